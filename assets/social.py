"""Social metrics: Bit.ly click totals per publication day (3 and 30 days after publication) and Facebook
engagement per topic story. The fetches are topicmap.social.fetching's; the rules live in topicmap.social.clicks /
topicmap.social.refetch / topicmap.social.store."""

from collections import Counter
from collections.abc import Iterator
from datetime import date, timedelta
from typing import TYPE_CHECKING, Any, Literal

import dagster as dg
from pydantic import Field

from assets.beta import beta_api
from assets.jobs import POOL_SOCIAL_API
from assets.metadata import CODE_VERSIONS, OWNERS, counts_markdown, table
from assets.partitions import click_days_partitions, stored_topic_id, topics_partitions
from resources.social import BitlyResource, FacebookResource
from resources.store import TopicStoreResource
from topicmap import settings
from topicmap.social import refetch
from topicmap.social.clicks import STAGE_3D, STAGE_30D

if TYPE_CHECKING:
    from topicmap.social.fetching import ClickTotals

SOCIAL_GROUP = "social"

#: One partition per publication day (UTC) a declared topic spans, to yesterday, the last complete day
#: (assets.partitions: the topic registry keeps the set equal to the topics file; an open-ended topic gains a day a
#: day): no day that can never hold a topic story is offered, or shown missing.
publication_days = click_days_partitions


#: Steps that call an external API are retried after a pause that grows (a network or database hiccup); failures
#: that a retry cannot fix (refused credentials, stories the API could not measure) raise with allow_retries=False.
API_RETRY_POLICY = dg.RetryPolicy(
    max_retries=3, delay=30, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS
)
#: what the stage is (asset tag and owner), shown and filterable in the UI's catalog
SOCIAL_TAGS = {"topicmap/stage": "social"}


class ClickStageConfig(dg.Config):
    """Which click figure a run fetches."""

    stage: Literal["3d", "30d", "auto"] = Field(
        default="auto",
        description=(
            "3d: clicks_3d only. 30d: clicks_30d (and clicks_3d where none is stored). auto (backfills): for each "
            "story, the latest stage already due. A stage not yet due for a story is left alone."
        ),
    )


#: metadata that describes the whole run, kept on every day of a range run beside the day's own figures
RUN_WIDE_METADATA = ("stage", "run_days", "parquet_folder", "raw_answers_folder")
#: the columns of a click preview table
PREVIEW_COLUMNS = ["publish_day", "stories_id", "url", "bitlinks_found", "clicks_3d", "clicks_30d"]


def _preview(rows: list[dict[str, Any]]) -> dg.MetadataValue:
    return table(sorted(rows, key=lambda r: -(r["clicks_30d"] or r["clicks_3d"] or 0)), PREVIEW_COLUMNS)


def _day_metadata(day: str, totals: "ClickTotals", kept_by_day: Counter[str]) -> dict[str, Any]:
    """One publication day's own figures (a range run records one materialization per day)."""
    day_rows = totals.day_rows(day)
    figures = totals.per_day.get(day, {"bitlinks": 0, "clicks_3d": 0, "clicks_30d": 0})
    return {
        "dagster/row_count": len(day_rows),
        "topic_stories": sum(1 for story in totals.stories if story.day.isoformat() == day),
        "stories_fetched_3d": totals.fetched_by_day[day, STAGE_3D],
        "stories_fetched_30d": totals.fetched_by_day[day, STAGE_30D],
        "stories_not_yet_due": totals.not_due_by_day[day],
        "figures_kept_over_lower_fetch": kept_by_day[day],
        "bitlinks_found": figures["bitlinks"],
        "stories_with_bitlinks": sum(1 for r in day_rows if r["bitlinks_found"]),
        "clicks_3d_total": figures["clicks_3d"],
        "clicks_30d_total": figures["clicks_30d"],
        "preview": _preview(day_rows),
    }


