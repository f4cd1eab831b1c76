"""The dedup stage: duplicate media, duplicate stories, near-duplicates."""

import dagster as dg

from assets.dedup import deduped_media, deduped_stories, near_duplicates
from resources.dedup import MediaDupsResource
from sensors.dedup import media_dups_changed
from topicmap import settings

dedup_defs = dg.Definitions(
    assets=[deduped_media, deduped_stories, near_duplicates],
    sensors=[media_dups_changed],
    resources={"media_dups": MediaDupsResource(path=settings.MEDIA_DUPS_FILE.value())},
)
