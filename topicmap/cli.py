"""The `topicmap` command: small look-ups against the topic store (no Dagster needed).

topicmap near-dups --url URL [--max-distance 6]   stories near-duplicate to a stored story, or containing it
topicmap near-dups --text TEXT                     stories containing a text (a paragraph, a quote), or copies
topicmap snapshot TOPIC [--snapshot-id N]          where a snapshot's files and link maps are
topicmap snapshot TOPIC --list                     every snapshot of a topic, with its dates and folder
topicmap serve [--host 127.0.0.1] [--port 8765]    the near-duplicate lookup service (HTTP JSON)
      [--url-workers 8] [--max-pending-urls 100]       (its limits on clients: TOPICMAP_SERVICE_*)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from topicmap.dedup.containment import DEFAULT_MIN_CONTAINMENT
from topicmap.dedup.service_limits import DEFAULT_MAX_PENDING_URLS, DEFAULT_URL_WORKERS, ClientLimits
from topicmap.dedup.simhash import DEFAULT_CANDIDATE_DISTANCE, DEFAULT_MIN_JACCARD
from topicmap.store.topic_store import TopicStore


def near_dups(
    store: TopicStore,
    url: str | None,
    text: str | None,
    max_distance: int = DEFAULT_CANDIDATE_DISTANCE,
    min_jaccard: float = DEFAULT_MIN_JACCARD,
    min_containment: float = DEFAULT_MIN_CONTAINMENT,
    limit: int = 20,
) -> list[dict]:
    """Stored stories that contain ``text`` (or the stored story at ``url``) or are near-duplicates of it.

    The lookup of ``topicmap serve`` (``FingerprintCatalog.lookup``), over an index built for this one call:
    candidates by simhash (within ``max_distance`` bits) and by shared word runs, kept when their word-bigram
    Jaccard reaches ``min_jaccard`` or they hold ``min_containment`` of the text's word bigrams; most contained
    first. Building the index reads every stored story's text once (~2 ms for an 800-word story), so for many
    lookups on a large store, ask the service. Raises ``SystemExit`` for an unknown URL, ``BadRequest`` for a
    text too short or too long."""
    # Imported here: the catalog loads numpy and the dedup stack, which `topicmap snapshot` does not need.
    from topicmap.dedup.catalog import FingerprintCatalog

    catalog = FingerprintCatalog(store, max_distance=max_distance, shingle_cache_bytes=0)
    own_id = None
    if url is not None:
        own_id = catalog.story_id_for_url(url)
        if own_id is None:
            raise SystemExit(f"no story in the store is known by the url {url!r}")
        text = catalog.story_text(own_id)
    catalog.refresh()
    _, matches = catalog.lookup(
        text or "",
        exclude=own_id,
        min_similarity=min_jaccard,
        min_containment=min_containment,
        limit=limit,
    )
    return [
        {
            "stories_id": m.stories_id,
            "containment": round(m.containment, 3),
            "jaccard": round(m.shingle_similarity, 3),
            "distance": m.hamming_distance,
            "url": m.url,
            "title": m.title,
            "medium": m.medium,
        }
        for m in matches
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="topicmap", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    near = commands.add_parser("near-dups", help="near-duplicates of a stored story or of a text")
    source = near.add_mutually_exclusive_group(required=True)
    source.add_argument("--url")
    source.add_argument("--text")
    near.add_argument(
        "--max-distance",
        type=int,
        default=DEFAULT_CANDIDATE_DISTANCE,
        help=f"simhash candidate distance in bits (0..{DEFAULT_CANDIDATE_DISTANCE})",
    )
    near.add_argument(
        "--min-jaccard",
        type=float,
        default=DEFAULT_MIN_JACCARD,
        help="whole-document word-bigram overlap (Jaccard) that makes a copy",
    )
    near.add_argument(
        "--min-containment",
        type=float,
        default=DEFAULT_MIN_CONTAINMENT,
        help="share of the text's word bigrams a story must hold to be said to contain it",
    )
    near.add_argument("--limit", type=int, default=20, help="at most this many stories")
    near.add_argument(
        "--database-url", default=None, help="default: TOPICMAP_DATABASE_URL or the SQLite store"
    )
    snapshot = commands.add_parser("snapshot", help="where a snapshot's files are")
    snapshot.add_argument("topic")
    which = snapshot.add_mutually_exclusive_group()
    which.add_argument("--snapshot-id", type=int, default=None, help="a snapshot id (default: the newest)")
    which.add_argument("--list", action="store_true", help="every snapshot of the topic, oldest first")
    serve = commands.add_parser("serve", help="the near-duplicate lookup service (GET/POST /near-duplicates)")
    serve.add_argument("--host", default="127.0.0.1", help="other than loopback needs TOPICMAP_SERVICE_TOKEN")
    serve.add_argument("--port", type=int, default=8765)
    serve.add_argument(
        "--database-url", default=None, help="default: TOPICMAP_DATABASE_URL or the SQLite store"
    )
    serve.add_argument("--refresh-seconds", type=float, default=10.0, help="how often new fingerprints load")
    serve.add_argument(
        "--shingle-cache-mb",
        type=int,
        default=64,
        help="memory for stored stories' shingles kept between lookups (0: none; answers never depend on it)",
    )
    serve.add_argument(
        "--allow-address",
        action="append",
        default=[],
        help="CIDR or IP[:PORT] the page fetcher may reach although private (default: public addresses only)",
    )
    serve.add_argument(
        "--url-workers",
        type=int,
        default=DEFAULT_URL_WORKERS,
        help="threads that fetch pages for URL lookups, one site each at a time (default %(default)s)",
    )
    serve.add_argument(
        "--max-pending-urls",
        type=int,
        default=DEFAULT_MAX_PENDING_URLS,
        help="URL lookups accepted at once, queued or fetching (default %(default)s); one more answers 503",
    )
    args = parser.parse_args(argv)
    if args.command == "serve":
        return serve_command(args)
    if args.command == "near-dups":
        return near_dups_command(args)
    from topicmap.snapshots.cli import main as snapshot_main

    return snapshot_main(
        [args.topic]
        + (["--snapshot-id", str(args.snapshot_id)] if args.snapshot_id else [])
        + (["--list"] if args.list else [])
    )


def near_dups_command(args: argparse.Namespace) -> int:
    """Print the stories that contain the text (or the stored story) or copy it; 2 for a refused text."""
    if not 0 <= args.max_distance <= DEFAULT_CANDIDATE_DISTANCE:
        raise SystemExit(
            f"--max-distance must be between 0 and {DEFAULT_CANDIDATE_DISTANCE}, got {args.max_distance}"
        )
    for name in ("min_jaccard", "min_containment"):
        if not 0.0 <= getattr(args, name) <= 1.0:
            raise SystemExit(f"--{name.replace('_', '-')} must be between 0 and 1, got {getattr(args, name)}")
    if args.limit < 1:
        raise SystemExit(f"--limit must be at least 1, got {args.limit}")
    from topicmap.dedup.catalog import BadRequest

    store = TopicStore.open(args.database_url)
    try:
        found = near_dups(
            store, args.url, args.text, args.max_distance, args.min_jaccard, args.min_containment, args.limit
        )
    except BadRequest as refused:
        print(f"topicmap near-dups: {refused}", file=sys.stderr)
        return 2
    finally:
        store.dispose()
    if not found:
        print(
            f"no story contains the text or copies it (containment >= {args.min_containment}, "
            f"or jaccard >= {args.min_jaccard} within {args.max_distance} bits)"
        )
        return 0
    print("containment  jaccard  bits   story  url  title")
    for match in found:
        bits = "-" if match["distance"] is None else str(match["distance"])
        print(
            f"{match['containment']:>11.2f}  {match['jaccard']:>7.2f}  {bits:>4}  {match['stories_id']:>6}  "
            f"{match['url']}  {match['title'] or ''}"
        )
    return 0


def serve_command(args: argparse.Namespace) -> int:
    """Run the near-duplicate service until interrupted (see topicmap.dedup.service)."""
    import logging
    import os

    from topicmap.dedup.catalog import FingerprintCatalog
    from topicmap.dedup.service import (
        MAX_FETCH_BYTES,
        LookupServer,
        create_app,
        service_token,
    )
    from topicmap.web.fetch import WebFetcher
    from topicmap.web.netguard import AddressPolicy

    token = service_token(args.host, dict(os.environ))
    try:
        limits = ClientLimits.from_settings()
    except ValueError as wrong:
        raise SystemExit(f"topicmap serve: {wrong}") from None
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    store = TopicStore.open(args.database_url)
    fetcher = WebFetcher(max_body_bytes=MAX_FETCH_BYTES, policy=AddressPolicy(allow=args.allow_address))
    if args.shingle_cache_mb < 0:
        raise SystemExit(f"--shingle-cache-mb must be >= 0, got {args.shingle_cache_mb}")
    for name in ("url_workers", "max_pending_urls"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    catalog = FingerprintCatalog(store, shingle_cache_bytes=args.shingle_cache_mb * 1024 * 1024)
    app = create_app(
        catalog,
        fetcher,
        token=token,
        refresh_seconds=args.refresh_seconds,
        url_workers=args.url_workers,
        max_pending_urls=args.max_pending_urls,
        limits=limits,
    )
    LookupServer(app, args.host, args.port).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