def _run_metadata(stage: str, days: str, totals: "ClickTotals", raw_answers: str) -> dict[str, Any]:
    """The run's figures over all its days."""
    from topicmap.social.store import click_exports_dir

    per_day = totals.per_day
    return {
        "dagster/row_count": len(totals.rows),
        "stage": stage,
        "run_days": days,
        "topic_stories": len(totals.stories),
        "stories_fetched_3d": totals.fetched[STAGE_3D],
        "stories_fetched_30d": totals.fetched[STAGE_30D],
        "stories_not_yet_due": len(totals.not_due),
        "stories_failed": len(totals.failed),
        "survivors_with_merged_stories": sum(1 for story in totals.stories if story.merged_stories_ids),
        "figures_kept_over_lower_fetch": len(totals.kept),
        "figures_kept": table(
            totals.kept,
            [
                "stories_id",
                "window",
                "stored",
                "fetched_now",
                "stored_fetched_at",
                "bitlinks_stored",
                "bitlinks_now",
            ],
        ),
        "bitlinks_found": sum(d["bitlinks"] for d in per_day.values()),
        "stories_with_bitlinks": sum(1 for r in totals.rows if r["bitlinks_found"]),
        "clicks_3d_total": sum(d["clicks_3d"] for d in per_day.values()),
        "clicks_30d_total": sum(d["clicks_30d"] for d in per_day.values()),
        "per_day": table(
            list(per_day.values()), ["day", "stories", "bitlinks", "clicks_3d", "clicks_30d"], 31
        ),
        "preview": _preview(totals.rows),
        "parquet_files": len(totals.exports),
        "parquet_folder": dg.MetadataValue.path(str(click_exports_dir())),
        "raw_answers_folder": dg.MetadataValue.path(raw_answers),
    }


