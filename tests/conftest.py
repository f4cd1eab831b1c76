"""Shared fixtures: a fresh topic store on SQLite (a copy of one upgraded per test process) and on PostgreSQL (one
schema per test process, emptied after each test); the order in which `make test` runs the modules."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, closing
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings
from sqlalchemy import create_engine, text

from topicmap.store.topic_store import TopicStore, normalize_database_url

if TYPE_CHECKING:
    import dagster as dg

#: the ``fresh_instance`` fixture: each call opens a test instance copied from the session's template
FreshInstance = Callable[[], AbstractContextManager["dg.DagsterInstance"]]

DEFAULT_TEST_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/test"

# Property tests explore new random examples on every local run; under CI they replay a fixed sequence, so a
# commit's CI result depends on the commit, not on the draw (a new case found locally becomes a named test).
# Loaded here, before the test modules build their settings from the current profile.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI", "").lower() == "true":
    settings.load_profile("ci")


def postgres_url() -> str:
    return normalize_database_url(os.environ.get("TOPICMAP_TEST_DATABASE_URL", DEFAULT_TEST_DATABASE_URL))


def postgres_available() -> str | None:
    """None if PostgreSQL answers, else the reason. Under CI=true a missing server is a failure, not a skip."""
    try:
        engine = create_engine(postgres_url())
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        engine.dispose()
        return None
    except Exception as exc:  # noqa: BLE001 - any connection problem means "not available"
        return f"PostgreSQL not reachable at {postgres_url()}: {exc.__class__.__name__}: {str(exc)[:200]}"


def require_postgres() -> None:
    reason = postgres_available()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true requires PostgreSQL: {reason}")
    pytest.skip(reason)


@pytest.fixture
def pg_schema() -> Iterator[tuple[str, str]]:
    """A PostgreSQL schema of its own (url, schema), dropped afterwards."""
    require_postgres()
    schema = f"tm_test_{os.getpid()}_{uuid.uuid4().hex[:10]}"
    url = postgres_url()
    yield url, schema
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    engine.dispose()


class WorkerSchema:
    """One upgraded topic-store schema per test process, emptied after each test: emptying ~40 tables is a fraction
    of what creating and upgrading a schema costs. A test that changed the schema itself (dropped tables, another
    version) gets the worker a new schema instead, so every test starts from a fresh, newest store."""

    def __init__(self) -> None:
        self.url = postgres_url()
        self.engine = create_engine(self.url)
        self.abandoned: list[str] = []
        self.schema, self.layout = self._create()

    def _create(self) -> tuple[str, tuple]:
        schema = f"tm_test_{os.getpid()}_{uuid.uuid4().hex[:10]}"
        TopicStore.open(self.url, schema=schema).dispose()
        return schema, self._layout(schema)

    def _layout(self, schema: str) -> tuple:
        """The schema's columns, indexes and version rows: what a test that only writes data leaves as it was."""
        with self.engine.connect() as conn:
            columns = conn.execute(
                text(
                    "SELECT table_name, column_name, data_type FROM information_schema.columns "
                    "WHERE table_schema = :schema ORDER BY 1, 2"
                ),
                {"schema": schema},
            ).all()
            indexes = conn.execute(
                text("SELECT indexname FROM pg_indexes WHERE schemaname = :schema ORDER BY 1"),
                {"schema": schema},
            ).all()
            versions = (
                conn.execute(text(f'SELECT count(*), max(version) FROM "{schema}".schema_version')).one()
                if any(row.table_name == "schema_version" for row in columns)
                else None
            )
        return tuple(columns), tuple(indexes), tuple(versions or ())

    def reset(self) -> None:
        """Every table but schema_version emptied, identities restarted (ids start at 1 again)."""
        if self._layout(self.schema) != self.layout:
            self.abandoned.append(self.schema)
            self.schema, self.layout = self._create()
            return
        tables = sorted({row.table_name for row in self.layout[0]} - {"schema_version"})
        with self.engine.begin() as conn:
            # a connection the test left open would block this for ever: fail the test instead
            conn.execute(text("SET LOCAL lock_timeout = '60s'"))
            names = ", ".join(f'"{self.schema}"."{table}"' for table in tables)
            conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))

    def drop(self) -> None:
        with self.engine.begin() as conn:
            for schema in (*self.abandoned, self.schema):
                conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        self.engine.dispose()


@pytest.fixture(scope="session")
def pg_worker_schema() -> Iterator[WorkerSchema]:
    require_postgres()
    worker = WorkerSchema()
    yield worker
    worker.drop()


@pytest.fixture(scope="session")
def sqlite_store_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A topic store on SQLite, upgraded once per test process; each test's store starts as a copy of it."""
    path = tmp_path_factory.mktemp("store_template") / "store.sqlite3"
    TopicStore.open(f"sqlite:///{path}").dispose()
    return path


def copy_sqlite_store(source: Path, path: Path) -> str:
    """A copy of the SQLite store at ``source`` (its WAL included) made at ``path``; its URL."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(source)) as original, closing(sqlite3.connect(path)) as copy:
        copy.execute("PRAGMA synchronous = OFF")  # a test's file: no fsync waits (the store opens it as ever)
        original.backup(copy)
    return f"sqlite:///{path}"


@pytest.fixture
def fresh_sqlite_store(sqlite_store_template: Path) -> Callable[[Path], str]:
    """Puts a fresh, upgraded topic store on SQLite at a path, a copy of the template (upgrading a store anew costs
    a third of a second of CPU), for a test that opens it by URL; gives the URL."""
    return lambda path: copy_sqlite_store(sqlite_store_template, path)


@pytest.fixture
def sqlite_store_url(fresh_sqlite_store: Callable[[Path], str], tmp_path: Path) -> str:
    """The URL of a fresh, upgraded topic store on SQLite at ``tmp_path / "store.sqlite3"``. The ``store``
    fixture's SQLite store is this one."""
    return fresh_sqlite_store(tmp_path / "store.sqlite3")


