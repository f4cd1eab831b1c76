"""The archive's part of the topic store: ``archive_files``, the outcome of each drop file by its content.

A file is recognised by its sha256, so a copy is not read twice and a changed file is read again; a file refused
unread is keyed by its name (``topicmap.archive.drops.refused_file_key``), and so is a file holding the same bytes
as one recorded before (state ``same bytes``, the first file named in its reason; ``same_bytes_key``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import select

from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore, now_utc

STATE_LOADED = "loaded"
STATE_FAILED = "failed"
#: a file holding the same bytes as a file recorded before: not read (its stories are the first file's)
STATE_SAME_BYTES = "same bytes"


@dataclass(frozen=True)
class ArchiveFileRecord:
    path: str
    state: str
    reason: str | None
    rows_loaded: int
    rows_rejected: int


def archive_file_record(store: TopicStore, sha256: str) -> ArchiveFileRecord | None:
    """What the store knows of a file with this content, or None."""
    af = s.archive_files
    with store.engine.connect() as conn:
        row = conn.execute(
            select(af.c.path, af.c.state, af.c.reason, af.c.rows_loaded, af.c.rows_rejected).where(
                af.c.sha256 == sha256
            )
        ).first()
    return ArchiveFileRecord(*row) if row is not None else None


def record_archive_file(
    store: TopicStore,
    path: Path,
    sha256: str,
    state: str,
    rows_loaded: int,
    rows_rejected: int,
    reason: str | None = None,
) -> None:
    """Record the outcome for this content (an upsert: a failed file retried and loaded becomes loaded)."""
    row = {
        "path": str(path)[:2048],
        "sha256": sha256,
        "state": state,
        "reason": reason,
        "rows_loaded": rows_loaded,
        "rows_rejected": rows_rejected,
        "loaded_at": now_utc(),
    }
    with store.engine.begin() as conn:
        store.upsert(
            conn,
            s.archive_files,
            [row],
            ["sha256"],
            ["path", "state", "reason", "rows_loaded", "rows_rejected", "loaded_at"],
        )
