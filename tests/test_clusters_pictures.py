"""Time drawn as time: the clusters' stream graph (the one-shot timeline and the weekly stream) and the mutation
graph place weeks by date, show weeks without stories as gaps, and never let two date labels overlap, on a
16-year topic whose stories come in two bursts and on a topic of the demo's size."""

from __future__ import annotations

from datetime import date, timedelta

import matplotlib.dates as mdates
import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from topicmap.clusters.mutation import NODE_COLUMNS, TRANSITION_COLUMNS
from topicmap.clusters.pictures import (
    _date_axis,
    batch_dates,
    boxes_overlap,
    date_labels,
    mutation_figure,
    stream_figure,
)

#: the long topic: 2008-12-29 to 2024-12-30, stories only in 2010-2011 and from 2019-10-28 on
LONG_FIRST, LONG_LAST = date(2008, 12, 29), date(2024, 12, 30)
#: the demo topic's weeks (2026-01-01 to 2026-04-30)
DEMO_FIRST, DEMO_LAST = date(2025, 12, 29), date(2026, 4, 27)


def in_bursts(day: date) -> bool:
    return date(2010, 1, 1) <= day < date(2012, 1, 1) or day >= date(2019, 10, 28)


def weekly_graph(
    first: date, last: date, has_stories=lambda day: True, clusters: int = 6
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Nodes and transitions as the weekly stream writes them: every week a node per cluster while it has
    stories, stayed edges from the week before, and now and then stories moving to the next cluster."""
    rng = np.random.default_rng(4)
    nodes, transitions = [], []
    previous = None
    day = first
    while day <= last:
        if has_stories(day):
            for cluster in range(clusters):
                stories = int(rng.integers(1, 40))
                nodes.append((day.isoformat(), cluster, stories, stories, f"words{cluster}, more", [], []))
                if previous is not None:
                    transitions.append((day.isoformat(), previous, cluster, cluster, stories))
                    if rng.random() < 0.1:
                        transitions.append((day.isoformat(), previous, cluster, (cluster + 1) % clusters, 3))
            previous = day.isoformat()
        else:
            previous = None  # an empty week leaves no window to re-predict: nothing links across a gap
        day += timedelta(weeks=1)
    return pd.DataFrame(nodes, columns=NODE_COLUMNS), pd.DataFrame(transitions, columns=TRANSITION_COLUMNS)


def x_pixel(figure: Figure, day: date) -> float:
    (axes,) = figure.axes
    return float(axes.transData.transform((mdates.date2num(day), 0))[0])


def assert_date_labels_apart(figure: Figure) -> list[str]:
    """No two date labels (ticks and the offset beside them) overlap; the labels shown."""
    (axes,) = figure.axes
    figure.draw_without_rendering()
    labels = date_labels(axes)
    boxes = [label.get_window_extent() for label in labels]
    for i, first in enumerate(boxes):
        for second in boxes[i + 1 :]:
            assert not boxes_overlap(first, second, gap=0), [label.get_text() for label in labels]
    assert len(labels) >= 4
    return [label.get_text() for label in labels]


def assert_placed_by_date(figure: Figure) -> None:
    # 2010-08-09 and 2011-08-08 are a year apart; 2019-11-11 and 2020-02-17 fourteen weeks
    year = x_pixel(figure, date(2011, 8, 8)) - x_pixel(figure, date(2010, 8, 9))
    weeks = x_pixel(figure, date(2020, 2, 17)) - x_pixel(figure, date(2019, 11, 11))
    assert year / weeks == pytest.approx(364 / 98, rel=1e-6)


@pytest.fixture(scope="module")
def long_graph() -> tuple[pd.DataFrame, pd.DataFrame]:
    return weekly_graph(LONG_FIRST, LONG_LAST, in_bursts)


def test_the_long_topics_timeline_places_weeks_by_date_with_gaps_and_apart_labels(
    long_graph: tuple[pd.DataFrame, pd.DataFrame],
) -> None:
    nodes, _ = long_graph
    figure = stream_figure(nodes, "a 16-year topic")
    (axes,) = figure.axes
    assert_placed_by_date(figure)
    # every band's corners sit on the Mondays of the weeks, from the first week with stories to the last
    corners = np.unique(np.concatenate([c.get_paths()[0].vertices[:, 0] for c in axes.collections]))
    mondays = mdates.date2num(pd.date_range("2010-01-04", LONG_LAST, freq="7D").date)
    assert np.allclose(corners, mondays)
    # weeks without stories (2012 to 2019) are a gap: the stream has no width there
    gap = mdates.date2num(date(2015, 6, 1))
    for band in axes.collections:
        vertices = band.get_paths()[0].vertices
        at_gap = vertices[np.isclose(vertices[:, 0], gap)][:, 1]
        assert np.ptp(at_gap) == pytest.approx(0.0)
    shown = assert_date_labels_apart(figure)
    assert "2014" in shown or "2016" in shown  # the gap's years are labelled, not skipped


def test_the_long_topics_mutation_graph_places_weeks_by_date(
    long_graph: tuple[pd.DataFrame, pd.DataFrame],
) -> None:
    nodes, transitions = long_graph
    figure = mutation_figure(nodes, transitions, "a 16-year topic")
    (axes,) = figure.axes
    assert_placed_by_date(figure)
    dots = next(c for c in axes.collections if len(c.get_offsets()) == len(nodes))
    assert np.allclose(dots.get_offsets()[:, 0], mdates.date2num(batch_dates(nodes["batch"].tolist())))
    # no line crosses the years without stories
    for lines in axes.collections[:2]:
        for segment in lines.get_segments():
            assert segment[1, 0] - segment[0, 0] == pytest.approx(7.0)
    assert_date_labels_apart(figure)


def test_a_demo_sized_topic_has_its_weeks_labelled_apart() -> None:
    nodes, transitions = weekly_graph(DEMO_FIRST, DEMO_LAST)
    for figure in (stream_figure(nodes, "demo"), mutation_figure(nodes, transitions, "demo")):
        shown = assert_date_labels_apart(figure)
        assert {"Feb", "Mar", "Apr"} <= set(shown)  # months named, the weeks between them marked


def test_date_labels_are_thinned_until_they_fit() -> None:
    """A picture too narrow for one label per year keeps fewer labels rather than overlapping ones."""
    figure = Figure(figsize=(2.5, 2), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.subplots()
    axes.plot(mdates.date2num([LONG_FIRST, LONG_LAST]), [0, 1])
    _date_axis(figure, axes, LONG_FIRST, LONG_LAST)
    figure.draw_without_rendering()
    boxes = [label.get_window_extent() for label in date_labels(axes)]
    assert len(boxes) >= 2
    assert not any(boxes_overlap(a, b, gap=0) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


def test_a_batch_that_is_not_a_date_is_named() -> None:
    nodes, _ = weekly_graph(DEMO_FIRST, DEMO_FIRST + timedelta(weeks=2))
    nodes.loc[0, "batch"] = "w0"
    with pytest.raises(ValueError, match="batch 'w0' is not a date"):
        stream_figure(nodes, "bad")
