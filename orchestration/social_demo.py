"""`make demo` support for the social metrics: point the clients at the loopback STAND-IN of the Bit.ly and Facebook
APIs (topicmap.demo.standins — made-up figures, never the real services), then backfill click totals for the demo's
topic stories (the Facebook statistics run in each topic's post_spider_job).

Import order matters: the code location reads the base URLs when orchestration.definitions is imported, so

    server = stack.enter_context(run_standin_server(StandinDataset()))   # empty; taught the stories later
    os.environ.update(demo_social_config(server))
    from orchestration.definitions import defs
    ...spider...
    run_click_demo(defs, instance, server, say=_say)

This module imports no asset or definitions module, so it can be imported before the environment is set.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import date, timedelta
from typing import Any

import dagster as dg

from orchestration.runs import run_job
from topicmap import settings
from topicmap.demo.standins import StandinDataset, StandinServer
from topicmap.social import refetch
from topicmap.social.store import topic_story_days, topic_story_timestamps
from topicmap.store.topic_store import TopicStore


def demo_social_config(server: StandinServer) -> dict[str, str]:
    """Environment settings pointing both clients at the stand-in ``server`` (set them before importing
    orchestration.definitions)."""
    dataset = server.dataset
    return {
        settings.BITLY_TOKEN.name: dataset.bitly_token,
        settings.BITLY_BASE_URL.name: server.base_url_bitly,
        settings.FACEBOOK_APP_ID.name: dataset.facebook_app_id,
        settings.FACEBOOK_APP_SECRET.name: dataset.facebook_app_secret,
        settings.FACEBOOK_BASE_URL.name: server.base_url_facebook,
    }


def day_ranges(days: list[date], max_days: int = 31) -> list[tuple[date, date]]:
    """Sorted days grouped into ranges spanning at most ``max_days`` calendar days (like the backfill policy)."""
    ranges: list[tuple[date, date]] = []
    for day in sorted(set(days)):
        if ranges and (day - ranges[-1][0]).days < max_days:
            ranges[-1] = (ranges[-1][0], day)
        else:
            ranges.append((day, day))
    return ranges


def _check_wiring(defs: dg.Definitions, server: StandinServer) -> None:
    """Refuse to run the demo against anything but the stand-in (e.g. definitions imported too early)."""
    resources = defs.resources or {}
    for key, expected in (("bitly", server.base_url_bitly), ("facebook", server.base_url_facebook)):
        configured = getattr(resources.get(key), "base_url", None)
        if not isinstance(configured, dg.EnvVar) and configured != expected:
            raise SystemExit(
                f"demo: the {key} client points at {configured!r}, not the stand-in {expected}: set "
                "os.environ.update(demo_social_config(server)) before importing orchestration.definitions"
            )


def teach_standin(server: StandinServer, seed: int = 11) -> int:
    """Teach the stand-in every topic story of the store (made-up bitlinks, clicks and engagement); returns how many."""
    store = TopicStore.open()
    stamps = topic_story_timestamps(store, refetch.current_time())
    server.dataset.stories.update(
        StandinDataset.from_urls(list(stamps), seed=seed, publish_date=stamps).stories
    )
    return len(stamps)


def run_click_demo(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    server: StandinServer,
    say: Callable[[str], None] = print,
) -> dict[str, int]:
    """Backfill ``click_totals_job`` over the topic stories' publication days (stage auto, one run per 31 days, as
    a UI backfill would) against the stand-in. Prints and returns totals."""
    _check_wiring(defs, server)
    taught = teach_standin(server)
    say(f"  API stand-in (not the real Bit.ly / Facebook) on {server.base_url}: {taught} topic stories")
    store = TopicStore.open()
    now = refetch.current_time()
    totals = {"click_runs": 0, "stories_with_clicks": 0, "bitlinks": 0, "clicks_3d": 0, "clicks_30d": 0}
    last_partition = now.date() - timedelta(days=1)
    for first, last in day_ranges([d for d in topic_story_days(store, now) if d <= last_partition]):
        result = run_job(
            defs,
            instance,
            "click_totals_job",
            tags={refetch.RANGE_START_TAG: first.isoformat(), refetch.RANGE_END_TAG: last.isoformat()},
        )
        days = result.materializations("click_totals")
        figures = {
            key: sum(m.metadata[name].value for m in days)
            for key, name in (
                ("stories_with_clicks", "dagster/row_count"),
                ("bitlinks", "bitlinks_found"),
                ("clicks_3d", "clicks_3d_total"),
                ("clicks_30d", "clicks_30d_total"),
                ("not_due", "stories_not_yet_due"),
            )
        }
        totals["click_runs"] += 1
        for key in ("stories_with_clicks", "bitlinks", "clicks_3d", "clicks_30d"):
            totals[key] += figures[key]
        say(
            f"  click_totals {first}..{last} ({len(days)} days): {figures['stories_with_clicks']} stories, "
            f"{figures['bitlinks']} bitlinks; clicks at 3 days {figures['clicks_3d']}, "
            f"at 30 days {figures['clicks_30d']}; not yet due {figures['not_due']}"
        )
    return totals


def statistics_line(meta: Mapping[str, Any], topic: str) -> str:
    """The demo's summary line of one topic's story_statistics materialization."""
    if "facebook_share_count_total" not in meta:
        return f"  story_statistics [{topic}]: skipped ({meta.get('skipped', 'not configured')})"
    return (
        f"  story_statistics [{topic}]: {meta['dagster/row_count'].value} stories; shares "
        f"{meta['facebook_share_count_total'].value}, comments {meta['facebook_comment_count_total'].value}, "
        f"reactions {meta['facebook_reaction_count_total'].value}; soft failures "
        f"{meta['stories_with_error'].value}"
    )
