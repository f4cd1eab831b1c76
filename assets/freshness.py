"""Freshness policies of the stages that run on a cadence, shown on each asset's page and evaluated by the daemon.

A policy only says something while its stage has a cadence: click refetches run while a declared topic's
publication days still have a 3-day or 30-day stage to come, snapshots are refreshed while a topic is running or
its clicks are still arriving. Once every declared topic is over, a policy would report the asset as failing for
ever although nothing is late, so none is set (the code location reads the topics file when it loads, as the
partitions do; reload it after editing the file). CC-NEWS is loaded day by day by the ``ccnews_yesterday``
schedule whenever it is used.
"""

from datetime import UTC, date, datetime, timedelta

import dagster as dg

from assets.partitions import declared_topic_dates, topics_file_path

#: a publication day's 3-day stage is due 3 days after the day ends, its 30-day stage 30 days after
FIRST_CLICK_STAGE = timedelta(days=1 + 3)
LAST_CLICK_STAGE = timedelta(days=1 + 30)
#: the refetch sensors request each day's runs as they fall due, every day: a day without a click run is late
CLICKS_WARN_AFTER = timedelta(hours=26)
CLICKS_FAIL_AFTER = timedelta(hours=48)
#: the weekly_snapshots schedule runs Mondays at 05:00 UTC; its snapshots are written by 07:00
WEEKLY_SNAPSHOT_DEADLINE = "0 7 * * 1"
#: the ccnews_yesterday schedule loads the day before at 06:00 UTC (a day is a few GB): done by noon
CCNEWS_DEADLINE = "0 12 * * *"


def _today() -> date:
    return datetime.now(UTC).date()


def click_freshness(spans: list[tuple[date, date]], today: date) -> dg.FreshnessPolicy | None:
    """Click totals must have materialized within two days while some declared topic's days have a stage due
    (from its start + 4 days to its end + 31 days); None otherwise."""
    if not any(start + FIRST_CLICK_STAGE <= today <= end + LAST_CLICK_STAGE for start, end in spans):
        return None
    return dg.FreshnessPolicy.time_window(fail_window=CLICKS_FAIL_AFTER, warn_window=CLICKS_WARN_AFTER)


def snapshot_freshness(spans: list[tuple[date, date]], today: date) -> dg.FreshnessPolicy | None:
    """A snapshot must have been written in the week before each Monday 07:00 UTC while some declared topic is
    running or still gets clicks (its start to its end + 31 days); None otherwise."""
    if not any(start <= today <= end + LAST_CLICK_STAGE for start, end in spans):
        return None
    return dg.FreshnessPolicy.cron(
        deadline_cron=WEEKLY_SNAPSHOT_DEADLINE, lower_bound_delta=timedelta(days=7)
    )


#: a CC-NEWS day must have been loaded in the 24 hours before each noon (UTC)
CCNEWS_FRESHNESS = dg.FreshnessPolicy.cron(
    deadline_cron=CCNEWS_DEADLINE, lower_bound_delta=timedelta(hours=24)
)

_SPANS = declared_topic_dates(topics_file_path())
CLICKS_FRESHNESS = click_freshness(_SPANS, _today())
SNAPSHOTS_FRESHNESS = snapshot_freshness(_SPANS, _today())
