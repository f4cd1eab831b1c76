"""The politeness throttle shared by every process using one topic store (PostgreSQL or SQLite).

The turn rules and the in-process ``MemoryThrottle`` are in :mod:`topicmap.web.throttle`; this is the same
contract kept in the ``domain_web_requests`` table, so politeness holds across processes and machines.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable

from sqlalchemy import Table, and_, case, func, inspect, literal, null, or_, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError, ProgrammingError

from topicmap.store.robots_txt import SqlRobots
from topicmap.store.schema import domain_web_requests
from topicmap.web.throttle import Lease, ask_again_at, check_turn

#: How long after its turn could come a process in line keeps it for itself: past it, a process that stalled or
#: died in line keeps no one else waiting.
LINE_GRACE = 1.0


class SqlThrottle:
    """Throttle shared by every process using one topic store (PostgreSQL or SQLite).

    A claim is ONE conditional upsert (``INSERT ... ON CONFLICT DO UPDATE ... WHERE <the turn is free>
    RETURNING``), which both databases execute atomically: PostgreSQL locks the conflicting row and checks the
    condition on its newest version, and SQLite runs the whole statement under its write lock. A release is one
    UPDATE that moves the domain's next turn to the send time plus the interval (never back) and frees the
    lease if it is still this one's.

    Turns go round between processes: a refused claim puts its process in line (``waiting``) unless another
    one is, and while one is, the domain's free turn is that process's (for LINE_GRACE after it could have
    taken it). Without the line, the process that just sent, which knows when the domain's next turn comes and
    asks right then, would win every turn while it has URLs of the domain, and a topic sharing a big site with
    another would wait for the other's whole queue of it. Within one process the fetcher's schedule takes
    turns in order.
    """

    def __init__(
        self,
        engine: Engine,
        clock: Callable[[], float] = time.time,
        create_table: bool = True,
    ) -> None:
        if engine.dialect.name not in ("postgresql", "sqlite"):
            raise ValueError(f"SqlThrottle supports PostgreSQL and SQLite, not {engine.dialect.name!r}")
        self.engine = engine
        self._clock = clock
        self.table: Table = domain_web_requests
        if engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        self._insert = insert
        self._greatest = func.greatest if engine.dialect.name == "postgresql" else func.max
        # Lease tokens: this process's own prefix, then a count (unique across processes and machines).
        self._token_prefix = uuid.uuid4().hex[:16]
        self._tokens = itertools.count(1)
        if create_table:
            self._create_table()

    def _create_table(self) -> None:
        try:
            self.table.create(self.engine, checkfirst=True)
        except (OperationalError, ProgrammingError):
            # Another process created it between the check and the CREATE: fine if it exists now.
            if not inspect(self.engine).has_table(self.table.name):
                raise

    def _token(self) -> str:
        return f"{self._token_prefix}-{next(self._tokens)}"

    def claim(self, domain: str, interval: float, hold: float) -> Lease | float:
        check_turn(domain, interval, hold)
        table = self.table
        now = self._clock()
        lease = Lease(domain, self._token(), interval)
        in_line = table.c.waiting == self._token_prefix
        line_is_mine_or_free = or_(table.c.waiting.is_(None), in_line, table.c.waiting_until <= now)
        held = {"held_by": lease.token, "held_since": now, "held_until": now + hold}
        statement = (
            self._insert(table)
            .values(domain=domain, next_request_at=now, **held)
            .on_conflict_do_update(
                index_elements=[table.c.domain],
                set_={
                    **held,
                    "waiting": case((in_line, null()), else_=table.c.waiting),
                    "waiting_until": case((in_line, null()), else_=table.c.waiting_until),
                },
                where=and_(
                    table.c.next_request_at <= now,
                    or_(table.c.held_by.is_(None), table.c.held_until <= now),
                    line_is_mine_or_free,
                ),
            )
            .returning(table.c.domain)
        )
        # Refused: get in line (unless another process is), until a little after the turn could come.
        could_come = self._greatest(
            table.c.next_request_at, func.coalesce(table.c.held_since, 0.0) + interval, literal(now)
        )
        queue_up = (
            update(table)
            .where(table.c.domain == domain)
            .values(
                waiting=case((line_is_mine_or_free, literal(self._token_prefix)), else_=table.c.waiting),
                waiting_until=case(
                    (line_is_mine_or_free, could_come + LINE_GRACE), else_=table.c.waiting_until
                ),
            )
            .returning(table.c.next_request_at, table.c.held_since, table.c.held_until, table.c.waiting)
        )
        with self.engine.begin() as conn:
            if conn.execute(statement).first() is not None:
                return lease
            row = conn.execute(queue_up).one()
        other_in_line = row.waiting != self._token_prefix
        again = ask_again_at(
            now, interval, row.next_request_at, row.held_since, row.held_until, other_in_line
        )
        # The row changed between the two statements (the lease was just released): ask again at once.
        return now if again is None else again

    def release(self, lease: Lease, sent_at: float | None) -> None:
        table = self.table
        mine = table.c.held_by == lease.token
        values = {
            "held_by": case((mine, null()), else_=table.c.held_by),
            "held_since": case((mine, null()), else_=table.c.held_since),
            "held_until": case((mine, null()), else_=table.c.held_until),
        }
        if sent_at is not None:
            values["next_request_at"] = self._greatest(
                table.c.next_request_at, literal(sent_at + lease.interval)
            )
        with self.engine.begin() as conn:
            conn.execute(update(table).where(table.c.domain == lease.domain).values(**values))


def shared_politeness(engine: Engine) -> dict[str, SqlThrottle | SqlRobots]:
    """``WebFetcher`` keyword arguments that share politeness with every process using the store at ``engine``:
    each domain's turns (``throttle``) and each origin's robots.txt reads (``shared_robots``)."""
    return {"throttle": SqlThrottle(engine, create_table=False), "shared_robots": SqlRobots(engine)}
