"""The social-metrics stage: click totals (+ check and refetch sensors), Facebook statistics, and the API clients.

Settings (environment, read when the code location loads; secrets only as EnvVars, resolved at run time):

* ``TOPICMAP_BITLY_TOKEN`` — Bit.ly access token (required for click_totals runs);
* ``TOPICMAP_BITLY_BASE_URL`` — default the public API ``https://api-ssl.bitly.com``;
* ``TOPICMAP_RAW_STORE_DIR`` — raw Bit.ly answers, default ``TOPICMAP_HOME/raw``;
* ``TOPICMAP_FACEBOOK_APP_ID`` / ``TOPICMAP_FACEBOOK_APP_SECRET`` — Graph API app credentials;
* ``TOPICMAP_FACEBOOK_BASE_URL`` — default ``https://graph.facebook.com/v12.0``.

See docs/social.md; the demo's stand-in settings are in orchestration/social_demo.py.
"""

from __future__ import annotations

import dagster as dg

from assets.social import click_totals, clicks_30d_not_below_3d, story_statistics
from orchestration.env import env_or
from resources.social import BitlyResource, FacebookResource
from sensors.clicks import click_refetch_3d, click_refetch_30d
from sensors.statistics import statistics_as_stories_join
from topicmap import settings
from topicmap.social import bitly, facebook


def social_resources() -> dict[str, dg.ConfigurableResource]:
    """The two API clients, configured from the environment."""
    return {
        "bitly": BitlyResource(
            token=env_or(settings.BITLY_TOKEN, ""),
            base_url=env_or(settings.BITLY_BASE_URL, bitly.DEFAULT_BASE_URL),
            raw_store_dir=env_or(settings.RAW_STORE_DIR, ""),
        ),
        "facebook": FacebookResource(
            app_id=env_or(settings.FACEBOOK_APP_ID, ""),
            app_secret=env_or(settings.FACEBOOK_APP_SECRET, ""),
            base_url=env_or(settings.FACEBOOK_BASE_URL, facebook.DEFAULT_BASE_URL),
        ),
    }


social_defs = dg.Definitions(
    assets=[click_totals, story_statistics],
    asset_checks=[clicks_30d_not_below_3d],
    sensors=[click_refetch_3d, click_refetch_30d, statistics_as_stories_join],
    resources=social_resources(),
)
