"""Clusters of a topic's stories: one-shot (``clusters``) and week by week with their mutations (``cluster_weeks``).

``cluster_weeks`` is partitioned by topic week: one key ``topic|monday`` per week of each declared topic (the
`topic_weeks` set the topic registry keeps), no topic offered another's weeks. A run builds all its weeks in one
pass, topic by topic, in date order, each from the state the week before left (a backfill over a range of keys is
one run: ``BackfillPolicy.single_run()``; a topic's weeks are one range),
and materializes each week as soon as its folder is written; its first week starts from the nearest built week
before it, or from its own fit when none is built. The chain of states lives in the week folders, not in Dagster's
graph: a range run gives all its weeks one provenance, so Dagster's stale status could not follow a
self-dependency through it. The asset check ``later_weeks_follow_this_state`` reads each week's lineage instead,
for topics of any length.
"""

from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg
from pydantic import Field

from assets.beta import beta_api
from assets.conditions import CLUSTER_WEEKS_CONDITION
from assets.jobs import POOL_ANALYSIS
from assets.metadata import CODE_VERSIONS, OWNERS, png_markdown
from assets.partitions import stored_topic_id, topic_weeks_partitions, topics_partitions
from resources.store import TopicStoreResource
from topicmap.clusters.names import MIN_STORIES
from topicmap.topics.calendar import split_topic_week

if TYPE_CHECKING:
    from topicmap.clusters.mutation import StreamConfig
    from topicmap.clusters.store import TopicWeek

CLUSTERS_GROUP = "clusters"
CLUSTERS_TAGS = {"topicmap/stage": "clusters"}
#: a run over many weeks logs one line every this many weeks (each week's figures are on its materialization)
LOG_EVERY_WEEKS = 26
#: a topic's week reads its topic's stories. Dagster has no built-in mapping from a ``topic|week`` set to the topic
#: (a custom one is deprecated, and dropped from what the webserver and daemon read), so the dependency is on every
#: topic's stories; the automation condition reads the topic's own (assets/conditions.py), and the run its own.
STORIES_OF_WEEKS = dg.AllPartitionMapping()


class ClustersConfig(dg.Config):
    k_min: int = Field(default=2, description="Smallest k the SSE curve is read over.")
    k_max: int = Field(default=30, description="Largest k the SSE curve is read over.")
    seed: int = Field(default=0, description="Seed of the random indexing and of KMeans.")


class ClusterWeeksConfig(dg.Config):
    k_min: int = Field(default=2, description="Smallest k for the stream's first week (SSE curve).")
    k_max: int = Field(default=15, description="Largest k for the stream (the chapter streams 15 clusters).")
    half_life: float = Field(
        default=2.0, description="Half-life of old stories, in weeks (the chapter: 2 batches)."
    )
    min_stories: int = Field(
        default=MIN_STORIES, description="The stream starts with the first week this big."
    )
    seed: int = Field(default=0, description="Seed of the random indexing and of KMeans.")

    def stream_config(self) -> "StreamConfig":
        from topicmap.clusters.mutation import StreamConfig  # scikit-learn loads with the run

        return StreamConfig(
            k_min=self.k_min,
            k_max=self.k_max,
            half_life=self.half_life,
            min_stories=self.min_stories,
            seed=self.seed,
        )


def _table_markdown(header: list[str], rows: list[list[object]]) -> dg.MarkdownMetadataValue:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(v).replace("|", "/") for v in row) + " |" for row in rows]
    return dg.MetadataValue.md("\n".join(lines))


def _picture(path: Path, alt: str) -> dict[str, dg.MetadataValue]:
    shown = png_markdown(path, alt) if path.exists() else None
    return {f"{path.stem}_png": dg.MetadataValue.path(str(path)), **({path.stem: shown} if shown else {})}


