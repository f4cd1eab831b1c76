"""Where archive drops (CSV, Parquet, WARC) are picked up."""

from pathlib import Path

import dagster as dg

from topicmap.store.topic_store import topicmap_home

ARCHIVE_SUFFIXES = (".csv", ".parquet", ".pq", ".warc", ".warc.gz", ".arc", ".arc.gz")


class ArchiveDropsResource(dg.ConfigurableResource):
    """A folder of story drops (CSV, Parquet, WARC/ARC); empty means TOPICMAP_HOME/drops. Each file loads once."""

    drops_dir: str = ""

    def folder(self) -> Path:
        return Path(self.drops_dir) if self.drops_dir else topicmap_home() / "drops"

    def files(self) -> list[Path]:
        folder = self.folder()
        if not folder.exists():
            return []
        return sorted(
            p for p in folder.rglob("*") if p.is_file() and p.name.lower().endswith(ARCHIVE_SUFFIXES)
        )
