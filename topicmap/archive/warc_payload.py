"""A WARC record's payload as the server meant it, decoded block by block with its output bounded.

warcio reads a whole HTTP chunk and inflates it in one call, so a few compressed megabytes could take
gigabytes; ``topicmap.archive.warc`` reads every payload through `read_payload` instead.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

from warcio.recordloader import ArcWarcRecord


class RecordProblem(Exception):
    """A record that is readable but not usable (e.g. a response without an HTTP status line)."""


_BLOCK = 1 << 16


def read_payload(record: ArcWarcRecord, limit: int, url: str) -> bytes:
    """The record's payload as the server meant it, like warcio's ``content_stream().read()`` (de-chunked,
    then gzip/deflate Content-Encoding undone; data that does not decode as announced is taken as it is),
    but streamed block by block with at most `limit` bytes of output: warcio reads a whole HTTP chunk and
    inflates it in one call, which is how a 1 MB file took gigabytes. Over the limit, or corrupt once decoding
    has begun: `RecordProblem` naming `url` (the record's target URI).
    """
    http = record.http_headers
    raw = record.raw_stream
    chunked = http is not None and (http.get_header("Transfer-Encoding") or "").strip().lower() == "chunked"
    encoding = (http.get_header("Content-Encoding") or "").strip().lower() if http is not None else ""
    pieces = _dechunked(raw) if chunked else _blocks(raw)
    out = bytearray()

    def too_large() -> RecordProblem:
        return RecordProblem(
            f"payload of {url or record.rec_type} is larger than max_payload_bytes = {limit} "
            "once decompressed; record skipped"
        )

    if encoding not in ("gzip", "deflate"):  # identity, or one warcio does not decode either
        for piece in pieces:
            out += piece
            if len(out) > limit:
                raise too_large()
        return bytes(out)
    inflater = zlib.decompressobj(zlib.MAX_WBITS | 16 if encoding == "gzip" else zlib.MAX_WBITS)
    decoded = passthrough = False
    for piece in pieces:
        data = b"" if passthrough else piece
        while data and not inflater.eof:
            try:
                chunk = inflater.decompress(data, limit - len(out) + 1)
            except zlib.error as exc:
                if decoded:
                    raise RecordProblem(
                        f"{encoding} payload of {url} is corrupt after {len(out)} bytes: {exc}"
                    ) from exc
                if encoding == "deflate":  # warcio's fallback: "deflate" sent as a raw deflate stream
                    encoding = "raw deflate"
                    inflater = zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                passthrough = True  # as warcio: not compressed after all, the bytes are the payload
                break
            decoded = True
            out += chunk
            if len(out) > limit:
                raise too_large()
            data = inflater.unconsumed_tail
        if passthrough:
            out += piece
            if len(out) > limit:
                raise too_large()
    return bytes(out)


def _blocks(raw: Any) -> Iterator[bytes]:
    while block := raw.read(_BLOCK):
        yield block


def _dechunked(raw: Any) -> Iterator[bytes]:
    """HTTP chunked transfer coding undone, streamed. As in warcio: data that is not chunked after all
    (a bad size line) is taken as it is from there on; a body cut off mid-chunk just ends."""
    while True:
        size_line = raw.readline(64)
        if not size_line:
            return
        try:
            if not size_line.endswith(b"\r\n"):
                raise ValueError("no CRLF")
            size = int(size_line[:-2].split(b";")[0], 16)
            if not 0 <= size <= 2**31:
                raise ValueError("chunk size out of range")
        except ValueError:
            yield size_line
            yield from _blocks(raw)
            return
        if size == 0:
            raw.read(2)
            return
        while size:
            data = raw.read(min(size, _BLOCK))
            if not data:
                return
            size -= len(data)
            yield data
        terminator = raw.read(2)
        if terminator != b"\r\n":
            yield terminator
            yield from _blocks(raw)
            return
