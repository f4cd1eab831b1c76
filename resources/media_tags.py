"""Media tags declared by people: a CSV of (medium_url, tag_set, tag), and the tag set link maps are coloured by."""

from pathlib import Path

import dagster as dg

from topicmap import settings


class MediaTagsResource(dg.ConfigurableResource):
    """Where the media tags are (empty: none). Media Cloud's tags were curated in its database; here the curation
    is a file under version control (format: topicmap/store/media_tags.py), loaded on each `media_tags` run."""

    path: str = ""

    def file(self) -> Path | None:
        return Path(self.path) if self.path else None


def link_map_tag_set_default() -> str:
    """The deployment's choice of tag set for colouring link maps (the snapshot run config's default)."""
    return settings.LINK_MAP_TAG_SET.value().strip()
