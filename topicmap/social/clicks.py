"""Bit.ly click totals: when to fetch them, over which window, and how to add them up.

Media Cloud (its Bit.ly processing) fetched each story's Bit.ly clicks twice, "3 and 30 days" after the story's
timestamp, and summed the daily clicks of every bitlink found for the story's URL variants. This module holds the
pure rules; the HTTP client lives in :mod:`topicmap.social.bitly`.

Differences from Media Cloud, on purpose:

* The delays are exactly 3 and 30 days. Media Cloud's example configuration used 295200 s and 2952000 s, which
  its comments called "3 days" and "30 days" but are really 3.4 and 34.2 days.
* Media Cloud rejected a publish date ``<= 2008-01-01`` and ``>= now``; here a date *before* 2008-01-01 or *after*
  ``now`` is rejected (the boundary instants themselves are valid dates), as the documented rule says.
* When the same day appears more than once for one bitlink (overlapping fetches, repeated entries), Media Cloud let
  the later entry overwrite the earlier one, so the result depended on response order. Here the *largest* value is
  kept: a day's count only grows while the day is still being clicked, so the largest figure is the most complete
  observation, and the result no longer depends on order (a recomputation from raw answers is deterministic).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

STAGE_3D = "3d"
STAGE_30D = "30d"
STAGE_DELAYS: dict[str, timedelta] = {STAGE_3D: timedelta(days=3), STAGE_30D: timedelta(days=30)}
"""Stage name → delay after the story timestamp at which the clicks are (re)fetched."""

EARLIEST_VALID_PUBLISH_DATE = datetime(2008, 1, 1, tzinfo=UTC)
"""Publish dates before this are not trusted (Media Cloud started in 2008); the collect date is used instead."""

WINDOW_BEFORE_STORY = timedelta(days=2)
"""A click window starts this long before the story timestamp (Media Cloud's stats window)."""


def as_utc(value: datetime, name: str = "datetime") -> datetime:
    """Return ``value`` as a timezone-aware UTC datetime; a naive datetime is taken to be UTC already."""
    if not isinstance(value, datetime):
        raise TypeError(f"{name} must be a datetime, got {type(value).__name__}: {value!r}")
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def story_timestamp(publish_date: datetime | None, collect_date: datetime, now: datetime) -> datetime:
    """The instant the click schedule counts from (UTC).

    The publish date, unless it is missing, before 2008-01-01 or in the future relative to ``now``; then the
    collect date, which the crawler sets soon after a story appears online (Media Cloud's Bit.ly processing notes).
    """
    collect_utc = as_utc(collect_date, "collect_date")
    now_utc = as_utc(now, "now")
    if publish_date is None:
        return collect_utc
    publish_utc = as_utc(publish_date, "publish_date")
    if publish_utc < EARLIEST_VALID_PUBLISH_DATE or publish_utc > now_utc:
        return collect_utc
    return publish_utc


def check_stage(stage: str) -> str:
    """``stage`` if it is a click stage ("3d", "30d"); a ValueError naming the stages otherwise."""
    if stage not in STAGE_DELAYS:
        raise ValueError(f"unknown click stage {stage!r}; expected one of {sorted(STAGE_DELAYS)}")
    return stage


def click_window(stage: str, story_ts: datetime, now: datetime) -> tuple[datetime, datetime]:
    """The days to fetch for a stage: from 2 days before the story (Media Cloud's window start) to the stage's
    cutoff, clipped to ``now``. A due stage is never clipped, so the request (and its raw-store key) is the same
    whenever it runs, and a re-run can be recomputed from the stored answers. If ``now`` is before the window
    start (a story timestamp in the future), the window is empty: start == end."""
    start = as_utc(story_ts, "story_ts") - WINDOW_BEFORE_STORY
    end = min(as_utc(story_ts) + STAGE_DELAYS[check_stage(stage)], as_utc(now, "now"))
    return start, max(start, end)


def parse_click_entries(response: Mapping[str, Any]) -> list[tuple[date, int]]:
    """The ``(day, clicks)`` entries of one raw Bit.ly clicks answer, in answer order (repeats kept).

    Accepts the v3 shape ``{"data": {"link_clicks": [{"clicks": N, "dt": epoch}, ...]}}`` (``dt`` is the start of
    the day in the requested time zone, Etc/GMT here, so its UTC date is the day) and, for convenience, the v4 shape
    ``{"link_clicks": [{"clicks": N, "date": "2024-01-02T00:00:00+0000"}, ...]}``.
    """
    if not isinstance(response, Mapping):
        raise ValueError(f"a clicks answer must be a JSON object, got {type(response).__name__}")
    data = response.get("data", response)
    entries = data.get("link_clicks") if isinstance(data, Mapping) else None
    if not isinstance(entries, list):
        raise ValueError(f"a clicks answer needs a 'link_clicks' list; got keys {sorted(data or {})}")
    parsed: list[tuple[date, int]] = []
    for entry in entries:
        if not isinstance(entry, Mapping) or "clicks" not in entry:
            raise ValueError(f"a link_clicks entry needs 'clicks' and 'dt' (or 'date'): {entry!r}")
        clicks = entry["clicks"]
        if isinstance(clicks, bool) or not isinstance(clicks, int) or clicks < 0:
            raise ValueError(f"clicks must be a non-negative integer: {entry!r}")
        if "dt" in entry:
            day = datetime.fromtimestamp(int(entry["dt"]), tz=UTC).date()
        elif "date" in entry:
            day = as_utc(_parse_iso(str(entry["date"])), "date").date()
        else:
            raise ValueError(f"a link_clicks entry needs 'dt' (or 'date'): {entry!r}")
        parsed.append((day, clicks))
    return parsed


def _parse_iso(text: str) -> datetime:
    # Python 3.11 fromisoformat handles "+0000" and "Z" suffixes.
    try:
        return datetime.fromisoformat(text)
    except ValueError as exc:
        raise ValueError(f"unparseable click date {text!r}") from exc


def merge_day_counts(day_map: dict[date, int], entries: Iterable[tuple[date, int]]) -> dict[date, int]:
    """Add entries to a per-bitlink day map in place, counting a repeated day once (largest value kept)."""
    for day, clicks in entries:
        previous = day_map.get(day)
        if previous is None or clicks > previous:
            day_map[day] = clicks
    return day_map


def sum_day_maps(day_maps: Iterable[Mapping[date, int]]) -> dict[date, int]:
    """Sum several day → clicks maps (one per bitlink) into one, sorted by day."""
    total: dict[date, int] = {}
    for day_map in day_maps:
        for day, clicks in day_map.items():
            total[day] = total.get(day, 0) + clicks
    return dict(sorted(total.items()))


def canonical_bitlink(bitlink: str) -> str:
    """``bit.ly/abc``, ``http://bit.ly/abc`` and ``https://bit.ly/abc`` are one link: return ``http://bit.ly/abc``.

    (http is the form v3 lookups answered with in ``aggregate_link``.) A bare hash ``abc`` is taken as a bit.ly id.
    """
    text = bitlink.strip() if isinstance(bitlink, str) else ""
    if not text:
        raise ValueError(f"a bitlink must be a non-empty string, got {bitlink!r}")
    for prefix in ("https://", "http://"):
        if text.lower().startswith(prefix):
            text = text[len(prefix) :]
            break
    if "/" not in text:
        text = f"bit.ly/{text}"
    host, _, path = text.partition("/")
    return f"http://{host.lower()}/{path}"


def clicks_until(day_map: Mapping[date, int], cutoff: datetime) -> int:
    """Clicks on the days that began before ``cutoff`` (UTC), e.g. ``story_ts + 3 days`` for the 3-day total.

    Bit.ly counts per whole day, so the day containing the cutoff is counted in full (it began before the cutoff);
    a cutoff at exactly midnight excludes the day starting then.
    """
    cutoff_utc = as_utc(cutoff, "cutoff")
    return sum(
        clicks for day, clicks in day_map.items() if datetime.combine(day, time.min, tzinfo=UTC) < cutoff_utc
    )
