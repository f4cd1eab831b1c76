"""The media link map of a snapshot timespan: a GEXF file for Gephi and a rendered PNG.

Inputs are a timespan's ``medium_link_counts`` (media_id, name, story_count, media_inlink_count, inlink_count,
facebook_share_count, ...) and ``medium_links`` (source_media_id, ref_media_id, link_count) from
``topicmap.snapshots.compute``, and optionally the media's tags (media_id, tag_set, tag): each tag set becomes a
node attribute of the GEXF (so Gephi can colour by it), and the picture can colour the media by one tag set
instead of by link community. Both outputs are deterministic: the GEXF is written by hand (networkx's writer stamps
today's date into it) with nodes and edges sorted by id, and the picture uses a seeded force-directed layout
and seeded community detection, so the same timespan always gives the same file.
"""

from __future__ import annotations

import math
import os
import re
import textwrap
from collections.abc import Mapping
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

import networkx as nx
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

# The Agg canvas is used directly (no pyplot): headless, no global backend switch, no figure registry.
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from topicmap.snapshots.layout import spring_layout

GEXF_NS = "http://gexf.net/1.3"
_XSI_NS = "http://www.w3.org/2001/XMLSchema-instance"
# (column in medium_link_counts, GEXF type); media_id is the node id, name its label.
NODE_ATTRIBUTES: tuple[tuple[str, str], ...] = (
    ("url", "string"),
    ("story_count", "long"),
    ("media_inlink_count", "long"),
    ("inlink_count", "long"),
    ("outlink_count", "long"),
    ("facebook_share_count", "long"),
)
_LAYOUT_SEED = 42
# Characters XML 1.0 cannot carry at all (control characters other than tab, newline, return).
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _require(frame: pd.DataFrame, name: str, columns: list[str]) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{name}: missing column(s) {missing}; has {list(frame.columns)}")


def _xml_text(value: object) -> str:
    return _XML_INVALID.sub("", str(value))


