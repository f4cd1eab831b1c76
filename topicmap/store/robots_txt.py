"""robots.txt answers shared by every process using one topic store (PostgreSQL or SQLite): the ``robots_txt``
table, so several spiders of one topic, or of many, read a site's robots.txt once per cache period.

The contract (``SharedRobots``) and the reading are in :mod:`topicmap.web.robots` and
:mod:`topicmap.web.fetch_robots`. Times are the callers' wall clocks, as the politeness turns' are.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sqlalchemy import and_, or_, select, update
from sqlalchemy.engine import Engine

from topicmap.store.schema import robots_txt
from topicmap.web.robots import StoredRobots


class SqlRobots:
    """``SharedRobots`` in the topic store. A claim is one conditional upsert (the row is free: no usable
    answer, and no reader, or a lapsed one), atomic on both databases as ``SqlThrottle``'s claims are."""

    def __init__(self, engine: Engine, clock: Callable[[], float] = time.time) -> None:
        if engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        elif engine.dialect.name == "sqlite":
            from sqlalchemy.dialects.sqlite import insert
        else:
            raise ValueError(f"SqlRobots supports PostgreSQL and SQLite, not {engine.dialect.name!r}")
        self.engine = engine
        self._insert = insert
        self._clock = clock

    def lookup(self, origin: str) -> StoredRobots | None:
        table = robots_txt
        with self.engine.connect() as conn:
            row = conn.execute(
                select(table.c.verdict, table.c.body, table.c.note, table.c.expires_at).where(
                    table.c.origin == origin
                )
            ).first()
        if row is None or row.verdict is None or row.expires_at is None or row.expires_at <= self._clock():
            return None
        return StoredRobots(row.verdict, row.body, row.note, row.expires_at)

    def claim(self, origin: str, reader: str, hold: float) -> bool:
        table = robots_txt
        now = self._clock()
        reading = {"reader": reader, "read_until": now + hold}
        statement = (
            self._insert(table)
            .values(origin=origin, **reading)
            .on_conflict_do_update(
                index_elements=[table.c.origin],
                set_=reading,
                where=and_(
                    or_(table.c.expires_at.is_(None), table.c.expires_at <= now),
                    or_(table.c.reader.is_(None), table.c.read_until <= now),
                ),
            )
            .returning(table.c.origin)
        )
        with self.engine.begin() as conn:
            return conn.execute(statement).first() is not None

    def put(self, origin: str, answer: StoredRobots) -> None:
        values = {
            "verdict": answer.verdict,
            "body": answer.body,
            "note": answer.note,
            "fetched_at": self._clock(),
            "expires_at": answer.expires_at,
            "reader": None,
            "read_until": None,
        }
        statement = self._insert(robots_txt).values(origin=origin, **values)
        statement = statement.on_conflict_do_update(index_elements=[robots_txt.c.origin], set_=values)
        with self.engine.begin() as conn:
            conn.execute(statement)

    def release(self, origin: str, reader: str) -> None:
        table = robots_txt
        with self.engine.begin() as conn:
            conn.execute(
                update(table)
                .where(and_(table.c.origin == origin, table.c.reader == reader))
                .values(reader=None, read_until=None)
            )
