"""Clusters of a topic's stories: one-shot (``clusters``) and week by week with their mutations (``cluster_weeks``).

``cluster_weeks`` is partitioned topic x week and depends on its own previous week (same topic): a week's run
reads the streaming model the previous week left, updates it with the week's stories and stores the new state.
A backfill over a range therefore runs the weeks in order, and re-materializing a week gives it a new data
version (a digest of the state) whenever its state changed, which marks the later weeks stale.
"""

from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg
from pydantic import Field

from assets.beta import beta_api
from assets.jobs import POOL_ANALYSIS
from assets.metadata import png_markdown
from assets.partitions import topics_partitions, weeks_start_day
from resources.store import TopicStoreResource
from topicmap.clusters.names import MIN_STORIES

if TYPE_CHECKING:
    from topicmap.clusters.mutation import StreamConfig

CLUSTERS_GROUP = "clusters"
CLUSTERS_TAGS = {"topicmap/stage": "clusters"}
#: the first week of the weekly partitions (a Monday; see weeks_start_day); a topic's first week starts afresh
WEEKS_START = weeks_start_day().isoformat()

weeks_partitions = dg.WeeklyPartitionsDefinition(start_date=WEEKS_START, day_offset=1)
topic_weeks_partitions = dg.MultiPartitionsDefinition({"topic": topics_partitions, "week": weeks_partitions})

#: the same topic, the week before (none for the first week of the partitions); a beta class of Dagster
PREVIOUS_WEEK = beta_api(
    dg.MultiPartitionMapping,
    {
        "topic": dg.DimensionPartitionMapping("topic", dg.IdentityPartitionMapping()),
        "week": dg.DimensionPartitionMapping(
            "week",
            dg.TimeWindowPartitionMapping(start_offset=-1, end_offset=-1),
        ),
    },
)
#: a topic's week reads the topic's whole partition; a beta class of Dagster
TOPIC_OF_WEEK = beta_api(dg.MultiToSingleDimensionPartitionMapping, "topic")


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

    result = build_topic_clusters(
        store.open(), context.partition_key, k_min=config.k_min, k_max=config.k_max, seed=config.seed
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


@dg.asset(
    group_name=CLUSTERS_GROUP,
    kinds={"python", "numpy"},
    tags=CLUSTERS_TAGS,
    pool=POOL_ANALYSIS,
    partitions_def=topic_weeks_partitions,
    deps=[
        dg.AssetDep("deduped_stories", partition_mapping=TOPIC_OF_WEEK),
        dg.AssetDep("cluster_weeks", partition_mapping=PREVIOUS_WEEK),
    ],
    description=(
        "Streaming KMeans over a topic's weeks, exactly Spark MLlib's model (half-life in weeks, dying clusters "
        "re-seeded by splitting the largest), carried from the previous week's partition. After each week's "
        "update the last four weeks' stories are predicted again; stories that changed cluster are the mutation "
        "edges. Writes `TOPICMAP_HOME/exports/clusters/{topic}/weeks/{monday}/` (state, stories, vectors, edges, "
        "nodes, mutations.gexf and pictures). Build weeks in order: a backfill does."
    ),
    check_specs=[
        dg.AssetCheckSpec(
            "later_weeks_follow_this_state",
            asset="cluster_weeks",
            description=(
                "Every built week of the topic starts from the current state of the week before it. Fails, "
                "naming them, when a week was built again differently and the weeks after it are stale."
            ),
        )
    ],
)
def cluster_weeks(
    context: dg.AssetExecutionContext, config: ClusterWeeksConfig, store: TopicStoreResource
) -> dg.MaterializeResult:
    keys = context.partition_key.keys_by_dimension
    topic, week = keys["topic"], keys["week"]
    from topicmap.clusters.store import build_topic_week, stale_weeks

    built = build_topic_week(store.open(), topic, week, config.stream_config())
    step, state = built.step, built.step.state
    edges = step.edges
    context.log.info(
        f"{topic} {week}: {len(step.stories)} stories, model "
        f"{'not started' if state.model is None else f'k={state.model.k}'}, {int(edges.stories.sum()) if len(edges) else 0} "
        f"stories moved along {len(edges)} edges; state {built.fingerprint} from {built.previous_fingerprint or 'nothing'}"
    )
    metadata: dict[str, object] = {
        "dagster/row_count": len(step.stories),
        "batches_so_far": state.batches,
        "started_fresh": built.started_fresh,
        "previous_state": built.previous_fingerprint or "",
        "state": built.fingerprint,
        "mutation_edges": len(edges),
        "stories_moved": int(edges.stories.sum()) if len(edges) else 0,
        "folder": dg.MetadataValue.path(str(built.folder)),
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
    metadata |= _picture(built.folder / "stream.png", "streaming clusters week by week")
    metadata |= _picture(built.folder / "mutations.png", "story mutation graph")
    metadata |= _picture(built.folder / "sse_curve.png", "SSE curve of the first week")
    stale = stale_weeks(topic)
    if stale:
        context.log.warning(
            f"{topic}: weeks built from an older state of the week before: {', '.join(stale)}"
        )
    check = dg.AssetCheckResult(
        check_name="later_weeks_follow_this_state",
        passed=not stale,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "stale_weeks": dg.MetadataValue.json(stale),
            "rebuild_from": stale[0] if stale else "",
        },
        description=(
            f"{len(stale)} later weeks are stale: re-materialize {stale[0]} to {stale[-1]} in order (a backfill)"
            if stale
            else "every built week follows from the week before"
        ),
    )
    return dg.MaterializeResult(
        metadata=metadata, data_version=dg.DataVersion(built.fingerprint), check_results=[check]
    )