@beta_api(  # backfill_policy is a beta parameter of dg.asset
    dg.asset,
    partitions_def=publication_days,
    backfill_policy=dg.BackfillPolicy.multi_run(max_partitions_per_run=31),
    # every topic's stories of the day are counted: each day depends on every topic's relevant stories
    deps=[dg.AssetDep("relevant_stories", partition_mapping=dg.AllPartitionMapping())],
    group_name=SOCIAL_GROUP,
    owners=OWNERS,
    code_version=CODE_VERSIONS["click_totals"],
    kinds={"python", "sql", "parquet"},
    tags=SOCIAL_TAGS,
    pool=POOL_SOCIAL_API,
    retry_policy=API_RETRY_POLICY,
    output_required=False,
    description=(
        "Rows in `bitly_clicks_total` and `TOPICMAP_HOME/exports/click_totals/{day}.parquet`: per topic story "
        "published that day, the bitlinks found for its URL variants and its Bit.ly clicks 3 and 30 days after "
        "publication. Requested by the `click_refetch_3d` / `click_refetch_30d` sensors and the daily catch-up; a "
        "backfill runs up to 31 days per run, and each day records its own figures. Without a Bit.ly token the "
        "run materializes nothing and says so (the days stay missing)."
    ),
)
def click_totals(
    context: dg.AssetExecutionContext,
    config: ClickStageConfig,
    store: TopicStoreResource,
    bitly: BitlyResource,
) -> Iterator[dg.MaterializeResult]:
    # the fetch and the store's reads and writes (SQLAlchemy) load with the run, not with the code location
    from topicmap.social.fetching import FetchStopped, fetch_click_totals
    from topicmap.social.store import click_stories

    # a generator: with output_required=False, yielding nothing is how a run materializes nothing
    # a range run's days are consecutive keys of the day set, which the registry keeps in date order
    days = sorted(date.fromisoformat(key) for key in context.partition_keys)
    first_day, last_day = days[0], days[-1]
    if not bitly.configured:
        # Like story_statistics without Facebook: say why and materialize nothing, so the days stay missing (a
        # backfill or the sensors fill them once a token is set) instead of showing empty figures as a success.
        reason = f"skipped: Bit.ly is not configured ({settings.BITLY_TOKEN.name} is not set)"
        context.log.warning(f"click_totals {first_day}..{last_day} {reason}")
        for key in context.partition_keys:  # shown on the asset page, beside its materializations
            context.log_event(
                dg.AssetObservation(asset_key=context.asset_key, partition=key, metadata={"skipped": reason})
            )
        return
    now = refetch.current_time()
    topic_store = store.open()
    stories = click_stories(topic_store, first_day, last_day, now)
    client = bitly.client()
    context.log.info(
        f"{len(stories)} topic stories published {first_day}..{last_day}; stage {config.stage}; "
        f"Bit.ly at {bitly.base_url}"
    )
    try:
        totals = fetch_click_totals(
            topic_store, client, stories, (first_day, last_day), config.stage, now, context.log
        )
    except FetchStopped as stop:
        raise dg.Failure(
            description=str(stop),
            metadata={"stories_written": stop.written},
            allow_retries=stop.retryable,  # a rate limit passes; a refused token does not
        ) from stop
    raw_answers = str(client.raw_store.root if client.raw_store else "")
    metadata = _run_metadata(config.stage, f"{first_day}..{last_day}", totals, raw_answers)
    if context.has_partition_key_range and first_day != last_day:
        # A range run (backfill): each day's materialization carries that day's figures, not the run's.
        kept_by_day = totals.kept_by_day()
        for key in context.partition_keys:
            context.add_asset_metadata(_day_metadata(key, totals, kept_by_day), partition_key=key)
        metadata = {k: v for k, v in metadata.items() if k in RUN_WIDE_METADATA}
    if totals.not_due:
        context.log.info(
            f"{len(totals.not_due)} stories have no {config.stage} stage due yet; they were left alone"
        )
    if kept := totals.kept:
        context.log.warning(
            f"{len(kept)} stored figures are higher than this run's and were kept (a figure never goes down); "
            f"first: story {kept[0]['stories_id']} {kept[0]['window']}: {kept[0]['stored']} stored, "
            f"{kept[0]['fetched_now']} now ({kept[0]['bitlinks_now']} bitlinks found, {kept[0]['bitlinks_stored']} before)"
        )
    if failed := totals.failed:
        raise dg.Failure(
            description=(
                f"{len(failed)} of {len(stories)} stories could not be measured (the others were written); "
                f"first: story {failed[0]['stories_id']}: {failed[0]['problem']}"
            ),
            metadata={**metadata, "failures": table(failed, ["stories_id", "url", "problem"])},
            # the client already retried each story; the sensors re-request the day once (a late- key)
            allow_retries=False,
        )
    yield dg.MaterializeResult(metadata=metadata)


@dg.asset_check(
    asset=click_totals,
    name="clicks_30d_not_below_3d",
    description=(
        "Flags stories whose 30-day click total is below their 3-day total. Clicks only accumulate, so this means "
        "Bit.ly revised its counts down or fewer bitlinks were found at 30 days than at 3 days. Severity WARN: both "
        "figures are kept as fetched and still the best available, so downstream work should not be blocked; the "
        "listed stories deserve a look (and a 30d re-run of their days once the cause is fixed)."
    ),
)
def clicks_30d_not_below_3d(store: TopicStoreResource) -> dg.AssetCheckResult:
    from topicmap.social.store import clicks_30d_below_3d  # with the check, not the code location

    flagged_count, flagged = clicks_30d_below_3d(store.open())
    return dg.AssetCheckResult(
        passed=flagged_count == 0,
        severity=dg.AssetCheckSeverity.WARN,
        description=(
            "every story's 30-day total is at least its 3-day total"
            if flagged_count == 0
            else f"{flagged_count} stories have fewer clicks at 30 days than at 3 days"
        ),
        metadata={
            "stories_flagged": flagged_count,
            "flagged": table(flagged, ["stories_id", "publish_day", "url", "clicks_3d", "clicks_30d"], 50),
            "flagged_stories_ids": dg.MetadataValue.json([row["stories_id"] for row in flagged]),
        },
    )


