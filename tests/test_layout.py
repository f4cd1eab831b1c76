"""The library's layout holds: layers point one way, the demo stays out of production, the public API imports.

Read from the source (imports as written, not as executed), so a lazy import inside a function counts too.
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "topicmap"

# Which library packages each package may import. The bottom first: web reading, then the store; every stage
# above them; the demo and the CLI at the top. A package not named on the right is not importable from the left.
ALLOWED: dict[str, set[str]] = {
    "web": set(),
    "store": {"web"},
    "archive": {"web", "store"},
    "topics": {"web", "store", "archive"},
    "spider": {"web", "store", "topics", "archive"},
    "dedup": {"web", "store"},
    "social": {"web", "store"},
    "snapshots": {"web", "store"},
    "clusters": {"web", "store"},
    "demo": {"web", "store", "topics", "archive"},
}
PRODUCTION_LAYERS = ("topicmap", "assets", "resources", "sensors")


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(imported module, only for type checking) for every import in a file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    type_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            type_only.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            found += [(name, id(node) in type_only) for name in names]
        elif isinstance(node, ast.Import):
            found += [(alias.name, id(node) in type_only) for alias in node.names]
    return found


def _library_package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "topicmap" and len(parts) > 1 else None


def test_the_library_never_imports_dagster() -> None:
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in LIBRARY.rglob("*.py")
        for name, _ in _imports(path)
        if name.split(".")[0] in {"dagster", "assets", "resources", "sensors", "orchestration"}
    ]
    assert offenders == []


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_library_packages_import_only_the_layers_below(package: str) -> None:
    offenders = []
    for path in (LIBRARY / package).rglob("*.py"):
        for name, type_only in _imports(path):
            target = _library_package(name)
            below = target is None or target == package or target not in ALLOWED or target in ALLOWED[package]
            if not below and not type_only:
                offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert offenders == [], "a package imports one above it (or beside it)"


def test_every_library_package_is_placed_in_a_layer() -> None:
    packages = {path.parent.name for path in LIBRARY.glob("*/__init__.py")}
    assert packages == set(ALLOWED)


def test_production_code_never_imports_the_demo() -> None:
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for layer in PRODUCTION_LAYERS
        for path in (ROOT / layer).rglob("*.py")
        if "demo" not in path.relative_to(ROOT).parts
        for name, _ in _imports(path)
        if name == "topicmap.demo" or name.startswith("topicmap.demo.")
    ]
    assert offenders == []


# The public API: the main entry points, by the module that defines them (topicmap/__init__.py lists the same).
PUBLIC_API: dict[str, list[str]] = {
    "topicmap.web.urls": ["normalize_url", "normalize_url_lossy", "url_variants", "distinctive_domain"],
    "topicmap.web.extract": ["extract_story", "decode_html", "ExtractedStory"],
    "topicmap.web.links": ["extract_links", "extract_story_and_links", "is_ignored_url"],
    "topicmap.web.dates": ["guess_date"],
    "topicmap.web.fetch": ["WebFetcher", "FetchOutcome"],
    "topicmap.store.topic_store": ["TopicStore", "NewStory"],
    "topicmap.store.names": ["StoreError", "topicmap_home"],
    "topicmap.archive.warc": ["read_warc_pages"],
    "topicmap.archive.warc_stories": ["StoryArchiveWriter", "read_story_archive"],
    "topicmap.archive.warc_replay": ["WarcReplay"],
    "topicmap.topics.declarations": ["TopicConfig", "TopicConfigError", "load_topics"],
    "topicmap.topics.query": ["parse", "TopicQuery", "QuerySyntaxError"],
    "topicmap.spider.iteration": ["Spider"],
    "topicmap.dedup.simhash": ["fingerprint", "NearDuplicateIndex", "verified_near_duplicate_pairs"],
    "topicmap.social.clicks": ["clicks_until", "story_timestamp"],
    "topicmap.snapshots.compute": ["compute_snapshot"],
    "topicmap.clusters.oneshot": ["cluster_stories"],
    "topicmap.clusters.streaming": ["StreamingKMeans"],
}
# Packages that also name their main module's public names themselves (loaded on first use).
PACKAGE_NAMES: dict[str, list[str]] = {
    "topicmap.store": ["TopicStore", "NewStory", "StoreError"],
    "topicmap.topics": ["TopicConfig", "load_topics", "TopicConfigError"],
    "topicmap.clusters": ["cluster_stories", "StreamingKMeans"],
}


@pytest.mark.parametrize(("module_path", "names"), sorted({**PUBLIC_API, **PACKAGE_NAMES}.items()))
def test_the_public_names_import(module_path: str, names: list[str]) -> None:
    module = importlib.import_module(module_path)
    missing = [name for name in names if not hasattr(module, name)]
    assert missing == [], f"{module_path} lost {missing}"


def test_the_library_docstring_lists_the_public_api() -> None:
    import topicmap

    listed = {
        module: re.findall(r"\w+", names)
        for module, names in re.findall(r"``(topicmap\.[\w.]+)``\s+\(([^)]*)\)", topicmap.__doc__ or "")
    }
    assert listed == PUBLIC_API


def test_the_top_of_the_library_holds_only_the_packages_the_command_and_the_settings() -> None:
    # One import path per name: a module at the top of topicmap/ that re-exports a package's module would be a
    # second one (the stage packages are the API). The settings module is every layer's, so it sits above them.
    modules = sorted(path.name for path in LIBRARY.glob("*.py"))
    assert modules == ["__init__.py", "cli.py", "settings.py"]


# The Dagster layer calls the library and attaches metadata: the SQL is the stage store modules' (topicmap/*/store.py,
# topicmap/store/). Found as written, so a lazy import or a statement built inside a function counts too.
DAGSTER_LAYER = ("assets", "sensors", "resources")
#: calls that run a statement: no code of the Dagster layer has one to run
STATEMENT_CALLS = {"execute", "exec_driver_sql", "executemany", "executescript"}
#: a string that reads as an SQL statement
SQL_TEXT = re.compile(
    r"^\s*(SELECT\s.+\sFROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|WITH\s+\w+\s+AS)\b", re.S
)


def _sql_in(source: str, where: str) -> list[str]:
    """Where a file's source imports SQLAlchemy (needed for any of its builders), runs a statement or holds SQL
    text."""
    tree = ast.parse(source, filename=where)
    found = [
        f"{where}:{node.lineno} imports {name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for name in (
            [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
        )
        if name.split(".")[0] == "sqlalchemy"
    ]
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if called in STATEMENT_CALLS:
                found.append(f"{where}:{node.lineno} runs a statement ({called})")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL_TEXT.match(node.value):
            found.append(f"{where}:{node.lineno} holds SQL text {node.value[:40]!r}")
    return found


def test_the_dagster_layer_holds_no_sql() -> None:
    offenders = [
        finding
        for layer in DAGSTER_LAYER
        for path in sorted((ROOT / layer).rglob("*.py"))
        for finding in _sql_in(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert offenders == [], "move the statement into the stage's store module and call it"


def test_the_sql_finder_finds_sql() -> None:
    source = (
        "def f(store):\n"
        "    from sqlalchemy import select\n"
        "    with store.engine.connect() as conn:\n"
        "        conn.execute(select(1))\n"
        "        conn.exec_driver_sql('DELETE FROM stories')\n"
    )
    assert [finding.split(" ", 1)[1] for finding in _sql_in(source, "sample.py")] == [
        "imports sqlalchemy",
        "runs a statement (execute)",
        "runs a statement (exec_driver_sql)",
        "holds SQL text 'DELETE FROM stories'",
    ]


# A process that imports pyarrow before topicmap keeps mimalloc's default, which hands freed pages back to the
# operating system and faults them in again (topicmap/__init__.py): the entry points that compute snapshots (the
# code location, whose step processes fork from it, the snapshot CLI, the benchmark) must import topicmap first.
# Checked in a fresh interpreter with no MIMALLOC_PURGE_DELAY of its own.
_WATCH_PYARROW = """
import os, runpy, sys
seen = {}
class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "pyarrow" and not seen:
            seen["purge_delay"] = os.environ.get("MIMALLOC_PURGE_DELAY")
        return None
sys.meta_path.insert(0, Watch())
entry = sys.argv[1]
try:
    if entry.endswith(".py"):  # as `python script.py` runs it, but for its main
        sys.path.insert(0, os.path.dirname(os.path.abspath(entry)))
        runpy.run_path(entry, run_name="imported")
    else:
        __import__(entry)
    import pyarrow  # as the code's steps do later, if the entry did not
finally:
    print(seen.get("purge_delay"))
"""


@pytest.mark.parametrize(
    "entry",
    ["orchestration.definitions", "topicmap.snapshots.cli", "benchmarks/bench_snapshot.py"],
)
def test_pyarrow_loads_with_topicmaps_allocator_setting(entry: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "MIMALLOC_PURGE_DELAY"}
    done = subprocess.run(
        [sys.executable, "-c", _WATCH_PYARROW, entry], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "-1", f"{entry} loads pyarrow before topicmap"
