"""Spider iterations sharded over real Celery workers (dagster-celery on RabbitMQ).

Two `celery -A orchestration.celery_app worker` processes on loopback, a RabbitMQ virtual host of this test's
own (so runs never collide), the demo web served here. A driver process runs the topic's iterations as
`spider_iteration_sharded_job` runs (4 shards each) until no URL is pending, while this test kills one
worker with SIGKILL in the middle of a shard. Checked against one spider in one process: the same stories,
links and URL states; the same page requests (a page is asked for again only if the killed shard held it and
had not written it); no two requests to one site closer than its interval; the killed shard was delivered
again and the run still succeeded.

Under CI=true a missing RabbitMQ fails the test; elsewhere it is skipped with the reason.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from sqlalchemy import func, select

from tests.faultserver import ArrivalTimedHandler
from tests.spider_demo_topic import SMALL_WEB, demo_topic, differences, seed_demo_topic, store_summary
from topicmap.demo.server import _DemoHandler, serve_demo_web
from topicmap.demo.web import generate_demo_web
from topicmap.spider.iteration import Spider
from topicmap.spider.sources import FetcherSource
from topicmap.store import schema as s
from topicmap.store.throttle import SqlThrottle
from topicmap.store.topic_store import TopicStore
from topicmap.web.fetch import WebFetcher
from topicmap.web.netguard import AddressPolicy
from topicmap.web.throttle import throttle_domain

ROOT = Path(__file__).resolve().parent.parent
INTERVAL = 0.2  # politeness per site, so the gaps can be checked
LATE_SEND_TOLERANCE = 0.05  # how late a CPU-starved worker may send after its slot began (see the gap check)
SHARDS = 4
F = s.topic_fetch_urls
pytestmark = pytest.mark.deployment

DRIVER = """
import sys
import dagster as dg
from dagster import DagsterEventType
from orchestration.definitions import spider_iteration_job
from topicmap.spider.plan import decide, read_spider_facts
from topicmap.store.topic_store import TopicStore

topic, max_iterations = sys.argv[1], int(sys.argv[2])
instance = dg.DagsterInstance.get()
if not instance.has_dynamic_partition("topics", topic):
    instance.add_dynamic_partitions("topics", [topic])
store = TopicStore.open()
job = dg.reconstructable(spider_iteration_job)
job.get_definition()
sys.stdin.readline()  # loaded while the test spiders its reference: go
for _ in range(max_iterations + 2):
    decision = decide(read_spider_facts(store, topic, max_iterations), None, 0.0)
    if decision.action != "run_iteration":
        break
    result = dg.execute_job(job, instance=instance, tags={"dagster/partition": topic})
    starts = [e.step_key for e in instance.all_logs(result.run_id, of_type=DagsterEventType.STEP_START)]
    again = sorted(k for k, n in __import__("collections").Counter(starts).items() if n > 1)
    print("RUN", decision.iteration, "SUCCESS" if result.success else "FAILURE", "RESTARTED", ",".join(again), flush=True)
    if not result.success:
        sys.exit(1)
