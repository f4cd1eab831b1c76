"""Where archive drops (CSV, Parquet, WARC) are picked up, and the bounds they are read under."""

from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg
from pydantic import Field

from topicmap.store.names import topicmap_home

if TYPE_CHECKING:
    from topicmap.archive.warc import ReadLimits


class ArchiveDropsResource(dg.ConfigurableResource):
    """A folder of story drops (CSV, Parquet, WARC/ARC); empty means TOPICMAP_HOME/drops. Each file loads once
    (by content hash); a file that fails is retried only when its content changes, or with
    ``retry_failed_files``."""

    drops_dir: str = ""
    max_payload_mib: int = Field(
        default=50,
        description="WARC/ARC: largest record payload once decompressed; larger records are skipped",
    )
    max_file_mib: int = Field(
        default=16 * 1024,
        description=(
            "what one file may decode to, in MiB: a WARC/ARC inflating to more, or any drop whose rows decode "
            "to more, stops there and fails (a CSV larger than this, or a Parquet file whose rows would decode "
            "to more, is refused unread)"
        ),
    )
    max_expansion: int = Field(
        default=1000,
        description=(
            "what the rows of one file may decode to per byte of the file on disk (never less than max_row_mib): "
            "a Parquet file over it (a dictionary value repeated in many rows) is refused unread, naming the "
            "row group and column; any other file stops and fails at the row that passes it"
        ),
    )
    max_row_mib: int = Field(
        default=32,
        description=(
            "longest row: CSV, all its lines in Mi characters (a longer one stops the file there); Parquet, "
            "its fields together in MiB as decoded (a longer row is rejected with its line; a row group "
            "with a page holding one value over it is not read)"
        ),
    )
    max_page_mib: int = Field(
        default=128,
        description=(
            "Parquet: largest page (the values a reader decodes at once: up to 1,024 rows of a column with "
            "pyarrow's defaults, or a column's dictionary) and metadata, in MiB as decoded; a row group with "
            "a larger page is reported and not read (write the file with a smaller data_page_size and "
            "write_batch_size)"
        ),
    )
    retry_failed_files: bool = Field(
        default=False, description="read files that failed before again, even though they did not change"
    )

    def folder(self) -> Path:
        return Path(self.drops_dir) if self.drops_dir else topicmap_home() / "drops"

    def read_limits(self) -> "ReadLimits":
        from topicmap.archive.warc import MIB, ReadLimits  # warcio loads with the run that reads drops

        return ReadLimits(
            max_payload_bytes=self.max_payload_mib * MIB,
            max_file_bytes=self.max_file_mib * MIB,
            max_row_bytes=self.max_row_mib * MIB,
            max_page_bytes=self.max_page_mib * MIB,
            max_expansion=self.max_expansion,
        )

    def files(self) -> list[Path]:
        folder = self.folder()
        if not folder.exists():
            return []
        # every file, of a known format or not: one that no reader knows (a zip) is recorded as refused
        return sorted(p for p in folder.rglob("*") if p.is_file())
