"""The fetcher's schedule: per-site slots and send times for ``WebFetcher.fetch_many``.

Every domain with queued URLs holds at most one slot: the time its next request may ask for the domain's turn
(``topicmap.web.throttle``). A heap orders those slots and each idle worker takes the URL whose slot comes
first, or waits on a condition variable until the earliest slot is due (no polling). The next slot of a domain
is set once its previous request has been sent, never earlier than its interval after it, nor earlier than
the throttle said to ask again (`DomainWaits`). How one slot is used (one request, a redirect hop, a retry)
is the fetcher's (``topicmap.web.fetch``); the schedule only hands slots out and collects the outcomes.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

log = logging.getLogger(__name__)

# Domains whose next turn one fetcher remembers before the past ones are dropped: a time only matters until it
# has passed, so past this many the fetcher forgets those (the ones still ahead are kept).
MAX_KEPT_WAITS = 10_000


@dataclass
class NeedSlot:
    """The fetch must continue in a (new) slot of ``domain``, not before wall-clock ``earliest``."""

    domain: str
    earliest: float = 0.0


class DomainWaits:
    """Per throttle domain, the wall-clock time before which this fetcher does not ask for its turn: its last
    request there plus the interval, or when the throttle said to ask again. A slot earlier than that would
    only be refused (a claim, a commit for a shared throttle, for nothing)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.not_before: dict[str, float] = {}
        self._clock = clock
        self._lock = threading.Lock()
        self._bound = MAX_KEPT_WAITS

    def earliest(self, domain: str, earliest: float) -> float:
        """``earliest``, moved to the domain's wait when that is later."""
        with self._lock:
            return max(earliest, self.not_before.get(domain, 0.0))

    def note(self, domain: str, not_before: float) -> None:
        with self._lock:
            if not_before > self.not_before.get(domain, 0.0):
                self.not_before[domain] = not_before
            if len(self.not_before) > self._bound:
                self._forget_past()

    def _forget_past(self) -> None:
        """Drop the waits that have passed (called holding the lock). A crawl of many sites sends to most of them
        once; the waits still ahead are kept, and the bound grows with them, so a crawl of many sites at once
        does not scan on every request."""
        now = self._clock()
        self.not_before = {domain: at for domain, at in self.not_before.items() if at > now}
        self._bound = max(MAX_KEPT_WAITS, 2 * len(self.not_before))


class ScheduledFetch(Protocol):
    """What the schedule reads and writes of a fetch under way (the fetcher's own state of it)."""

    url: str
    domain: str
    queued_at: float
    throttle_wait: float


_Fetch = TypeVar("_Fetch", bound=ScheduledFetch)
_Outcome = TypeVar("_Outcome")


