"""Common Crawl's definitions: the outlet queue, CC-NEWS by day, the schedule that loads yesterday, and the
Common Crawl resource read from the environment (endpoints are configuration, never literals in code)."""

from __future__ import annotations

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
from topicmap import settings
from topicmap.archive.cc_settings import DEFAULT_DATA_URL, DEFAULT_INDEX_URL


def commoncrawl_resource_from_env() -> CommonCrawlResource:
    """TOPICMAP_CC_INDEX_URL (with {collection}), TOPICMAP_CC_DATA_URL, TOPICMAP_CC_COLLECTIONS,
    TOPICMAP_CC_OUTLETS, TOPICMAP_CC_ALLOW_NETWORKS, TOPICMAP_CC_WORKERS, TOPICMAP_CC_BREADTH; defaults: Common
    Crawl's endpoints."""
    return CommonCrawlResource(
        index_url=env_or(settings.CC_INDEX_URL, DEFAULT_INDEX_URL),
        data_url=env_or(settings.CC_DATA_URL, DEFAULT_DATA_URL),
        collections=settings.CC_COLLECTIONS.items(),
        outlets=settings.CC_OUTLETS.items(),
        allow_networks=settings.CC_ALLOW_NETWORKS.items(),
        workers=settings.CC_WORKERS.integer(),
        breadth=settings.CC_BREADTH.value().strip().lower() in ("1", "true", "yes"),
    )


commoncrawl_defs = dg.Definitions(
    assets=[cc_outlet_queue, cc_outlet_stories, ccnews_stories],
    asset_checks=[cc_outlets_without_error],
    jobs=[ccnews_daily_job],
    schedules=[ccnews_yesterday_schedule],
    resources={"commoncrawl": commoncrawl_resource_from_env()},
)
