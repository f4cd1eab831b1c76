"""Snapshots, link maps and pictures of topics at the edges: no links, one medium, one story, and one page
linking to hundreds of sites (generated topics, every output written)."""

from __future__ import annotations

import shutil
from datetime import date, timedelta
from pathlib import Path

import networkx as nx
import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from matplotlib import image as mpimg
from PIL import Image

from topicmap.snapshots.compute import compute_snapshot
from topicmap.snapshots.files import write_snapshot_files
from topicmap.snapshots.linkmap import render_link_map, write_gexf
from topicmap.snapshots.results import SnapshotResult
from topicmap.snapshots.timespans import build_timespans

START = date(2026, 1, 1)
END = date(2026, 1, 31)


def _topic(media_of_story: list[int], days: list[int], links: list[tuple[int, int]], link_weight: int = 1):
    """Stories (ids 1..n) of the given media on the given days of January 2026, and links between them."""
    stories = pd.DataFrame(
        {
            "stories_id": np.arange(1, len(media_of_story) + 1),
            "media_id": media_of_story,
            "publish_date": pd.to_datetime([START + timedelta(days=d) for d in days], utc=True),
            "url": [f"https://m{m}.example/story/{i}" for i, m in enumerate(media_of_story, 1)],
            "title": [f"Story {i}" for i in range(1, len(media_of_story) + 1)],
        }
    )
    media_ids = sorted(set(media_of_story))
    media = pd.DataFrame(
        {
            "media_id": media_ids,
            "name": [f"Medium {m}" for m in media_ids],
            "url": [f"https://m{m}.example/" for m in media_ids],
        }
    )
    link_frame = pd.DataFrame(
        {
            "stories_id": pd.array([a for a, _ in links] * link_weight, dtype="int64"),
            "ref_stories_id": pd.array([b for _, b in links] * link_weight, dtype="int64"),
        }
    )
    return stories, media, link_frame


#: the media tables drawn so far in this process, by title, with their GEXF and picture: about half the
#: timespans of the generated topics repeat tables drawn before (a week of one story, of two media and no link)
_DRAWN: dict[str, list[tuple[pd.DataFrame, pd.DataFrame, Path, Path]]] = {}


def _write_everything(  # noqa: ANN001
    stories, media, links, folder: Path, result: SnapshotResult | None = None, title: str = "t"
) -> None:
    """What a snapshot run writes for a topic: the tables, then per timespan a GEXF and a picture (``title``).

    ``result``: the snapshot of these inputs when the test computed it already. A timespan whose media tables
    equal those of a timespan drawn before (a topic within one month: the overall and the monthly timespan; the
    same small week in another generated topic) gets a copy of that GEXF and picture: both are drawn from those
    two tables alone, with a fixed layout seed, so drawing them again would give the same bytes (``test_linkmap``
    checks the picture is reproducible).
    """
    if result is None:
        result = compute_snapshot(stories, media, links, build_timespans(START, END))
    written = write_snapshot_files(result, folder)
    assert (folder / "manifest.json").exists() and written["snapshot"]
    drawn = _DRAWN.setdefault(title, [])
    for snap in result.timespans:
        if snap.empty:
            continue
        ts_folder = folder / snap.timespan.key
        same = next(
            (
                (gexf, png)
                for counts, links_of, gexf, png in drawn
                if counts.equals(snap.medium_link_counts) and links_of.equals(snap.medium_links)
            ),
            None,
        )
        if same is None:
            gexf = write_gexf(snap.medium_link_counts, snap.medium_links, ts_folder / "media.gexf", "t")
            png = render_link_map(
                snap.medium_link_counts, snap.medium_links, ts_folder / "map.png", title=title
            )
            drawn.append((snap.medium_link_counts, snap.medium_links, gexf, png))
        else:
            ts_folder.mkdir(parents=True, exist_ok=True)
            gexf = Path(shutil.copyfile(same[0], ts_folder / "media.gexf"))
            png = Path(shutil.copyfile(same[1], ts_folder / "map.png"))
        graph = nx.read_gexf(gexf)
        assert graph.number_of_nodes() == len(snap.medium_link_counts)
        # a whole PNG (every chunk's checksum right) of the picture's height; the hub test decodes its pixels
        with Image.open(png) as picture:
            height = picture.height
            picture.verify()
        assert height > 100


@st.composite
def generated_topics(draw):  # noqa: ANN001, ANN201
    n_media = draw(st.integers(1, 6))
    n_stories = draw(st.integers(1, 25))
    media_of_story = draw(st.lists(st.integers(1, n_media), min_size=n_stories, max_size=n_stories))
    days = draw(st.lists(st.integers(0, 30), min_size=n_stories, max_size=n_stories))
    ids = st.integers(1, n_stories)
    links = draw(st.lists(st.tuples(ids, ids), max_size=60))
    return media_of_story, days, links


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(topic=generated_topics())
def test_any_small_topic_gets_every_output(tmp_path_factory, topic) -> None:  # noqa: ANN001
    """Topics with no links, self links only, one medium, one story: every file and picture is written."""
    media_of_story, days, links = topic
    stories, media, link_frame = _topic(media_of_story, days, links)
    _write_everything(stories, media, link_frame, tmp_path_factory.mktemp("snap"))


def test_one_story_one_medium_no_links(tmp_path: Path) -> None:
    stories, media, links = _topic([1], [3], [])
    _write_everything(stories, media, links, tmp_path)


def test_a_page_with_100000_links_to_500_sites(tmp_path: Path) -> None:
    """One story linking 200 times to each of 500 sites' stories: the drawn top media (the linked sites) have
    no link among themselves, and the picture still renders with the hub's links counted."""
    sites = 500
    media_of_story = [1] + list(range(2, sites + 2))
    days = [5] * len(media_of_story)
    links = [(1, target) for target in range(2, sites + 2)]
    stories, media, link_frame = _topic(media_of_story, days, links, link_weight=200)
    assert len(link_frame) == 100_000
    result = compute_snapshot(stories, media, link_frame, build_timespans(START, END))
    overall = next(snap for snap in result.timespans if snap.counts.story_link_count)
    # duplicates of a link count once (Media Cloud's topic_links are distinct pairs)
    assert overall.counts.story_link_count == sites
    _write_everything(stories, media, link_frame, tmp_path, result, title="hub")
    pixels = mpimg.imread(tmp_path / overall.timespan.key / "map.png")  # its tables' picture, written above
    assert (pixels[:, :, :3].mean(axis=2) < 0.9).mean() > 0.005  # nodes drawn, not only the title
