"""The lookup service's queue of URL lookups that fetch a page: threads of their own, one lookup per site at a time,
bounded, cancelled when their client goes away (see ``UrlLookupQueue``)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from topicmap.dedup.service_limits import DEFAULT_MAX_PENDING_URLS, DEFAULT_URL_WORKERS
from topicmap.web.throttle import DEFAULT_INTERVAL

# What a 503 for a full URL queue asks the client to wait: one default politeness interval, the soonest a
# site's next lookup can start.
RETRY_AFTER_SECONDS = math.ceil(DEFAULT_INTERVAL)


class ServiceBusy(RuntimeError):
    """A URL lookup the service cannot take now (answered 503 with ``Retry-After``)."""


@dataclass(eq=False)
class UrlLookup:
    """One accepted URL lookup: ``work(cancelled)`` runs in a worker thread; ``future`` (of the event loop)
    gets its result or error."""

    site: str  # the fetcher's throttle domain: lookups of one site run one at a time
    work: Callable[[threading.Event], Any]
    future: asyncio.Future
    cancelled: threading.Event = field(default_factory=threading.Event)


class UrlLookupQueue:
    """The URL lookups that fetch a page, run by ``workers`` threads of their own, so that they never hold the
    threads that answer texts and stored URLs.

    At most ``max_pending`` are accepted at once, queued or running (``submit`` raises :class:`ServiceBusy`
    beyond). Workers take the oldest queued lookup whose site has none running: the fetcher spaces a site's
    requests by its politeness interval anyway, so a second thread on the site would only wait, while lookups
    of other sites go on. ``cancel`` (the client went away) drops a queued lookup at once; a running one's
    fetch ends at once if it waits for a slot, within a fraction of a second if a request is under way (see
    :meth:`WebFetcher.fetch`). ``close`` answers every pending lookup :class:`ServiceBusy` and lets
    the workers end. ``submit``, ``cancel`` and ``close`` are called from the event loop's thread."""

    def __init__(
        self, workers: int = DEFAULT_URL_WORKERS, max_pending: int = DEFAULT_MAX_PENDING_URLS
    ) -> None:
        if workers < 1:
            raise ValueError(f"URL lookup workers must be at least 1, got {workers}")
        if max_pending < 1:
            raise ValueError(f"the URL lookup queue must hold at least 1, got {max_pending}")
        self.workers = workers
        self.max_pending = max_pending
        self._queued: list[UrlLookup] = []  # oldest first; at most max_pending, so scans are short
        self._running: set[UrlLookup] = set()
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._condition = threading.Condition()

    def counts(self) -> dict[str, int]:
        with self._condition:
            return {
                "queued": len(self._queued),
                "running": len(self._running),
                "max_pending": self.max_pending,
                "workers": self.workers,
            }

    def submit(self, site: str, work: Callable[[threading.Event], Any]) -> UrlLookup:
        """Accept a lookup (raises :class:`ServiceBusy` when ``max_pending`` are pending or the queue is closed)."""
        lookup = UrlLookup(site, work, asyncio.get_running_loop().create_future())
        with self._condition:
            if self._closed:
                raise ServiceBusy("the service is shutting down")
            if len(self._queued) + len(self._running) >= self.max_pending:
                raise ServiceBusy(
                    f"{self.max_pending} URL lookups are already pending (the service's --max-pending-urls); "
                    f"try again in {RETRY_AFTER_SECONDS} s"
                )
            self._queued.append(lookup)
            if len(self._threads) < min(self.workers, len(self._queued) + len(self._running)):
                # Threads start as lookups come: a service that is never asked for a URL runs none.
                thread = threading.Thread(target=self._work, name="url-lookup", daemon=True)
                self._threads.append(thread)
                thread.start()
            self._condition.notify_all()
        return lookup

    def cancel(self, lookup: UrlLookup) -> None:
        """Nobody waits for this lookup any more: drop it if queued; if running, its fetch sends nothing more
        and cuts the request under way."""
        lookup.cancelled.set()
        lookup.future.cancel()
        with self._condition:
            if lookup in self._queued:
                self._queued.remove(lookup)

    def close(self) -> None:
        """Answer every pending lookup :class:`ServiceBusy` (the service is stopping); later submits are refused
        and the workers end once their lookup does (they are daemon threads: a fetch in the middle of a transfer
        does not hold up the process's exit)."""
        with self._condition:
            self._closed = True
            pending = [*self._queued, *self._running]
            self._queued.clear()
            self._condition.notify_all()
        for lookup in pending:
            lookup.cancelled.set()
            if not lookup.future.done():
                lookup.future.set_exception(ServiceBusy("the service is shutting down"))

    def _next(self) -> UrlLookup | None:
        """The oldest queued lookup whose site has none running (called holding the condition)."""
        busy = {lookup.site for lookup in self._running}
        for position, lookup in enumerate(self._queued):
            if lookup.site not in busy:
                del self._queued[position]
                self._running.add(lookup)
                return lookup
        return None

    def _work(self) -> None:
        while True:
            with self._condition:
                lookup = self._next()
                while lookup is None:
                    if self._closed:
                        return
                    self._condition.wait()
                    lookup = self._next()
            result = error = None
            try:
                result = lookup.work(lookup.cancelled)
            except Exception as failure:  # noqa: BLE001 - the request's handler answers it
                error = failure
            with self._condition:
                self._running.discard(lookup)
                self._condition.notify_all()  # the site is free again: another worker may run its next lookup
            with contextlib.suppress(RuntimeError):  # the event loop has closed: nobody waits for the answer
                lookup.future.get_loop().call_soon_threadsafe(_settle, lookup.future, result, error)


def _settle(future: asyncio.Future, result: Any, error: BaseException | None) -> None:
    if future.done():  # cancelled (the client went away) or answered by close()
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
