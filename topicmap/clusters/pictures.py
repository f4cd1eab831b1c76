"""Pictures of clusters a person can read at 1600 px wide: a stream graph, the mutation graph, the SSE curve.

Labels come from each cluster's top terms (stop words of the stories' languages and newswire boilerplate
removed, see ``model.top_terms``) or, failing those, its most central title.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from topicmap.clusters.model import KChoice

#: every picture is this many pixels wide (16 inches at 100 dpi)
WIDTH_PX = 1600
DPI = 100


def _pyplot():  # noqa: ANN202
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _colour(cluster: int):  # noqa: ANN202
    import matplotlib

    palette = matplotlib.colormaps["tab20"]
    return palette((cluster * 2) % 20 + (cluster // 10) % 2)


def _week_ticks(axes, batches: list[str]) -> None:  # noqa: ANN001
    step = max(1, len(batches) // 16)
    positions = list(range(0, len(batches), step))
    axes.set_xticks(positions, [batches[i] for i in positions], rotation=30, ha="right", fontsize=10)


def draw_stream_graph(table: pd.DataFrame, path: Path, title: str) -> Path:
    """Stories per cluster per batch as a stream graph (layers around a centre line), each layer named at its
    widest point. ``table``: batch, cluster, stories, label (the label of that cluster in that batch)."""
    plt = _pyplot()
    path.parent.mkdir(parents=True, exist_ok=True)
    batches = sorted(table["batch"].astype(str).unique().tolist())
    clusters = sorted(table["cluster"].astype(int).unique().tolist())
    grid = (
        table.pivot_table(index="cluster", columns="batch", values="stories", aggfunc="sum", fill_value=0)
        .reindex(index=clusters, columns=batches, fill_value=0)
        .to_numpy(dtype=float)
    )
    figure, axes = plt.subplots(figsize=(WIDTH_PX / DPI, 8), dpi=DPI)
    try:
        if len(batches) == 0 or grid.sum() == 0:
            axes.text(0.5, 0.5, "no clustered stories yet", ha="center", va="center", fontsize=16)
            axes.set_axis_off()
        else:
            x = np.arange(len(batches))
            if len(batches) == 1:  # a stream needs two points: draw the one batch as a short band
                x, grid = np.array([-0.3, 0.3]), np.repeat(grid, 2, axis=1)
            polys = axes.stackplot(
                x,
                grid,
                baseline="wiggle" if len(batches) > 2 else "sym",
                colors=[_colour(c) for c in clusters],
            )
            total = grid.sum(axis=0).max()
            for layer, (cluster, poly) in enumerate(zip(clusters, polys, strict=True)):
                peak = int(grid[layer].argmax())
                if grid[layer, peak] < 0.04 * total:  # too thin to carry a readable label
                    continue
                vertices = poly.get_paths()[0].vertices
                at_peak = vertices[np.isclose(vertices[:, 0], x[peak])][:, 1]
                if len(at_peak) < 2:
                    continue
                label = _label_at(table, cluster, batches[min(peak, len(batches) - 1)])
                # at either end of the stream the label runs inwards, so it stays inside the picture
                align = "left" if peak == 0 else "right" if peak == len(x) - 1 else "center"
                axes.text(
                    x[peak],
                    (at_peak.min() + at_peak.max()) / 2,
                    f"#{cluster} {label}",
                    ha=align,
                    va="center",
                    fontsize=10,
                    bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "alpha": 0.75, "linewidth": 0},
                )
            _week_ticks(axes, batches)
            if len(batches) == 1:
                axes.set_xticks([0], batches)
            axes.set_yticks([])
            axes.set_xlabel("week; the width of a band is the cluster's stories that week", fontsize=11)
            for side in ("left", "right", "top"):
                axes.spines[side].set_visible(False)
        axes.set_title(title, fontsize=14)
        figure.tight_layout()
        figure.savefig(path, dpi=DPI)
    finally:
        plt.close(figure)
    return path


def _label_at(table: pd.DataFrame, cluster: int, batch: str) -> str:
    rows = table[(table["cluster"] == cluster) & (table["batch"].astype(str) == batch)]
    labels = [label for label in rows["label"].tolist() if isinstance(label, str) and label]
    if labels:
        return labels[0]
    others = table[(table["cluster"] == cluster) & table["label"].astype(bool)]
    return str(others["label"].iloc[-1]) if len(others) else ""


def draw_mutation_graph(nodes: pd.DataFrame, transitions: pd.DataFrame, path: Path, title: str) -> Path:
    """Batches left to right, one row per cluster: a dot per batch x cluster sized by its stories, grey lines
    for stories that stayed, coloured arcs (width: stories) for stories that moved to another cluster."""
    plt = _pyplot()
    path.parent.mkdir(parents=True, exist_ok=True)
    batches = sorted(set(nodes["batch"].astype(str)) | set(transitions["batch"].astype(str)))
    column = {b: i for i, b in enumerate(batches)}
    clusters = sorted(set(nodes["cluster"].astype(int)) | set(transitions["to_cluster"].astype(int)))
    height = max(5.0, min(14.0, 1.2 + 0.55 * len(clusters)))
    figure, axes = plt.subplots(figsize=(WIDTH_PX / DPI, height), dpi=DPI)
    try:
        if not batches:
            axes.text(0.5, 0.5, "no batches yet", ha="center", va="center", fontsize=16)
            axes.set_axis_off()
        else:
            moved_max = max(
                [1, *transitions.loc[transitions.from_cluster != transitions.to_cluster, "stories"]]
            )
            for edge in transitions.itertuples(index=False):
                if edge.from_batch not in column or pd.isna(edge.from_batch):
                    continue
                x0, x1 = column[edge.from_batch], column[edge.batch]
                if edge.from_cluster == edge.to_cluster:
                    axes.plot([x0, x1], [edge.from_cluster] * 2, color="0.8", linewidth=1.5, zorder=1)
                    continue
                share = edge.stories / moved_max
                axes.annotate(
                    "",
                    xy=(x1, edge.to_cluster),
                    xytext=(x0, edge.from_cluster),
                    arrowprops={
                        "arrowstyle": "-|>",
                        "color": _colour(int(edge.from_cluster)),
                        "linewidth": 0.8 + 5 * share,
                        "alpha": 0.45 + 0.5 * share,
                        "connectionstyle": "arc3,rad=0.15",
                        "shrinkA": 4,
                        "shrinkB": 4,
                    },
                    zorder=2,
                )
            largest = max([1, *nodes["stories"].tolist()])
            axes.scatter(
                [column[b] for b in nodes["batch"].astype(str)],
                nodes["cluster"],
                s=[20 + 600 * n / largest for n in nodes["stories"]],
                c=[_colour(int(c)) for c in nodes["cluster"]],
                edgecolors="black",
                linewidths=0.5,
                zorder=3,
            )
            latest = nodes.sort_values("batch").groupby("cluster").last()
            names = {
                c: _label_at(nodes, c, str(latest.loc[c, "batch"])) if c in latest.index else ""
                for c in clusters
            }
            axes.set_yticks(clusters, [f"#{c} {names[c]}" for c in clusters], fontsize=10)
            _week_ticks(axes, batches)
            axes.set_xlim(-0.5, len(batches) - 0.5)
            axes.set_ylim(min(clusters) - 0.7, max(clusters) + 0.7)
            axes.invert_yaxis()
            axes.grid(axis="x", color="0.93")
            axes.set_xlabel("batch (week); arrows: stories that moved to another cluster, width by count")
        axes.set_title(title, fontsize=14)
        figure.tight_layout()
        figure.savefig(path, dpi=DPI)
    finally:
        plt.close(figure)
    return path


def draw_sse_curve(choice: KChoice, path: Path, title: str) -> Path:
    """The SSE (inertia) curve over k with the chosen k marked and the reason written under it."""
    plt = _pyplot()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure, axes = plt.subplots(figsize=(WIDTH_PX / DPI, 6), dpi=DPI)
    try:
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
        figure.savefig(path, dpi=DPI)
    finally:
        plt.close(figure)
    return path
