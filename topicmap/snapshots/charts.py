"""Attention over time: stories per day of a timespan as a picture with a real date axis.

The daily counts are drawn as bars, with their 7-day mean as a line (news attention has a weekly rhythm that
hides the trend), on matplotlib's date axis (``AutoDateLocator`` picks days, weeks or months for the span,
``ConciseDateFormatter`` names them without repeating the year). A focus's chart also shows the whole topic's
7-day mean, in grey, so its share of the attention is seen at a glance. Deterministic: the same counts always
give the same bytes (no date or software stamp in the PNG).
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib.dates as mdates
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from topicmap.snapshots.linkmap import _save_png

_BARS = "#9ecae1"
_MEAN = "#08519c"
_TOPIC = "#7f7f7f"
MEAN_DAYS = 7


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
    axes = figure.add_axes((0.07, 0.2 if note else 0.14, 0.9, 0.62 if note else 0.68))
    when = pd.to_datetime(days["day"]).to_numpy(dtype="datetime64[s]")
    counts = days["story_count"].to_numpy(dtype=np.int64)
    if len(when):
        axes.bar(when, counts, width=0.9, color=_BARS, label="stories a day", zorder=2)
        axes.plot(
            when, _rolling_mean(counts), color=_MEAN, linewidth=2, label=f"{MEAN_DAYS}-day mean", zorder=3
        )
        if topic_days is not None and len(topic_days) == len(days):
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
        axes.set_xlim(when[0] - np.timedelta64(12, "h"), when[-1] + np.timedelta64(12, "h"))
        # above the plot, right of the title: never over the bars
        axes.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), ncols=3, fontsize=8, frameon=False)
    axes.set_ylim(bottom=0)
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))  # stories are counted, never fractions
    axes.set_ylabel("stories", fontsize=9)
    axes.tick_params(labelsize=8)
    axes.grid(axis="y", color="#e5e5e5", zorder=0)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)
    figure.text(0.07, 0.95, title, fontsize=11, va="top")
    if note:
        figure.text(0.07, 0.03, note, fontsize=8, color="#555555")
    return _save_png(figure, Path(path))