def _atomic_write_bytes(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def tag_labels(media_tags: pd.DataFrame | None) -> dict[str, dict[int, str]]:
    """Per tag set, each tagged medium's tags of the set joined with "; " (sorted): the GEXF values and the
    colour keys. Computed once per snapshot: every timespan's map reads it."""
    labels: dict[str, dict[int, list[str]]] = {}
    if media_tags is not None:
        ordered = media_tags.sort_values(["tag_set", "media_id", "tag"], kind="mergesort")
        for tag_set, media_id, tag in zip(
            ordered["tag_set"].tolist(), ordered["media_id"].tolist(), ordered["tag"].tolist(), strict=True
        ):
            labels.setdefault(tag_set, {}).setdefault(int(media_id), []).append(tag)
    return {tag_set: {m: "; ".join(tags) for m, tags in media.items()} for tag_set, media in labels.items()}


def write_gexf(
    medium_link_counts: pd.DataFrame,
    medium_links: pd.DataFrame,
    path: str | os.PathLike[str],
    description: str = "",
    media_tags: Mapping[str, Mapping[int, str]] | None = None,
) -> Path:
    """Write the directed media link graph as GEXF 1.3 (readable by Gephi and ``networkx.read_gexf``).

    Nodes are the media (id = media_id, label = name) with the attributes in ``NODE_ATTRIBUTES`` (a null
    statistic is left out of that node); edges go from the linking medium to the linked one with
    ``weight`` = link_count (and a ``link_count`` integer attribute). Edges whose media are not in
    ``medium_link_counts`` are an error. Each tag set of ``media_tags`` (``tag_labels``) is a string attribute
    ``tags:<set>`` (a medium's tags of the set joined with "; "; none on an untagged medium).
    """
    _require(medium_link_counts, "medium_link_counts", ["media_id", "name"] + [c for c, _ in NODE_ATTRIBUTES])
    _require(medium_links, "medium_links", ["source_media_id", "ref_media_id", "link_count"])
    nodes = medium_link_counts.sort_values("media_id", kind="mergesort")
    edges = medium_links.sort_values(["source_media_id", "ref_media_id"], kind="mergesort")
    sources = edges["source_media_id"].to_numpy(dtype=np.int64)
    targets = edges["ref_media_id"].to_numpy(dtype=np.int64)
    strays = np.setdiff1d(np.union1d(sources, targets), nodes["media_id"].to_numpy(dtype=np.int64))
    if len(strays):
        raise ValueError(f"medium_links name media not in medium_link_counts: {strays[:10].tolist()}")

    tags_of = media_tags or {}
    tag_sets = sorted(tags_of)
    # Written as text line by line: an ElementTree of ~100k edges is slow to build and indent.
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<gexf xmlns="{GEXF_NS}" xmlns:xsi="{_XSI_NS}" xsi:schemaLocation="{GEXF_NS} {GEXF_NS}/gexf.xsd" version="1.3">',
        "  <meta>",
        "    <creator>topicmap</creator>",
        f"    <description>{escape(_xml_text(description or 'media link map'))}</description>",
        "  </meta>",
        '  <graph defaultedgetype="directed" mode="static">',
        '    <attributes class="node" mode="static">',
        *(f'      <attribute id="{c}" title="{c}" type="{kind}" />' for c, kind in NODE_ATTRIBUTES),
        *(f'      <attribute id="tags:{t}" title="{t}" type="string" />' for t in tag_sets),
        "    </attributes>",
        '    <attributes class="edge" mode="static">',
        '      <attribute id="link_count" title="link_count" type="long" />',
        "    </attributes>",
        "    <nodes>",
    ]
    columns = {column: nodes[column].tolist() for column, _ in NODE_ATTRIBUTES}
    for i, (media_id, name) in enumerate(
        zip(nodes["media_id"].tolist(), nodes["name"].tolist(), strict=True)
    ):
        lines.append(f'      <node id="{int(media_id)}" label={quoteattr(_xml_text(name))}>')
        lines.append("        <attvalues>")
        for column, kind in NODE_ATTRIBUTES:
            value = columns[column][i]
            if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
                continue  # unknown: no value rather than a made-up 0
            text = str(int(value)) if kind == "long" else _xml_text(value)
            lines.append(f'          <attvalue for="{column}" value={quoteattr(text)} />')
        for tag_set in tag_sets:
            tags = tags_of[tag_set].get(int(media_id))
            if tags is not None:
                lines.append(
                    f'          <attvalue for="tags:{tag_set}" value={quoteattr(_xml_text(tags))} />'
                )
        lines.append("        </attvalues>")
        lines.append("      </node>")
    lines += ["    </nodes>", "    <edges>"]
    lines += _edge_lines(sources, targets, edges["link_count"].to_numpy(dtype=np.int64))
    lines += ["    </edges>", "  </graph>", "</gexf>", ""]
    data = "\n".join(lines).encode("utf-8")
    return _atomic_write_bytes(Path(path), data)


def _edge_lines(sources: np.ndarray, targets: np.ndarray, counts: np.ndarray) -> list[str]:
    """One ``<edge>`` line per medium link, built by Arrow's string kernels: a big timespan has tens of
    thousands of media pairs, and a Python f-string per edge was most of a map's cost."""
    if len(sources) == 0:
        return []
    text = [
        pc.cast(pa.array(values), pa.string())
        for values in (np.arange(len(sources)), sources, targets, counts)
    ]
    edge_id, source, target, count = text
    pieces = [
        '      <edge id="', edge_id, '" source="', source, '" target="', target, '" weight="', count,
        '"><attvalues><attvalue for="link_count" value="', count, '" /></attvalues></edge>',
    ]  # fmt: skip
    return pc.binary_join_element_wise(*pieces, "").to_pylist()


# ----------------------------------------------------------------------------------------------- picture

_COMMUNITY_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
_OTHER_COLOR = "#a8a8a8"
_MIN_AREA, _MAX_AREA = 36.0, 1500.0  # marker areas in points²: area is proportional to media inlinks


def _short(name: object, width: int = 28) -> str:
    """A label: control characters dropped (no font draws them), long names shortened on a word."""
    return textwrap.shorten(re.sub(r"[\x00-\x1f\x7f]", "", str(name)), width=width, placeholder="…")


