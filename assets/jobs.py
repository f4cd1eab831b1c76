"""The named jobs a data engineer launches, re-executes and finds in the Runs list, and the run tags and pools they
carry. Every run of the code location — sensors, schedules, `make demo`, `topicmap topic run` — is one of these jobs,
so no run shows as an anonymous asset run.

Jobs select assets by key (no asset module is imported here), so sensors can target them without pulling in a stage.
Concurrency (see deploy/dagster.yaml and the README's Dagster section) is keyed on the tags and pools below:

* run tag ``topicmap/spider_topic=<topic>`` on every spider iteration run: at most one spider run per topic;
* run tag ``topicmap/api=bitly`` / ``topicmap/api=facebook`` on runs that call those APIs: a cap per API;
* op pools ``spider``, ``social_api``, ``archive``, ``analysis`` (dedup, clusters, snapshots): one kind of work never
  takes every slot from another.
"""

import dagster as dg

#: run tag naming the topic a run works on (every topic-partitioned run has it)
TOPIC_TAG = "topicmap/topic"
#: run tag on spider iteration runs only (tag concurrency limit: one per unique value)
SPIDER_TOPIC_TAG = "topicmap/spider_topic"
#: run tag naming the external API a run calls (tag concurrency limit per value)
API_TAG = "topicmap/api"
#: run tag naming the pipeline stage of a topic run: "spider" or "post-spider"
STAGE_TAG = "topicmap/stage"

# Op pools (instance-wide concurrency slots; limits in deploy/dagster.yaml, `dagster instance concurrency set`).
POOL_SPIDER = "spider"
POOL_SOCIAL_API = "social_api"
POOL_ARCHIVE = "archive"
POOL_ANALYSIS = "analysis"

SPIDER_ASSETS = ["fetched_links", "relevant_stories", "topic_links"]
#: what runs once a topic has no pending link left: dedup, Facebook statistics, the WARC export, clusters, snapshot
POST_SPIDER_ASSETS = [
    "deduped_media",
    "deduped_stories",
    "near_duplicates",
    "story_statistics",
    "story_warc_archive",
    "clusters",
    "snapshots",
]

archive_job = dg.define_asset_job(
    "archive_job",
    selection=dg.AssetSelection.assets("archive_stories"),
    description="Load new files of the archive drops folder into the story archive (`archive_stories`).",
)

seeds_job = dg.define_asset_job(
    "seeds_job",
    selection=dg.AssetSelection.assets("seeds"),
    description=(
        "A topic's seed stories: its boolean query over the archive plus its seed URL lists (`seeds`, one "
        "`topics` partition). Requested by the `topic_registry` sensor when a topic is declared or changed."
    ),
)

spider_iteration_job = dg.define_asset_job(
    "spider_iteration_job",
    selection=dg.AssetSelection.assets(*SPIDER_ASSETS),
    description=(
        "One spider iteration of one topic (partition = topic): fetch the pending links, keep the relevant "
        "stories, mine their links. Requested by the `spider_iterations` sensor, one run at a time per topic "
        "(run tag `topicmap/spider_topic`)."
    ),
)

post_spider_job = dg.define_asset_job(
    "post_spider_job",
    selection=dg.AssetSelection.assets(*POST_SPIDER_ASSETS),
    description=(
        "Everything after the spider for one topic (partition = topic): duplicate media and stories merged, "
        "near-duplicates grouped, Facebook statistics (skipped when not configured), the WARC export, clusters "
        "and a snapshot. Requested by the `spider_iterations` sensor once no pending link is left."
    ),
    tags={API_TAG: "facebook"},
)

click_totals_job = dg.define_asset_job(
    "click_totals_job",
    selection=dg.AssetSelection.assets("click_totals"),
    description=(
        "Bit.ly clicks 3 and 30 days after publication for the topic stories of one or more publication days "
        "(daily partitions; a backfill runs up to 31 days per run). Requested by the click refetch sensors and "
        "the daily catch-up."
    ),
    tags={API_TAG: "bitly"},
)

snapshot_job = dg.define_asset_job(
    "snapshot_job",
    selection=dg.AssetSelection.assets("snapshots"),
    description=(
        "A new snapshot of one topic (partition = topic), written only if its inputs changed. Requested weekly "
        "and when late clicks or statistics arrive (`snapshot_refresh` sensor)."
    ),
)

cluster_weeks_job = dg.define_asset_job(
    "cluster_weeks_job",
    selection=dg.AssetSelection.assets("cluster_weeks"),
    description=(
        "One week of a topic's streaming clusters (partition = topic x week), updated from the state the week "
        "before left; a backfill over a range runs the weeks in order."
    ),
)

ALL_JOBS = [
    archive_job,
    seeds_job,
    spider_iteration_job,
    post_spider_job,
    click_totals_job,
    snapshot_job,
    cluster_weeks_job,
]


def topic_run_tags(topic: str, iteration: int | None, stage: str) -> dict[str, str]:
    """Tags of a topic's spider or post-spider run; spider runs also carry the per-topic concurrency tag."""
    tags = {TOPIC_TAG: topic, "topicmap/iteration": str(iteration), STAGE_TAG: stage}
    if stage == "spider":
        tags[SPIDER_TOPIC_TAG] = topic
    return tags
