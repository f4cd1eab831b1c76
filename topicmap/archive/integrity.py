"""The archive drops' check (the queries of the other stages' checks are in topicmap.store.integrity)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from sqlalchemy import select

from topicmap.archive.drops import file_sha256, printable_name, refused_file_key, refused_file_reason
from topicmap.store import schema as s
from topicmap.store.integrity import Finding
from topicmap.store.topic_store import TopicStore


def drop_files_not_recorded(store: TopicStore, files: Iterable[Path], folder: Path) -> Finding:
    """Drop files the archive has no record of (neither loaded nor failed): a file the loader could not read
    and could not record (a reader bug, an I/O error) is read again on every run and never loaded."""
    finding = Finding()
    af = s.archive_files
    with store.engine.connect() as conn:
        paths = set(conn.execute(select(af.c.path)).scalars())
        for path in files:
            finding.checked += 1
            if printable_name(path) in paths:
                continue
            # the same content under another name (a renamed or moved file) is recorded by its content hash
            refused = refused_file_reason(path, folder)
            key = refused_file_key(path) if refused else file_sha256(path)
            if conn.execute(select(af.c.path).where(af.c.sha256 == key)).first() is None:
                finding.add({"file": printable_name(path), "bytes": path.stat().st_size})
    return finding
