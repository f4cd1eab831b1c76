"""Common Crawl into the story archive: the outlet queue and CC-NEWS by day.

The rules live in topicmap.archive.commoncrawl (index client, Range fetcher), topicmap.archive.cc_queue
(queue and workers) and topicmap.archive.ccnews (CC-NEWS days); these assets call them and report metadata.
Those modules (requests, warcio, SQLAlchemy) are imported by the steps that use them, not when the code
location loads.
"""

from datetime import UTC, date, datetime, timedelta
from typing import Any

import dagster as dg

from assets.beta import beta_api
from assets.freshness import CCNEWS_FRESHNESS
from assets.metadata import CODE_VERSIONS, OWNERS, counts_markdown, table
from assets.partitions import ccnews_days_partitions
from resources.commoncrawl import CommonCrawlResource
from resources.store import TopicStoreResource
from topicmap import settings

ARCHIVE_GROUP = "archive"

#: One partition per day of CC-NEWS (UTC) a declared topic spans, to yesterday, the last whole day; with
#: TOPICMAP_CCNEWS_START set, every day from it (assets.partitions: the topic registry keeps the set in step).
ccnews_days = ccnews_days_partitions


@dg.asset(
    group_name=ARCHIVE_GROUP,
    owners=OWNERS,
    code_version=CODE_VERSIONS["cc_outlet_queue"],
    kinds={"python", "sql"},
    pool="commoncrawl",  # the queue's writes share the Common Crawl loaders' slots
    description=(
        "The Common Crawl outlet queue (cc_outlet_queue): one row per configured outlet and crawl, with its "
        "state, claim and load times, captures found, stories stored and error. Adding outlets is idempotent; "
        "rows already loading or loaded are left as they are, rows in error are queued again."
    ),
)
def cc_outlet_queue(
    context: dg.AssetExecutionContext, store: TopicStoreResource, commoncrawl: CommonCrawlResource
) -> dg.MaterializeResult:
    from topicmap.archive import cc_queue

    topic_store = store.open()
    added = 0
    if commoncrawl.outlets:
        added = cc_queue.enqueue_outlets(topic_store, commoncrawl.outlets, commoncrawl.collections)
    requeued = cc_queue.requeue_errors(topic_store)
    counts = cc_queue.queue_counts(topic_store)
    context.log.info(f"queued {added} new outlet/crawl pairs, {requeued} back from error; states: {counts}")
    rows = cc_queue.queue_rows(topic_store)
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": sum(counts.values()),
            "added": added,
            "requeued_from_error": requeued,
            "states": counts_markdown(counts, "state", "outlets"),
            "queue": table(rows, _QUEUE_COLUMNS, limit=50),
        }
    )


_QUEUE_COLUMNS = [
    "domain",
    "collection",
    "state",
    "claimed_by",
    "started_at",
    "completed_at",
    "captures_found",
    "stories_stored",
    "captures_rejected",
    "error",
]


@dg.asset(
    group_name=ARCHIVE_GROUP,
    owners=OWNERS,
    code_version=CODE_VERSIONS["cc_outlet_stories"],
    kinds={"python", "sql"},
    deps=[cc_outlet_queue],
    pool="commoncrawl",
    description=(
        "Archive stories from Common Crawl: `workers` processes claim outlets from the queue (PostgreSQL: "
        "SKIP LOCKED), list each outlet's captures from the CDX index page by page, fetch every record by "
        "HTTP Range and extract it like the spider does (title kept). A killed run resumes where it stopped."
    ),
)
def cc_outlet_stories(
    context: dg.AssetExecutionContext, store: TopicStoreResource, commoncrawl: CommonCrawlResource
) -> dg.MaterializeResult:
    from topicmap.archive import cc_queue

    topic_store = store.open()
    settings = commoncrawl.settings()
    options = {
        "batch_size": commoncrawl.batch_size,
        "fetch_threads": commoncrawl.fetch_threads,
        "lease_seconds": commoncrawl.lease_seconds,
        "breadth": commoncrawl.breadth,
    }
    run_tag = context.run.run_id[:8]
    reports: list[dict[str, Any]] = []
    if commoncrawl.workers <= 1:
        loader = cc_queue.OutletLoader(
            topic_store,
            settings,
            worker_id=f"{cc_queue.default_worker_id()}:{run_tag}",
            progress=context.log.info,
            **options,
        )
        reports.append(loader.run().as_dict())
    else:
        # Processes, not threads: extraction is CPU-bound. Each opens its own store and claims on its own.
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        spawn = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(commoncrawl.workers, mp_context=spawn) as pool:
            futures = [
                pool.submit(
                    cc_queue.run_worker_process,
                    settings,
                    store.database_url,
                    store.schema_name,
                    f"{cc_queue.default_worker_id()}:{run_tag}:w{number}",
                    options,
                )
                for number in range(commoncrawl.workers)
            ]
            reports = [future.result() for future in futures]
    outlets = [outlet for report in reports for outlet in report["outlets"]]
    rejected: dict[str, int] = {}
    for outlet in outlets:
        for reason, count in outlet["rejected"].items():
            rejected[reason] = rejected.get(reason, 0) + count
    counts = cc_queue.queue_counts(topic_store)
    errors = [o for o in outlets if o["error"]]
    for outlet in errors:
        context.log.error(f"{outlet['domain']} in {outlet['collection']}: {outlet['error']}")
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": topic_store.story_count(archive_only=True),
            "outlets_loaded": sum(1 for o in outlets if o["state"] == cc_queue.COMPLETED),
            "captures": sum(o["captures"] for o in outlets),
            "stories_added": sum(o["stories_added"] for o in outlets),
            "stories_already_known": sum(o["stories_existing"] for o in outlets),
            "captures_rejected": sum(rejected.values()),
            "rejected_by_reason": counts_markdown(rejected, "reason", "captures"),
            "outlets": table(
                outlets, ["domain", "collection", "state", "captures", "stories_added", "error"], limit=50
            ),
            "queue_states": counts_markdown(counts, "state", "outlets"),
        }
    )


