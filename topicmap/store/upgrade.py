"""Schema upgrades: a store's tables brought to a schema version one version at a time. Every table, column and
index of ``topicmap.store.schema`` says in its ``info`` the version that added it (``since``); a version's
upgrade creates exactly those, as they were at that version."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Index, MetaData, Table, UniqueConstraint, func, inspect, select, text
from sqlalchemy.schema import CreateColumn

from topicmap.store import schema as s


def stored_version(conn: Connection) -> int:
    """The schema version the store's tables are at (0: an empty database)."""
    if not inspect(conn).has_table("schema_version"):
        return 0
    return int(conn.execute(select(func.coalesce(func.max(s.schema_version.c.version), 0))).scalar_one())


def lock_for_upgrade(conn: Connection) -> None:
    """PostgreSQL: one upgrade at a time, whoever opens the store (held to the end of the transaction)."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(424242)"))


def apply_version(conn: Connection, version: int, upgraded_at: datetime) -> None:
    """Create what ``version`` adds (tables, columns, indexes whose ``since`` is that version) and record it."""
    tables_then = MetaData()
    copies = {
        t.name: _table_at_version(t, version, tables_then)
        for t in s.metadata.sorted_tables
        if _since(t) <= version
    }
    inspector = inspect(conn)
    for table in s.metadata.sorted_tables:
        if _since(table) == version:
            copies[table.name].create(conn, checkfirst=True)
        elif _since(table) < version:
            existing = {c["name"] for c in inspector.get_columns(table.name)}
            for column in table.columns:
                if _since(column) == version and column.name not in existing:
                    ddl = CreateColumn(copies[table.name].c[column.name]).compile(dialect=conn.dialect)
                    conn.execute(text(f'ALTER TABLE "{table.name}" ADD COLUMN {ddl}'))
            existing_indexes = {i["name"] for i in inspector.get_indexes(table.name)}
            for index in copies[table.name].indexes:
                if _since(index) == version and index.name not in existing_indexes:
                    index.create(conn)
    conn.execute(s.schema_version.insert().values(version=version, upgraded_at=upgraded_at))


def _since(obj: Any) -> int:
    return int(obj.info.get("since", 1))


def _table_at_version(table: Table, version: int, target: MetaData) -> Table:
    """A copy of ``table`` with only the columns, keys and indexes that existed at ``version``."""
    columns = [c._copy() for c in table.columns if _since(c) <= version]
    names = {c.name for c in columns}
    extras: list[Any] = []
    for constraint in list(table.constraints):
        cols = [c.name for c in constraint.columns]
        if isinstance(constraint, UniqueConstraint) and set(cols) <= names:
            extras.append(UniqueConstraint(*cols, name=constraint.name))
    copy = Table(table.name, target, *columns, *extras, info=dict(table.info))
    for index in table.indexes:
        cols = [c.name for c in index.columns]
        if set(cols) <= names and _since(index) <= version:
            Index(index.name, *[copy.c[c] for c in cols], unique=index.unique, info=dict(index.info))
    return copy
