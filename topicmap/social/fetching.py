"""The fetch loops of the social stage: the Bit.ly click totals of a range of publication days, and the Facebook
statistics of one topic's stories.

Both write as they go (every ``WRITE_EVERY`` stories), so a run that stops keeps what it already fetched, and
both follow one failure policy:

* an error the API will not get over for the next story either (refused credentials, a rate limit that outlasted
  every retry, a Graph API that is unusable) writes what was fetched and raises :class:`FetchStopped`, which says
  whether retrying the run later can help;
* an error of one story (Bit.ly could not measure it; a URL Facebook cannot measure, recorded as a soft failure)
  is kept with the others and the loop goes on.

The callers (the ``click_totals`` and ``story_statistics`` assets) turn the results into metadata.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

from topicmap.social import refetch
from topicmap.social.bitly import BitlyAuthError, BitlyClient, BitlyError, BitlyRateLimitError
from topicmap.social.clicks import click_window
from topicmap.social.facebook import EngagementResult, FacebookAuthError, FacebookClient, FacebookError
from topicmap.social.store import (
    ClickStory,
    click_rows,
    click_total_row,
    error_kind,
    upsert_click_totals,
    upsert_story_statistics,
    write_click_exports,
)
from topicmap.store.topic_store import TopicStore

WRITE_EVERY = 50
"""Stories fetched between two writes: a failing run keeps what it already fetched."""

log = logging.getLogger(__name__)


class FetchStopped(RuntimeError):
    """The API cannot be used for any further story: what was fetched is written (``written`` stories).
    ``retryable``: a later attempt can succeed (a rate limit passes; refused credentials do not)."""

    def __init__(self, message: str, written: int, retryable: bool) -> None:
        super().__init__(message)
        self.written = written
        self.retryable = retryable


# ---------------------------------------------------------------------------------------------- click totals
@dataclass
class ClickTotals:
    """What one click fetch over ``[first_day, last_day]`` did, and the stored totals of those days after it.

    Days are ISO strings (the asset's partition keys)."""

    stories: Sequence[ClickStory]
    fetched: Counter[str] = field(default_factory=Counter)
    """Stage → stories written."""
    fetched_by_day: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(day, stage) → stories written."""
    not_due: list[int] = field(default_factory=list)
    """Stories with no stage due yet (left alone)."""
    not_due_by_day: Counter[str] = field(default_factory=Counter)
    failed: list[dict[str, Any]] = field(default_factory=list)
    """Stories Bit.ly could not measure: ``{"stories_id", "url", "problem"}``."""
    kept: list[dict[str, Any]] = field(default_factory=list)
    """Stored figures higher than this fetch's, kept (a figure never goes down; see ``upsert_click_totals``)."""
    rows: list[dict[str, Any]] = field(default_factory=list)
    """The stored totals of the days after the fetch (``click_rows``)."""
    exports: dict[date, Path] = field(default_factory=dict)
    """The Parquet file written per day."""

    @property
    def per_day(self) -> dict[str, dict[str, Any]]:
        """Day → ``{"day", "stories", "bitlinks", "clicks_3d", "clicks_30d"}`` summed over the stored rows, for
        the days that have rows (in row order: by day)."""
        days: dict[str, dict[str, Any]] = {}
        for row in self.rows:
            key = row["publish_day"].isoformat()
            day = days.setdefault(
                key, {"day": key, "stories": 0, "bitlinks": 0, "clicks_3d": 0, "clicks_30d": 0}
            )
            day["stories"] += 1
            day["bitlinks"] += row["bitlinks_found"] or 0
            day["clicks_3d"] += row["clicks_3d"] or 0
            day["clicks_30d"] += row["clicks_30d"] or 0
        return days

    def day_rows(self, day: str) -> list[dict[str, Any]]:
        return [row for row in self.rows if row["publish_day"].isoformat() == day]

    def kept_by_day(self) -> Counter[str]:
        """Day → figures kept over a lower fetch."""
        day_of_story = {story.stories_id: story.day.isoformat() for story in self.stories}
        return Counter(day_of_story[figure["stories_id"]] for figure in self.kept)


def fetch_click_totals(
    store: TopicStore,
    client: BitlyClient,
    stories: Sequence[ClickStory],
    days: tuple[date, date],
    requested_stage: str,
    now: datetime,
    logger: logging.Logger = log,
) -> ClickTotals:
    """Fetch and store the clicks of ``stories`` (from ``click_stories`` over ``days``), one stage per story
    (``refetch.stage_for_story``: ``requested_stage`` is "3d", "30d" or "auto"), then write the days' Parquet
    exports and read back their stored totals.

    Raises :class:`FetchStopped` when Bit.ly refuses the token or stays rate-limited (after writing what was
    fetched); a story Bit.ly could not measure is listed in ``failed`` and the others go on."""
    result = ClickTotals(stories)
    pending: dict[str, list[dict[str, Any]]] = {stage: [] for stage in refetch.STAGES}

    def write_pending() -> None:
        for stage, rows in pending.items():
            result.kept.extend(upsert_click_totals(store, stage, rows))
            result.fetched[stage] += len(rows)
            rows.clear()

    for story in stories:
        stage = refetch.stage_for_story(requested_stage, story.story_ts, now)
        if stage is None:
            result.not_due.append(story.stories_id)
            result.not_due_by_day[story.day.isoformat()] += 1
            continue
        try:
            clicks = client.story_clicks(list(story.url_variants), click_window(stage, story.story_ts, now))
        except (BitlyAuthError, BitlyRateLimitError) as exc:
            # The API is unusable for every story now: keep what was fetched and stop with a clear message.
            write_pending()
            written = sum(result.fetched.values())
            raise FetchStopped(
                f"Bit.ly stopped the run after {written} stories: {exc}",
                written,
                retryable=isinstance(exc, BitlyRateLimitError),
            ) from exc
        except BitlyError as exc:
            logger.warning(f"story {story.stories_id} ({story.url}): {exc}")
            result.failed.append({"stories_id": story.stories_id, "url": story.url, "problem": str(exc)})
            continue
        pending[stage].append(click_total_row(stage, story, clicks))
        result.fetched_by_day[story.day.isoformat(), stage] += 1
        if sum(len(rows) for rows in pending.values()) >= WRITE_EVERY:
            write_pending()
    write_pending()
    result.exports = write_click_exports(store, *days)
    result.rows = click_rows(store, *days)
    return result


# ---------------------------------------------------------------------------------------------- story statistics
@dataclass
class StatisticsFetch:
    """What one Facebook fetch of a topic's stories did."""

    measured: int = 0
    """Stories written (a soft failure is written too)."""
    soft_failures: Counter[str] = field(default_factory=Counter)
    """Kind of soft failure (``error_kind``) → stories."""


def fetch_story_statistics(
    store: TopicStore, client: FacebookClient, stories: Sequence[dict[str, Any]]
) -> StatisticsFetch:
    """Ask Facebook about each of ``stories`` (``{"stories_id", "url"}``, from ``stories_needing_statistics``) and
    store the answers, soft failures included.

    Raises :class:`FetchStopped` when the app credentials are refused (not retryable) or the Graph API is
    unusable (retryable), after writing what was fetched."""
    result = StatisticsFetch()
    batch: list[tuple[int, EngagementResult]] = []

    def write_batch() -> None:
        result.measured += upsert_story_statistics(store, batch)
        batch.clear()

    for story in stories:
        try:
            answer = client.fetch_engagement(story["url"])
        except FacebookAuthError as exc:
            write_batch()
            raise FetchStopped(
                f"Facebook refused the configured app credentials; nothing more can be fetched: {exc}",
                result.measured,
                retryable=False,
            ) from exc
        except FacebookError as exc:
            write_batch()
            raise FetchStopped(
                f"the Graph API is unusable right now (after {result.measured} stories): {exc}",
                result.measured,
                retryable=True,
            ) from exc
        if answer.error:
            result.soft_failures[error_kind(answer.error)] += 1
        batch.append((story["stories_id"], answer))
        if len(batch) >= WRITE_EVERY:
            write_batch()
    write_batch()
    return result
