"""Pictures of clusters a person can read at 1600 px wide: a stream graph, the mutation graph, the SSE curve.

Time is drawn as time: weeks sit on a date axis (2010-08-09 and 2011-08-08 a year apart, whatever lies
between), weeks without stories show as gaps, and the date labels are thinned until no two of them overlap.
Labels come from each cluster's top terms (stop words of the stories' languages and newswire boilerplate
removed, see ``model.top_terms``) or, failing those, its most central title; a cluster label that would cover
another is left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from topicmap.clusters.model import KChoice

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.text import Text
    from matplotlib.transforms import Bbox

#: every picture is this many pixels wide (16 inches at 100 dpi)
WIDTH_PX = 1600
DPI = 100
#: the most date labels an axis starts with; fewer when they would overlap
MAX_DATE_TICKS = 14
#: pixels kept free between two labels
LABEL_GAP_PX = 4
#: a week is drawn this wide around its Monday where it stands alone (a stream of one week)
HALF_WEEK = timedelta(days=3.5)


def _figure(height_inches: float) -> tuple[Figure, Axes]:
    """A figure WIDTH_PX wide on its own Agg canvas (not pyplot's: nothing global to close or to leak)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(WIDTH_PX / DPI, height_inches), dpi=DPI)
    FigureCanvasAgg(figure)
    return figure, figure.subplots()


def _colour(cluster: int):  # noqa: ANN202
    import matplotlib

    palette = matplotlib.colormaps["tab20"]
    return palette((cluster * 2) % 20 + (cluster // 10) % 2)


def batch_dates(batches: Sequence[str]) -> list[date]:
    """The day each batch key names (weekly batches are keyed by their Monday, YYYY-MM-DD)."""
    days = []
    for batch in batches:
        try:
            days.append(date.fromisoformat(str(batch)))
        except ValueError as error:
            raise ValueError(
                f"batch {batch!r} is not a date (YYYY-MM-DD): it cannot be placed in time"
            ) from error
    return days


def boxes_overlap(first: Bbox, second: Bbox, gap: float = LABEL_GAP_PX) -> bool:
    """Whether two boxes (pixels) overlap or come closer than ``gap`` side by side."""
    return (
        first.x0 < second.x1 + gap
        and second.x0 < first.x1 + gap
        and first.y0 < second.y1
        and second.y0 < first.y1
    )


def _any_overlap(boxes: Sequence[Bbox]) -> bool:
    return any(boxes_overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


def date_labels(axes: Axes) -> list[Text]:
    """The date labels the x axis shows (its tick labels and the offset, e.g. the year, beside them)."""
    shown = [label for label in axes.get_xticklabels() if label.get_visible() and label.get_text()]
    offset = axes.xaxis.get_offset_text()
    return shown + ([offset] if offset.get_visible() and offset.get_text() else [])


def _date_axis(figure: Figure, axes: Axes, first: date, last: date) -> None:
    """Dates on the x axis from ``first`` to ``last`` (half a week of margin): matplotlib's automatic date
    ticks with concise labels, their number lowered until no two labels overlap (a long topic shows years, a
    short one months or weeks). Call once everything else is drawn: the layout decides the room labels have."""
    import matplotlib.dates as mdates

    axes.set_xlim(mdates.date2num(first - HALF_WEEK), mdates.date2num(last + HALF_WEEK))
    max_ticks = MAX_DATE_TICKS
    while True:
        # at least five ticks where they fit: a four-month topic is labelled every two weeks, not by month
        locator = mdates.AutoDateLocator(minticks=min(5, max_ticks), maxticks=max_ticks)
        axes.xaxis.set_major_locator(locator)
        axes.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
        figure.tight_layout()
        figure.draw_without_rendering()
        boxes = [label.get_window_extent() for label in date_labels(axes)]
        if not _any_overlap(boxes) or max_ticks <= 2:
            return
        max_ticks -= 2


def _stream_grid(table: pd.DataFrame) -> tuple[list[date], list[int], np.ndarray]:
    """Every week from the first batch to the last (weeks without stories as zeros, so gaps stay gaps), the
    clusters, and stories per cluster x week."""
    batches = sorted(table["batch"].astype(str).unique().tolist())
    clusters = sorted(table["cluster"].astype(int).unique().tolist())
    days = batch_dates(batches)
    weeks = sorted(set(days) | set(pd.date_range(days[0], days[-1], freq="7D").date)) if days else []
    columns = [d.isoformat() for d in weeks]
    grid = (
        table.assign(batch=table["batch"].astype(str))
        .pivot_table(index="cluster", columns="batch", values="stories", aggfunc="sum", fill_value=0)
        .reindex(index=clusters, columns=columns, fill_value=0)
        .to_numpy(dtype=float)
    )
    return weeks, clusters, grid


def stream_figure(table: pd.DataFrame, title: str) -> Figure:
    """Stories per cluster per batch as a stream graph (layers around a centre line) on a date axis, each layer
    named at its widest point. ``table``: batch (a Monday, YYYY-MM-DD), cluster, stories, label (the label of that
    cluster in that batch)."""
    import matplotlib.dates as mdates

    weeks, clusters, grid = _stream_grid(table)
    figure, axes = _figure(8)
    axes.set_title(title, fontsize=14)
    if not weeks or grid.sum() == 0:
        axes.text(0.5, 0.5, "no clustered stories yet", ha="center", va="center", fontsize=16)
        axes.set_axis_off()
        figure.tight_layout()
        return figure
    x = mdates.date2num(weeks)
    if len(weeks) == 1:  # a stream needs two points: the one week is a short band around its Monday
        x = mdates.date2num([weeks[0] - HALF_WEEK / 2, weeks[0] + HALF_WEEK / 2])
        grid = np.repeat(grid, 2, axis=1)
    polys = axes.stackplot(
        x, grid, baseline="wiggle" if len(weeks) > 2 else "sym", colors=[_colour(c) for c in clusters]
    )
    axes.set_yticks([])
    axes.set_xlabel("week; the width of a band is the cluster's stories that week", fontsize=11)
    for side in ("left", "right", "top"):
        axes.spines[side].set_visible(False)
    _date_axis(figure, axes, weeks[0], weeks[-1])
    _name_layers(figure, axes, table, weeks, clusters, grid, x, polys)
    return figure


def _name_layers(
    figure: Figure,
    axes: Axes,
    table: pd.DataFrame,
    weeks: list[date],
    clusters: list[int],
    grid: np.ndarray,
    x: np.ndarray,
    polys: list,
) -> None:
    """Each layer's label at its widest point, widest layers first; a label that would cover one already placed
    or leave the picture is left out."""
    total = grid.sum(axis=0).max()
    renderer = figure.canvas.get_renderer()
    frame = axes.get_window_extent(renderer)
    placed: list = []
    for layer in np.argsort(-grid.max(axis=1), kind="stable"):
        cluster, poly = clusters[layer], polys[layer]
        peak = int(grid[layer].argmax())
        if grid[layer, peak] < 0.04 * total:  # too thin to carry a readable label
            continue
        vertices = poly.get_paths()[0].vertices
        at_peak = vertices[np.isclose(vertices[:, 0], x[peak])][:, 1]
        if len(at_peak) < 2:
            continue
        label = _label_at(table, cluster, weeks[min(peak, len(weeks) - 1)].isoformat())
        # at either end of the stream the label runs inwards, so it stays inside the picture
        align = "left" if peak == 0 else "right" if peak == len(x) - 1 else "center"
        text = axes.text(
            x[peak],
            (at_peak.min() + at_peak.max()) / 2,
            f"#{cluster} {label}",
            ha=align,
            va="center",
            fontsize=10,
            bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "alpha": 0.75, "linewidth": 0},
        )
        box = text.get_window_extent(renderer)
        inside = frame.x0 <= box.x0 and box.x1 <= frame.x1
        if not inside or any(boxes_overlap(box, other) for other in placed):
            text.remove()
            continue
        placed.append(box)


def draw_stream_graph(table: pd.DataFrame, path: Path, title: str) -> Path:
    """``stream_figure`` saved as a PNG at ``path``."""
    return _save(stream_figure(table, title), path)


def _label_at(table: pd.DataFrame, cluster: int, batch: str) -> str:
    rows = table[(table["cluster"] == cluster) & (table["batch"].astype(str) == batch)]
    labels = [label for label in rows["label"].tolist() if isinstance(label, str) and label]
    if labels:
        return labels[0]
    others = table[(table["cluster"] == cluster) & table["label"].astype(bool)]
    return str(others["label"].iloc[-1]) if len(others) else ""


def mutation_figure(nodes: pd.DataFrame, transitions: pd.DataFrame, title: str) -> Figure:
    """Batches on a date axis, one row per cluster: a dot per batch x cluster sized by its stories, grey lines for
    stories that stayed, coloured lines (width: stories) for stories that moved to another cluster."""
    import matplotlib.dates as mdates
    from matplotlib.collections import LineCollection

    batches = sorted(set(nodes["batch"].astype(str)) | set(transitions["batch"].astype(str)))
    clusters = sorted(set(nodes["cluster"].astype(int)) | set(transitions["to_cluster"].astype(int)))
    height = max(5.0, min(14.0, 1.2 + 0.55 * len(clusters)))
    figure, axes = _figure(height)
    axes.set_title(title, fontsize=14)
    if not batches:
        axes.text(0.5, 0.5, "no batches yet", ha="center", va="center", fontsize=16)
        axes.set_axis_off()
        figure.tight_layout()
        return figure
    days = batch_dates(batches)
    at = dict(zip(batches, mdates.date2num(days), strict=True))
    # dots and lines shrink with the room a week has (two pixels a week over sixteen years)
    week_px = WIDTH_PX * 0.85 / max(1.0, (days[-1] - days[0]).days / 7 + 1)
    scale = float(np.clip(week_px / 40, 0.15, 1.0))
    drawn = transitions[transitions["from_batch"].notna() & transitions["from_batch"].astype(str).isin(at)]
    stayed = drawn[drawn.from_cluster == drawn.to_cluster]
    moved = drawn[drawn.from_cluster != drawn.to_cluster]
    segments = [
        [(at[str(e.from_batch)], e.from_cluster), (at[str(e.batch)], e.to_cluster)]
        for e in stayed.itertuples(index=False)
    ]
    axes.add_collection(LineCollection(segments, colors="0.8", linewidths=1.5 * scale, zorder=1))
    if len(moved):
        share = moved["stories"].to_numpy(dtype=float) / moved["stories"].max()
        axes.add_collection(
            LineCollection(
                [
                    [(at[str(e.from_batch)], e.from_cluster), (at[str(e.batch)], e.to_cluster)]
                    for e in moved.itertuples(index=False)
                ],
                colors=[
                    (*_colour(int(c))[:3], 0.45 + 0.5 * s)
                    for c, s in zip(moved.from_cluster, share, strict=True)
                ],
                linewidths=(0.8 + 5 * share) * scale,
                zorder=2,
            )
        )
    largest = max([1, *nodes["stories"].tolist()])
    axes.scatter(
        [at[b] for b in nodes["batch"].astype(str)],
        nodes["cluster"],
        s=[(20 + 600 * n / largest) * scale**2 for n in nodes["stories"]],
        c=[_colour(int(c)) for c in nodes["cluster"]],
        edgecolors="black",
        linewidths=0.5 * scale,
        zorder=3,
    )
    latest = nodes.sort_values("batch").groupby("cluster").last()
    names = {
        c: _label_at(nodes, c, str(latest.loc[c, "batch"])) if c in latest.index else "" for c in clusters
    }
    axes.set_yticks(clusters, [f"#{c} {names[c]}" for c in clusters], fontsize=10)
    axes.set_ylim(min(clusters) - 0.7, max(clusters) + 0.7)
    axes.invert_yaxis()
    axes.grid(axis="x", color="0.93")
    axes.set_xlabel("week; diagonal lines: stories that moved to another cluster, width by count")
    _date_axis(figure, axes, days[0], days[-1])
    return figure


def draw_mutation_graph(nodes: pd.DataFrame, transitions: pd.DataFrame, path: Path, title: str) -> Path:
    """``mutation_figure`` saved as a PNG at ``path``."""
    return _save(mutation_figure(nodes, transitions, title), path)


def _save(figure: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=DPI)
    return path


def draw_sse_curve(choice: KChoice, path: Path, title: str) -> Path:
    """The SSE (inertia) curve over k with the chosen k marked and the reason written under it."""
    figure, axes = _figure(6)
    if choice.ks:
        axes.plot(choice.ks, choice.sse, marker="o", color="tab:blue", linewidth=2)
        axes.set_xlabel("k (clusters)", fontsize=12)
        axes.set_ylabel("SSE: sum of squared distances to the nearest centre", fontsize=12)
        axes.grid(color="0.92")
    else:
        axes.set_axis_off()
    axes.axvline(choice.k, color="tab:red", linestyle="--", linewidth=1.5)
    axes.annotate(
        f"chosen k = {choice.k} ({choice.method})",
        xy=(choice.k, 1),
        xycoords=("data", "axes fraction"),
        xytext=(8, -20),
        textcoords="offset points",
        color="tab:red",
        fontsize=12,
    )
    axes.set_title(title, fontsize=14)
    figure.text(0.01, 0.01, choice.reason, fontsize=10, color="0.3")
    figure.tight_layout(rect=(0, 0.04, 1, 1))
    return _save(figure, path)
