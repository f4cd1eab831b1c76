"""Attention over time: stories per day of a timespan as a picture with a real date axis.

The daily counts are drawn as bars, with their 7-day mean as a line (news attention has a weekly rhythm that
hides the trend), on matplotlib's date axis (``AutoDateLocator`` picks days, weeks or months for the span,
``ConciseDateFormatter`` names them without repeating the year). A focus's chart also shows the whole topic's
7-day mean, in grey, so its share of the attention is seen at a glance. Deterministic: the same counts always
give the same bytes (no date or software stamp in the PNG).

The days are the publisher's calendar days (the axis says so). A timespan longer than ``DAILY_UP_TO`` days is
drawn by week (Monday to Sunday), one longer than ``WEEKLY_UP_TO`` by month: daily bars of a 16-year span would
be invisible. A first or last week or month the timespan only partly covers is drawn lighter and named under
the chart. ``render_focal_set_chart`` draws the foci of one focal set together, one line each.
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib.dates as mdates
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from topicmap.snapshots.linkmap import save_png

_BARS = "#9ecae1"
_MEAN = "#08519c"
_TOPIC = "#7f7f7f"
MEAN_DAYS = 7
DAILY_UP_TO = 180
WEEKLY_UP_TO = 3 * 366
#: the x axis label: which day a story counts on
DAY_BASIS = "publisher's local day (the page's own UTC offset; UTC where unknown)"
_LINES = ("#08519c", "#d95f02", "#1b9e77", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d")


def binned(days: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    """``days`` (day, story_count: every day of a timespan) by the unit its length calls for: ("day", days) or
    ("week" / "month", frame of day (the bin's first day), story_count, days_covered, partial)."""
    if len(days) <= DAILY_UP_TO:
        return "day", days
    unit = "week" if len(days) <= WEEKLY_UP_TO else "month"
    when = pd.to_datetime(days["day"])
    start = (
        (when - pd.to_timedelta(when.dt.day_of_week, unit="D"))
        if unit == "week"
        else when.dt.to_period("M").dt.start_time
    )
    grouped = (
        pd.DataFrame({"day": start.to_numpy(), "story_count": days["story_count"].to_numpy(), "n": 1})
        .groupby("day", sort=True)
        .sum()
        .reset_index()
    )
    full = 7 if unit == "week" else pd.to_datetime(grouped["day"]).dt.days_in_month.to_numpy()
    grouped["partial"] = grouped["n"].to_numpy() < full
    return unit, grouped.rename(columns={"n": "days_covered"})


def _rolling_mean(counts: np.ndarray, days: int = MEAN_DAYS) -> np.ndarray:
    """The mean of each day and the days before it (fewer at the start: no made-up zeros before the data)."""
    sums = np.cumsum(np.concatenate(([0.0], counts.astype(float))))
    ends = np.arange(1, len(counts) + 1)
    starts = np.maximum(ends - days, 0)
    return (sums[ends] - sums[starts]) / (ends - starts)


def render_attention_chart(
    days: pd.DataFrame,
    path: str | os.PathLike[str],
    title: str,
    topic_days: pd.DataFrame | None = None,
    note: str = "",
) -> Path:
    """Draw ``days`` (day, story_count: every day of a timespan) and return the PNG's path. ``topic_days``
    (the whole topic's, same days) adds the topic's 7-day mean for comparison; ``note`` is printed under it."""
    figure = Figure(figsize=(9, 3.4), dpi=100, facecolor="white")
    FigureCanvasAgg(figure)
    unit, bins = binned(days)
    partial = bins["partial"].to_numpy(dtype=bool) if unit != "day" else np.zeros(len(bins), dtype=bool)
    if partial.any():
        first_last = ", ".join(str(pd.Timestamp(d).date()) for d in bins["day"][partial])
        note = f"{note + '; ' if note else ''}partial {unit}s (lighter): {first_last}"
    axes = figure.add_axes((0.07, 0.24 if note else 0.2, 0.9, 0.58 if note else 0.62))
    when = pd.to_datetime(bins["day"]).to_numpy(dtype="datetime64[s]")
    counts = bins["story_count"].to_numpy(dtype=np.int64)
    width = {"day": 0.9, "week": 6, "month": 27}[unit]
    if len(when):
        axes.bar(
            when[~partial],
            counts[~partial],
            width=width,
            align="edge" if unit != "day" else "center",
            color=_BARS,
            label=f"stories a {unit}",
            zorder=2,
        )
        if partial.any():
            axes.bar(
                when[partial], counts[partial], width=width, align="edge", color=_BARS, alpha=0.45, zorder=2
            )
        if unit == "day":
            axes.plot(
                when, _rolling_mean(counts), color=_MEAN, linewidth=2, label=f"{MEAN_DAYS}-day mean", zorder=3
            )
        if unit == "day" and topic_days is not None and len(topic_days) == len(days):
            topic_counts = topic_days["story_count"].to_numpy(dtype=np.int64)
            axes.plot(
                when,
                _rolling_mean(topic_counts),
                color=_TOPIC,
                linewidth=1.5,
                linestyle="--",
                label=f"whole topic, {MEAN_DAYS}-day mean",
                zorder=1,
            )
        locator = mdates.AutoDateLocator(minticks=4, maxticks=10)
        axes.xaxis.set_major_locator(locator)
        axes.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
        pad = np.timedelta64(12, "h") if unit == "day" else np.timedelta64(width, "D")
        axes.set_xlim(when[0] - pad, when[-1] + pad)
        # above the plot, right of the title: never over the bars
        axes.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), ncols=3, fontsize=8, frameon=False)
    axes.set_xlabel(DAY_BASIS if unit == "day" else f"{unit} of the {DAY_BASIS}", fontsize=8)
    axes.set_ylim(bottom=0)
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))  # stories are counted, never fractions
    axes.set_ylabel("stories published", fontsize=9)
    return _finish(figure, axes, path, title, note)