print("DONE", flush=True)
"""


class _ArrivalStampedDemoHandler(ArrivalTimedHandler, _DemoHandler):
    """The demo server's handler, also logging the kernel's arrival time of each request: a time taken in the
    handler thread lags by tens of milliseconds on a loaded machine, too coarse to check a 0.2 s interval."""

    def do_GET(self) -> None:
        target = self._target()
        if target is not None:
            self.server.arrivals.append((self.arrived_at, *target))  # type: ignore[attr-defined]
        super().do_GET()


def _stamp_arrivals(server) -> list[tuple[float, str, str]]:  # noqa: ANN001 - a DemoServer
    server._httpd.arrivals = []
    server._httpd.RequestHandlerClass = _ArrivalStampedDemoHandler
    return server._httpd.arrivals


def rabbitmq_problem() -> str | None:
    try:
        with socket.create_connection(("127.0.0.1", 5672), timeout=2):
            return None
    except OSError as error:
        return f"RabbitMQ not reachable at 127.0.0.1:5672: {error}"


@pytest.fixture
def vhost() -> str:
    problem = rabbitmq_problem()
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true requires RabbitMQ: {problem}")
        pytest.skip(problem)
    ctl = shutil.which("rabbitmqctl")
    if ctl is None:
        yield "/"  # no admin tool: the default virtual host (the test's run ids still keep its tasks apart)
        return
    name = f"topicmap-test-{uuid.uuid4().hex[:10]}"
    subprocess.run([ctl, "add_vhost", name], check=True, capture_output=True)
    subprocess.run(
        [ctl, "set_permissions", "-p", name, "guest", ".*", ".*", ".*"], check=True, capture_output=True
    )
    yield name
    subprocess.run([ctl, "delete_vhost", name], capture_output=True)


def _start_worker(name: str, env: dict[str, str], log: Path) -> subprocess.Popen:
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "orchestration.celery_app",
        "worker",
        "-n",
        f"{name}@%h",
        "--concurrency=1",
        "--prefetch-multiplier=1",
        "--without-gossip",
        "--without-mingle",
        "-l",
        "INFO",
    ]
    with log.open("wb") as out:
        # its own session: a SIGKILL to the group ends the worker's main process and its pool child at once
        return subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _wait_ready(worker: subprocess.Popen, log: Path) -> None:
    while "ready." not in log.read_text(errors="replace"):
        assert worker.poll() is None, log.read_text(errors="replace")[-3000:]
        time.sleep(0.2)


def _one_process_reference(web, topic, server, folder: Path) -> tuple[dict, Counter]:  # noqa: ANN001
    store = TopicStore.open(f"sqlite:///{folder / 'reference.sqlite3'}")
    seed_demo_topic(store, web, topic, folder)
    since = len(server.request_log)
    fetcher = WebFetcher(
        policy=AddressPolicy(allow=[f"127.0.0.1:{server.port}"]),
        host_overrides={"*.test": f"127.0.0.1:{server.port}"},
        throttle=SqlThrottle(store.engine, create_table=False),
    )
    spider = Spider(store, topic, FetcherSource(fetcher, interval_overrides={"*": 0.0}), log=lambda _: None)
    for _ in range(topic.max_iterations + 2):
        if spider.run_iteration().done:
            break
    requests = Counter((h, p) for _, h, p in server.request_log[since:] if p != "/robots.txt")
    summary = store_summary(store, topic.name)
    store.dispose()
    return summary, requests


def test_an_iteration_sharded_over_two_celery_workers_survives_a_kill_9(vhost: str, tmp_path: Path) -> None:
    web = generate_demo_web(**SMALL_WEB)
    topic = demo_topic(web)
    home = tmp_path / "home"
    (home / "dagster").mkdir(parents=True)
    (home / "dagster" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    topics_file = tmp_path / "topics.yaml"
    topics_file.write_text(
        json.dumps(
            {
                "topics": [
                    {
                        "name": topic.name,
                        "query": topic.query,
                        "start_date": topic.start_date.isoformat(),
                        "end_date": topic.end_date.isoformat(),
                        "max_iterations": topic.max_iterations,
                        "max_stories": topic.max_stories,
                    }
                ]
            }
        )
    )
    database = f"sqlite:///{tmp_path / 'celery.sqlite3'}"
    with serve_demo_web(web) as server:
        arrivals = _stamp_arrivals(server)
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "TOPICMAP_HOME": str(home),
            "DAGSTER_HOME": str(home / "dagster"),
            "TOPICMAP_DATABASE_URL": database,
            "TOPICMAP_TOPICS_FILE": str(topics_file),
            "TOPICMAP_PAGE_SOURCE_JSON": json.dumps(
                {
                    "allow_networks": [f"127.0.0.1:{server.port}"],
                    "host_overrides": {"*.test": f"127.0.0.1:{server.port}"},
                    "default_interval": INTERVAL,
                    "max_workers": 4,
                    # a page of the loopback demo web takes milliseconds; the turn of a site the killed worker
                    # held lapses this plus 10 s later (30 + 10 by default: the next shard of that site waited)
                    "total_timeout": 8.0,
                }
            ),
            "TOPICMAP_EXECUTOR": "celery",
            "TOPICMAP_SPIDER_SHARDS": str(SHARDS),
            "TOPICMAP_CELERY_BROKER": f"amqp://guest:guest@127.0.0.1:5672/{vhost.replace('/', '%2F')}",
        }
        logs = [tmp_path / "w1.log", tmp_path / "w2.log"]
        # The workers and the driver start (the driver loads the job, then waits for a line) while this process
        # spiders the reference: no page is asked for but the reference's until the driver is told to go.
        workers = [_start_worker(f"w{n + 1}", env, logs[n]) for n in range(2)]
        driver = None
        try:
            store = TopicStore.open(database)
            seed_demo_topic(store, web, topic, tmp_path)
            driver = subprocess.Popen(
                [sys.executable, "-c", DRIVER, topic.name, str(topic.max_iterations)],
                cwd=ROOT,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            reference, reference_requests = _one_process_reference(web, topic, server, tmp_path)
            since, arrivals_since = len(server.request_log), len(arrivals)
            try:
                driver.stdin.write(b"go\n")
                driver.stdin.flush()
            except BrokenPipeError:
                pass  # the driver ended already: its output says why
            for worker, log in zip(workers, logs, strict=True):
                _wait_ready(worker, log)
            # Kill worker 1 (main process and pool child) once its shard of iteration 1 is well under way.
            held_at_kill = _kill_mid_shard(store, workers[0], logs[0], driver)
            output = driver.communicate(timeout=900)[0].decode(errors="replace")
        finally:
            for worker in workers:
                if worker.poll() is None:
                    os.killpg(worker.pid, signal.SIGTERM)
            for worker in workers:
                worker.wait(timeout=60)
            if driver is not None and driver.poll() is None:
                driver.kill()
        assert driver.returncode == 0 and "DONE" in output, output[-4000:]
        hits = list(server.request_log[since:])
        arrived = list(arrivals[arrivals_since:])
    runs = [line.split() for line in output.splitlines() if line.startswith("RUN ")]
    assert runs and all(run[2] == "SUCCESS" for run in runs), output[-4000:]
    # the killed worker's shard was delivered again (a second STEP_START of one shard step) and finished
    restarted = [run for run in runs if len(run) > 4 and "spider_shard" in run[4]]
    assert restarted, output[-4000:]

    with store.engine.connect() as conn:
        assert conn.execute(select(func.count()).where(F.c.state.in_(("pending",)))).scalar_one() == 0
    assert differences(reference, store_summary(store, topic.name)) == []

    requests = Counter((host, path) for _, host, path in hits if path != "/robots.txt")
    assert set(requests) == set(reference_requests)  # every page the one process asked for, no other
    again = requests - reference_requests
    held = {_host_path(url) for url in held_at_kill}
    # a page asked for more often than by one process was being fetched by the killed shard
    assert set(again) <= held, (again, held)

    by_site: dict[str, list[tuple[float, str, str]]] = defaultdict(list)
    for at, host, path in arrived:
        by_site[throttle_domain(f"http://{host}/")].append((at, host, path))
    pairs = [
        (later[0] - earlier[0], earlier[1:], later[1:])
        for records in by_site.values()
        for earlier, later in zip(sorted(records), sorted(records)[1:], strict=False)
    ]
    # kernel arrival times; the tolerance covers the client side: a slot is kept between request *starts*, and a
    # worker process starved of CPU after its start sends a little later, while the other worker's next slot does
    # not move. Two workers, the driver, the server, PostgreSQL, RabbitMQ and a parallel test on 2 cores: 24 ms
    # was seen. Requests sharing a slot, or a robots.txt request outside its slot, arrive 0-10 ms apart.
    assert min(gap for gap, _, _ in pairs) >= INTERVAL - LATE_SEND_TOLERANCE, sorted(pairs)[:4]


def _host_path(url: str) -> tuple[str, str]:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return parts.hostname or "", (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


class _ShardWatch:
    """The shard step a worker has started and not finished, from its log ("shard-2-of-4"), or None; the log is
    read as it grows (polled often, it is not read whole each time)."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.offset = 0
        self.partial = b""  # a line the worker has not finished writing
        self.running: str | None = None

    def shard_running(self) -> str | None:
        with self.log.open("rb") as handle:
            handle.seek(self.offset)
            chunk = handle.read()
        self.offset += len(chunk)
        *lines, self.partial = (self.partial + chunk).split(b"\n")
        for line in lines:
            match = re.search(
                r"spider_shard\[shard_(\d+)_of_(\d+)\] - (STEP_START|STEP_SUCCESS|STEP_FAILURE)",
                line.decode(errors="replace"),
            )
            if match:
                self.running = f"shard-{match[1]}-of-{match[2]}" if match[3] == "STEP_START" else None
        return self.running


