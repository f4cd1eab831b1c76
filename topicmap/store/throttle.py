"""The politeness throttle shared by every process using one topic store (PostgreSQL or SQLite).

The spacing rules and the in-process ``MemoryThrottle`` are in :mod:`topicmap.web.throttle`; this is the same
contract kept in the ``domain_web_requests`` table, so politeness holds across processes and machines.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from sqlalchemy import Table, and_, func, inspect, literal, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError, ProgrammingError

from topicmap.store.schema import domain_web_requests
from topicmap.web.throttle import DEFAULT_GUARD_BAND, SAME_SLOT_EPSILON, SlotSpacing


class SqlThrottle(SlotSpacing):
    """Throttle shared by every process using one topic store (PostgreSQL or SQLite).

    Each reservation is ONE upsert statement (``INSERT ... ON CONFLICT DO UPDATE ... RETURNING``), which both
    databases execute atomically: PostgreSQL locks the conflicting row for the update, and SQLite takes its
    write lock when the statement starts, before it reads the existing row. So no explicit
    ``SELECT ... FOR UPDATE`` or SQLite ``BEGIN IMMEDIATE`` is needed: those are for read-then-write
    sequences, and there is no separate read here. A late start is one conditional UPDATE (compare-and-set
    on the value this caller wrote).
    """

    MIN_LEAD = 0.005
    MAX_LEAD = 0.25

    def __init__(
        self,
        engine: Engine,
        clock: Callable[[], float] = time.time,
        late_tolerance: float = 0.002,
        create_table: bool = True,
        guard_band: float = DEFAULT_GUARD_BAND,
    ) -> None:
        if engine.dialect.name not in ("postgresql", "sqlite"):
            raise ValueError(f"SqlThrottle supports PostgreSQL and SQLite, not {engine.dialect.name!r}")
        self.engine = engine
        self._clock = clock
        # A start this close to its slot needs no database round trip.
        self.late_tolerance = late_tolerance
        self.guard_band = guard_band
        self.table: Table = domain_web_requests
        if engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        self._insert = insert
        self._greatest = func.greatest if engine.dialect.name == "postgresql" else func.max
        self._latencies: deque[float] = deque(maxlen=16)
        self._latency_lock = threading.Lock()
        if create_table:
            self._create_table()

    def _create_table(self) -> None:
        try:
            self.table.create(self.engine, checkfirst=True)
        except (OperationalError, ProgrammingError):
            # Another process created it between the check and the CREATE: fine if it exists now.
            if not inspect(self.engine).has_table(self.table.name):
                raise

    def lead(self) -> float:
        """How far ahead of "now" promised times are set: twice the slowest recent commit, bounded."""
        with self._latency_lock:
            slowest = max(self._latencies, default=0.0)
        return min(self.MAX_LEAD, max(self.MIN_LEAD, 2 * slowest))

    def _execute(self, statement):
        began = time.perf_counter()
        with self.engine.begin() as conn:
            result = conn.execute(statement)
            value = result.scalar_one() if statement.is_insert else result.rowcount
        with self._latency_lock:
            self._latencies.append(time.perf_counter() - began)
        return value

    def reserve(self, domain: str, interval: float, earliest: float = 0.0) -> float:
        spacing = self._spacing(domain, interval)
        if spacing == 0:
            # A zero interval is no throttling: there is nothing to share, so no commit and no lead to wait
            # out. (Such requests neither wait for nor delay the slots other callers hold for the domain.)
            return max(self._clock(), earliest)
        start = max(self._clock() + self.lead(), earliest)
        table = self.table
        statement = (
            self._insert(table)
            .values(domain=domain, next_request_at=start + spacing)
            .on_conflict_do_update(
                index_elements=[table.c.domain],
                set_={"next_request_at": self._greatest(literal(start), table.c.next_request_at) + spacing},
            )
            .returning(table.c.next_request_at)
        )
        return float(self._execute(statement)) - spacing

    def confirm(self, domain: str, slot: float, interval: float) -> float | None:
        spacing = self._spacing(domain, interval)
        now = self._clock()
        if spacing == 0 or now - slot <= self.late_tolerance:
            return max(now, slot)
        expected = slot + spacing
        while True:
            promised = self._clock() + self.lead()
            if not self._compare_and_set(domain, expected, promised + spacing):
                return None
            if self._clock() <= promised:
                return promised
            expected = promised + spacing  # the commit outlasted the lead: promise again

    def _compare_and_set(self, domain: str, expected: float, new_value: float) -> bool:
        table = self.table
        statement = (
            update(table)
            .where(
                and_(
                    table.c.domain == domain,
                    table.c.next_request_at.between(
                        expected - 4 * SAME_SLOT_EPSILON, expected + 4 * SAME_SLOT_EPSILON
                    ),
                )
            )
            .values(next_request_at=new_value)
        )
        return self._execute(statement) == 1
