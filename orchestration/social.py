"""The social-metrics stage: click totals (+ check and refetch sensors), Facebook statistics, and the API clients.

Settings (environment, read when the code location loads; secrets only as EnvVars, resolved at run time):

* ``TOPICMAP_BITLY_TOKEN`` — Bit.ly access token (required for click_totals runs);
* ``TOPICMAP_BITLY_BASE_URL`` — default the public API ``https://api-ssl.bitly.com``;
* ``TOPICMAP_RAW_STORE_DIR`` — raw Bit.ly answers, default ``TOPICMAP_HOME/raw``;
* ``TOPICMAP_FACEBOOK_APP_ID`` / ``TOPICMAP_FACEBOOK_APP_SECRET`` — Graph API app credentials;
* ``TOPICMAP_FACEBOOK_BASE_URL`` — default ``https://graph.facebook.com/v12.0``.

See docs/social.md.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from datetime import date, timedelta
from typing import Any

import dagster as dg

from assets.social import click_totals, clicks_30d_not_below_3d, story_statistics
from resources.social import BitlyResource, FacebookResource
from sensors.clicks import click_refetch_3d, click_refetch_30d
from topicmap import bitly, facebook, refetch
from topicmap.social_store import topic_story_days, topic_story_timestamps
from topicmap.standins import StandinDataset, StandinServer
from topicmap.store import TopicStore

BITLY_TOKEN_ENV = "TOPICMAP_BITLY_TOKEN"
BITLY_BASE_URL_ENV = "TOPICMAP_BITLY_BASE_URL"
RAW_STORE_DIR_ENV = "TOPICMAP_RAW_STORE_DIR"
FACEBOOK_APP_ID_ENV = "TOPICMAP_FACEBOOK_APP_ID"
FACEBOOK_APP_SECRET_ENV = "TOPICMAP_FACEBOOK_APP_SECRET"
FACEBOOK_BASE_URL_ENV = "TOPICMAP_FACEBOOK_BASE_URL"


def _env_or(name: str, default: str) -> str | dg.EnvVar:
    # Same rule as orchestration.definitions.env_or (not imported: definitions imports this module).
    return dg.EnvVar(name) if os.environ.get(name) else default


def social_resources() -> dict[str, dg.ConfigurableResource]:
    """The two API clients, configured from the environment."""
    return {
        "bitly": BitlyResource(
            token=dg.EnvVar(BITLY_TOKEN_ENV),
            base_url=_env_or(BITLY_BASE_URL_ENV, bitly.DEFAULT_BASE_URL),
            raw_store_dir=_env_or(RAW_STORE_DIR_ENV, ""),
        ),
        "facebook": FacebookResource(
            app_id=dg.EnvVar(FACEBOOK_APP_ID_ENV),
            app_secret=dg.EnvVar(FACEBOOK_APP_SECRET_ENV),
            base_url=_env_or(FACEBOOK_BASE_URL_ENV, facebook.DEFAULT_BASE_URL),
        ),
    }


social_defs = dg.Definitions(
    assets=[click_totals, story_statistics],
    asset_checks=[clicks_30d_not_below_3d],
    sensors=[click_refetch_3d, click_refetch_30d],
    resources=social_resources(),
)


# ---------------------------------------------------------------------------------------------- demo support
def demo_social_config(server: StandinServer) -> dict[str, str]:
    """Environment settings pointing both clients at a loopback STAND-IN of the APIs (not the real services).

    Set them in ``os.environ`` before ``orchestration.definitions`` is imported (base URLs are read at load time).
    """
    dataset = server.dataset
    return {
        BITLY_TOKEN_ENV: dataset.bitly_token,
        BITLY_BASE_URL_ENV: server.base_url_bitly,
        FACEBOOK_APP_ID_ENV: dataset.facebook_app_id,
        FACEBOOK_APP_SECRET_ENV: dataset.facebook_app_secret,
        FACEBOOK_BASE_URL_ENV: server.base_url_facebook,
    }


def day_ranges(days: list[date], max_days: int = 31) -> list[tuple[date, date]]:
    """Split sorted days into ranges of at most ``max_days`` calendar days (what BackfillPolicy.multi_run does)."""
    ranges: list[tuple[date, date]] = []
    for day in sorted(days):
        if ranges and (day - ranges[-1][0]).days < max_days:
            ranges[-1] = (ranges[-1][0], day)
        else:
            ranges.append((day, day))
    return ranges


def run_social_demo(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    server: StandinServer,
    topics: list[str],
    say: Callable[[str], None] = print,
    seed: int = 11,
) -> dict[str, int]:
    """Teach the stand-in every topic story, backfill click_totals over the topic stories' publication days
    (stage auto, up to 31 days per run), then story_statistics per topic; prints and returns the totals."""
    store = TopicStore.open()
    now = refetch.current_time()
    stamps = topic_story_timestamps(store, now)
    server.dataset.stories.update(
        StandinDataset.from_urls(list(stamps), seed=seed, publish_date=stamps).stories
    )
    totals = {"click_runs": 0, "clicks_3d": 0, "clicks_30d": 0, "bitlinks": 0, "shares": 0}
    days = [d for d in topic_story_days(store, now) if d <= now.date() - timedelta(days=1)]
    for first, last in day_ranges(days):
        result = _materialize(
            defs,
            instance,
            ["click_totals"],
            tags={
                refetch.RANGE_START_TAG: first.isoformat(),
                refetch.RANGE_END_TAG: last.isoformat(),
            },
        )
        meta = result.asset_materializations_for_node("click_totals")[0].metadata
        totals["click_runs"] += 1
        totals["clicks_3d"] += meta["clicks_3d_total"].value
        totals["clicks_30d"] += meta["clicks_30d_total"].value
        totals["bitlinks"] += meta["bitlinks_found"].value
        say(
            f"  click_totals {first}..{last}: {meta['dagster/row_count'].value} stories, "
            f"{meta['bitlinks_found'].value} bitlinks, clicks at 3 days {meta['clicks_3d_total'].value}, "
            f"at 30 days {meta['clicks_30d_total'].value} (not yet due: {meta['stories_not_yet_due'].value})"
        )
    for topic in topics:
        result = _materialize(defs, instance, ["story_statistics"], partition_key=topic)
        meta = result.asset_materializations_for_node("story_statistics")[0].metadata
        totals["shares"] += meta["facebook_share_count_total"].value
        say(
            f"  story_statistics [{topic}]: {meta['dagster/row_count'].value} stories, "
            f"shares {meta['facebook_share_count_total'].value}, comments "
            f"{meta['facebook_comment_count_total'].value}, reactions {meta['facebook_reaction_count_total'].value}, "
            f"soft failures {meta['stories_with_error'].value}"
        )
    return totals


def _materialize(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    selection: list[str],
    partition_key: str | None = None,
    tags: Mapping[str, str] | None = None,
) -> Any:
    result = dg.materialize(
        assets=[*(defs.assets or []), *(defs.asset_checks or [])],
        selection=selection,
        instance=instance,
        partition_key=partition_key,
        resources=defs.resources,
        tags=dict(tags or {}),
        raise_on_error=False,
    )
    if not result.success:
        failures = [event.message for event in result.all_events if event.is_failure]
        raise SystemExit(f"demo: materializing {selection} ({partition_key or tags}) failed: {failures[-1:]}")
    return result