@dg.asset(
    group_name=CLUSTERS_GROUP,
    owners=OWNERS,
    code_version=CODE_VERSIONS["clusters"],
    kinds={"python", "scikit-learn"},
    tags=CLUSTERS_TAGS,
    pool=POOL_ANALYSIS,
    partitions_def=topics_partitions,
    deps=[dg.AssetDep("deduped_stories", partition_mapping=dg.IdentityPartitionMapping())],
    description=(
        "All the topic's stories clustered at once: hashed TF-IDF projected by random indexing, KMeans with k "
        "at the elbow of the SSE curve (kneedle; the chapter's sqrt(n/2) when the curve has no knee). Writes "
        "`TOPICMAP_HOME/exports/clusters/{topic}/overall/` (stories, clusters with top terms and central titles, "
        "the SSE curve, a stream graph of the clusters week by week)."
    ),
)
def clusters(
    context: dg.AssetExecutionContext, config: ClustersConfig, store: TopicStoreResource
) -> dg.MaterializeResult:
    from topicmap.clusters.store import build_topic_clusters  # scikit-learn loads with the run

    topic_store = store.open()
    stored_topic_id(topic_store, context.partition_key)  # an undeclared topic fails here, at once
    result = build_topic_clusters(
        topic_store, context.partition_key, k_min=config.k_min, k_max=config.k_max, seed=config.seed
    )
    if result is None:
        context.log.info(f"fewer than {MIN_STORIES} stories: nothing to cluster")
        return dg.MaterializeResult(
            metadata={"dagster/row_count": 0, "skipped": f"fewer than {MIN_STORIES} stories"}
        )
    found = result.clusters
    context.log.info(f"{result.stories} stories in {found.choice.k} clusters: {found.choice.reason}")
    rows = [
        [c, n, ", ".join(found.top_terms[c]), " / ".join(found.titles[c])] for c, n in found.sizes.items()
    ]
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": result.stories,
            "k": found.choice.k,
            "k_method": found.choice.method,
            "k_reason": found.choice.reason,
            "sse_curve_values": dg.MetadataValue.json({"k": found.choice.ks, "sse": found.choice.sse}),
            "clusters": _table_markdown(
                ["cluster", "stories", "top terms", "titles nearest the centre"], rows
            ),
            "parquet_path": dg.MetadataValue.path(str(result.parquet_path)),
            **_picture(result.sse_png, "SSE curve"),
            **_picture(result.timeline_png, "clusters week by week"),
        }
    )


@beta_api(  # backfill_policy is a beta parameter of dg.asset
    dg.asset,
    backfill_policy=dg.BackfillPolicy.single_run(),
    output_required=False,  # each week is materialized as it is built (see the function)
    automation_condition=CLUSTER_WEEKS_CONDITION,  # new weeks and rebuilt stories (the cluster_weeks_automation sensor)
    group_name=CLUSTERS_GROUP,
    owners=OWNERS,
    code_version=CODE_VERSIONS["cluster_weeks"],
    kinds={"python", "numpy"},
    tags=CLUSTERS_TAGS,
    pool=POOL_ANALYSIS,
    partitions_def=topic_weeks_partitions,
    deps=[dg.AssetDep("deduped_stories", partition_mapping=STORIES_OF_WEEKS)],
    description=(
        "Streaming KMeans over a topic's weeks, exactly Spark MLlib's model (half-life in weeks, dying clusters "
        "re-seeded by splitting the largest), carried from week to week. A run builds its weeks in order in one "
        "pass (a backfill over a range is one run per topic); its first week starts from the nearest built week "
        "before it, or from its own fit (metadata `started_from`). After each week's update the last four weeks' "
        "stories are predicted again; stories that changed cluster are the mutation edges. Writes "
        "`TOPICMAP_HOME/exports/clusters/{topic}/weeks/{monday}/` (state, lineage, stories, vectors, edges, "
        "nodes; the run's last week also the mutation graph so far as GEXF and pictures)."
    ),
    check_specs=[
        dg.AssetCheckSpec(
            "later_weeks_follow_this_state",
            asset="cluster_weeks",
            description=(
                "Every built week of the run's topics starts from the current state of the nearest built week "
                "before it. Fails, naming them, when a week was built again differently (or an earlier week was "
                "built after it) and the weeks after it are stale; a backfill from the first of them repairs them."
            ),
        )
    ],
)
def cluster_weeks(
    context: dg.AssetExecutionContext, config: ClusterWeeksConfig, store: TopicStoreResource
) -> Iterator[dg.AssetMaterialization | dg.AssetCheckResult]:
    from topicmap.clusters.store import build_topic_weeks, stale_weeks  # scikit-learn loads with the run

    # one key in a run of one week; a single-run backfill's range, possibly of several topics, otherwise
    keys_by_topic: dict[str, dict[str, str]] = defaultdict(dict)
    for key in context.partition_keys:
        try:
            topic, week = split_topic_week(key)
        except ValueError as exc:  # a key added by hand in the launch dialog
            raise dg.Failure(description=str(exc), allow_retries=False) from exc
        keys_by_topic[topic][week] = key
    topic_store = store.open()
    stale: dict[str, list[str]] = {}
    for topic, keys in sorted(keys_by_topic.items()):
        stored_topic_id(topic_store, topic)  # an undeclared topic fails here, at once
        seconds: dict[str, float] = defaultdict(float)
        for position, built in enumerate(
            build_topic_weeks(topic_store, topic, list(keys), config.stream_config()), start=1
        ):
            for phase, spent in built.seconds.items():
                seconds[phase] += spent
            if position % LOG_EVERY_WEEKS == 1 or position == len(keys):
                context.log.info(_week_line(built, position, len(keys)))
            # each week is materialized as soon as its folder is in place, with its own figures: a run that
            # stops half way leaves its built weeks materialized, and progress shows on the asset page as it goes
            yield dg.AssetMaterialization(
                asset_key=context.asset_key, partition=keys[built.week], metadata=_week_metadata(built)
            )
        context.log.info(
            f"{topic}: {len(keys)} weeks built in {sum(seconds.values()):.1f} s: "
            + ", ".join(
                f"{phase} {spent:.1f} s" for phase, spent in sorted(seconds.items(), key=lambda i: -i[1])
            )
        )
        stale_now = stale_weeks(topic)
        if stale_now:
            stale[topic] = stale_now
            context.log.warning(
                f"{topic}: weeks built from an older state of the week before: {', '.join(stale_now)}"
            )
    yield dg.AssetCheckResult(
        check_name="later_weeks_follow_this_state",
        passed=not stale,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "stale_weeks": dg.MetadataValue.json(stale),
            "rebuild_from": dg.MetadataValue.json({topic: weeks[0] for topic, weeks in stale.items()}),
        },
        description=(
            "; ".join(
                f"{topic}: {len(weeks)} weeks are stale, rebuild {weeks[0]} to {weeks[-1]} (one backfill over the "
                "range)"
                for topic, weeks in stale.items()
            )
            or "every built week follows from the week before"
        ),
    )


