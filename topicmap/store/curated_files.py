"""The files people curate beside the store (the media tags file, the duplicate-media list): the digest that says
one changed. Free of heavy imports: the sensors that watch these files read it on every tick."""

from __future__ import annotations

import hashlib
from pathlib import Path


def curated_file_digest(path: str | Path | None) -> str | None:
    """sha256 of the file as stored (None when there is no file)."""
    if path is None:
        return None
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except FileNotFoundError:
        return None
