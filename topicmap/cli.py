"""The `topicmap` command: small look-ups against the topic store (no Dagster needed).

topicmap near-dups --url URL [--max-distance 6]   stories near-duplicate to a stored story
topicmap near-dups --text TEXT                     stories near-duplicate to a text
topicmap snapshot TOPIC [--snapshot-id N]          where a snapshot's files and link maps are
topicmap serve [--host 127.0.0.1] [--port 8765]    the near-duplicate lookup service (HTTP JSON)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from sqlalchemy import select

from topicmap.dedup.simhash import DEFAULT_MIN_JACCARD, NearDuplicateIndex, fingerprint, jaccard, shingle_set
from topicmap.dedup.store import SIMHASH_FEATURE_VERSION, simhashes_from_db
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore
from topicmap.web.urls import url_variants


def near_dups(
    store: TopicStore,
    url: str | None,
    text: str | None,
    max_distance: int = 6,
    min_jaccard: float = DEFAULT_MIN_JACCARD,
) -> list[dict]:
    """Stored stories near-duplicate to the story at ``url`` (or to ``text``), nearest first.

    The same two stages as the `near_duplicates` asset: simhash candidates within ``max_distance`` bits,
    kept when their word-bigram overlap (Jaccard) is at least ``min_jaccard``."""
    sh, st = s.story_simhashes, s.stories
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(sh.c.stories_id, sh.c.simhash).where(sh.c.feature_version == SIMHASH_FEATURE_VERSION)
        ).all()
        own_id = None
        if url is not None:
            variants = url_variants(url) or [url]
            found = conn.execute(
                select(s.story_urls.c.stories_id).where(s.story_urls.c.url.in_(variants)).limit(1)
            ).scalar_one_or_none()
            if found is None:
                raise SystemExit(f"no story in the store is known by the url {url!r}")
            own_id = int(found)
            text = conn.execute(select(st.c.text).where(st.c.stories_id == own_id)).scalar_one() or ""
        index = NearDuplicateIndex(
            [r.stories_id for r in rows], simhashes_from_db([r.simhash for r in rows]), max_distance
        )
        matches = [(i, d) for i, d in index.query(fingerprint(text or "")) if i != own_id]
        details = {
            r.stories_id: r
            for r in conn.execute(
                select(st.c.stories_id, st.c.url, st.c.title, st.c.publish_date, st.c.text).where(
                    st.c.stories_id.in_([i for i, _ in matches])
                )
            )
        }
    own = shingle_set(text or "")
    found = []
    for i, distance in matches:
        similarity = jaccard(own, shingle_set(details[i].text or ""))
        if similarity >= min_jaccard:
            found.append(
                {
                    "stories_id": i,
                    "distance": distance,
                    "jaccard": round(similarity, 3),
                    "url": details[i].url,
                    "title": details[i].title,
                    "publish_date": details[i].publish_date,
                }
            )
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="topicmap", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    near = commands.add_parser("near-dups", help="near-duplicates of a stored story or of a text")
    source = near.add_mutually_exclusive_group(required=True)
    source.add_argument("--url")
    source.add_argument("--text")
    near.add_argument("--max-distance", type=int, default=6, help="simhash candidate distance in bits")
    near.add_argument(
        "--min-jaccard", type=float, default=DEFAULT_MIN_JACCARD, help="word-bigram overlap a candidate needs"
    )
    near.add_argument(
        "--database-url", default=None, help="default: TOPICMAP_DATABASE_URL or the SQLite store"
    )
    snapshot = commands.add_parser("snapshot", help="where a snapshot's files are")
    snapshot.add_argument("topic")
    snapshot.add_argument("--snapshot-id", type=int, default=None)
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
    args = parser.parse_args(argv)
    if args.command == "serve":
        return serve_command(args)
    if args.command == "near-dups":
        store = TopicStore.open(args.database_url)
        found = near_dups(store, args.url, args.text, args.max_distance, args.min_jaccard)
        if not found:
            print(f"no near-duplicates (within {args.max_distance} bits and jaccard >= {args.min_jaccard})")
        for match in found:
            print(
                f"{match['distance']:>2} bits  jaccard {match['jaccard']:.2f}  story {match['stories_id']:>6}  "
                f"{match['url']}  {match['title'] or ''}"
            )
        return 0
    from topicmap.snapshots.cli import main as snapshot_main

    return snapshot_main(
        [args.topic] + (["--snapshot-id", str(args.snapshot_id)] if args.snapshot_id else [])
    )


def serve_command(args: argparse.Namespace) -> int:
    """Run the near-duplicate service until interrupted (see topicmap.dedup.service)."""
    import logging
    import os

    import uvicorn

    from topicmap.dedup.service import MAX_FETCH_BYTES, FingerprintCatalog, create_app, service_token
    from topicmap.web.fetch import WebFetcher
    from topicmap.web.netguard import AddressPolicy

    token = service_token(args.host, dict(os.environ))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    store = TopicStore.open(args.database_url)
    fetcher = WebFetcher(max_body_bytes=MAX_FETCH_BYTES, policy=AddressPolicy(allow=args.allow_address))
    if args.shingle_cache_mb < 0:
        raise SystemExit(f"--shingle-cache-mb must be >= 0, got {args.shingle_cache_mb}")
    catalog = FingerprintCatalog(store, shingle_cache_bytes=args.shingle_cache_mb * 1024 * 1024)
    app = create_app(catalog, fetcher, token=token, refresh_seconds=args.refresh_seconds)
    uvicorn.run(app, host=args.host, port=args.port, log_level="info")
    return 0


if __name__ == "__main__":
    sys.exit(main())
