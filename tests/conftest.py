"""Shared fixtures: a fresh topic store on SQLite and on PostgreSQL (its own schema per test)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import settings
from sqlalchemy import create_engine, text

from topicmap.store.topic_store import TopicStore, normalize_database_url

DEFAULT_TEST_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/test"

# The click tests date their stories in 2024; the click partitions must reach back that far whatever topics.yaml
# says (set before any asset module is imported, since the partitions are built at import).
os.environ.setdefault("TOPICMAP_CLICKS_START_DATE", "2008-01-01")

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


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path) -> Iterator[TopicStore]:
    """A fresh, upgraded topic store; every store test runs on both SQLite and PostgreSQL."""
    if request.param == "sqlite":
        topic_store = TopicStore.open(f"sqlite:///{tmp_path / 'store.sqlite3'}")
        yield topic_store
        topic_store.dispose()
        return
    url, schema = request.getfixturevalue("pg_schema")
    topic_store = TopicStore.open(url, schema=schema)
    yield topic_store
    topic_store.dispose()


#: markers of the tests that start processes of their own (a webserver, a daemon, code servers, run workers, Celery
#: workers, a browser) and take tens of seconds to minutes each; `make test-fast` leaves them out
SLOW_MARKERS = ("daemon", "browser", "deployment")


def is_slow(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(name) is not None for name in SLOW_MARKERS)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Slow modules first. `make test` hands whole modules to two workers in collection order (`--dist loadfile
    --no-loadscope-reorder`; xdist's default order, most tests first, puts the long modules of a few tests last);
    a long module handed out last would run alone at the end while the other worker idles. A module counts as slow
    when any of its tests is."""
    slow_modules = {item.path for item in items if is_slow(item)}
    items.sort(key=lambda item: item.path not in slow_modules)  # stable: the order within each group is kept
