"""docs/dagster.md's tables of jobs, automation and pools say what the code location holds, and every sensor's
runs are runs of a named job.

docs/dagster.md is where a data engineer learns which jobs to look for in the Runs list, which sensors and schedules
to turn on and which pools to size; a job, sensor or pool added in code and not in the tables (or the reverse) is
a doc that lies. The tables are read by their header (first column ``job``, ``name`` or ``pool``) in the section
"Dagster: jobs, automation, pools", each row by the backticked names of its cells.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from orchestration.definitions import defs

ROOT = Path(__file__).resolve().parents[1]
DAGSTER_DOC = ROOT / "docs" / "dagster.md"
SECTION = "## Dagster: jobs, automation, pools"
#: Dagster's implicit asset job and the anonymous jobs of sensors declared with an asset selection start with this
HIDDEN_JOB_PREFIX = "__"
BACKTICKED = re.compile(r"`([^`]+)`")


@dataclass(frozen=True)
class MarkdownTable:
    header: list[str]
    rows: list[list[str]]

    def names(self, column: int) -> list[set[str]]:
        """The backticked names of each row's cell in ``column`` (a cell may name several, or none)."""
        return [set(BACKTICKED.findall(row[column])) for row in self.rows]


def split_row(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def markdown_tables(text: str) -> list[MarkdownTable]:
    """Every pipe table of ``text``: a header row, a ``|---|`` separator row, then body rows up to the first
    line that is not a table row."""
    lines = text.splitlines()
    tables: list[MarkdownTable] = []
    index = 0
    while index + 1 < len(lines):
        header, separator = lines[index].strip(), lines[index + 1].strip()
        if header.startswith("|") and re.fullmatch(r"\|?(\s*:?-{3,}:?\s*\|)+\s*:?(-{3,}:?)?\s*", separator):
            index += 2
            rows = []
            while index < len(lines) and lines[index].strip().startswith("|"):
                rows.append(split_row(lines[index]))
                index += 1
            tables.append(MarkdownTable(split_row(header), rows))
        else:
            index += 1
    return tables


def readme_section() -> str:
    text = DAGSTER_DOC.read_text(encoding="utf-8")
    start = text.find(SECTION + "\n")
    assert start >= 0, f"docs/dagster.md has no section {SECTION!r}"
    end = text.find("\n## ", start + len(SECTION))
    return text[start : end if end >= 0 else len(text)]


def readme_table(first_column: str) -> MarkdownTable:
    """The one table of docs/dagster.md's Dagster section whose first column header is ``first_column``."""
    found = [t for t in markdown_tables(readme_section()) if t.header[0].lower() == first_column]
    assert len(found) == 1, (
        f"docs/dagster.md's {SECTION!r} needs one table headed {first_column!r}, found {len(found)}"
    )
    return found[0]


def disagreement(what: str, in_code: Iterable[str], in_readme: Iterable[str]) -> list[str]:
    """Lines naming what is in the code but not in docs/dagster.md and the reverse (empty when they agree)."""
    code, readme = set(in_code), set(in_readme)
    lines = []
    if code - readme:
        lines.append(f"{what} in the code location but not in docs/dagster.md: {sorted(code - readme)}")
    if readme - code:
        lines.append(f"{what} in docs/dagster.md but not in the code location: {sorted(readme - code)}")
    return lines


def asset_names(keys: Iterable[dg.AssetKey]) -> set[str]:
    return {key.to_user_string() for key in keys}


@pytest.fixture(scope="module")
def repository() -> dg.RepositoryDefinition:
    return defs.get_repository_def()


@pytest.fixture(scope="module")
def named_jobs(repository: dg.RepositoryDefinition) -> dict[str, set[str]]:
    """Each named job and the assets it materializes."""
    return {
        job.name: asset_names(job.asset_layer.selected_asset_keys)
        for job in repository.get_all_jobs()
        if not job.name.startswith(HIDDEN_JOB_PREFIX)
    }


def test_readme_jobs_table_lists_every_named_job_and_its_assets(named_jobs: dict[str, set[str]]) -> None:
    table = readme_table("job")
    readme_jobs: dict[str, set[str]] = {}
    for names, assets in zip(table.names(0), table.names(1), strict=True):
        assert len(names) == 1, f"a row of docs/dagster.md's jobs table names {sorted(names) or 'no job'}"
        readme_jobs[names.pop()] = assets
    problems = disagreement("jobs", named_jobs, readme_jobs)
    for job in sorted(named_jobs.keys() & readme_jobs.keys()):
        problems += disagreement(f"assets of {job}", named_jobs[job], readme_jobs[job])
    assert not problems, "\n".join(problems)


def test_readme_automation_table_lists_every_sensor_and_schedule(repository: dg.RepositoryDefinition) -> None:
    table = readme_table("name")
    kind_column = [h.lower() for h in table.header].index("kind")
    readme_sensors: set[str] = set()
    readme_schedules: set[str] = set()
    for names, row in zip(table.names(0), table.rows, strict=True):
        assert names, f"a row of docs/dagster.md's automation table names nothing: {row}"
        (readme_schedules if "schedule" in row[kind_column].lower() else readme_sensors).update(names)
    problems = disagreement("sensors", (s.name for s in repository.sensor_defs), readme_sensors)
    problems += disagreement("schedules", (s.name for s in repository.schedule_defs), readme_schedules)
    assert not problems, "\n".join(problems)


def test_readme_pools_table_lists_every_pool_and_its_assets() -> None:
    code_pools: dict[str, set[str]] = {}
    for assets_def in defs.resolve_asset_graph().assets_defs:
        if assets_def.is_executable and assets_def.keys:
            for op in assets_def.node_def.iterate_op_defs():
                if op.pool:
                    code_pools.setdefault(op.pool, set()).update(asset_names(assets_def.keys))
    table = readme_table("pool")
    readme_pools: dict[str, set[str]] = {}
    for names, assets in zip(table.names(0), table.names(1), strict=True):
        assert len(names) == 1, f"a row of docs/dagster.md's pools table names {sorted(names) or 'no pool'}"
        readme_pools[names.pop()] = assets
    problems = disagreement("pools", code_pools, readme_pools)
    for pool in sorted(code_pools.keys() & readme_pools.keys()):
        problems += disagreement(f"assets of pool {pool}", code_pools[pool], readme_pools[pool])
    assert not problems, "\n".join(problems)


def test_every_asset_sits_in_a_pool() -> None:
    """docs/dagster.md promises that one kind of work never takes every slot from another: an asset outside every pool
    runs unlimited beside them."""
    without_pool = sorted(
        name
        for assets_def in defs.resolve_asset_graph().assets_defs
        if assets_def.is_executable and assets_def.keys
        for op in assets_def.node_def.iterate_op_defs()
        if not op.pool
        for name in asset_names(assets_def.keys)
    )
    assert not without_pool, f"assets in no pool: {without_pool}"


def instigated_jobs(
    repository: dg.RepositoryDefinition, named_jobs: dict[str, set[str]]
) -> dict[str, set[str]]:
    """Each sensor's and schedule's name → the named jobs its runs are runs of: the jobs it targets or, for a sensor
    launching asset backfills (an asset selection, no job), the smallest named job that holds its selection, under
    which the run queue files their runs. A sensor with neither launches no run."""
    launched: dict[str, set[str]] = {}
    for sensor in repository.sensor_defs:
        jobs = {target.job_name for target in sensor.targets if target.has_job_def}
        if not jobs and sensor.asset_selection is not None:
            selected = asset_names(sensor.asset_selection.resolve(defs.resolve_asset_graph()))
            holders = sorted((len(assets), job) for job, assets in named_jobs.items() if selected <= assets)
            jobs = {holders[0][1]} if holders else set()
        launched[sensor.name] = jobs
    for schedule in repository.schedule_defs:
        launched[schedule.name] = {schedule.job_name}
    return launched


def test_readme_jobs_table_names_every_sensor_and_schedule_that_launches_each_job(
    repository: dg.RepositoryDefinition, named_jobs: dict[str, set[str]]
) -> None:
    """The "launched by" column is where a data engineer looks up why a run of a job appeared: it names each sensor
    and schedule whose runs are runs of that job, and no other."""
    launched = instigated_jobs(repository, named_jobs)
    table = readme_table("job")
    column = [h.lower() for h in table.header].index("launched by")
    problems = []
    for names, row in zip(table.names(0), table.rows, strict=True):
        job = next(iter(names))
        in_code = {name for name, jobs in launched.items() if job in jobs}
        in_readme = set(BACKTICKED.findall(row[column])) & set(launched)
        problems += disagreement(f"sensors and schedules launching {job}", in_code, in_readme)
    assert not problems, "\n".join(problems)


def test_every_sensor_runs_a_named_job(
    repository: dg.RepositoryDefinition, named_jobs: dict[str, set[str]]
) -> None:
    """A sensor targets named jobs, so its runs show on a job's page; never `__ASSET_JOB` nor the anonymous job
    Dagster makes for a sensor declared with an asset selection. The exception is a sensor that launches asset
    backfills (only a sensor with an asset selection and no job may, in Dagster 1.13): its selection must be held
    by one named job, whose name the run queue (orchestration/coordinator.py) tags the backfill's runs with. A run
    status sensor that requests no job (sensors/run_failures.py) launches nothing and is left out."""
    problems = []
    for sensor in sorted(repository.sensor_defs, key=lambda s: s.name):
        if isinstance(sensor, dg.RunStatusSensorDefinition) and not sensor.targets:
            continue  # reacts to runs that ended; launches none
        job_names = [target.job_name for target in sensor.targets if target.has_job_def]
        for job_name in job_names:
            if job_name.startswith(HIDDEN_JOB_PREFIX):
                assets = sorted(asset_names(repository.get_job(job_name).asset_layer.selected_asset_keys))
                problems.append(f"sensor {sensor.name} runs the anonymous job {job_name} (assets {assets})")
        if not job_names:
            selection = sensor.asset_selection
            assert selection is not None, f"sensor {sensor.name} has neither a job nor an asset selection"
            selected = asset_names(selection.resolve(defs.resolve_asset_graph()))
            if not any(selected <= assets for assets in named_jobs.values()):
                problems.append(f"sensor {sensor.name} selects {sorted(selected)}, which no named job holds")
    assert not problems, "\n".join(problems)


ARCHITECTURE = ROOT / "docs" / "architecture.md"
BETA = ROOT / "assets" / "beta.py"


@pytest.mark.parametrize("page", [ARCHITECTURE, ROOT / "README.md"], ids=lambda page: page.name)
def test_the_asset_graph_drawings_draw_only_what_the_asset_graph_has(
    repository: dg.RepositoryDefinition, page: Path
) -> None:
    """The asset graph drawn in README.md and docs/architecture.md names only assets of the code location, and an
    arrow ``upstream ─► downstream`` on a line is drawn only where the downstream asset depends on the upstream one
    (directly or through assets the drawing leaves out)."""
    text = page.read_text(encoding="utf-8")
    drawing = text[text.index("## The asset graph") :].split("```")[1]
    graph = repository.asset_graph
    known = asset_names(graph.get_all_asset_keys())
    named = set(re.findall(r"\b[a-z]+(?:_[a-z]+)+\b", drawing))
    assert named - known == set(), f"{page.name} draws assets the code location does not have"
    # a lookahead, so that the head of one arrow is the tail of the next: a ─► b ─► c
    arrows = re.findall(r"\b(?=(\w+)(?: ?\[[^\]]*\])? ─+► (\w+))", drawing)
    assert len(arrows) >= 3, f"{page.name}: found too few arrows to check ({arrows})"
    wrong = [
        f"{upstream} ─► {downstream}"
        for upstream, downstream in arrows
        if upstream not in asset_names(graph.upstream_key_iterator(dg.AssetKey(downstream)))
    ]
    assert wrong == [], f"{page.name} draws dependencies the asset graph does not have: {wrong}"


def test_the_beta_apis_listed_are_the_ones_called_through_beta_api() -> None:
    """assets/beta.py's list of the beta APIs in use names each class made through ``beta_api`` (for ``dg.asset``,
    its beta parameter), and nothing else of Dagster's."""
    import ast

    called: set[str] = set()
    layer = ("assets", "orchestration", "resources", "sensors")
    for path in (file for folder in layer for file in (ROOT / folder).glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "beta_api":
                made = node.args[0]
                assert isinstance(made, ast.Attribute), ast.unparse(node)
                called.add("backfill_policy" if made.attr == "asset" else made.attr)
    in_use = (ast.get_docstring(ast.parse(BETA.read_text(encoding="utf-8"))) or "").split("In use:")[1]
    listed = {name for name in re.findall(r"``(?:@asset\()?(\w+)", in_use) if hasattr(dg, name)}
    listed |= {"backfill_policy"} & set(re.findall(r"\w+", in_use))
    assert called == listed, f"{BETA.name} lists {sorted(listed)}; beta_api is called for {sorted(called)}"