def _kill_mid_shard(
    store: TopicStore, worker: subprocess.Popen, log: Path, driver: subprocess.Popen
) -> list[str]:
    """Wait until worker 1 is in the middle of a shard (started, some of its URLs written, some still claimed),
    SIGKILL its process group, and return the URLs that shard held and had not written (fetched again later)."""
    watch = _ShardWatch(log)
    while driver.poll() is None:
        shard = watch.shard_running()
        if shard is not None:
            holder = F.c.claimed_by.like(f"%/{shard}")
            with store.engine.connect() as conn:
                written = conn.execute(
                    select(func.count()).where(holder, F.c.state.not_in(("pending",)))
                ).scalar_one()
                held = (
                    conn.execute(select(F.c.url).where(holder, F.c.state.in_(("pending",)))).scalars().all()
                )
            if written >= 2 and held:
                # Stop the worker, read what its shard holds, then kill it: read first and kill after, the shard
                # could claim and ask for another batch in between (seen: a page asked for again outside `held`).
                # WAL: the read does not wait on a stopped writer.
                os.killpg(worker.pid, signal.SIGSTOP)
                with store.engine.connect() as conn:
                    held = (
                        conn.execute(select(F.c.url).where(holder, F.c.state.in_(("pending",))))
                        .scalars()
                        .all()
                    )
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()
                return list(held)
        time.sleep(0.05)
    raise AssertionError("the driver ended before a shard could be killed mid-way")
