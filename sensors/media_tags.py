"""Re-load the media tags, and re-snapshot the topics that have a snapshot, when the tags file changes."""

import dagster as dg

from assets.jobs import post_spider_job
from assets.media_tags import media_tags
from assets.snapshots import snapshots
from resources.media_tags import MediaTagsResource
from resources.store import TopicStoreResource
from sensors.settings import SENSOR_INTERVAL_SECONDS
from sensors.watched_file import WatchedFile

MEDIA_TAGS_FILE = WatchedFile(
    "media_tags_changed", "media tags file", "media-tags", [media_tags.key, snapshots.key]
)


def _snapshotted_topics(store: TopicStoreResource) -> list[str]:
    """The topics that have a snapshot: their media-tag foci and link map colours may change with the tags."""
    from topicmap.snapshots.freshness import snapshotted_topics  # SQLAlchemy loads with the tick

    return snapshotted_topics(store.open())


@dg.sensor(
    name=MEDIA_TAGS_FILE.sensor_name,
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
    return MEDIA_TAGS_FILE.evaluate(context, media_tags_file.file(), lambda: _snapshotted_topics(store))
