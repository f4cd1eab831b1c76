"""Duplicate media declared by people: a CSV of (medium_url, dup_of_medium_url)."""

from pathlib import Path

import dagster as dg


class MediaDupsResource(dg.ConfigurableResource):
    """Where the declared duplicate media are (empty: none). Media Cloud's dup_media_id was curated by hand;
    here the curation is a file under version control, applied on each `deduped_media` run."""

    path: str = ""

    def file(self) -> Path | None:
        return Path(self.path) if self.path else None
