"""The named jobs a data engineer launches, re-executes and finds in the Runs list, and the run tags and pools they
carry. Every run the project launches — sensors, schedules, `make demo`, `topicmap topic run` — is one of these jobs;
an asset backfill or a run of assets picked in the UI keeps Dagster's `__ASSET_JOB` and is tagged with the job
that holds its assets (`topicmap/named_job`, orchestration/coordinator.py).

Jobs select assets by key (no asset module is imported here), so sensors can target them without pulling in a stage.
Concurrency (see deploy/dagster.yaml and docs/dagster.md) is keyed on the tags and pools below:

* run tag ``topicmap/spider_topic=<topic>`` on every spider iteration run: at most one spider run per topic;
* run tag ``topicmap/api=bitly`` / ``topicmap/api=facebook`` on runs that call those APIs: a cap per API;
* op pools ``spider``, ``social_api``, ``archive``, ``analysis`` (dedup, clusters, snapshots): one kind of work never
  takes every slot from another.

``run_tags`` is the one place that decides a run's tags from what it materializes. The named jobs, the sensors,
`make demo` and `topicmap topic run` use it, and so does the run coordinator (orchestration/coordinator.py) for
every run it queues, so a run launched from the UI (a materialization or backfill of any asset) is limited like the
sensors' runs.
"""

from collections.abc import Collection

import dagster as dg

#: run tag naming the topic a run works on (every topic-partitioned run has it)
TOPIC_TAG = "topicmap/topic"
#: run tag on spider iteration runs only (tag concurrency limit: one per unique value)
SPIDER_TOPIC_TAG = "topicmap/spider_topic"
#: run tag naming the external API a run calls (tag concurrency limit per value)
API_TAG = "topicmap/api"
#: run tag naming the pipeline stage of a topic run: "spider", "post-spider" or "statistics"
STAGE_TAG = "topicmap/stage"

# Op pools (instance-wide concurrency slots; limits in deploy/dagster.yaml, `dagster instance concurrency set`).
POOL_SPIDER = "spider"
POOL_SOCIAL_API = "social_api"
POOL_ARCHIVE = "archive"
POOL_ANALYSIS = "analysis"

SPIDER_ASSETS = ["fetched_links", "relevant_stories", "topic_links"]
#: what runs once a topic has no pending link left: dedup, media tags, Facebook statistics, the WARC export, clusters,
#: snapshot
POST_SPIDER_ASSETS = [
    "deduped_media",
    "media_tags",
    "deduped_stories",
    "near_duplicates",
    "story_statistics",
    "story_warc_archive",
    "clusters",
    "snapshots",
]
#: what runs as stories join a topic, beside its spidering (stage tag STATISTICS_STAGE: the spider sensor does not
#: wait for it, only the post-spider run does)
STATISTICS_ASSETS = ["story_statistics"]
STATISTICS_STAGE = "statistics"
#: the external API each asset calls (run tag API_TAG)
API_OF_ASSET = {"click_totals": "bitly", "story_statistics": "facebook"}


def run_tags(asset_names: Collection[str], topic: str | None = None) -> dict[str, str]:
    """The project's tags for a run that materializes ``asset_names`` (for ``topic``'s partition, if it is one).

    The tag concurrency limits of the run queue (deploy/dagster.yaml) are keyed on these: a run of the spider's
    assets for a topic counts against that topic's one spider slot, a run calling Bit.ly or Facebook against the
    API's cap, whoever launched it."""
    selected = set(asset_names)
    tags: dict[str, str] = {}
    if topic:
        tags[TOPIC_TAG] = topic
    if selected & set(SPIDER_ASSETS):
        tags[STAGE_TAG] = "spider"
        if topic:
            tags[SPIDER_TOPIC_TAG] = topic
    elif selected == set(STATISTICS_ASSETS):
        tags[STAGE_TAG] = STATISTICS_STAGE
    elif selected & set(POST_SPIDER_ASSETS):
        tags[STAGE_TAG] = "post-spider"
    # Assets of different APIs have different partitions (publication days, topics), so one run calls one API;
    # should a run ever call both, it is limited under the pair's own value.
    apis = sorted({API_OF_ASSET[name] for name in selected if name in API_OF_ASSET})
    if apis:
        tags[API_TAG] = "+".join(apis)
    return tags


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
    tags=run_tags(POST_SPIDER_ASSETS),
)

statistics_job = dg.define_asset_job(
    "statistics_job",
    selection=dg.AssetSelection.assets(*STATISTICS_ASSETS),
    description=(
        "Facebook figures of one topic's stories that joined without one (partition = topic), while the topic is "
        "spidered. Requested by the `statistics_as_stories_join` sensor; the post-spider run fetches the rest."
    ),
    tags=run_tags(STATISTICS_ASSETS),
)

click_totals_job = dg.define_asset_job(
    "click_totals_job",
    selection=dg.AssetSelection.assets("click_totals"),
    description=(
        "Bit.ly clicks 3 and 30 days after publication for the topic stories of one or more publication days "
        "(daily partitions; a backfill runs up to 31 days per run). Requested by the click refetch sensors and "
        "the daily catch-up."
    ),
    tags=run_tags(["click_totals"]),
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
    statistics_job,
    click_totals_job,
    snapshot_job,
    cluster_weeks_job,
]


def topic_run_tags(topic: str, iteration: int | None, stage: str) -> dict[str, str]:
    """Tags of a topic's spider or post-spider run (``stage``), with the spider iteration it belongs to."""
    if stage not in ("spider", "post-spider"):
        raise ValueError(f"stage must be 'spider' or 'post-spider', got {stage!r}")
    assets = SPIDER_ASSETS if stage == "spider" else POST_SPIDER_ASSETS
    return {**run_tags(assets, topic), "topicmap/iteration": str(iteration)}