@pytest.fixture(scope="session")
def dagster_home_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A DAGSTER_HOME as ``dg.instance_for_test`` makes it, its SQLite storage created once per test process."""
    import dagster as dg

    home = tmp_path_factory.mktemp("dagster_home_template")
    with dg.instance_for_test(temp_dir=str(home)):
        pass
    return home


@pytest.fixture(scope="session")
def local_instance_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A DAGSTER_HOME from deploy/dagster.local.yaml (the shipped local instance), its SQLite storage created once per
    test process: a test copies it (``shutil.copytree``) for an instance of its own."""
    import dagster as dg

    from tests.dagster_deploy import write_instance

    home = tmp_path_factory.mktemp("local_instance_template") / "dagster_home"
    write_instance(home, "dagster.local.yaml")
    with dg.DagsterInstance.from_config(str(home)):
        pass
    return home


@pytest.fixture
def fresh_instance(dagster_home_template: Path, tmp_path: Path) -> FreshInstance:
    """Opens ``dg.instance_for_test`` on a copy of the template, under ``tmp_path``: creating its storage anew
    costs about a quarter of a second of CPU, a copy milliseconds."""
    import dagster as dg

    numbers = itertools.count()

    def open_copy() -> AbstractContextManager[dg.DagsterInstance]:
        home = shutil.copytree(dagster_home_template, tmp_path / f"dagster_home_{next(numbers)}")
        return dg.instance_for_test(temp_dir=str(home))

    return open_copy


@pytest.fixture
def store_resource_cache(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The store resource's per-process cache of opened stores (``resources/store.py``), empty for this test: the
    code location opens this test's store, not one an earlier test opened at the same URL (a PostgreSQL schema
    emptied since, with its media ids still cached). What the test opened is disposed of as it ends (before a
    ``store`` fixture set up earlier empties its schema)."""
    from resources import store as store_resource

    open_uncached = store_resource._open_store.__wrapped__
    opened: dict[tuple[str | None, str | None], TopicStore] = {}

    def open_store(database_url: str | None, schema: str | None) -> TopicStore:
        if (database_url, schema) not in opened:
            opened[database_url, schema] = open_uncached(database_url, schema)
        return opened[database_url, schema]

    monkeypatch.setattr(store_resource, "_open_store", open_store)
    yield
    for store in opened.values():
        store.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TopicStore]:
    """A fresh, upgraded topic store; every store test runs on both SQLite and PostgreSQL."""
    if request.param == "sqlite":
        topic_store = TopicStore.open(request.getfixturevalue("sqlite_store_url"))
        yield topic_store
        topic_store.dispose()
        return
    worker: WorkerSchema = request.getfixturevalue("pg_worker_schema")
    topic_store = TopicStore.open(worker.url, schema=worker.schema)
    yield topic_store
    topic_store.dispose()
    worker.reset()


#: markers of the tests that start processes of their own (a webserver, a daemon, code servers, run workers, Celery
#: workers, a browser) and take tens of seconds to minutes each; `make test-fast` leaves them out
SLOW_MARKERS = ("daemon", "browser", "deployment")


def is_slow(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(name) is not None for name in SLOW_MARKERS)


#: pytest's cache key for the seconds each test module took when it last ran (by module path)
MODULE_SECONDS = "topicmap/module_seconds"
#: the same, committed: what a fresh clone (CI, no pytest cache) orders by; `--record-module-seconds` rewrites it
MODULE_SECONDS_FILE = Path(__file__).with_name("module_seconds.json")
_measured: dict[str, float] = {}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--record-module-seconds",
        action="store_true",
        help=f"write each module's seconds in this run to {MODULE_SECONDS_FILE.name} (run the whole suite)",
    )


def module_seconds(config: pytest.Config) -> dict[str, float]:
    """Each module's seconds in its last run: pytest's cache over the committed file."""
    committed = json.loads(MODULE_SECONDS_FILE.read_text()) if MODULE_SECONDS_FILE.exists() else {}
    cache = getattr(config, "cache", None)
    return {**committed, **(cache.get(MODULE_SECONDS, {}) if cache is not None else {})}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Slow modules first, each group longest first as the last run measured it. `make test` hands whole modules
    to the workers in collection order (`--dist loadfile --no-loadscope-reorder`; xdist's default order, most tests
    first, puts the long modules of a few tests last); a long module handed out last would run alone at the end
    while the other workers idle. A module counts as slow when any of its tests is. A module neither the cache nor
    the committed file knows keeps its collection order within its group."""
    seconds = module_seconds(config)
    slow_modules = {item.path for item in items if is_slow(item)}
    # stable: the order within a module is kept
    items.sort(
        key=lambda item: (item.path not in slow_modules, -seconds.get(item.nodeid.split("::")[0], 0.0))
    )


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    module = report.nodeid.split("::")[0]
    _measured[module] = _measured.get(module, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Keep each module's time for the next run's order (in the process that saw every module's reports)."""
    config = session.config
    if hasattr(config, "workerinput") or not _measured:
        return
    cache = getattr(config, "cache", None)
    if cache is not None:
        cache.set(MODULE_SECONDS, {**cache.get(MODULE_SECONDS, {}), **_measured})
    if config.getoption("--record-module-seconds"):
        rounded = {module: round(seconds, 1) for module, seconds in sorted(_measured.items())}
        MODULE_SECONDS_FILE.write_text(json.dumps(rounded, indent=1) + "\n")