def render_focal_set_chart(
    foci: dict[str, pd.DataFrame], path: str | os.PathLike[str], title: str, note: str = ""
) -> Path:
    """The foci of one focal set on one chart (``foci``: focus name -> its overall days, same days each): a line
    per focus, the 7-day mean of its stories per day (or its stories per week or month on a long span)."""
    figure = Figure(figsize=(9, 3.4), dpi=100, facecolor="white")
    FigureCanvasAgg(figure)
    axes = figure.add_axes((0.07, 0.24 if note else 0.2, 0.9, 0.58 if note else 0.62))
    unit = "day"
    for number, (name, days) in enumerate(sorted(foci.items())):
        unit, bins = binned(days)
        when = pd.to_datetime(bins["day"]).to_numpy(dtype="datetime64[s]")
        counts = bins["story_count"].to_numpy(dtype=np.int64)
        values = _rolling_mean(counts) if unit == "day" else counts
        axes.plot(when, values, color=_LINES[number % len(_LINES)], linewidth=1.8, label=name, zorder=2)
    if foci:
        locator = mdates.AutoDateLocator(minticks=4, maxticks=10)
        axes.xaxis.set_major_locator(locator)
        axes.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
        axes.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), ncols=4, fontsize=8, frameon=False)
    axes.set_ylim(bottom=0)
    axes.set_ylabel(f"stories, {MEAN_DAYS}-day mean" if unit == "day" else f"stories a {unit}", fontsize=9)
    axes.set_xlabel(DAY_BASIS if unit == "day" else f"{unit} of the {DAY_BASIS}", fontsize=8)
    return _finish(figure, axes, path, title, note)


def _finish(figure: Figure, axes: Axes, path: str | os.PathLike[str], title: str, note: str) -> Path:
    """The charts' common frame (light grid, no top or right spine, the title above, the note below), saved."""
    axes.tick_params(labelsize=8)
    axes.grid(axis="y", color="#e5e5e5", zorder=0)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)
    figure.text(0.07, 0.95, title, fontsize=11, va="top")
    if note:
        figure.text(0.07, 0.03, note, fontsize=8, color="#555555")
    return save_png(figure, Path(path))
