"""Re-run media and story dedup when the duplicate-media list changes: as Media Cloud's topic mapper notes, the
set of duplicate media can change between (or during) spidering runs, so dedup runs again with each change."""

import dagster as dg

from assets.dedup import deduped_media, deduped_stories
from assets.jobs import post_spider_job
from assets.partitions import topics_partitions
from resources.dedup import MediaDupsResource
from sensors.settings import SENSOR_INTERVAL_SECONDS


@dg.sensor(
    name="media_dups_changed",
    job=post_spider_job,  # runs of the two dedup assets, listed under the named job that holds them
    minimum_interval_seconds=SENSOR_INTERVAL_SECONDS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Watches the duplicate-media list (its sha256 is the cursor): when its content changes, re-runs "
        "deduped_media and deduped_stories for every topic, so stories of newly declared duplicate media are "
        "merged. The first evaluation only records the list (each dedup run applies the list it finds)."
    ),
)
def media_dups_changed(context: dg.SensorEvaluationContext, media_dups: MediaDupsResource) -> dg.SensorResult:
    path = media_dups.file()
    if path is None:
        return dg.SensorResult(skip_reason=dg.SkipReason("no duplicate-media list configured"))
    from topicmap.dedup.store import media_dups_digest  # pandas loads with the tick, not the code location

    digest = media_dups_digest(path) or "none"  # a removed list is a change too (nothing more to apply)
    if context.cursor is None:
        return dg.SensorResult(
            skip_reason=dg.SkipReason(f"watching {path} (sha256 {digest[:12]})"), cursor=digest
        )
    if context.cursor == digest:
        return dg.SensorResult(skip_reason=dg.SkipReason(f"{path} unchanged (sha256 {digest[:12]})"))
    topics = sorted(context.instance.get_dynamic_partitions(topics_partitions.name))
    context.log.info(
        f"duplicate-media list {path} changed ({context.cursor[:12]} -> {digest[:12]}): {len(topics)} topics"
    )
    return dg.SensorResult(
        run_requests=[
            dg.RunRequest(
                run_key=f"media-dups:{digest[:16]}:{topic}",
                partition_key=topic,
                asset_selection=[deduped_media.key, deduped_stories.key],
            )
            for topic in topics
        ],
        cursor=digest,
    )
