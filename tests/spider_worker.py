"""Run a topic's spider to the end in its own process (used by the kill -9 and concurrency tests).

usage: python tests/spider_worker.py DB_URL SCHEMA TOPIC_JSON PAGE_SOURCE_JSON [INTERVAL [CLAIM_LEASE]]
"""

import faulthandler
import json
import os
import sys
import time
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from topicmap.spider.iteration import Spider  # noqa: E402
from topicmap.spider.sources import FetcherSource  # noqa: E402
from topicmap.store.throttle import shared_politeness  # noqa: E402
from topicmap.store.topic_store import TopicStore  # noqa: E402
from topicmap.topics.declarations import TopicConfig  # noqa: E402
from topicmap.web.fetch import WebFetcher  # noqa: E402
from topicmap.web.netguard import AddressPolicy  # noqa: E402


def main() -> None:
    faulthandler.enable()  # a crash (e.g. at interpreter exit) shows its threads' stacks in the output
    db_url, schema, topic_json, source_json = sys.argv[1:5]
    interval = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    lease = {"claim_lease": float(sys.argv[6])} if len(sys.argv) > 6 else {}
    raw = json.loads(topic_json)
    topic = TopicConfig(
        name=raw["name"],
        query=raw["query"],
        start_date=date.fromisoformat(raw["start_date"]),
        end_date=date.fromisoformat(raw["end_date"]),
        max_iterations=raw.get("max_iterations", 15),
    )
    settings = json.loads(source_json)
    store = TopicStore.open(db_url, schema=schema or None)
    fetcher = WebFetcher(
        policy=AddressPolicy(allow=settings["allow_networks"]),
        host_overrides=settings["host_overrides"],
        **shared_politeness(store.engine),
        interval_overrides={"*": interval},
    )
    spider = Spider(
        store,
        topic,
        FetcherSource(fetcher, max_workers=4, interval_overrides={"*": interval}),
        log=lambda line: print(line, flush=True),
        **lease,
    )
    wait_for_the_others()
    processed = 0
    for _ in range(40):
        report = spider.run_iteration()
        processed += report.urls_processed
        if report.done:
            break
    print(f"PROCESSED {processed}", flush=True)  # this process's share (several may spider one topic)
    print("DONE", flush=True)


def wait_for_the_others() -> None:
    """With TOPICMAP_TEST_START_BARRIER (a folder), say we are ready and start when the test says go, so that
    concurrent spiders really overlap (on a quiet machine one would otherwise finish while another imports)."""
    barrier = os.environ.get("TOPICMAP_TEST_START_BARRIER")
    if not barrier:
        return
    Path(barrier, f"ready-{os.getpid()}").touch()
    while not Path(barrier, "go").exists():
        time.sleep(0.01)


if __name__ == "__main__":
    main()
