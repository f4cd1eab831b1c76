"""Common Crawl's definitions: the outlet queue, CC-NEWS by day, the schedule that loads yesterday, and the
Common Crawl resource read from the environment (endpoints are configuration, never literals in code)."""

from __future__ import annotations

import os

import dagster as dg

from assets.commoncrawl import (
    cc_outlet_queue,
    cc_outlet_stories,
    cc_outlets_without_error,
    ccnews_daily_job,
    ccnews_stories,
    ccnews_yesterday_schedule,
)
from orchestration.env import env_or
from resources.commoncrawl import CommonCrawlResource
from topicmap.archive.cc_settings import DEFAULT_DATA_URL, DEFAULT_INDEX_URL


def _env_list(name: str) -> list[str]:
    """A comma- or whitespace-separated list from the environment (outlets, crawls, networks)."""
    return [item for item in os.environ.get(name, "").replace(",", " ").split() if item]


def commoncrawl_resource_from_env() -> CommonCrawlResource:
    """TOPICMAP_CC_INDEX_URL (with {collection}), TOPICMAP_CC_DATA_URL, TOPICMAP_CC_COLLECTIONS,
    TOPICMAP_CC_OUTLETS, TOPICMAP_CC_ALLOW_NETWORKS, TOPICMAP_CC_WORKERS; defaults: Common Crawl's endpoints."""
    return CommonCrawlResource(
        index_url=env_or("TOPICMAP_CC_INDEX_URL", DEFAULT_INDEX_URL),
        data_url=env_or("TOPICMAP_CC_DATA_URL", DEFAULT_DATA_URL),
        collections=_env_list("TOPICMAP_CC_COLLECTIONS"),
        outlets=_env_list("TOPICMAP_CC_OUTLETS"),
        allow_networks=_env_list("TOPICMAP_CC_ALLOW_NETWORKS"),
        workers=int(os.environ.get("TOPICMAP_CC_WORKERS") or 1),
    )


commoncrawl_defs = dg.Definitions(
    assets=[cc_outlet_queue, cc_outlet_stories, ccnews_stories],
    asset_checks=[cc_outlets_without_error],
    jobs=[ccnews_daily_job],
    schedules=[ccnews_yesterday_schedule],
    resources={"commoncrawl": commoncrawl_resource_from_env()},
)
