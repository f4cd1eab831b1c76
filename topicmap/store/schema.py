"""The topic store schema: Media Cloud's table and column names, versioned with an in-place upgrade path.

Every table and every column carries the schema version that introduced it (``info={"since": N}``). A
store at version ``v`` is upgraded to ``v + 1`` by creating the tables introduced in ``v + 1`` (with only the
columns that existed then) and adding the columns introduced in ``v + 1`` to tables that already exist. So a
store created by an older release upgrades in place, and the migration of every version is derived from
one declaration instead of being written twice (once as a table, once as a migration).

Unique keys are what make every write idempotent: writers insert with ``ON CONFLICT DO NOTHING`` (or an
upsert) against these keys, so a re-run or a killed run never duplicates rows.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Date,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
)

metadata = MetaData()

#: The newest schema version; ``schema_version`` holds the version a store is at.
SCHEMA_VERSION = 16

#: Every URL column is an indexed VARCHAR of this length that lookups match exactly (as Media Cloud's are). A
#: longer URL is rejected or skipped with a reason, never cut: a cut URL is another URL.
MAX_URL_LENGTH = 1024


def url_fits(url: str) -> bool:
    return len(url) <= MAX_URL_LENGTH


def checked_url(url: str, what: str = "url") -> str:
    """``url`` unchanged, or a ValueError that names it: callers reject over-long URLs before they get here."""
    if not url_fits(url):
        raise ValueError(
            f"{what} is {len(url)} characters, longer than the store's {MAX_URL_LENGTH} "
            f"(not cut, which would make it another URL): {url[:80]}..."
        )
    return url


def _since(version: int) -> dict[str, int]:
    return {"since": version}


def _url(name: str = "url", nullable: bool = False, since: int = 1) -> Column:
    return Column(name, String(MAX_URL_LENGTH), nullable=nullable, info=_since(since))


schema_version = Table(
    "schema_version",
    metadata,
    Column("version", Integer, primary_key=True),
    Column("upgraded_at", DateTime(timezone=True), nullable=False),
    info=_since(1),
)

# ---------------------------------------------------------------- version 1: the archive, topics, seeds

media = Table(
    "media",
    metadata,
    Column("media_id", Integer, primary_key=True, autoincrement=True),
    _url(),
    Column("name", String(256), nullable=False),
    # lossy-normalized medium URL: how a story URL finds its medium (Media Cloud's guess_medium)
    _url("normalized_url"),
    Column("dup_media_id", Integer, ForeignKey("media.media_id"), nullable=True),
    Column("foreign_rss_links", Boolean, nullable=False, server_default=false()),
    Column("is_spidered", Boolean, nullable=False, server_default=false()),
    UniqueConstraint("url", name="media_url_key"),
    UniqueConstraint("name", name="media_name_key"),
    Index("media_normalized_url", "normalized_url"),
    info=_since(1),
)

stories = Table(
    "stories",
    metadata,
    Column("stories_id", Integer, primary_key=True, autoincrement=True),
    Column("media_id", Integer, ForeignKey("media.media_id"), nullable=False),
    _url(),
    _url("guid"),
    Column("title", Text, nullable=True),
    Column("description", Text, nullable=True),
    Column("text", Text, nullable=True),
    Column("publish_date", DateTime(timezone=True), nullable=True),
    Column("collect_date", DateTime(timezone=True), nullable=False),
    Column("language", String(16), nullable=True),
    # where the story came from: archive:<file>, demo archive, spider, warc:<file>
    Column("source", String(256), nullable=False),
    Column("date_guess_method", String(64), nullable=True),
    Column("normalized_title_hash", String(32), nullable=True, info=_since(3)),
    # How the title and the language were found (topicmap.web.extract: "og:title", "<title>, site name
    # removed"; "text", "declared") and the page's own UTC offset of publish_date in minutes, since a
    # timestamptz keeps only the instant: publish_date + offset is the publisher's calendar day.
    Column("title_method", String(64), nullable=True, info=_since(6)),
    Column("language_method", String(32), nullable=True, info=_since(6)),
    Column("publish_utc_offset", Integer, nullable=True, info=_since(6)),
    # Did the page give a time of day / a UTC offset with its date (topicmap.web.dates.DateGuess)? A date
    # without a time is stored as midnight UTC of its day; null for stories stored before version 15 or
    # dated by their source (an archive drop) rather than by extraction.
    Column("publish_time_known", Boolean, nullable=True, info=_since(15)),
    Column("publish_zone_known", Boolean, nullable=True, info=_since(15)),
    UniqueConstraint("media_id", "guid", name="stories_media_guid_key"),
    Index("stories_publish_date", "publish_date"),
    Index("stories_url", "url"),
    info=_since(1),
)

story_urls = Table(
    "story_urls",
    metadata,
    Column("story_urls_id", Integer, primary_key=True, autoincrement=True),
    Column("stories_id", Integer, ForeignKey("stories.stories_id"), nullable=False),
    _url(),
    UniqueConstraint("stories_id", "url", name="story_urls_story_url_key"),
    Index("story_urls_url", "url"),
    info=_since(1),
)

# The raw page a story was made from (gzip), for link mining and WARC export (Media Cloud: downloads + content).
downloads = Table(
    "downloads",
    metadata,
    Column("downloads_id", Integer, primary_key=True, autoincrement=True),
    Column("stories_id", Integer, ForeignKey("stories.stories_id"), nullable=False),
    _url(),
    Column("http_status", Integer, nullable=True),
    Column("encoding", String(64), nullable=True),
    # Media Cloud's name; a zstd frame since 2026-11-26, gzip before (store.decompress_page reads both)
    Column("content_gz", LargeBinary, nullable=False),
    Column("download_date", DateTime(timezone=True), nullable=False),
    UniqueConstraint("stories_id", name="downloads_story_key"),
    info=_since(1),
)

archive_files = Table(
    "archive_files",
    metadata,
    Column("archive_files_id", Integer, primary_key=True, autoincrement=True),
    Column("path", String(2048), nullable=False),
    Column("sha256", String(64), nullable=False),
    Column("rows_loaded", Integer, nullable=False),
    Column("rows_rejected", Integer, nullable=False),
    Column("loaded_at", DateTime(timezone=True), nullable=False),
    # version 9: a file that cannot be read is recorded as "failed" with its reason, so it fails alone and is
    # retried only when its content (sha256) changes; "loaded" files may still have rejected rows
    Column("state", String(16), nullable=False, server_default="loaded", info=_since(9)),
    Column("reason", Text, nullable=True, info=_since(9)),
    UniqueConstraint("sha256", name="archive_files_sha256_key"),
    info=_since(1),
)

topics = Table(
    "topics",
    metadata,
    Column("topics_id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(256), nullable=False),
    Column("solr_seed_query", Text, nullable=False),
    Column("start_date", Date, nullable=False),
    Column("end_date", Date, nullable=False),
    Column("max_iterations", Integer, nullable=False, server_default="15"),
    Column("max_stories", Integer, nullable=False),
    Column("state", String(64), nullable=False, server_default="created but not queued"),
    Column("message", Text, nullable=True),
    Column("is_logogram", Boolean, nullable=False, server_default=false()),
    # the full topic declaration as JSON (fetch settings, seed files, timespans): what a snapshot records
    Column("config_json", Text, nullable=False),
    Column("removed_from_config", Boolean, nullable=False, server_default=false()),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    # the days whose stories' links were last mined ("start..end", "start..open"; topicmap.spider.respider):
    # stories a widening brings into them are mined again
    Column("mined_window", String(64), nullable=True, info=_since(16)),
    # the last respider declaration applied (Respider.key): each is applied once
    Column("respider_done", String(64), nullable=True, info=_since(16)),
    UniqueConstraint("name", name="topics_name_key"),
    info=_since(1),
)

topic_seed_urls = Table(
    "topic_seed_urls",
    metadata,
    Column("topic_seed_urls_id", Integer, primary_key=True, autoincrement=True),
    Column("topics_id", Integer, ForeignKey("topics.topics_id"), nullable=False),
    _url(),
    # "archive query" for stories found by the topic query, "csv:<file>" for imported URL lists
    Column("source", String(512), nullable=False),
    Column("stories_id", Integer, ForeignKey("stories.stories_id"), nullable=True),
    Column("processed", Boolean, nullable=False, server_default=false()),
    Column("assume_match", Boolean, nullable=False, server_default=false()),
    Column("publish_date", DateTime(timezone=True), nullable=True),
    Column("title", Text, nullable=True),
    # version 13: a seed URL shared in posts names the post source and the first post URL row that brought it
    # (Media Cloud's columns; the posts sharing it are in topic_post_urls)
    Column("topic_seed_queries_id", Integer, nullable=True, info=_since(13)),
    Column("topic_post_urls_id", Integer, nullable=True, info=_since(13)),
    UniqueConstraint("topics_id", "url", name="topic_seed_urls_topic_url_key"),
    info=_since(1),
)

# ---------------------------------------------------------------- version 2: the spider

topic_fetch_urls = Table(
    "topic_fetch_urls",
    metadata,
    Column("topic_fetch_urls_id", Integer, primary_key=True, autoincrement=True),
    Column("topics_id", Integer, ForeignKey("topics.topics_id"), nullable=False),
    _url(since=2),
    # the iteration a story found here would get: linking story's iteration + 1 (seeds: 0)
    Column("iteration", Integer, nullable=False),
    Column("state", String(32), nullable=False, server_default="pending"),
    Column("code", Integer, nullable=True),
    Column("message", Text, nullable=True),
    Column("fetch_date", DateTime(timezone=True), nullable=True),
    Column("stories_id", Integer, ForeignKey("stories.stories_id"), nullable=True),
    Column("assume_match", Boolean, nullable=False, server_default=false()),
    Column("topic_links_id", Integer, nullable=True),
    _url("redirect_url", nullable=True, since=2),
    # Claimed work (version 4, topicmap.spider.claims): a pending URL is claimed before it is fetched, so any
    # number of processes or Celery workers on one topic fetch it once. ``domain`` (the URL's throttle domain)
    # caps how many URLs of one site a claim takes; ``shard_key`` (31 bits of the URL's MD5) splits an
    # iteration into shards and spreads a claim over sites; ``claimed_by`` holds the claim until
    # ``claim_expires_at`` (seconds since the epoch, renewed while the holder works): a claim whose holder
    # died expires and the URL is claimed again. Rows written before version 4 get both keys on first claim.
    Column("domain", String(256), nullable=True, info=_since(4)),
    Column("shard_key", Integer, nullable=True, info=_since(4)),
    Column("claimed_by", String(128), nullable=True, info=_since(4)),
    Column("claim_expires_at", Float, nullable=True, info=_since(4)),
    # version 10: ``site_key`` (31 bits of the MD5 of ``domain``) gives each site to one of the live holders
    # (site affinity: two workers rarely use one site's politeness slots at once)
    Column("site_key", Integer, nullable=True, info=_since(10)),
    # Media Cloud has no unique key here; one makes "every URL is processed once per topic" a database fact
    UniqueConstraint("topics_id", "url", name="topic_fetch_urls_topic_url_key"),
    Index("topic_fetch_urls_pending", "topics_id", "state"),
    Index("topic_fetch_urls_claims", "topics_id", "iteration", "state", "shard_key", info=_since(4)),
    info=_since(2),
)

# Version 10: who is working on an iteration now (topicmap.spider.claims, site affinity). A holder writes its
# row when it starts, renews ``seen_at`` (seconds since the epoch) with its claims' leases, and deletes it when
# it stops; a row older than a lease is a holder that died.
topic_spider_holders = Table(
    "topic_spider_holders",
    metadata,
    Column("topics_id", Integer, ForeignKey("topics.topics_id"), primary_key=True),
    Column("iteration", Integer, primary_key=True),
    Column("holder", String(128), primary_key=True),
    Column("seen_at", Float, nullable=False),
    info=_since(10),
)

topic_stories = Table(
    "topic_stories",
    metadata,
    Column("topic_stories_id", Integer, primary_key=True, autoincrement=True),
    Column("topics_id", Integer, ForeignKey("topics.topics_id"), nullable=False),
    Column("stories_id", Integer, ForeignKey("stories.stories_id"), nullable=False),
    Column("iteration", Integer, nullable=False, server_default="0"),
    Column("link_mined", Boolean, nullable=False, server_default=false()),
    _url("redirect_url", nullable=True, since=2),
    Column("valid_foreign_rss_story", Boolean, nullable=False, server_default=false()),
    Column("link_mine_error", Text, nullable=True),
    Column("added_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("topics_id", "stories_id", name="topic_stories_topic_story_key"),
    info=_since(2),
)

topic_links = Table(
    "topic_links",
    metadata,
    Column("topic_links_id", Integer, primary_key=True, autoincrement=True),
    Column("topics_id", Integer, ForeignKey("topics.topics_id"), nullable=False),
    Column("stories_id", Integer, ForeignKey("stories.stories_id"), nullable=False),
    _url(since=2),
    _url("redirect_url", nullable=True, since=2),
    Column("ref_stories_id", Integer, ForeignKey("stories.stories_id"), nullable=True),
    Column("link_spidered", Boolean, nullable=False, server_default=false()),
    # Media Cloud keys on (stories_id, topics_id, ref_stories_id), which does not constrain the rows whose
    # ref is still unknown (NULL); keying on the URL keeps link mining idempotent.
    UniqueConstraint("topics_id", "stories_id", "url", name="topic_links_topic_story_url_key"),
    Index("topic_links_ref", "topics_id", "ref_stories_id"),
    # resolving a fetched URL to its story updates every link to that URL (added in version 3)
    Index("topic_links_url", "topics_id", "url", info=_since(3)),
    info=_since(2),
)

topic_domains = Table(
    "topic_domains",
    metadata,
    Column("topic_domains_id", Integer, primary_key=True, autoincrement=True),
    Column("topics_id", Integer, ForeignKey("topics.topics_id"), nullable=False),
    Column("domain", String(256), nullable=False),
    Column("self_links", Integer, nullable=False, server_default="0"),
    UniqueConstraint("topics_id", "domain", name="topic_domains_topic_domain_key"),
    info=_since(2),
)

topic_spider_metrics = Table(
    "topic_spider_metrics",
    metadata,
    Column("topic_spider_metrics_id", Integer, primary_key=True, autoincrement=True),
    Column("topics_id", Integer, ForeignKey("topics.topics_id"), nullable=False),
    Column("iteration", Integer, nullable=False),
    Column("links_processed", Integer, nullable=False),
    Column("stories_added", Integer, nullable=False),
    Column("links_added", Integer, nullable=False),
    Column("frontier_left", Integer, nullable=False),
    Column("elapsed_time", Float, nullable=False),
    Column("throttle_wait_time", Float, nullable=False),
    Column("states_json", Text, nullable=False),
    Column("processed_date", DateTime(timezone=True), nullable=False),
    UniqueConstraint("topics_id", "iteration", name="topic_spider_metrics_topic_iteration_key"),
    info=_since(2),
)

# When an iteration of a topic's spider first started, and the newest story then (version 4). The URLs of an
# iteration are resolved without a fetch (an earlier failure, a known story) against what was known at that
# moment, however many workers process them and in whatever order: the outcome does not depend on which URL
# a worker happened to claim first.
topic_spider_iterations = Table(
    "topic_spider_iterations",
    metadata,
    Column("topics_id", Integer, ForeignKey("topics.topics_id"), primary_key=True),
    Column("iteration", Integer, primary_key=True),
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("max_stories_id", Integer, nullable=False),
    info=_since(4),
)

# Which story first published a sentence in a medium and calendar week. Media Cloud's relevance test only
# looks at a story's sentences that are not duplicates within its medium and week: the first
# story to claim a sentence hash owns it.
story_sentence_hashes = Table(
    "story_sentence_hashes",
    metadata,
    Column("media_id", Integer, ForeignKey("media.media_id"), primary_key=True),
    Column("week_start_date", Date, primary_key=True),
    Column("sentence_md5", String(32), primary_key=True),
    Column("stories_id", Integer, ForeignKey("stories.stories_id"), nullable=False),
    info=_since(2),
)

# Per distinctive domain, the earliest wall-clock time the next request may be sent, the lease of the request
# being sent, and the process next in line (topicmap.web.throttle, topicmap.store.throttle). Shared by every
# process and run that spiders against this store, so two topics, or several spiders of one topic, share each
# domain's budget.
domain_web_requests = Table(
    "domain_web_requests",
    metadata,
    Column("domain", String(256), primary_key=True),
    Column("next_request_at", Float, nullable=False),
    Column("held_by", String(64), nullable=True, info=_since(14)),
    Column("held_since", Float, nullable=True, info=_since(14)),
    Column("held_until", Float, nullable=True, info=_since(14)),
    # the process whose claim was refused first and is next in line, until when it is (see SqlThrottle)
    Column("waiting", String(64), nullable=True, info=_since(14)),
    Column("waiting_until", Float, nullable=True, info=_since(14)),
    info=_since(2),
)

# ---------------------------------------------------------------- version 3: dedup, social metrics, snapshots

topic_merged_stories_map = Table(
    "topic_merged_stories_map",
    metadata,
    Column("topic_merged_stories_map_id", Integer, primary_key=True, autoincrement=True),
    Column("topics_id", Integer, ForeignKey("topics.topics_id"), nullable=False),
    Column("source_stories_id", Integer, ForeignKey("stories.stories_id"), nullable=False),
    Column("target_stories_id", Integer, ForeignKey("stories.stories_id"), nullable=False),
    # "duplicate medium", "same title and day", "same lossy url"
    Column("reason", String(64), nullable=False),
    Column("merged_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("topics_id", "source_stories_id", name="topic_merged_stories_map_source_key"),
    info=_since(3),
)

story_simhashes = Table(
    "story_simhashes",
    metadata,
    Column("stories_id", Integer, ForeignKey("stories.stories_id"), primary_key=True),
    # unsigned 64-bit fingerprint stored as signed BIGINT (two's complement); see topicmap.store.topic_store
    Column("simhash", BigInteger, nullable=False),
    Column("feature_version", Integer, nullable=False),
    info=_since(3),
)

topic_near_dup_groups = Table(
    "topic_near_dup_groups",
    metadata,
    Column("topics_id", Integer, ForeignKey("topics.topics_id"), primary_key=True),
    Column("stories_id", Integer, ForeignKey("stories.stories_id"), primary_key=True),
    Column("group_stories_id", Integer, nullable=False),
    Column("group_size", Integer, nullable=False),
    info=_since(3),
)

story_statistics = Table(
    "story_statistics",
    metadata,
    Column("stories_id", Integer, ForeignKey("stories.stories_id"), primary_key=True),
    Column("facebook_share_count", BigInteger, nullable=True),
    Column("facebook_comment_count", BigInteger, nullable=True),
    Column("facebook_reaction_count", BigInteger, nullable=True),
    Column("facebook_api_collect_date", DateTime(timezone=True), nullable=True),
    Column("facebook_api_error", Text, nullable=True),
    info=_since(3),
)

bitly_clicks_total = Table(
    "bitly_clicks_total",
    metadata,
    Column("stories_id", Integer, ForeignKey("stories.stories_id"), primary_key=True),
    Column("publish_day", Date, nullable=False),
    Column("bitlinks_found", Integer, nullable=True),
    Column("clicks_3d", BigInteger, nullable=True),
    Column("clicks_30d", BigInteger, nullable=True),
    Column("fetched_3d_at", DateTime(timezone=True), nullable=True),
    Column("fetched_30d_at", DateTime(timezone=True), nullable=True),
    # the newest fetch of each stage, whatever it saw: a fetch that saw no more clicks than stored keeps the
    # figure and its fetched_*_at, but it still counted every story merged in by then (topicmap.social.store)
    Column("checked_3d_at", DateTime(timezone=True), nullable=True, info=_since(12)),
    Column("checked_30d_at", DateTime(timezone=True), nullable=True, info=_since(12)),
    Index("bitly_clicks_total_publish_day", "publish_day"),
    info=_since(3),
)

snapshots = Table(
    "snapshots",
    metadata,
    Column("snapshots_id", Integer, primary_key=True, autoincrement=True),
    Column("topics_id", Integer, ForeignKey("topics.topics_id"), nullable=False),
    # content hash of everything the snapshot was built from: same inputs, same key, same files
    Column("snapshot_key", String(64), nullable=False),
    Column("snapshot_date", DateTime(timezone=True), nullable=False),
    Column("state", String(32), nullable=False),
    Column("iteration", Integer, nullable=False),
    Column("provenance_json", Text, nullable=False),
    Column("path", String(2048), nullable=False),
    UniqueConstraint("topics_id", "snapshot_key", name="snapshots_topic_key"),
    info=_since(3),
)

timespans = Table(
    "timespans",
    metadata,
    Column("timespans_id", Integer, primary_key=True, autoincrement=True),
    Column("snapshots_id", Integer, ForeignKey("snapshots.snapshots_id"), nullable=False),
    Column("period", String(16), nullable=False),
    Column("start_date", Date, nullable=False),
    Column("end_date", Date, nullable=False),
    Column("story_count", Integer, nullable=False),
    Column("story_link_count", Integer, nullable=False),
    Column("medium_count", Integer, nullable=False),
    Column("medium_link_count", Integer, nullable=False),
    UniqueConstraint("snapshots_id", "period", "start_date", "end_date", name="timespans_key"),
    info=_since(3),
)

# ---------------------------------------------------------------- version 5: Common Crawl loading

# The Common Crawl loader's `queue` done right: one row per (outlet, crawl), claimed by any number of loader
# processes (PostgreSQL: FOR UPDATE SKIP LOCKED; SQLite: one atomic UPDATE ... RETURNING, writers serialized).
# The cursor (next_page, next_capture) and the counters move in the same transaction as the stories they count,
# so a worker killed at any point is resumed by the next claim with nothing lost or counted twice.
cc_outlet_queue = Table(
    "cc_outlet_queue",
    metadata,
    Column("cc_outlet_queue_id", Integer, primary_key=True, autoincrement=True),
    Column("domain", String(256), nullable=False),
    Column("collection", String(64), nullable=False),
    # queued | running | completed | error (Media Cloud's job states)
    Column("state", String(16), nullable=False),
    Column("claimed_by", String(128), nullable=True),
    Column("claimed_at", DateTime(timezone=True), nullable=True),
    Column("started_at", DateTime(timezone=True), nullable=True),
    Column("completed_at", DateTime(timezone=True), nullable=True),
    # refreshed with every committed batch: a running row whose heartbeat is older than the lease is abandoned
    Column("heartbeat_at", DateTime(timezone=True), nullable=True),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("pages_total", Integer, nullable=True),
    Column("next_page", Integer, nullable=False, server_default="0"),
    Column("next_capture", Integer, nullable=False, server_default="0"),
    Column("captures_found", Integer, nullable=False, server_default="0"),
    Column("stories_stored", Integer, nullable=False, server_default="0"),
    Column("stories_existing", Integer, nullable=False, server_default="0"),
    Column("captures_rejected", Integer, nullable=False, server_default="0"),
    Column("rejections_json", Text, nullable=True),
    Column("error", Text, nullable=True),
    UniqueConstraint("domain", "collection", name="cc_outlet_queue_domain_collection_key"),
    Index("cc_outlet_queue_state", "state"),
    info=_since(5),
)

# CC-NEWS WARC files loaded (one row per file): a re-run of a day skips completed files, and a file cut short
# by a crash resumes after `records_done` (records before it are streamed past, not extracted again).
cc_news_files = Table(
    "cc_news_files",
    metadata,
    Column("path", String(512), primary_key=True),
    Column("day", Date, nullable=False),
    Column("state", String(16), nullable=False),
    Column("records_done", Integer, nullable=False, server_default="0"),
    Column("stories_added", Integer, nullable=False, server_default="0"),
    Column("records_rejected", Integer, nullable=False, server_default="0"),
    Column("rejections_json", Text, nullable=True),
    Column("error", Text, nullable=True),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Index("cc_news_files_day", "day"),
    info=_since(5),
)


# ---------------------------------------------------------------- version 11: media tags, snapshot foci

# Media tags (Media Cloud's tag_sets / tags / media_tags_map): what kind of outlet a medium is (media_type:
# newspaper), its partisanship, its country... Loaded from a curated CSV (topicmap.store.media_tags): the
# file is the source of truth for media_tags_map, tag sets and tags keep their ids once created. A tag on a
# duplicate medium counts for its final medium (dup_media_id chains are followed when the tags are read).
tag_sets = Table(
    "tag_sets",
    metadata,
    Column("tag_sets_id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(256), nullable=False),
    UniqueConstraint("name", name="tag_sets_name_key"),
    info=_since(11),
)

tags = Table(
    "tags",
    metadata,
    Column("tags_id", Integer, primary_key=True, autoincrement=True),
    Column("tag_sets_id", Integer, ForeignKey("tag_sets.tag_sets_id"), nullable=False),
    Column("tag", String(512), nullable=False),
    UniqueConstraint("tag_sets_id", "tag", name="tags_tag_set_tag_key"),
    info=_since(11),
)

media_tags_map = Table(
    "media_tags_map",
    metadata,
    Column("media_tags_map_id", Integer, primary_key=True, autoincrement=True),
    Column("media_id", Integer, ForeignKey("media.media_id"), nullable=False),
    Column("tags_id", Integer, ForeignKey("tags.tags_id"), nullable=False),
    UniqueConstraint("media_id", "tags_id", name="media_tags_map_media_tag_key"),
    Index("media_tags_map_tag", "tags_id"),
    info=_since(11),
)

# A snapshot's subtopics, as Media Cloud records them: focal sets of a snapshot, their foci (the definition as
# JSON in ``arguments``: a query, or media tags) and each focus's timespans with their counts. Media Cloud put
# a focus's timespans in ``timespans`` with a ``foci_id``; here they have their own table, so the whole topic's
# ``timespans`` keep their unique key (snapshot, period, dates).
focal_sets = Table(
    "focal_sets",
    metadata,
    Column("focal_sets_id", Integer, primary_key=True, autoincrement=True),
    Column("snapshots_id", Integer, ForeignKey("snapshots.snapshots_id"), nullable=False),
    Column("name", String(256), nullable=False),
    UniqueConstraint("snapshots_id", "name", name="focal_sets_snapshot_name_key"),
    info=_since(11),
)

foci = Table(
    "foci",
    metadata,
    Column("foci_id", Integer, primary_key=True, autoincrement=True),
    Column("focal_sets_id", Integer, ForeignKey("focal_sets.focal_sets_id"), nullable=False),
    Column("name", String(256), nullable=False),
    Column("arguments", Text, nullable=False),
    Column("story_count", Integer, nullable=False),
    UniqueConstraint("focal_sets_id", "name", name="foci_focal_set_name_key"),
    info=_since(11),
)

focus_timespans = Table(
    "focus_timespans",
    metadata,
    Column("focus_timespans_id", Integer, primary_key=True, autoincrement=True),
    Column("foci_id", Integer, ForeignKey("foci.foci_id"), nullable=False),
    Column("period", String(16), nullable=False),
    Column("start_date", Date, nullable=False),
    Column("end_date", Date, nullable=False),
    Column("story_count", Integer, nullable=False),
    Column("story_link_count", Integer, nullable=False),
    Column("medium_count", Integer, nullable=False),
    Column("medium_link_count", Integer, nullable=False),
    UniqueConstraint("foci_id", "period", "start_date", "end_date", name="focus_timespans_key"),
    info=_since(11),
)


# ---------------------------------------------------------------- version 13: posts as seeds

# A topic's post sources (Media Cloud's topic_seed_queries): one row per platform and file or folder declared in
# ``posts:`` (``query`` holds the path). ``source`` is where posts of the platform come from: csv (generic
# posts), pushshift (Reddit), twitter_api_v2 (tweets).
topic_seed_queries = Table(
    "topic_seed_queries",
    metadata,
    Column("topic_seed_queries_id", Integer, primary_key=True, autoincrement=True),
    Column("topics_id", Integer, ForeignKey("topics.topics_id"), nullable=False),
    Column("source", String(64), nullable=False),
    Column("platform", String(64), nullable=False),
    Column("query", Text, nullable=False),
    Column("imported_date", DateTime(timezone=True), nullable=True),
    UniqueConstraint("topics_id", "platform", "query", name="topic_seed_queries_topic_platform_query_key"),
    info=_since(13),
)

# The posts read (Media Cloud's topic_posts), what URL-sharing counts need: author, channel (subreddit; the
# author for tweets and generic posts without one) and publish date, with the record as read in ``data`` (JSON).
# Media Cloud grouped them by fetch day (topic_post_days), which a file does not need: each post names its
# topic and source here. A post is kept once per source (its platform id, or one derived from its fields).
topic_posts = Table(
    "topic_posts",
    metadata,
    Column("topic_posts_id", Integer, primary_key=True, autoincrement=True),
    Column("topics_id", Integer, ForeignKey("topics.topics_id"), nullable=False),
    Column(
        "topic_seed_queries_id",
        Integer,
        ForeignKey("topic_seed_queries.topic_seed_queries_id"),
        nullable=False,
    ),
    Column("post_id", String(1024), nullable=False),
    Column("content", Text, nullable=False),
    Column("publish_date", DateTime(timezone=True), nullable=False),
    Column("author", String(1024), nullable=False),
    Column("channel", String(1024), nullable=False),
    # the post's own address (a tweet's or a Reddit thread's), when the dump gives or implies it
    Column("url", Text, nullable=True),
    Column("data", Text, nullable=False),
    UniqueConstraint("topic_seed_queries_id", "post_id", name="topic_posts_query_post_key"),
    Index("topic_posts_topic_author", "topics_id", "author"),
    Index("topic_posts_topic_channel", "topics_id", "channel"),
    Index("topic_posts_topic_date", "topics_id", "publish_date"),
    info=_since(13),
)

# URLs shared in posts (Media Cloud's topic_post_urls): each became a seed URL of the post's topic.
topic_post_urls = Table(
    "topic_post_urls",
    metadata,
    Column("topic_post_urls_id", Integer, primary_key=True, autoincrement=True),
    Column("topic_posts_id", Integer, ForeignKey("topic_posts.topic_posts_id"), nullable=False),
    _url(since=13),
    UniqueConstraint("topic_posts_id", "url", name="topic_post_urls_post_url_key"),
    Index("topic_post_urls_url", "url"),
    info=_since(13),
)

# ---------------------------------------------------------------- version 14: politeness shared by processes

# Per origin (scheme, host, port), what its robots.txt said and until when it may be used, and which fetch is
# reading it now (topicmap.store.robots_txt): every process using the store reads a site's robots.txt once per
# cache period.
robots_txt = Table(
    "robots_txt",
    metadata,
    Column("origin", String(MAX_URL_LENGTH), primary_key=True),
    # "rules" (``body`` is the robots.txt), "allow-all" or "disallow-all" (``note`` says why); None until read
    Column("verdict", String(16), nullable=True),
    Column("body", Text, nullable=True),
    Column("note", Text, nullable=True),
    Column("fetched_at", Float, nullable=True),
    Column("expires_at", Float, nullable=True),
    Column("reader", String(64), nullable=True),
    Column("read_until", Float, nullable=True),
    info=_since(14),
)
