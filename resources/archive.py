"""Where archive drops (CSV, Parquet, WARC) are picked up."""

from pathlib import Path

import dagster as dg

from topicmap.store import topicmap_home

ARCHIVE_SUFFIXES = (".csv", ".parquet", ".pq")


class ArchiveDropsResource(dg.ConfigurableResource):
    """A folder of story drops; empty means TOPICMAP_HOME/drops. Every matching file is loaded once."""

    drops_dir: str = ""

    def folder(self) -> Path:
        return Path(self.drops_dir) if self.drops_dir else topicmap_home() / "drops"

    def files(self) -> list[Path]:
        folder = self.folder()
        if not folder.exists():
            return []
        return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in ARCHIVE_SUFFIXES)