def _node_area(inlinks: np.ndarray | float, biggest: float) -> np.ndarray | float:
    return _MIN_AREA + (_MAX_AREA - _MIN_AREA) * np.asarray(inlinks, dtype=float) / biggest


def link_map_graph(
    medium_link_counts: pd.DataFrame, medium_links: pd.DataFrame, max_media: int = 250
) -> tuple[nx.Graph, int]:
    """The undirected media graph the picture draws, and how many media had any cross-media link.

    Nodes: the ``max_media`` linked media with the most media inlinks (ties: inlinks, stories, lower id),
    with their ``rank`` in that order; media without any cross-media link are left out. Edges: A→B and
    B→A summed into one ``weight`` (story links), plus ``spring`` = log(1 + weight) for the layout, so a
    few very heavy pairs do not collapse the picture. Self links are ignored.
    """
    _require(
        medium_link_counts,
        "medium_link_counts",
        ["media_id", "name", "story_count", "media_inlink_count", "inlink_count"],
    )
    _require(medium_links, "medium_links", ["source_media_id", "ref_media_id", "link_count"])
    media = medium_link_counts.set_index("media_id")
    links = medium_links[medium_links["source_media_id"] != medium_links["ref_media_id"]]
    # named: `.loc` names its result's index after the indexer in pandas 3.0 (3.1 keeps the frame's name)
    linked = pd.Index(
        np.union1d(links["source_media_id"].to_numpy(), links["ref_media_id"].to_numpy()), name="media_id"
    )
    linked = linked.intersection(media.index)
    ranked = (
        media.loc[linked]
        .reset_index()
        .sort_values(
            ["media_inlink_count", "inlink_count", "story_count", "media_id"],
            ascending=[False, False, False, True],
            kind="mergesort",
        )
    )
    shown = ranked["media_id"].head(max_media).tolist()
    rank = {int(m): i for i, m in enumerate(shown)}
    links = links[links["source_media_id"].isin(rank) & links["ref_media_id"].isin(rank)]
    graph = nx.Graph()
    graph.add_nodes_from((media_id, {"rank": rank[media_id]}) for media_id in sorted(rank))
    low, high, weights = _pair_weights(
        links["source_media_id"].to_numpy(dtype=np.int64),
        links["ref_media_id"].to_numpy(dtype=np.int64),
        links["link_count"].to_numpy(dtype=np.int64),
    )
    # in ascending pair order, as Louvain then meets them
    graph.add_edges_from(
        (a, b, {"weight": weight, "spring": math.log1p(weight)})
        for a, b, weight in zip(low.tolist(), high.tolist(), weights.tolist(), strict=True)
    )
    return graph, len(ranked)


