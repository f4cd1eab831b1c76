"""Clusters of a topic's stories (hashed TF-IDF, random indexing, KMeans) and their weekly mutations."""

import dagster as dg

from assets.jobs import POOL_ANALYSIS
from assets.metadata import png_markdown
from assets.partitions import topics_partitions
from resources.store import TopicStoreResource

CLUSTERS_GROUP = "clusters"
CLUSTERS_TAGS = {"topicmap/stage": "clusters"}


def _clusters_markdown(sizes: dict[int, int], top_terms: dict[int, list[str]]) -> dg.MarkdownMetadataValue:
    lines = ["| cluster | stories | top terms |", "|---:|---:|---|"]
    lines += [f"| {c} | {n} | {', '.join(top_terms.get(c, []))} |" for c, n in sizes.items()]
    return dg.MetadataValue.md("\n".join(lines))


@dg.asset(
    group_name=CLUSTERS_GROUP,
    kinds={"python", "scikit-learn"},
    tags=CLUSTERS_TAGS,
    pool=POOL_ANALYSIS,
    partitions_def=topics_partitions,
    deps=[dg.AssetDep("deduped_stories", partition_mapping=dg.IdentityPartitionMapping())],
    description=(
        "Stories grouped into clusters (hashed TF-IDF projected by random indexing, KMeans with "
        "k = min(8, max(2, n // 40))) and, week by week, streaming KMeans with a two-week half-life whose "
        "clusters are linked into a mutation graph. Writes `TOPICMAP_HOME/exports/clusters/{topic}/stories.parquet` "
        "and `timeline.png` (shown on the asset page)."
    ),
)
def clusters(context: dg.AssetExecutionContext, store: TopicStoreResource) -> dg.MaterializeResult:
    # scikit-learn, scipy and pandas load here, in the run that needs them, not with the code location
    from topicmap.clusters.store import MIN_STORIES, build_topic_clusters

    result = build_topic_clusters(store.open(), context.partition_key)
    if result is None:
        context.log.info(f"fewer than {MIN_STORIES} stories: nothing to cluster")
        return dg.MaterializeResult(
            metadata={"dagster/row_count": 0, "skipped": f"fewer than {MIN_STORIES} stories"}
        )
    context.log.info(
        f"{result.stories} stories in {len(result.clusters.sizes)} clusters, "
        f"{len(result.stream.batches)} weekly batches, {len(result.mutations)} mutation edges"
    )
    metadata = {
        "dagster/row_count": result.stories,
        "clusters": _clusters_markdown(result.clusters.sizes, result.clusters.top_terms),
        "weeks": len(result.stream.batches),
        "mutation_edges": len(result.mutations),
        "parquet_path": dg.MetadataValue.path(str(result.parquet_path)),
        "timeline_png": dg.MetadataValue.path(str(result.png_path)),
    }
    picture = png_markdown(result.png_path, f"cluster timeline of {context.partition_key}")
    if picture is not None:
        metadata["timeline"] = picture
    return dg.MaterializeResult(metadata=metadata)
