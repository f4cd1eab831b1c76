"""The library's layout holds: layers point one way, the demo stays out of production, old import paths work.

Read from the source (imports as written, not as executed), so a lazy import inside a function counts too.
"""

from __future__ import annotations

import ast
import importlib
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
            upward = target and target != package and target in ALLOWED and target not in ALLOWED[package]
            if upward and not type_only:
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


@pytest.mark.parametrize(
    ("old_path", "names"),
    [
        ("topicmap.query", ["parse", "QuerySyntaxError", "TopicQuery"]),
        ("topicmap.urls", ["normalize_url", "normalize_url_lossy", "url_variants", "distinctive_domain"]),
        ("topicmap.links", ["extract_links", "extract_story_and_links", "is_ignored_url"]),
        ("topicmap.extract", ["extract_story", "decode_html", "ExtractedStory"]),
        ("topicmap.simhash", ["fingerprint", "NearDuplicateIndex"]),
        ("topicmap.clicks", ["clicks_until", "story_timestamp"]),
        ("topicmap.fetch", ["WebFetcher", "FetchOutcome"]),
        ("topicmap.store", ["TopicStore", "NewStory", "StoreError"]),
        ("topicmap.topics", ["TopicConfig", "load_topics", "TopicConfigError"]),
        ("topicmap.clusters", ["cluster_stories"]),
    ],
)
def test_public_module_paths_keep_their_names(old_path: str, names: list[str]) -> None:
    module = importlib.import_module(old_path)
    missing = [name for name in names if not hasattr(module, name)]
    assert missing == [], f"{old_path} lost {missing}"
