"""The order `make test` hands modules to its workers (tests/scheduling.py), run against xdist's own `loadfile`
scheduler in a simulation of xdist's workers: a worker runs a test only once it holds the test after it, or once it
was told to shut down."""

from __future__ import annotations

import heapq
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from xdist.scheduler import LoadFileScheduling

from tests.scheduling import LONG_SECONDS, LongestModuleFirst, module_of

MODULE_SECONDS = json.loads(Path(__file__).with_name("module_seconds.json").read_text())


class FakeWorker:
    """A worker as the scheduler sees it: the tests it was sent, in order, and whether it was told to stop."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.gateway = SimpleNamespace(id=name)  # xdist's loadfile names workers by it
        self.sent: list[int] = []
        self.sent_at: dict[int, float] = {}
        self.clock = [0.0]  # the simulation's time, shared
        self.stop = False

    @property
    def shutting_down(self) -> bool:
        return self.stop

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.extend(indices)
        self.sent_at.update((i, self.clock[0]) for i in indices)

    def shutdown(self) -> None:
        self.stop = True

    def __repr__(self) -> str:
        return self.name


def collection(module_tests: dict[str, int]) -> list[str]:
    return [f"{module}::test_{i}" for module, n in module_tests.items() for i in range(n)]


def simulate(scheduler, workers: list[FakeWorker], ids: list[str], seconds: dict[str, float]) -> dict:  # noqa: ANN001
    """Run the collection as xdist would; each test takes its module's seconds shared among its tests. Returns the
    end time, the tests in the order they ended, and the longest a long module's first test waited on its worker
    between being sent there and starting."""
    sizes: dict[str, int] = {}
    for nodeid in ids:
        sizes[module_of(nodeid)] = sizes.get(module_of(nodeid), 0) + 1
    for worker in workers:
        scheduler.add_node(worker)
    for worker in workers:
        scheduler.add_node_collection(worker, ids)
    scheduler.schedule()
    done_upto = {w: 0 for w in workers}  # index into w.sent of the next test to run
    busy_until: dict[FakeWorker, float] = {}
    clock = [0.0]
    for worker in workers:
        worker.clock = clock
    longest_wait = 0.0
    events: list[tuple[float, int, FakeWorker]] = []
    now = 0.0
    ran: list[str] = []

    def start_next(worker: FakeWorker) -> None:
        if worker in busy_until:
            return
        position = done_upto[worker]
        if position >= len(worker.sent):
            return
        if position + 1 >= len(worker.sent) and not worker.stop:
            return  # holds its last test until it knows the next one
        index = worker.sent[position]
        module = module_of(ids[index])
        first = position == 0 or module_of(ids[worker.sent[position - 1]]) != module
        if first and is_long(module):
            nonlocal longest_wait
            longest_wait = max(longest_wait, now - worker.sent_at[index])
        busy_until[worker] = now + seconds.get(module, 0.0) / sizes[module]
        heapq.heappush(events, (busy_until[worker], id(worker), worker))

    for worker in workers:
        start_next(worker)
    while events:
        now, _, worker = heapq.heappop(events)
        clock[0] = now
        del busy_until[worker]
        index = worker.sent[done_upto[worker]]
        done_upto[worker] += 1
        ran.append(ids[index])
        scheduler.mark_test_complete(worker, index)
        if scheduler.tests_finished:
            for w in workers:
                w.shutdown()
        for w in workers:
            start_next(w)
    return {"end": now, "ran": ran, "longest_wait": longest_wait}


def is_long(module: str) -> bool:
    return MODULE_SECONDS.get(module, 0.0) > LONG_SECONDS


class _Config:
    """What xdist's LoadFileScheduling reads of pytest's config."""

    class option:  # noqa: N801 - pytest's attribute name
        loadscopereorder = False
        tx = ["popen"] * 4
        numprocesses = 4
        dist = "loadfile"

    def getvalue(self, name: str) -> object:
        return getattr(self.option, name)


@pytest.fixture
def suite() -> list[str]:
    """This suite's modules at their committed seconds: long modules of one or two tests (the daemon modules) and
    many short modules of many tests."""
    tests_per_module = {module: (1 if seconds > 60 else 12) for module, seconds in MODULE_SECONDS.items()}
    return collection(tests_per_module)


def run_both(suite: list[str]) -> tuple[dict, dict]:
    ours = simulate(LongestModuleFirst(4, MODULE_SECONDS), workers(), suite, MODULE_SECONDS)
    theirs = simulate(LoadFileScheduling(_Config()), workers(), suite, MODULE_SECONDS)
    return ours, theirs


def workers() -> list[FakeWorker]:
    return [FakeWorker(f"gw{i}") for i in range(4)]


def test_every_test_runs_once_and_the_run_ends_before_xdists_loadfile(suite: list[str]) -> None:
    ours, theirs = run_both(suite)
    assert sorted(ours["ran"]) == sorted(suite) == sorted(theirs["ran"])
    assert ours["end"] < theirs["end"]
    # near the bound: the longest module, or the work shared by four
    bound = max(max(MODULE_SECONDS.values()), sum(MODULE_SECONDS.values()) / 4)
    assert ours["end"] <= bound * 1.05, (ours["end"], bound)


def test_a_long_module_never_waits_behind_another_on_one_worker(suite: list[str]) -> None:
    """xdist's loadfile queues a long module behind the long one a worker runs (it hands out the next module as
    soon as the current one is down to two tests); here the long modules wait in the common queue for whichever
    worker frees up first."""
    ours, theirs = run_both(suite)
    assert theirs["longest_wait"] > 100  # a daemon module behind another
    assert ours["longest_wait"] <= LONG_SECONDS  # at most the last test of a module


def test_a_crashed_worker_s_untried_tests_go_to_another() -> None:
    ids = collection({"tests/test_a.py": 3, "tests/test_b.py": 2})
    scheduler = LongestModuleFirst(2, {"tests/test_a.py": 30.0, "tests/test_b.py": 1.0})
    one, two = FakeWorker("gw0"), FakeWorker("gw1")
    for worker in (one, two):
        scheduler.add_node(worker)
        scheduler.add_node_collection(worker, ids)
    scheduler.schedule()
    assert [ids[i] for i in one.sent] == collection({"tests/test_a.py": 3})
    crashed = scheduler.remove_node(one)
    assert crashed == "tests/test_a.py::test_0"  # xdist reports it failed
    scheduler.mark_test_complete(two, two.sent[0])
    scheduler.mark_test_complete(two, two.sent[1])
    sent_to_two = [ids[i] for i in two.sent]
    assert sent_to_two[2:] == ["tests/test_a.py::test_1", "tests/test_a.py::test_2"]
