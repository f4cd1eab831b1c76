"""A topic's timespans: overall, monthly, weekly and custom day ranges (Media Cloud's ``Snapshot.pm``).

Dates are whole UTC days. Internally every timespan is the half-open interval ``[start_date, end_date)``:
``end_date`` is EXCLUSIVE (``last_date`` is the inclusive last day), whereas the topic's own ``end_date`` and
custom ranges are given inclusive, as users write them. Monthly timespans start on the 1st, weekly ones on
Monday. Media Cloud lets the first week start before the topic and the last week/month run past it; here the
first and last monthly/weekly timespans are CLIPPED to the topic's dates so that no timespan ever lies outside
the topic. Their ``key`` still names the calendar period (``weekly_2026-01-26`` is the week starting Monday
2026-01-26, even if the topic only starts on the Wednesday), so weeks and months line up across topics.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

import pandas as pd

from topicmap.snapshots.names import PERIODS

ONE_DAY = timedelta(days=1)


@dataclass(frozen=True)
class Timespan:
    """One timespan: the half-open UTC day range ``[start_date, end_date)`` (``end_date`` is exclusive)."""

    period: str
    start_date: date
    end_date: date
    key: str  # unique, file-name safe: "overall", "monthly_2026-02-01", "weekly_2026-01-26", "custom_<slug>"
    name: str  # human label: "overall", "2026-02", "week of 2026-01-26", or the custom range's own name

    @property
    def last_date(self) -> date:
        """The inclusive last day of the timespan."""
        return self.end_date - ONE_DAY

    @property
    def day_count(self) -> int:
        """The days the timespan covers."""
        return (self.end_date - self.start_date).days

    @property
    def partial(self) -> bool:
        """A weekly or monthly timespan cut by the topic's first or last day: fewer days than its calendar week
        or month, so its counts are not comparable with a whole one's (overall and custom: never)."""
        if self.period == "weekly":
            return self.day_count < 7
        if self.period == "monthly":
            return self.day_count < calendar.monthrange(self.start_date.year, self.start_date.month)[1]
        return False

    def window_ns(self) -> tuple[int, int]:
        """The window as UTC nanosecond timestamps ``[lo, hi)``, comparable with publish dates."""
        return _day_ns(self.start_date), _day_ns(self.end_date)


def _day_ns(day: date) -> int:
    return int(pd.Timestamp(day.year, day.month, day.day, tz="UTC").value)


def as_date(value: Any, what: str) -> date:
    """Accept a date, a datetime / Timestamp (its UTC day) or an ISO string; reject anything else clearly."""
    if isinstance(value, pd.Timestamp | datetime):
        ts = pd.Timestamp(value)
        if ts.tzinfo is not None:
            ts = ts.tz_convert("UTC")
        return ts.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value.strip()[:10])
        except ValueError:
            pass
    raise ValueError(f"{what}: expected a date (YYYY-MM-DD), got {value!r}")


def _custom_range(item: Any) -> tuple[str, date, date]:
    """A custom range is ``(name, start, end)`` or a mapping with name / start_date / end_date (end inclusive)."""
    if isinstance(item, Mapping):
        try:
            name, start, end = item["name"], item["start_date"], item["end_date"]
        except KeyError as missing:
            raise ValueError(f"custom timespan {dict(item)!r} lacks {missing}") from None
    else:
        try:
            name, start, end = item
        except (TypeError, ValueError):
            raise ValueError(f"custom timespan must be (name, start_date, end_date), got {item!r}") from None
    name = str(name).strip()
    start_day = as_date(start, f"custom timespan {name!r} start")
    end_day = as_date(end, f"custom timespan {name!r} end")
    if end_day < start_day:
        raise ValueError(f"custom timespan {name!r} ends ({end_day}) before it starts ({start_day})")
    return name, start_day, end_day


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def build_timespans(
    start_date: Any,
    end_date: Any,
    periods: Sequence[str] = PERIODS,
    custom: Iterable[Any] = (),
) -> list[Timespan]:
    """The topic's timespans, in the order of ``periods`` and by start date within a period.

    ``start_date`` and ``end_date`` are the topic's dates, both INCLUSIVE. Weekly timespans step +7 days from
    the Monday on or before the start while the week starts before the end; monthly ones step from the 1st of
    the start's month to the 1st of the month of (start + 32 days), as Media Cloud does. The first and last of
    them are clipped to the topic's dates. Custom ranges partly outside the topic are clipped; one entirely
    outside is a configuration error and raises ``ValueError``.
    """
    topic_start = as_date(start_date, "topic start_date")
    topic_last = as_date(end_date, "topic end_date")
    if topic_last < topic_start:
        raise ValueError(f"topic end_date {topic_last} is before its start_date {topic_start}")
    if isinstance(periods, str):
        periods = periods.split()  # Media Cloud's topics.snapshot_periods is space separated
    unknown = [p for p in periods if p not in PERIODS]
    if unknown:
        raise ValueError(f"unknown snapshot period(s) {unknown}; expected some of {list(PERIODS)}")
    if len(set(periods)) != len(periods):
        raise ValueError(f"snapshot periods repeat: {list(periods)}")
    topic_end = topic_last + ONE_DAY

    def clipped(period: str, start: date, end: date, key: str, name: str) -> Timespan:
        return Timespan(period, max(start, topic_start), min(end, topic_end), key, name)

    timespans: list[Timespan] = []
    for period in periods:
        if period == "overall":
            timespans.append(Timespan("overall", topic_start, topic_end, "overall", "overall"))
        elif period == "monthly":
            month = topic_start.replace(day=1)
            while month < topic_end:
                following = (month + timedelta(days=32)).replace(day=1)
                timespans.append(
                    clipped(
                        "monthly", month, following, f"monthly_{month.isoformat()}", month.strftime("%Y-%m")
                    )
                )
                month = following
        elif period == "weekly":
            monday = topic_start - timedelta(days=topic_start.weekday())
            while monday < topic_end:
                following = monday + timedelta(days=7)
                key = f"weekly_{monday.isoformat()}"
                timespans.append(clipped("weekly", monday, following, key, f"week of {monday.isoformat()}"))
                monday = following
        else:
            ranges = sorted((_custom_range(item) for item in custom), key=lambda r: (r[1], r[2], r[0]))
            seen: dict[str, str] = {}
            for name, start, last in ranges:
                if last < topic_start or start > topic_last:
                    raise ValueError(
                        f"custom timespan {name!r} ({start}..{last}) lies entirely outside the topic's dates "
                        f"({topic_start}..{topic_last})"
                    )
                slug = _slug(name) or f"{start.isoformat()}_{last.isoformat()}"
                key = f"custom_{slug}"
                if key in seen:
                    raise ValueError(f"custom timespans {seen[key]!r} and {name!r} have the same key {key!r}")
                seen[key] = name
                timespans.append(clipped("custom", start, last + ONE_DAY, key, name or key))
    return timespans
