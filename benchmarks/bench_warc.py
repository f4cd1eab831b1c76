"""Benchmark: writing, reading and replaying story archives with topicmap.archive (warc, warc_stories, warc_replay).

Anchor: Media Cloud story-indexer's own code path (its WARC writer and reader), rebuilt on warcio in this file: its write_story
(response + metadata records, random ids, `_massage_metadata`) and its StoryArchiveReader state machine
(`raw_stream.read()` + `json.load`). Ours adds validation, deep JSON conversion, digest checking, error
reporting with offsets, pairing by WARC-Refers-To and the gzip repair; the table shows what that costs.
Replay is compared with a bare warcio seek-and-read of a record whose offset is already known.

Stories are synthetic (seeded): HTML of `--kb` KiB built from a 5 000-word vocabulary, so it compresses
like text, with metadata shaped like story-indexer's.

Times are the best of 3 runs.

Run: .venv/bin/python benchmarks/bench_warc.py [--stories 2000] [--kb 30] [--lookups 1000] [--seed 3]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import random
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from topicmap.archive.warc import read_warc_pages
from topicmap.archive.warc_replay import WarcReplay
from topicmap.archive.warc_stories import StoryArchiveWriter, StoryRecord, read_story_archive

NOW = datetime(2024, 5, 1, tzinfo=UTC)


def make_stories(count: int, kib: int, seed: int) -> list[StoryRecord]:
    rng = random.Random(seed)
    vocabulary = [
        "".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(2, 10))) for _ in range(5000)
    ]
    stories = []
    for n in range(count):
        words: list[str] = []
        size = 0
        while size < kib * 1024:
            word = rng.choice(vocabulary)
            words.append(word)
            size += len(word) + 1
        text = " ".join(words)
        html = f"<html><head><title>Story {n}</title></head><body><p>{text}</p></body></html>".encode()
        url = f"https://site{n % 50}.example/{2024}/{n}/story-{n}"
        stories.append(
            StoryRecord(
                url=url,
                original_url=url + "?utm_source=rss",
                html=html,
                encoding="utf-8",
                fetch_date=NOW + timedelta(seconds=n, microseconds=n),
                metadata={
                    "rss_entry": {"link": url + "?utm_source=rss", "title": f"Story {n}", "via": "bench"},
                    "content_metadata": {
                        "url": url,
                        "article_title": f"Story {n}",
                        "text_content": text[:2000],
                        "publication_date": "2024-04-30",
                        "language": "en",
                        "canonical_domain": f"site{n % 50}.example",
                    },
                },
            )
        )
    return stories


# -- anchor: story-indexer's writer and reader, as in indexer/story_archive_writer.py ------------------------


def si_massage(d: dict) -> dict:
    return {
        k: v
        if isinstance(v, str | bool | int | float) or v is None
        else (v.isoformat() if isinstance(v, datetime) else repr(v))
        for k, v in d.items()
    }


def si_write(path: Path, stories: list[StoryRecord]) -> None:
    with path.open("wb") as handle:
        writer = WARCWriter(handle, gzip=True, warc_version=WARCWriter.WARC_1_0)
        info = {
            "hostname": "bench",
            "software": "mediacloud story-indexer ArchiveWriter",
            "format": "WARC file version 1.0",
        }
        writer.write_record(writer.create_warcinfo_record(path.name, info))
        for story in stories:
            http = {
                "final_url": story.url,
                "response_code": 200,
                "encoding": story.encoding,
                "fetch_timestamp": story.fetch_date.timestamp(),
            }
            fetch_date = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(http["fetch_timestamp"]))
            response = writer.create_warc_record(
                story.url,
                "response",
                warc_headers_dict={"WARC-Date": fetch_date},
                http_headers=StatusAndHeaders(
                    "200 OK",
                    [
                        ("Content-Type", f"text/html; encoding={story.encoding}"),
                        ("Content-Length", str(len(story.html))),
                    ],
                    protocol="HTTP/1.0",
                ),
                payload=io.BytesIO(story.html),
            )
            writer.write_record(response)
            metadata = {
                "rss_entry": si_massage(story.metadata["rss_entry"]),
                "http_metadata": si_massage(http),
                "content_metadata": si_massage(story.metadata["content_metadata"]),
            }
            body = json.dumps(metadata, indent=2).encode()
            writer.write_record(
                writer.create_warc_record(
                    story.url,
                    "metadata",
                    warc_headers_dict={
                        "Content-Type": "application/x.mediacloud-indexer+json",
                        "WARC-Refers-To": response.rec_headers["WARC-Record-ID"],
                        "WARC-Date": fetch_date,
                    },
                    payload=io.BytesIO(body),
                    length=len(body),
                )
            )


def si_read(path: Path) -> int:
    count = 0
    expect = "warcinfo"
    with path.open("rb") as handle:
        for record in ArchiveIterator(handle):
            if record.rec_type != expect:
                continue
            if expect == "warcinfo":
                expect = "response"
            elif expect == "response":
                html = record.raw_stream.read()
                expect = "metadata"
            else:
                metadata = json.load(record.raw_stream)
                count += bool(html) and bool(metadata)
                expect = "response"
    return count


def bare_pages(path: Path) -> int:
    count = 0
    with path.open("rb") as handle:
        for record in ArchiveIterator(handle):
            if record.rec_type == "response":
                count += bool(record.content_stream().read())
    return count


REPEATS = 3


def timed(function, *args):  # noqa: ANN001, ANN202 - tiny helper
    """Best of REPEATS runs: the machine is shared, the minimum is the least disturbed measurement."""
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        result = function(*args)
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--stories", type=int, default=2000)
    parser.add_argument("--kb", type=int, default=30)
    parser.add_argument("--lookups", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()

    stories = make_stories(args.stories, args.kb, args.seed)
    html_mb = sum(len(s.html) for s in stories) / 1e6
    rows: list[tuple[str, str, float, int]] = []
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)

        runs = iter(range(1000))

        def ours_write() -> Path:
            with StoryArchiveWriter(work / f"ours{next(runs)}", hostname="bench", now=NOW) as writer:
                for story in stories:
                    writer.write_story(story)
            return writer.path

        seconds, ours_path = timed(ours_write)
        rows.append(("write archive", "topicmap StoryArchiveWriter", seconds, args.stories))
        anchor_path = work / "si.warc.gz"
        seconds, _ = timed(si_write, anchor_path, stories)
        rows.append(("write archive", "anchor: story-indexer write_story", seconds, args.stories))

        seconds, read_back = timed(lambda: list(read_story_archive(ours_path)))
        assert len(read_back) == args.stories and read_back[-1].html == stories[-1].html
        rows.append(("read archive", "topicmap read_story_archive", seconds, len(read_back)))
        seconds, count = timed(si_read, ours_path)
        rows.append(("read archive", "anchor: story-indexer StoryArchiveReader", seconds, count))

        seconds, pages = timed(lambda: sum(1 for _ in read_warc_pages(ours_path)))
        rows.append(("pages", "topicmap read_warc_pages (digests checked)", seconds, pages))
        seconds, pages = timed(lambda: sum(1 for _ in read_warc_pages(ours_path, check_digests=False)))
        rows.append(("pages", "topicmap read_warc_pages (no digests)", seconds, pages))
        seconds, pages = timed(bare_pages, ours_path)
        rows.append(("pages", "anchor: bare warcio ArchiveIterator", seconds, pages))

        seconds, replay = timed(WarcReplay, ours_path)
        rows.append(("replay index", "topicmap WarcReplay(...)", seconds, len(replay)))
        rng = random.Random(args.seed)
        wanted = [rng.choice(stories).url.replace("https://", "http://") + "/" for _ in range(args.lookups)]
        seconds, found = timed(lambda: sum(replay.get(url) is not None for url in wanted))
        assert found == args.lookups
        rows.append(("replay get", "topicmap WarcReplay.get (tolerant key)", seconds, found))
        offsets = [replay._exact[url.replace("http://", "https://").rstrip("/")].offset for url in wanted]

        def bare_seek_reads() -> int:
            got = 0
            with ours_path.open("rb") as handle:
                for offset in offsets:
                    handle.seek(offset)
                    got += bool(next(iter(ArchiveIterator(handle))).content_stream().read())
            return got

        seconds, found = timed(bare_seek_reads)
        rows.append(("replay get", "anchor: warcio seek + read, offset known", seconds, found))
        size_mb = os.path.getsize(ours_path) / 1e6

    print(
        f"# WARC benchmark: {args.stories} stories of {args.kb} KiB HTML ({html_mb:.1f} MB), archive {size_mb:.1f} MB"
    )
    print(f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cpus\n")
    print("| task | implementation | seconds | items | items/s | MB HTML/s |")
    print("|---|---|---:|---:|---:|---:|")
    for task, name, seconds, items in rows:
        per_item_mb = html_mb / args.stories
        print(
            f"| {task} | {name} | {seconds:.3f} | {items} | {items / seconds:,.0f} | {items * per_item_mb / seconds:.1f} |"
        )


if __name__ == "__main__":
    main()
