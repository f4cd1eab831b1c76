"""Re-run media and story dedup when the duplicate-media list changes: as Media Cloud's topic mapper notes, the
set of duplicate media can change between (or during) spidering runs, so dedup runs again with each change."""

import dagster as dg

from assets.dedup import deduped_media, deduped_stories
from assets.jobs import post_spider_job
from assets.partitions import topics_partitions
from resources.dedup import MediaDupsResource
from sensors.settings import SENSOR_INTERVAL_SECONDS
from sensors.watched_file import WatchedFile

MEDIA_DUPS_FILE = WatchedFile(
    "media_dups_changed", "duplicate-media list", "media-dups", [deduped_media.key, deduped_stories.key]
)


@dg.sensor(
    name=MEDIA_DUPS_FILE.sensor_name,
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
    return MEDIA_DUPS_FILE.evaluate(
        context,
        media_dups.file(),
        lambda: sorted(context.instance.get_dynamic_partitions(topics_partitions.name)),
    )