class DomainScheduler(Generic[_Fetch, _Outcome]):
    """fetch_many's shared schedule; every worker thread runs :meth:`work` and schedules for itself.

    There is no coordinator thread: with dozens of workers contending for the GIL, a coordinator that must
    be scheduled between every two requests becomes the bottleneck. Workers take due slots from the heap,
    run them, and (outside the lock) reserve the next slot of a domain whose previous request has been sent.
    """

    def __init__(
        self,
        *,
        interval_for: Callable[[str], float],
        wall_clock: Callable[[], float],
        reserve: Callable[[str, float], float],
        run_slot: Callable[[_Fetch, str, float, Callable[[], None]], _Outcome | NeedSlot],
        failed: Callable[[_Fetch, str], _Outcome],
        max_ready: int,
        max_workers: int,
    ) -> None:
        # the fetcher's parts the schedule uses: a domain's interval, the throttle's clock, a slot reserved,
        # one slot of a fetch used, and a fetch ended with an error
        self._interval_for = interval_for
        self._wall = wall_clock
        self._reserve_slot = reserve
        self._run_slot = run_slot
        self._failed = failed
        self.max_ready = max_ready
        self.ready = 0  # outcomes put in ``results`` and not yet taken by the caller
        self.resume_at = max_ready // 2  # a full buffer holds new fetches back until it has drained to this
        self.held_back = False
        # Fetches under way at once, at most ``active_limit``: halved each time the buffer fills (the caller is
        # the bottleneck, and every extra fetch thread running takes the GIL from it), one more each time the
        # caller finds the buffer empty. On the live web, where the caller waits, it stays at max_workers.
        self.max_workers = max_workers
        self.active_limit = max_workers
        self.active = 0
        self.condition = threading.Condition()
        self.results: queue.SimpleQueue[_Outcome | None] = queue.SimpleQueue()
        self.queues: dict[str, deque[_Fetch]] = {}
        # (slot, seq, domain, interval, reserved_at): a heap of the slot each domain holds
        self.slots: list[tuple[float, int, str, float, float]] = []
        self.delayed: list[tuple[float, int, _Fetch, str]] = []  # retries waiting for their backoff
        self.holding: set[str] = set()  # domains with a slot reserved (or being reserved) and not yet used
        self.needs_slot: deque[str] = deque()
        self.intervals: dict[str, float] = {}
        self.sequence = itertools.count()
        self.pending = 0  # fetches not finished
        self.input_closed = False  # no URL will be added any more: the workers end once pending is 0
        self.stopped = False

    def interval_of(self, domain: str) -> float:
        if domain not in self.intervals:
            self.intervals[domain] = self._interval_for(domain)
        return self.intervals[domain]

    # All methods below whose name starts with "_" run with the condition's lock held.

    def add(self, state: _Fetch) -> None:
        with self.condition:
            self.pending += 1
            self._enqueue(state, state.domain)
            self.condition.notify()  # a worker may be waiting for work (fed from a UrlFeed)

    def close_input(self) -> None:
        with self.condition:
            self.input_closed = True
            if not self.pending:
                self.results.put(None)
            self.condition.notify_all()

    def outstanding(self) -> int:
        """URLs added and not yet taken by the caller (being fetched, queued, or waiting in ``results``)."""
        with self.condition:
            return self.pending + self.ready

    def _enqueue(self, state: _Fetch, domain: str, front: bool = False) -> None:
        state.queued_at = self._wall()
        bucket = self.queues.setdefault(domain, deque())
        if front:  # a fetch already under way (redirect hop, retry) goes before new URLs
            bucket.appendleft(state)
        else:
            bucket.append(state)
        if domain not in self.holding:
            self.needs_slot.append(domain)

    def stop(self) -> None:
        with self.condition:
            self.stopped = True
            self.condition.notify_all()

    def unfinished(self) -> list[_Fetch]:
        """The fetches added and not finished (queued, or waiting for a retry), once the workers have ended."""
        with self.condition:
            return [state for bucket in self.queues.values() for state in bucket] + [
                entry[2] for entry in self.delayed
            ]

    def starved(self) -> None:
        """The caller found no outcome waiting: allow one more fetch at once (up to max_workers)."""
        if self.active_limit >= self.max_workers:
            return  # the usual case on the web, and no lock to take (an unlocked read is enough for a hint)
        with self.condition:
            if self.active_limit < self.max_workers:
                self.active_limit += 1
                self.condition.notify()

    def taken(self) -> None:
        """The caller took an outcome: if the buffer was full, the workers held back may fetch again."""
        with self.condition:
            self.ready -= 1
            if self.held_back and self.ready <= self.resume_at:
                self.held_back = False
                self.condition.notify_all()

    def _next_job(self) -> tuple[str, object] | None:
        """("reserve", domain) or ("fetch", (state, domain, interval)); None when finished. Waits."""
        while not self.stopped and (self.pending or not self.input_closed):
            now = self._wall()
            while self.delayed and self.delayed[0][0] <= now:
                _, _, state, domain = heapq.heappop(self.delayed)
                self._enqueue(state, domain, front=True)
            if self.ready >= self.max_ready and not self.held_back:
                self.held_back = True
                self.active_limit = max(1, self.active_limit // 2)
            # No polite slot is reserved while the caller is behind: a slot that came due while its fetch was
            # held back would be used late, and the domain's turn would go unused meanwhile (or to another
            # process sharing the throttle, while this one's URLs of the domain wait). Zero-interval slots take
            # no turn: those are reserved as before.
            deferred: list[str] = []
            job: tuple[str, object] | None = None
            while self.needs_slot:
                domain = self.needs_slot.popleft()
                if not self.queues.get(domain) or domain in self.holding:
                    continue
                if self.held_back and self.interval_of(domain) > 0:
                    deferred.append(domain)
                    continue
                self.holding.add(domain)
                job = ("reserve", domain)
                break
            self.needs_slot.extendleft(reversed(deferred))
            if job is not None:
                return job
            if self.slots and self.slots[0][0] <= now:
                # A slot already reserved for a polite (non-zero) interval is used on time even when held back:
                # at most one such fetch per domain, and only domains reserved before the hold.
                polite = self.slots[0][3] > 0
                if not polite and (self.held_back or self.active >= self.active_limit):
                    self.condition.wait()  # backpressure: woken by ``taken``, ``starved``, a fetch's end, ``stop``
                    continue
                slot, _, domain, interval, reserved_at = heapq.heappop(self.slots)
                state = self.queues[domain].popleft()
                # Waiting on the throttle is the part of the wait the slot imposed: from when the slot was
                # reserved (or the URL queued, if later) to the slot. Time spent behind other URLs of the
                # domain, or held back by a slow caller, is not the throttle's.
                state.throttle_wait += max(0.0, slot - max(state.queued_at, reserved_at))
                if (self.slots and self.slots[0][0] <= now) or self.needs_slot:
                    self.condition.notify()  # more is due: wake another worker
                self.active += 1
                return "fetch", (state, domain, interval)
            waits = [self.slots[0][0] - now] if self.slots else []
            if self.delayed:
                waits.append(self.delayed[0][0] - now)
            self.condition.wait(max(0.0, min(waits)) if waits else None)
        return None

    def work(self) -> None:
        while True:
            with self.condition:
                job = self._next_job()
            if job is None:
                return
            kind, payload = job
            if kind == "reserve":
                self._reserve(payload)  # type: ignore[arg-type]
            else:
                self._fetch(*payload)  # type: ignore[misc]

    def _reserve(self, domain: str) -> None:
        interval = self.interval_of(domain)
        reserved_at = self._wall()
        slot = self._reserve_slot(domain, interval)
        with self.condition:
            heapq.heappush(self.slots, (slot, next(self.sequence), domain, interval, reserved_at))
            if self.slots[0][2] == domain:
                self.condition.notify()  # the earliest slot changed: a waiting worker must recompute

    def _fetch(self, state: _Fetch, domain: str, interval: float) -> None:
        def slot_used() -> None:
            # Reserve the domain's next slot right here (no hand-off to another thread): while workers
            # keep finding due slots in the heap, none of them ever has to be woken up.
            with self.condition:
                if not self.queues.get(domain):
                    self.holding.discard(domain)
                    return
                if self.held_back and interval > 0:  # reserved once the caller has caught up (see _next_job)
                    self.holding.discard(domain)
                    self.needs_slot.append(domain)
                    return
            self._reserve(domain)

        try:
            result: _Outcome | NeedSlot = self._run_slot(state, domain, interval, slot_used)
        except Exception as error:  # noqa: BLE001 - a bug must not hang the other fetches
            log.exception("fetch of %s crashed", state.url)
            result = self._failed(state, f"internal error: {type(error).__name__}: {error}")
            slot_used()
        with self.condition:
            self.active -= 1
            if self.active == self.active_limit - 1:
                self.condition.notify()  # a worker may be waiting for a fetch to end
            if not isinstance(result, NeedSlot):
                self._finish(result)
            elif result.earliest > self._wall():
                heapq.heappush(self.delayed, (result.earliest, next(self.sequence), state, result.domain))
                self.condition.notify()
            else:
                self._enqueue(state, result.domain, front=True)
                self.condition.notify()

    def _finish(self, outcome: _Outcome) -> None:
        self.results.put(outcome)
        self.ready += 1
        self.pending -= 1
        if not self.pending and self.input_closed:
            self.results.put(None)
            self.condition.notify_all()