class StoryStatisticsConfig(dg.Config):
    """When to ask Facebook again about a story whose last attempt was a soft failure."""

    retry_errors_after_days: float = Field(
        default=7.0, ge=0, description="Ask again about a soft failure once it is this many days old."
    )


@dg.asset(
    partitions_def=topics_partitions,
    deps=[dg.AssetDep("relevant_stories", partition_mapping=dg.IdentityPartitionMapping())],
    group_name=SOCIAL_GROUP,
    owners=OWNERS,
    code_version=CODE_VERSIONS["story_statistics"],
    kinds={"python", "sql"},
    tags=SOCIAL_TAGS,
    pool=POOL_SOCIAL_API,
    retry_policy=API_RETRY_POLICY,
    description=(
        "Rows in `story_statistics`: Facebook share, comment and reaction counts for each topic story that has "
        "none yet (or whose last soft failure is older than `retry_errors_after_days`). A URL Facebook cannot "
        "measure is recorded as a soft failure in `facebook_api_error`; refused credentials stop the run. Without "
        "Facebook credentials the run records `skipped: not configured`."
    ),
)
def story_statistics(
    context: dg.AssetExecutionContext,
    config: StoryStatisticsConfig,
    store: TopicStoreResource,
    facebook: FacebookResource,
) -> dg.MaterializeResult:
    # the fetch and the store's reads and writes (SQLAlchemy) load with the run, not with the code location
    from topicmap.social.fetching import FetchStopped, fetch_story_statistics
    from topicmap.social.store import statistics_rows, statistics_summary, stories_needing_statistics

    topic_store = store.open()
    topics_id = stored_topic_id(topic_store, context.partition_key)
    if not facebook.configured:
        # An optional source: a topic without Facebook credentials still gets its snapshot (share counts null).
        context.log.warning(
            f"story_statistics skipped: Facebook is not configured ({settings.FACEBOOK_APP_ID.name}, {settings.FACEBOOK_APP_SECRET.name})"
        )
        return dg.MaterializeResult(
            metadata={
                "facebook_configured": False,
                "stories_measured_now": 0,
                "skipped": "not configured",
            }
        )
    now = refetch.current_time()
    todo = stories_needing_statistics(
        topic_store, topics_id, now - timedelta(days=config.retry_errors_after_days)
    )
    client = facebook.client()
    context.log.info(
        f"{len(todo)} stories of topic {context.partition_key!r} to measure on {facebook.base_url}"
    )
    try:
        fetched = fetch_story_statistics(topic_store, client, todo)
    except FetchStopped as stop:
        raise dg.Failure(
            description=str(stop), metadata={"stories_written": stop.written}, allow_retries=stop.retryable
        ) from stop
    errors = fetched.soft_failures

    summary = statistics_summary(topic_store, topics_id)
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": summary["stories_with_row"],
            "topic_stories": summary["topic_stories"],
            "stories_measured_this_run": fetched.measured,
            "soft_failures_this_run": sum(errors.values()),
            "soft_failures_by_kind": counts_markdown(dict(errors.most_common()), "soft failure", "stories"),
            "stories_with_error": summary["stories_with_error"],
            "facebook_share_count_total": summary["share_count"],
            "facebook_comment_count_total": summary["comment_count"],
            "facebook_reaction_count_total": summary["reaction_count"],
            "preview": table(
                statistics_rows(topic_store, topics_id),
                [
                    "stories_id",
                    "url",
                    "facebook_share_count",
                    "facebook_comment_count",
                    "facebook_reaction_count",
                    "facebook_api_error",
                ],
            ),
        }
    )
