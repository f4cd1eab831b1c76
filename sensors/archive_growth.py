"""Topics that keep running: when the archive gains stories, each topic whose dates include them is seeded again.

The archive grows when `archive_stories` loads a drop, a CC-NEWS day is loaded (`ccnews_stories`) or Common Crawl
outlets are (`cc_outlet_stories`). On every tick the sensor reads the archive's newest story (stories the spider
found are not the archive's; the cursor keeps the newest one seen, so the tick says how far the archive grew) and,
for each declared topic already seeded, what its last `seeds` materialization read of the archive (metadata
`archive_scan`). A topic with archive stories it has not read in its dates (an open-ended topic's dates reach
today; one ending in the future, that day) gets a `seeds_job` run, run key
`archive:<topic>:<last day of its dates>:<newest story id>`, so one archive state is requested once per topic.
That run reads only the new stories; the spider sensor then spiders the new seeds forward (a URL the topic has is
never fetched again) and the post-spider run writes a new snapshot beside the earlier ones.
"""

from __future__ import annotations

import json

import dagster as dg

from assets.jobs import seeds_job
from assets.partitions import topics_partitions
from assets.seeds import last_seeding
from resources.store import TopicStoreResource
from resources.topics import TopicsFileResource
from sensors.launched import drop_launched
from sensors.settings import SENSOR_INTERVAL_SECONDS
from sensors.topic_runs import topic_run_in_progress, topic_run_request
from topicmap.store.names import StoreError
from topicmap.topics.declarations import TopicConfigError

#: run tag saying why a seeds run was requested
SEEDS_REASON_TAG = "topicmap/seeds_reason"
#: the asset a seeds_job run materializes
SEEDS_ASSET = dg.AssetKey("seeds")


def read_cursor(cursor: str | None) -> int | None:
    """The newest archive story id the last tick saw (None before the first tick)."""
    return int(json.loads(cursor)["newest_story"]) if cursor else None


#: the sensor's name, under which it looks for the runs it launched
SENSOR_NAME = "archive_growth"


@dg.sensor(
    name=SENSOR_NAME,
    target=seeds_job,
    minimum_interval_seconds=SENSOR_INTERVAL_SECONDS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Topics that keep running: when the archive gains stories (a drop loaded by `archive_stories`, a CC-NEWS "
        "day, Common Crawl outlets), requests a `seeds_job` run for each declared topic whose dates (up to today "
        "for an open-ended topic) hold archive stories its last seeding did not read (run key "
        "`archive:{topic}:{last day}:{newest story id}`). The run reads only those; the spider sensor spiders the "
        "new seeds forward and a new snapshot follows, the earlier ones kept. Topics never seeded are left to "
        "`topic_registry`. Cursor: the newest archive story seen; each tick says why it requested or skipped."
    ),
)
def archive_growth(
    context: dg.SensorEvaluationContext, store: TopicStoreResource, topics_file: TopicsFileResource
) -> dg.SensorResult:
    # the store's SQLAlchemy loads with the tick, not the code location
    from topicmap.topics.seeding import archive_through_id, unread_archive_stories

    topic_store = store.open()
    newest = archive_through_id(topic_store)
    seen = read_cursor(context.cursor)
    cursor = json.dumps({"newest_story": newest})
    growth = (
        f"archive through story {newest} (new since the last tick: {newest - seen})"
        if seen is not None and newest != seen
        else f"archive through story {newest}, unchanged since the last tick"
    )
    try:
        declared = topics_file.load().by_name()
    except TopicConfigError as exc:
        return dg.SensorResult(skip_reason=dg.SkipReason(f"{growth}; topics file unusable: {exc}"))
    requests: list[dg.RunRequest] = []
    notes: list[str] = []
    for name in sorted(context.instance.get_dynamic_partitions(topics_partitions.name)):
        topic = declared.get(name)
        if topic is None:
            notes.append(f"{name}: not declared in the topics file")
            continue
        seeded, previous = last_seeding(context.instance, name)
        if not seeded:
            notes.append(f"{name}: not seeded yet (topic_registry seeds it)")
            continue
        try:
            state = topic_store.topic_row(name)["state"]
        except StoreError:
            notes.append(f"{name}: not in the topic store yet")
            continue
        if state == "error":
            notes.append(f"{name}: in error, not seeded again (see its message in the store)")
            continue
        if topic_run_in_progress(context.instance, name, seeds_job.name, asset=SEEDS_ASSET):
            notes.append(f"{name}: a seeds_job run is in progress (what it reads is seen after it)")
            continue
        last_day = topic.last_day()
        dates = f"{topic.start_date}..{last_day}" + (" (open-ended)" if topic.open_ended else "")
        if previous is None:
            why = "its seeding recorded no archive reading (an older release): the archive is read whole"
        elif unread := unread_archive_stories(topic_store, topic, previous, newest):
            why = (
                f"{unread} archive stories in its dates {dates} not read by its last seeding "
                f"(through story {previous.through_id})"
            )
        else:
            notes.append(f"{name}: no archive story in its dates {dates} left unread")
            continue
        requests.append(
            topic_run_request(
                name, f"archive:{name}:{last_day}:{newest}", {SEEDS_REASON_TAG: "archive-growth"}
            )
        )
        notes.append(f"{name}: {why}: seeds_job requested")
    requests, launched = drop_launched(context.instance, SENSOR_NAME, requests)
    summary = f"{growth}; " + ("; ".join(notes + launched) or "no topic partitions")
    context.log.info(summary)
    if not requests:
        return dg.SensorResult(skip_reason=dg.SkipReason(summary), cursor=cursor)
    return dg.SensorResult(run_requests=requests, cursor=cursor)
