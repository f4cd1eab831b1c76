"""Dagster beta APIs this code location uses on purpose: their BetaWarning silenced where each is called.

Dagster is pinned exactly (pyproject.toml: the Dagster family as one unit), so a beta API cannot change under
us without an upgrade that the tests then run against. Every process that loads the code location (webserver,
daemon, each run's launcher and step, sensor ticks) would otherwise print the same warnings into its logs:
noise that buries real warnings. Only ``BetaWarning`` and only during the one call are silenced; any other
warning, and this one from anywhere else, still shows.

In use: ``@asset(backfill_policy=...)`` (a ``click_totals`` backfill runs up to 31 days per run, a
``ccnews_stories`` backfill one day per run, a ``cluster_weeks`` backfill one run per range of topic weeks,
a topic's weeks being one range) and
``AutomationConditionSensorDefinition(use_user_code_server=True)`` (``cluster_weeks_automation`` evaluates a
Python condition, which only the code server can run).
"""

import warnings
from collections.abc import Callable
from typing import Any, TypeVar

import dagster as dg

T = TypeVar("T")


def beta_api(make: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``make(*args, **kwargs)`` without its BetaWarning: a beta class built, or a decorator made with a beta
    parameter (Dagster warns when ``dg.asset(backfill_policy=...)`` is called, not when it decorates)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=dg.BetaWarning)
        return make(*args, **kwargs)