@dg.asset_check(asset=cc_outlet_stories, description="No outlet of the queue ended in error.")
def cc_outlets_without_error(store: TopicStoreResource) -> dg.AssetCheckResult:
    from topicmap.archive import cc_queue

    rows = [r for r in cc_queue.queue_rows(store.open()) if r["state"] == cc_queue.ERROR]
    return dg.AssetCheckResult(
        passed=not rows,
        metadata={"outlets_in_error": len(rows), "errors": table(rows, ["domain", "collection", "error"])},
    )


@beta_api(  # backfill_policy is a beta parameter of dg.asset
    dg.asset,
    group_name=ARCHIVE_GROUP,
    owners=OWNERS,
    code_version=CODE_VERSIONS["ccnews_stories"],
    freshness_policy=CCNEWS_FRESHNESS,
    kinds={"python", "sql"},
    partitions_def=ccnews_days,
    backfill_policy=dg.BackfillPolicy.multi_run(max_partitions_per_run=1),
    pool="commoncrawl",
    description=(
        "Archive stories from CC-NEWS, one day per partition: the day's WARC files (from the month's "
        "warc.paths.gz, named by crawl timestamp) streamed and extracted, kept to the configured outlets if "
        "any. Completed files are skipped on a re-run; a month's backfill fills history; a schedule loads yesterday."
    ),
)
def ccnews_stories(
    context: dg.AssetExecutionContext, store: TopicStoreResource, commoncrawl: CommonCrawlResource
) -> dg.MaterializeResult:
    from topicmap.archive.ccnews import CcNewsLoader

    day = date.fromisoformat(context.partition_key)
    loader = CcNewsLoader(
        store.open(),
        commoncrawl.settings(),
        outlets=commoncrawl.ccnews_outlets(),
        progress=context.log.info,
    )
    report = loader.load_day(day)
    metadata = {
        "files": len(report.files),
        "files_already_loaded": len(report.files_skipped),
        "files_failed": len(report.files_failed),
        "records": report.records,
        "records_not_of_outlets": report.records_filtered,
        "stories_added": report.stories_added,
        "stories_already_known": report.stories_existing,
        "rejected": report.rejections.total,
        "rejected_by_reason": counts_markdown(report.rejections.counts, "reason", "records"),
        "rejected_examples": table(report.rejections.examples, ["reason", "where", "message"]),
        "file_errors": dg.MetadataValue.json(report.files_failed),
    }
    if report.files_failed:
        # The other files are stored; the partition fails so a re-run (which skips completed files) is due.
        raise dg.Failure(
            description=f"{len(report.files_failed)} of {len(report.files)} CC-NEWS files of {day} failed: "
            + "; ".join(report.files_failed.values())[:2000],
            metadata=metadata,
        )
    return dg.MaterializeResult(metadata=metadata)


ccnews_daily_job = dg.define_asset_job(
    "ccnews_daily",
    selection=[ccnews_stories],
    tags={"dagster/max_runtime": "21600"},
)


@dg.schedule(
    job=ccnews_daily_job,
    cron_schedule="0 6 * * *",
    execution_timezone="UTC",
    name="ccnews_yesterday",
    default_status=dg.DefaultScheduleStatus.STOPPED,
    description=(
        "Loads yesterday's CC-NEWS partition (the last whole UTC day) every morning, when it is one (a declared "
        "topic spans it, or TOPICMAP_CCNEWS_START is set); stopped until turned on."
    ),
)
def ccnews_yesterday_schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest | dg.SkipReason:
    moment = context.scheduled_execution_time or datetime.now(UTC)
    day = (moment.astimezone(UTC).date() - timedelta(days=1)).isoformat()
    if not context.instance.has_dynamic_partition(ccnews_days.name, day):
        return dg.SkipReason(
            f"{day} is not a CC-NEWS partition: no declared topic spans it (the topic registry adds an open-ended "
            f"topic's day after midnight) and {settings.CCNEWS_START.name} is not set to load every day"
        )
    # one run per day: a tick evaluated twice (daemon restart) does not load the day twice
    return dg.RunRequest(run_key=f"ccnews:{day}", partition_key=day)
