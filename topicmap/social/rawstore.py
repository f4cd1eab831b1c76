"""A folder of raw API answers, gzip-compressed JSON, so derived figures can be recomputed without refetching.

Media Cloud kept every raw Bit.ly answer gzip-compressed in a key-value store (Postgres and/or S3).
Here the store is a plain folder (a setting, so it can be a mounted bucket or network share):

    <root>/<kind>/<h[0:2]>/<h[2:4]>/<h>.json.gz      h = sha256(key) in hex

Keys are arbitrary strings (typically the request, minus credentials), so file names are hashes; the key is kept
inside the file, in a small envelope ``{"kind": ..., "key": ..., "payload": <the answer>}``, which lets the store
list its keys. Writes go to a temporary file in the same folder and are renamed into place, so a reader never sees
a half-written answer and a crash leaves at most an ignored ``.tmp-*`` file. Writing the same key again replaces
the answer; writing the same answer twice gives a byte-identical file (gzip mtime is fixed), so writes are
idempotent.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SUFFIX = ".json.gz"
TMP_PREFIX = ".tmp-"


class RawResponseStore:
    """Gzip-compressed JSON answers under ``root/kind/``, addressed by (kind, key)."""

    def __init__(self, root: str | Path) -> None:
        if root is None or str(root) == "":
            raise ValueError("RawResponseStore needs a root folder path")
        self.root = Path(root).expanduser()

    def __repr__(self) -> str:
        return f"RawResponseStore(root={str(self.root)!r})"

    # -- paths -------------------------------------------------------------------------------------------------
    @staticmethod
    def _check_kind(kind: str) -> str:
        if not isinstance(kind, str) or not kind or kind.startswith(".") or any(c in kind for c in "/\\\0"):
            raise ValueError(
                f"kind must be a plain folder name (no '/', not starting with '.'), got {kind!r}"
            )
        return kind

    @staticmethod
    def _check_key(key: str) -> str:
        if not isinstance(key, str) or not key:
            raise ValueError(f"key must be a non-empty string, got {key!r}")
        return key

    def path_for(self, kind: str, key: str) -> Path:
        """Where the answer for (kind, key) lives (whether or not it exists)."""
        digest = hashlib.sha256(self._check_key(key).encode("utf-8")).hexdigest()
        return self.root / self._check_kind(kind) / digest[:2] / digest[2:4] / f"{digest}{SUFFIX}"

    # -- writing -----------------------------------------------------------------------------------------------
    def put(self, kind: str, key: str, payload: dict[str, Any] | list[Any] | bytes | str) -> Path:
        """Store one answer atomically; ``payload`` is parsed JSON or the raw JSON text/bytes. Returns the path.

        Raw bytes must be JSON (the store is for API answers); anything else raises ``ValueError``.
        """
        if isinstance(payload, bytes | str):
            try:
                payload = json.loads(payload)
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ValueError(f"payload for {kind}/{key!r} is not valid JSON: {exc}") from None
        path = self.path_for(kind, key)
        envelope = {"kind": kind, "key": key, "payload": payload}
        try:
            text = json.dumps(envelope, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"payload for {kind}/{key!r} cannot be written as JSON: {exc}") from None
        data = gzip.compress(text.encode("utf-8"), mtime=0)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=TMP_PREFIX, suffix=SUFFIX, dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp_name, path)
        except BaseException:
            Path(tmp_name).unlink(missing_ok=True)
            raise
        return path

    # -- reading -----------------------------------------------------------------------------------------------
    def get(self, kind: str, key: str) -> Any | None:
        """The stored answer (parsed JSON), or None when nothing is stored for (kind, key)."""
        path = self.path_for(kind, key)
        try:
            envelope = self._read(path)
        except FileNotFoundError:
            return None
        return envelope["payload"]

    def exists(self, kind: str, key: str) -> bool:
        return self.path_for(kind, key).is_file()

    def __contains__(self, kind_and_key: tuple[str, str]) -> bool:
        kind, key = kind_and_key
        return self.exists(kind, key)

    @staticmethod
    def _read(path: Path) -> dict[str, Any]:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            envelope = json.load(handle)
        if not isinstance(envelope, dict) or "key" not in envelope or "payload" not in envelope:
            raise ValueError(f"{path} is not a raw-response file (no key/payload envelope)")
        return envelope

    def _files(self, kind: str) -> Iterator[Path]:
        folder = self.root / self._check_kind(kind)
        if not folder.is_dir():
            return
        for path in sorted(folder.glob(f"??/??/*{SUFFIX}")):
            if not path.name.startswith(TMP_PREFIX):
                yield path

    def keys(self, kind: str) -> Iterator[str]:
        """Every key stored under ``kind`` (in file order, which is stable but not meaningful)."""
        for path in self._files(kind):
            yield self._read(path)["key"]

    def items(self, kind: str) -> Iterator[tuple[str, Any]]:
        """``(key, answer)`` for every answer stored under ``kind``."""
        for path in self._files(kind):
            envelope = self._read(path)
            yield envelope["key"], envelope["payload"]

    def kinds(self) -> list[str]:
        """The kinds (top-level folders) present in the store."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and not p.name.startswith("."))

    def __len__(self) -> int:
        return sum(1 for kind in self.kinds() for _ in self._files(kind))
