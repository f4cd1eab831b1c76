"""What `make` installs is what was tested, and pyproject's ranges do not reach below it.

constraints.txt pins every package of the tested virtualenv; the Makefile installs through it. pyproject's lower
bounds are the tested versions at their minor version (a newer release may be picked by someone installing without
the constraints, never an older untested one); its upper bounds are known limits.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONSTRAINTS = ROOT / "constraints.txt"
#: a requirement as pyproject writes them: a name, optional extras, comma-separated specifiers
REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*(.*)$")
SPECIFIER = re.compile(r"^(==|>=|<=|<|>|!=)\s*([0-9][0-9A-Za-z.]*)$")
#: lower bounds below the pinned minor version, each tested at the version named (the tests of the modules using it)
TESTED_OLDER = {"pandas": "3.0.6"}


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def release(version: str) -> tuple[int, ...]:
    """The numeric release part of a version (``2026.10.19.post1`` -> (2026, 10, 19))."""
    match = re.match(r"\d+(?:\.\d+)*", version)
    assert match, version
    return tuple(int(part) for part in match.group().split("."))


def pins() -> dict[str, str]:
    found = {}
    for line in CONSTRAINTS.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            found[normalized(name)] = version.strip()
    return found


def requirements() -> list[tuple[str, list[tuple[str, str]]]]:
    """(name, [(operator, version)]) of every dependency of pyproject, extras included, the project itself not."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lines = list(project["dependencies"]) + [
        line for extra in project["optional-dependencies"].values() for line in extra
    ]
    parsed = []
    for line in lines:
        match = REQUIREMENT.match(line)
        assert match and ";" not in line, f"not a requirement this test reads: {line!r}"
        name, _, specifiers = match.groups()
        if normalized(name) == normalized(project["name"]):
            continue
        specs = []
        for spec in filter(None, (part.strip() for part in specifiers.split(","))):
            spec_match = SPECIFIER.match(spec)
            assert spec_match, f"not a specifier this test reads: {spec!r} in {line!r}"
            specs.append(spec_match.groups())
        parsed.append((normalized(name), specs))
    return parsed


def satisfies(version: str, operator: str, bound: str) -> bool:
    if operator == "==":
        return version == bound
    if operator == "!=":
        return version != bound
    have, want = release(version), release(bound)
    return {">=": have >= want, ">": have > want, "<=": have <= want, "<": have < want}[operator]


@pytest.mark.parametrize("name,specs", requirements())
def test_every_dependency_is_pinned_inside_its_range(name: str, specs: list[tuple[str, str]]) -> None:
    pinned = pins()
    assert name in pinned, f"{name} is not in constraints.txt"
    assert all(satisfies(pinned[name], op, bound) for op, bound in specs), (name, pinned[name], specs)


@pytest.mark.parametrize("name,specs", requirements())
def test_lower_bounds_are_the_tested_minor_version(name: str, specs: list[tuple[str, str]]) -> None:
    tested = release(TESTED_OLDER.get(name) or pins()[name])[:2]
    lower = [release(bound)[:2] for op, bound in specs if op in (">=", "==")]
    assert lower, f"{name} has no lower bound"
    assert max(lower) == tested, f"{name}: lower bound {max(lower)} is not the tested {tested}"


def test_make_installs_through_the_constraints() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    stamp_rule = re.search(r"^\$\(STAMP\):(.*)$", makefile, flags=re.MULTILINE)
    assert stamp_rule and "constraints.txt" in stamp_rule.group(1).split()
    installs = [line for line in makefile.splitlines() if "pip install" in line and "-e " in line]
    assert installs and all("-c constraints.txt" in line for line in installs)


def test_the_constraints_leave_the_project_out() -> None:
    assert "topicmap" not in pins()  # also: every line that is not a comment is a name==version pin