def _week_line(built: "TopicWeek", position: int, weeks: int) -> str:
    """A week in the run's log (every LOG_EVERY_WEEKS weeks: a log line is an event stored like a
    materialization, and one a week doubled Dagster's time over a long topic)."""
    state = built.step.state
    model = "not started" if state.model is None else f"k={state.model.k}"
    return (
        f"{built.week} (week {position} of {weeks}): {len(built.step.stories)} stories, model {model}, "
        f"{len(built.step.edges)} mutation edges; state {built.fingerprint} from "
        f"{built.started_from or 'its own fit'}"
    )


def _week_metadata(built: "TopicWeek") -> dict[str, object]:
    step, state = built.step, built.step.state
    edges = step.edges
    metadata: dict[str, object] = {
        "dagster/row_count": len(step.stories),
        "batches_so_far": state.batches,
        "started_fresh": built.started_fresh,
        "started_from": built.started_from or "its own fit (no earlier week built)",
        "previous_state": built.previous_fingerprint or "",
        "state": built.fingerprint,
        "mutation_edges": len(edges),
        "stories_moved": int(edges.stories.sum()) if len(edges) else 0,
        "folder": dg.MetadataValue.path(str(built.folder)),
        "seconds": dg.MetadataValue.json({phase: round(spent, 3) for phase, spent in built.seconds.items()}),
    }
    if state.choice is not None:
        metadata |= {"k": state.choice.k, "k_method": state.choice.method, "k_reason": state.choice.reason}
    if len(edges):
        rows = edges.sort_values("stories", ascending=False).head(15).values.tolist()
        metadata["moves"] = _table_markdown(["batch", "from cluster", "to cluster", "stories"], rows)
    if len(step.nodes):
        rows = [
            [r.cluster, r.stories, r.window_stories, ", ".join(r.top_terms), " / ".join(r.titles)]
            for r in step.nodes.itertuples()
        ]
        metadata["clusters"] = _table_markdown(
            ["cluster", "stories", "last 4 weeks", "top terms", "titles nearest the centre"], rows
        )
    alt = {"stream": "streaming clusters week by week", "mutations": "story mutation graph"}
    for picture in built.pictures:
        metadata |= _picture(picture, alt.get(picture.stem, "SSE curve of the first week"))
    return metadata
