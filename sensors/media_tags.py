"""Re-load the media tags, and re-snapshot the topics that have a snapshot, when the tags file changes."""

import dagster as dg

from assets.jobs import post_spider_job
from assets.media_tags import media_tags
from assets.snapshots import snapshots
from resources.media_tags import MediaTagsResource
from resources.store import TopicStoreResource
from sensors.settings import SENSOR_INTERVAL_SECONDS


@dg.sensor(
    name="media_tags_changed",
    job=post_spider_job,  # runs of the two assets, listed under the named job that holds them
    minimum_interval_seconds=SENSOR_INTERVAL_SECONDS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Watches the media tags file (its sha256 is the cursor): when its content changes, re-runs media_tags and "
        "snapshots for every topic that has a snapshot (media-tag foci and link map colours follow the tags; a "
        "snapshot whose topic's tags did not change is found complete and kept). Other topics load the tags with "
        "their next post-spider run. The first evaluation only records the file."
    ),
)
def media_tags_changed(
    context: dg.SensorEvaluationContext, media_tags_file: MediaTagsResource, store: TopicStoreResource
) -> dg.SensorResult:
    path = media_tags_file.file()
    if path is None:
        return dg.SensorResult(skip_reason=dg.SkipReason("no media tags file configured"))
    from topicmap.store.media_tags import media_tags_digest  # loads with the tick, not the code location

    digest = media_tags_digest(path) or "none"  # a removed file is a change too
    if context.cursor is None:
        return dg.SensorResult(
            skip_reason=dg.SkipReason(f"watching {path} (sha256 {digest[:12]})"), cursor=digest
        )
    if context.cursor == digest:
        return dg.SensorResult(skip_reason=dg.SkipReason(f"{path} unchanged (sha256 {digest[:12]})"))
    from topicmap.snapshots.freshness import snapshotted_topics  # SQLAlchemy loads with the tick

    # the topics that have a snapshot: their media-tag foci and link map colours may change with the tags
    topics = snapshotted_topics(store.open())
    context.log.info(
        f"media tags file {path} changed ({context.cursor[:12]} -> {digest[:12]}): {len(topics)} topics"
    )
    return dg.SensorResult(
        run_requests=[
            dg.RunRequest(
                run_key=f"media-tags:{digest[:16]}:{topic}",
                partition_key=topic,
                asset_selection=[media_tags.key, snapshots.key],
            )
            for topic in topics
        ],
        cursor=digest,
    )
