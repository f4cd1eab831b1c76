"""How `make test` hands test modules to its xdist workers: whole modules (module fixtures are built once), the
longest first, each to whichever worker frees up, never queued behind another long module.

xdist's `loadfile` gives each worker its next module as soon as the current one is down to two tests, because a
worker runs a test only once it knows the test after it (for module teardown). A long module of one or two tests
(most of the daemon and browser modules) therefore gets a second long module queued behind it at once: the two run
one after the other on that worker while the other workers may be free, and the run lasts as long as the longest
such pair. Here a worker whose remaining work is a long test gets the shortest module waiting instead (a few
seconds of unit tests); the long modules stay in the queue for the next worker that frees up.

Seconds per module come from the last run (tests/conftest.py `module_seconds`); a module no run has timed counts
as short. Written against xdist's scheduler protocol (`xdist.scheduler.protocol.Scheduling`, handed to xdist by
its `pytest_xdist_make_scheduler` hook).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

#: a worker whose remaining work is expected to take longer than this gets a short module queued behind it
LONG_SECONDS = 20.0


class Worker(Protocol):
    """What the scheduler uses of xdist's WorkerController."""

    @property
    def shutting_down(self) -> bool: ...

    def send_runtest_some(self, indices: Sequence[int]) -> None: ...

    def shutdown(self) -> None: ...


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


class LongestModuleFirst:
    """xdist's Scheduling protocol: modules as units of work, handed out longest first (module doc)."""

    def __init__(self, numnodes: int, seconds: Mapping[str, float]) -> None:
        self.numnodes = numnodes
        self.seconds = seconds
        self.collection: list[str] | None = None
        self.registered: dict[Worker, list[str]] = {}
        #: per worker, the node ids sent to it and not yet reported, in the order it runs them
        self.pending: dict[Worker, list[str]] = {}
        #: modules not yet sent, each with its node ids
        self.queue: dict[str, list[str]] = {}
        #: tests per module in the collection
        self.sizes: dict[str, int] = {}

    # -- the protocol's state
    @property
    def nodes(self) -> list[Worker]:
        return list(self.pending)

    @property
    def collection_is_completed(self) -> bool:
        return len(self.registered) >= self.numnodes

    @property
    def tests_finished(self) -> bool:
        """Nothing left to send and every worker down to the one test it holds until shutdown."""
        if not self.collection_is_completed or self.queue:
            return False
        return all(len(ids) < 2 for ids in self.pending.values())

    @property
    def has_pending(self) -> bool:
        return bool(self.queue) or any(self.pending.values())

    # -- workers
    def add_node(self, node: Worker) -> None:
        assert node not in self.pending
        self.pending[node] = []

    def add_node_collection(self, node: Worker, collection: Sequence[str]) -> None:
        assert node in self.pending
        if self.collection is not None and list(collection) != self.collection:
            return  # a replacement worker that collected something else gets no work
        self.registered[node] = list(collection)

    def remove_node(self, node: Worker) -> str | None:
        """A worker that finished or crashed; what it had not run goes back to the queue. The test it crashed in."""
        left = self.pending.pop(node)  # its collection stays registered: collection_is_completed counts them
        if not left:
            return None
        crashed, *rest = left  # reported as failed by xdist, not run again
        for nodeid in rest:
            self.queue.setdefault(module_of(nodeid), []).append(nodeid)
        for other in self.pending:
            self._feed(other)
        return crashed

    def mark_test_complete(self, node: Worker, item_index: int, duration: float = 0) -> None:
        nodeid = self.registered[node][item_index]
        self.pending[node].remove(nodeid)
        self._feed(node)

    def mark_test_pending(self, item: str) -> None:
        raise NotImplementedError

    def remove_pending_tests_from_node(self, node: Worker, indices: Sequence[int]) -> None:
        raise NotImplementedError

    # -- handing out work
    def schedule(self) -> None:
        assert self.collection_is_completed
        if self.collection is None:
            collections = list(self.registered.values())
            if any(c != collections[0] for c in collections):
                return  # xdist reports the differing collections itself
            self.collection = collections[0]
            for nodeid in self.collection:
                self.queue.setdefault(module_of(nodeid), []).append(nodeid)
            self.sizes = {module: len(nodeids) for module, nodeids in self.queue.items()}
        for node in self.nodes:
            self._feed(node)

    def _expected(self, nodeids: Sequence[str]) -> float:
        """Seconds the worker still needs for these tests (a module's seconds shared among its tests)."""
        total = 0.0
        for module in {module_of(n) for n in nodeids}:
            share = sum(1 for n in nodeids if module_of(n) == module) / self.sizes[module]
            total += self.seconds.get(module, 0.0) * share
        return total

    def _feed(self, node: Worker) -> None:
        """Send more work while the worker holds fewer than two tests (it cannot run its last one before it
        knows the next): the longest module waiting, or the shortest if what it holds is itself long."""
        if node.shutting_down or node not in self.registered or node not in self.pending:
            return
        held = self.pending[node]
        if len(held) >= 2:
            return
        if not self.queue:
            node.shutdown()
            return
        by_length = sorted(self.queue, key=lambda module: (-self.seconds.get(module, 0.0), module))
        module = by_length[-1] if self._expected(held) > LONG_SECONDS else by_length[0]
        nodeids = self.queue.pop(module)
        held.extend(nodeids)
        index = {nodeid: i for i, nodeid in enumerate(self.registered[node])}
        node.send_runtest_some([index[nodeid] for nodeid in nodeids])
        self._feed(node)  # a one-test module: the worker needs the next one before it can start