def _pair_weights(
    sources: np.ndarray, targets: np.ndarray, counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Links A→B and B→A summed into one undirected pair (lower id, higher id), the pairs ascending."""
    low, high = np.minimum(sources, targets), np.maximum(sources, targets)
    order = np.lexsort((high, low))
    low, high, counts = low[order], high[order], counts[order]
    first = np.ones(len(low), dtype=bool)
    first[1:] = (low[1:] != low[:-1]) | (high[1:] != high[:-1])
    starts = np.flatnonzero(first)
    weights = np.add.reduceat(counts, starts) if len(starts) else counts
    return low[starts], high[starts], weights


def render_link_map(
    medium_link_counts: pd.DataFrame,
    medium_links: pd.DataFrame,
    path_png: str | os.PathLike[str],
    title: str = "Media link map",
    top_labels: int = 15,
    max_media: int = 250,
    max_edges: int = 3000,
    seed: int = _LAYOUT_SEED,
    groups: Mapping[int, str] | None = None,
    groups_title: str = "",
) -> Path:
    """Draw the media link map as a PNG and return its path.

    Only media with at least one cross-media link are drawn (at most ``max_media``, those with the most media
    inlinks). Node area is proportional to media_inlink_count, edge width grows with link_count (only the
    ``max_edges`` heaviest media pairs are drawn; the layout uses them all), colours mark the largest link
    communities (Louvain, seeded), and the ``top_labels`` media with the most media inlinks are named, labels
    placed greedily so they do not overlap. The layout is networkx's spring layout with a fixed ``seed``, so
    the picture is reproducible. A timespan without links still gets a picture that says so.

    ``groups`` (media_id -> label, e.g. each medium's media_type tags, ``tag_labels``) colours the media by
    their label instead of by community: the most frequent labels among the drawn media get a colour each, the
    others one grey, untagged media a lighter one; the legend is titled ``groups_title``.
    """
    media = medium_link_counts.sort_values("media_id", kind="mergesort").set_index("media_id")
    graph, total_linked = link_map_graph(medium_link_counts, medium_links, max_media)
    labelled_order = sorted(graph.nodes, key=lambda m: graph.nodes[m]["rank"])
    story_links = sum(int(w) for _, _, w in graph.edges(data="weight"))

    figure = Figure(figsize=(12, 12.6), dpi=100, facecolor="white")
    FigureCanvasAgg(figure)
    axes = figure.add_axes((0.02, 0.08, 0.96, 0.86))
    axes.set_axis_off()
    figure.suptitle(title, fontsize=18, fontweight="bold", y=0.975)
    if graph.number_of_nodes() == 0:
        axes.text(
            0.5,
            0.5,
            "no links between different media in this timespan",
            ha="center",
            va="center",
            fontsize=15,
            color="#555555",
            transform=axes.transAxes,
        )
        figure.text(
            0.5,
            0.04,
            f"{len(media)} media with stories · 0 cross-media links",
            ha="center",
            fontsize=11,
            color="#333333",
        )
        return save_png(figure, Path(path_png))

    positions = spring_layout(
        graph, weight="spring", seed=seed, iterations=200, k=1.8 / math.sqrt(graph.number_of_nodes())
    )
    nodes = sorted(graph.nodes())
    index = {node: i for i, node in enumerate(nodes)}
    xy = np.array([positions[node] for node in nodes], dtype=float)
    _fix_equal_limits(figure, axes, xy)

    if groups is not None:
        color_of, cluster_entries = _group_colors(nodes, groups)
        legend_title = groups_title or "media tags"
    else:
        color_of, cluster_entries = _community_colors(graph, media, nodes, seed)
        legend_title = "link communities (media)"

    # Edges: the heaviest pairs, light, under the nodes, as one LineCollection (fast for thousands).
    edges = sorted(graph.edges(data="weight"), key=lambda e: (-e[2], e[0], e[1]))[:max_edges]
    # The drawn media can have no link among themselves: when the cap keeps only the targets of a medium
    # that links out to hundreds of sites, the linking medium (no inlinks) ranks below them.
    if edges:
        weights = np.array([w for _, _, w in edges], dtype=float)
        segments = np.array([[xy[index[a]], xy[index[b]]] for a, b, _ in edges])
        widths = 0.3 + 4.0 * np.sqrt(weights / weights.max())
        edge_colors = [color_of[a] if color_of[a] == color_of[b] else "#9a9a9a" for a, b, _ in edges]
        axes.add_collection(
            LineCollection(segments, linewidths=widths, colors=edge_colors, alpha=0.22, zorder=1)
        )

    inlinks = np.array([int(media.at[node, "media_inlink_count"]) for node in nodes], dtype=float)
    biggest = max(float(inlinks.max()), 1.0)
    areas = _node_area(inlinks, biggest)
    order = np.argsort(areas, kind="stable")  # big nodes drawn last, on top
    axes.scatter(
        xy[order, 0],
        xy[order, 1],
        s=areas[order],
        c=[color_of[nodes[i]] for i in order],
        edgecolors="white",
        linewidths=0.8,
        zorder=2,
    )
    labelled = labelled_order[:top_labels]
    _place_labels(
        figure,
        axes,
        [(_short(media.at[m, "name"]), xy[index[m]], math.sqrt(areas[index[m]]) / 2) for m in labelled],
    )

    size_values = sorted({int(biggest), max(int(round(biggest / 4)), 1), 1}, reverse=True)
    size_handles = [
        Line2D(
            [],
            [],
            linestyle="none",
            marker="o",
            markersize=math.sqrt(float(_node_area(value, biggest))),
            markerfacecolor="#d0d0d0",
            markeredgecolor="#808080",
            label=f"linked from {value} other media" if value > 1 else "linked from 1 other medium",
        )
        for value in size_values
    ]
    size_legend = axes.legend(
        handles=size_handles,
        loc="lower left",
        frameon=True,
        framealpha=0.92,
        fontsize=9,
        labelspacing=1.6,
        handletextpad=1.8,
        borderpad=1.1,
        title="node size: media inlinks",
        title_fontsize=9,
    )
    axes.add_artist(size_legend)
    if cluster_entries:
        axes.legend(
            handles=[
                Line2D(
                    [],
                    [],
                    linestyle="none",
                    marker="o",
                    markersize=9,
                    markerfacecolor=c,
                    markeredgecolor="white",
                    label=label,
                )
                for c, label in cluster_entries
            ],
            loc="upper left",
            frameon=True,
            framealpha=0.92,
            fontsize=9,
            title=legend_title,
            title_fontsize=9,
        )

    hidden = total_linked - graph.number_of_nodes()
    caption = "\n".join(
        [
            f"{len(nodes)} linked media shown of {len(media)} media with stories"
            + (f" ({hidden} with fewer media inlinks not drawn)" if hidden else ""),
            f"{graph.number_of_edges()} linked media pairs"
            + (f" ({len(edges)} heaviest drawn)" if len(edges) < graph.number_of_edges() else "")
            + f" · {story_links} cross-media story links between them",
            f"edge width: story links between two media · labels: the {len(labelled)} media linked from the most other media",
        ]
    )
    figure.text(0.5, 0.038, caption, ha="center", va="center", fontsize=10, color="#333333", linespacing=1.6)
    return save_png(figure, Path(path_png))


def _community_colors(
    graph: nx.Graph, media: pd.DataFrame, nodes: list[int], seed: int
) -> tuple[dict[int, str], list[tuple[str, str]]]:
    """Colours of the largest link communities (Louvain, seeded) and their legend entries."""
    communities = sorted(
        nx.community.louvain_communities(graph, weight="weight", seed=seed),
        key=lambda members: (-sum(int(media.at[m, "media_inlink_count"]) for m in members), min(members)),
    )
    color_of = dict.fromkeys(nodes, _OTHER_COLOR)
    entries = []
    for rank, members in enumerate(c for c in communities if len(c) > 1):
        if rank >= len(_COMMUNITY_COLORS):
            break
        for node in members:
            color_of[node] = _COMMUNITY_COLORS[rank]
        hub = max(sorted(members), key=lambda m: int(media.at[m, "media_inlink_count"]))
        entries.append(
            (_COMMUNITY_COLORS[rank], f"around {_short(media.at[hub, 'name'], 26)} ({len(members)})")
        )
    return color_of, entries


_UNTAGGED_COLOR = "#dcdcdc"


def _group_colors(
    nodes: list[int], groups: Mapping[int, str]
) -> tuple[dict[int, str], list[tuple[str, str]]]:
    """Colours of the most frequent labels among the drawn media (ties: the label), and their legend entries."""
    counts: dict[str, int] = {}
    for node in nodes:
        if node in groups:
            counts[groups[node]] = counts.get(groups[node], 0) + 1
    ranked = sorted(counts, key=lambda label: (-counts[label], label))
    colored = {label: _COMMUNITY_COLORS[i] for i, label in enumerate(ranked[: len(_COMMUNITY_COLORS)])}
    color_of = {
        node: colored.get(groups[node], _OTHER_COLOR) if node in groups else _UNTAGGED_COLOR for node in nodes
    }
    entries = [(colored[label], f"{_short(label, 30)} ({counts[label]})") for label in ranked[: len(colored)]]
    others = sum(counts[label] for label in ranked[len(colored) :])
    if others:
        entries.append((_OTHER_COLOR, f"other tags ({others})"))
    untagged = sum(node not in groups for node in nodes)
    if untagged:
        entries.append((_UNTAGGED_COLOR, f"untagged ({untagged})"))
    return color_of, entries


def _fix_equal_limits(figure: Figure, axes: object, xy: np.ndarray, margin: float = 0.08) -> None:
    """Set equal-scale data limits now (not at draw time), so label placement can use final coordinates."""
    box = axes.get_position()
    width_in, height_in = box.width * figure.get_figwidth(), box.height * figure.get_figheight()
    low, high = xy.min(axis=0), xy.max(axis=0)
    center = (low + high) / 2
    span = np.maximum(high - low, 1e-6)
    per_inch = max(span[0] / width_in, span[1] / height_in) * (1 + 2 * margin)
    axes.set_xlim(center[0] - per_inch * width_in / 2, center[0] + per_inch * width_in / 2)
    axes.set_ylim(center[1] - per_inch * height_in / 2, center[1] + per_inch * height_in / 2)


def _place_labels(figure: Figure, axes: object, labels: list[tuple[str, np.ndarray, float]]) -> None:
    """Greedy label placement: for each label (most important first) try positions around its node at
    growing distances and take the first that overlaps no placed label and no labelled node; far
    positions get a leader line."""
    renderer = figure.canvas.get_renderer()
    points_to_px = figure.dpi / 72.0
    obstacles = []
    for _, point, radius_pt in labels:
        cx, cy = axes.transData.transform(point)
        r = radius_pt * points_to_px
        obstacles.append((cx - r, cy - r, cx + r, cy + r))
    placed: list[tuple[float, float, float, float]] = []
    directions = [(0, 1), (1, 0.4), (-1, 0.4), (0, -1), (1, -0.4), (-1, -0.4), (0.7, 1), (-0.7, 1)]
    style = {
        "textcoords": "offset points",
        "fontsize": 10,
        "fontweight": "bold",
        "color": "#1a1a1a",
        "zorder": 4,
        "bbox": {"boxstyle": "round,pad=0.25", "facecolor": "white", "edgecolor": "#bbbbbb", "alpha": 0.9},
    }
    for own, (text, point, radius_pt) in enumerate(labels):
        others = obstacles[:own] + obstacles[own + 1 :]
        chosen = None
        # One probe moved from candidate to candidate: building an annotation for each was most of the cost.
        probe = axes.annotate(text, point, xytext=(0.0, 0.0), **style)
        for step in range(14):
            for dx, dy in directions:
                distance = radius_pt + 4 + 16 * step
                norm = math.hypot(dx, dy)
                offset = (dx / norm * distance, dy / norm * distance)
                ha = "left" if dx > 0.3 else "right" if dx < -0.3 else "center"
                va = "bottom" if dy > 0.3 else "top" if dy < -0.3 else "center"
                probe.xyann = offset
                probe.set_horizontalalignment(ha)
                probe.set_verticalalignment(va)
                # Measure the text box alone (an arrow would make every far candidate "overlap").
                extent = probe.get_window_extent(renderer).expanded(1.08, 1.3)
                box = (extent.x0, extent.y0, extent.x1, extent.y1)
                inside = axes.bbox.contains(extent.x0, extent.y0) and axes.bbox.contains(extent.x1, extent.y1)
                if inside and not any(_overlap(box, other) for other in placed + others):
                    chosen = (offset, ha, va, step, box)
                    break
            if chosen:
                break
        probe.remove()
        if chosen is None:  # crowded beyond all candidates: straight above, accepting the overlap
            chosen = ((0.0, radius_pt + 4), "center", "bottom", 0, None)
        offset, ha, va, step, box = chosen
        leader = {"arrowstyle": "-", "color": "#555555", "lw": 0.8, "shrinkA": 0, "shrinkB": radius_pt}
        label = axes.annotate(
            text, point, xytext=offset, ha=ha, va=va, arrowprops=leader if step > 1 else None, **style
        )
        if box is None:
            extent = label.get_window_extent(renderer)
            box = (extent.x0, extent.y0, extent.x1, extent.y1)
        placed.append(box)


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def save_png(figure: Figure, path: Path) -> Path:
    """``figure`` written to ``path`` as a PNG whose bytes depend only on the picture, replaced atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}.png")
    try:
        # No Software/date metadata: the bytes depend only on the picture.
        figure.savefig(tmp, format="png", facecolor="white", metadata={"Software": None})
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path
