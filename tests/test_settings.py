"""One list of environment variables (topicmap/settings.py): the code reads only through it, names nothing it lacks,
and docs/configuration.md's table lists exactly what it declares."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from topicmap import settings

ROOT = Path(__file__).resolve().parents[1]
SETTINGS_MODULE = ROOT / "topicmap" / "settings.py"
PRODUCTION = ("topicmap", "orchestration", "assets", "sensors", "resources")
#: a variable's name as the project spells them; a name followed by ``*`` is a family (``TOPICMAP_CC_*``)
VARIABLE = re.compile(r"\b((?:TOPICMAP|DAGSTER_PG)_[A-Z0-9_]*[A-Z0-9])\b(?!_?\*)")
BACKTICKED = re.compile(r"`([^`]+)`")


def production_files() -> list[Path]:
    return sorted(
        path for layer in PRODUCTION for path in (ROOT / layer).rglob("*.py") if path != SETTINGS_MODULE
    )


def configuration_table() -> list[list[str]]:
    """The cells of each body row of docs/configuration.md's table whose header starts with ``variable``."""
    lines = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8").splitlines()
    start = lines.index("| variable | meaning | default |") + 2  # the header, then its |---| line
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def _is_environ(node: ast.AST) -> bool:
    return ast.unparse(node) in ("os.environ", "environ")


def environment_reads(path: Path) -> list[str]:
    """``os.environ.get(...)``, ``os.getenv(...)`` and ``os.environ[...]`` read in ``path`` (writes, ``pop``
    and whole copies for child processes are not reads of one variable)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if (node.func.attr == "get" and _is_environ(node.func.value)) or ast.unparse(
                node.func
            ) == "os.getenv":
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node)}")
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environ(node.value):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node)}")
    return found


def test_names_are_declared_once() -> None:
    names = [s.name for s in settings.SETTINGS]
    assert len(names) == len(set(names))
    assert all(s.doc and s.name == s.name.upper() for s in settings.SETTINGS)


def test_code_reads_variables_only_through_the_settings_module() -> None:
    reads = [read for path in production_files() for read in environment_reads(path)]
    assert reads == [], "read these through topicmap/settings.py"


def test_every_variable_the_code_names_is_declared() -> None:
    declared = set(settings.by_name())
    named = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in production_files()
        for name in VARIABLE.findall(path.read_text(encoding="utf-8"))
        if name not in declared
    }
    assert named == set(), "declare these in topicmap/settings.py (or stop naming them)"


@pytest.mark.parametrize(
    "reader,path", [("make", ROOT / "Makefile"), ("dagster.yaml", ROOT / "deploy" / "dagster.yaml")]
)
def test_variables_read_outside_python_are_declared_with_their_reader(reader: str, path: Path) -> None:
    in_file = set(VARIABLE.findall(path.read_text(encoding="utf-8")))
    if reader == "dagster.yaml":
        in_file |= set(re.findall(r"\{env: (\w+)\}", path.read_text(encoding="utf-8")))
    declared = set(settings.by_name())
    assert in_file - declared == set()
    for setting in settings.SETTINGS:
        if setting.reader == reader:
            assert setting.name in in_file, (
                f"{setting.name} is declared as read by {reader}, which does not name it"
            )


def test_configuration_table_lists_every_declared_variable_and_only_those() -> None:
    listed = [name for row in configuration_table() for name in BACKTICKED.findall(row[0])]
    documented = [s.name for s in settings.SETTINGS if s.documented]
    assert sorted(listed) == sorted(documented)


def test_configuration_table_says_which_variables_are_secrets() -> None:
    for row in configuration_table():
        names = BACKTICKED.findall(row[0])
        if any(settings.by_name()[name].secret for name in names):
            assert "secret" in row[1], (
                f"docs/configuration.md's row of {names} does not say it holds a secret"
            )


def test_a_setting_reads_the_environment_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(settings.TOPICS_FILE.name, raising=False)
    assert settings.TOPICS_FILE.value() == "topics.yaml" and not settings.TOPICS_FILE.is_set()
    monkeypatch.setenv(settings.TOPICS_FILE.name, "")
    assert settings.TOPICS_FILE.value() == "topics.yaml"  # empty counts as unset
    monkeypatch.setenv(settings.TOPICS_FILE.name, "mine.yaml")
    assert settings.TOPICS_FILE.value() == "mine.yaml" and settings.TOPICS_FILE.is_set()
    assert settings.TOPICS_FILE.value({}) == "topics.yaml"  # a mapping given replaces the environment


def test_typed_accessors() -> None:
    assert settings.CC_WORKERS.integer({}) == 1
    assert settings.CC_WORKERS.integer({settings.CC_WORKERS.name: "3"}) == 3
    with pytest.raises(ValueError, match=settings.CC_WORKERS.name):
        settings.CC_WORKERS.integer({settings.CC_WORKERS.name: "three"})
    assert settings.CC_OUTLETS.items({settings.CC_OUTLETS.name: "a.com, b.com c.com,,"}) == [
        "a.com",
        "b.com",
        "c.com",
    ]
    assert settings.CC_OUTLETS.items({}) == []
