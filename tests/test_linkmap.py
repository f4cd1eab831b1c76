"""The media link map: GEXF export and rendered picture (topicmap.snapshots.linkmap)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pandas as pd
import pytest
from matplotlib import image as mpimg

from topicmap.snapshots.layout import spring_layout
from topicmap.snapshots.linkmap import link_map_graph, render_link_map, write_gexf


def media_counts() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "media_id": [3, 1, 2, 4],  # unsorted on purpose: output is sorted by id
            "name": [
                'Gamma & "Sons" <Blog>',
                "Alpha News",
                "Beta\x07 Daily",
                "Delta Wire",
            ],  # XML specials, a control char
            "url": [
                "https://gamma.example/",
                "https://alpha.example/",
                "https://beta.example/",
                "https://delta.example/",
            ],
            "story_count": [2, 2, 3, 3],
            "media_inlink_count": [2, 2, 3, 0],
            "inlink_count": [2, 3, 4, 0],
            "outlink_count": [2, 2, 4, 2],
            "sum_media_inlink_count": [2, 3, 3, 0],
            "facebook_share_count": pd.array([None, 13, 0, 100], dtype="Int64"),
        }
    )


def medium_links() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "source_media_id": [2, 1, 1, 2, 3, 4, 4],
            "ref_media_id": [1, 2, 3, 3, 2, 1, 2],
            "link_count": [2, 1, 1, 1, 2, 1, 1],
        }
    )


def test_gexf_reads_back_with_attributes_and_weights(tmp_path):
    path = write_gexf(media_counts(), medium_links(), tmp_path / "map.gexf", description="overall")
    graph = nx.read_gexf(path)
    assert isinstance(graph, nx.DiGraph)
    assert list(graph.nodes) == ["1", "2", "3", "4"]
    assert graph.nodes["3"]["label"] == 'Gamma & "Sons" <Blog>'
    assert graph.nodes["2"]["label"] == "Beta Daily"  # the control character cannot be carried by XML
    assert graph.nodes["1"] == {
        "label": "Alpha News",
        "url": "https://alpha.example/",
        "story_count": 2,
        "media_inlink_count": 2,
        "inlink_count": 3,
        "outlink_count": 2,
        "facebook_share_count": 13,
    }
    assert "facebook_share_count" not in graph.nodes["3"]  # unknown, not 0
    assert graph.nodes["2"]["facebook_share_count"] == 0
    assert graph.number_of_edges() == 7
    assert graph.edges["2", "1"]["weight"] == 2.0 and graph.edges["2", "1"]["link_count"] == 2
    assert graph.edges["4", "2"]["link_count"] == 1
    text = path.read_text(encoding="utf-8")
    assert 'version="1.3"' in text and "http://gexf.net/1.3" in text


def test_gexf_is_deterministic_and_rejects_stray_edges(tmp_path):
    one = write_gexf(media_counts(), medium_links(), tmp_path / "a.gexf")
    two = write_gexf(media_counts().iloc[::-1], medium_links().iloc[::-1], tmp_path / "b.gexf")
    assert one.read_bytes() == two.read_bytes()
    stray = pd.concat(
        [medium_links(), pd.DataFrame({"source_media_id": [9], "ref_media_id": [1], "link_count": [1]})]
    )
    with pytest.raises(ValueError, match=r"not in medium_link_counts: \[9\]"):
        write_gexf(media_counts(), stray, tmp_path / "c.gexf")
    with pytest.raises(ValueError, match="missing column"):
        write_gexf(media_counts().drop(columns=["story_count"]), medium_links(), tmp_path / "d.gexf")


def test_link_map_picture_is_written_and_reproducible(tmp_path):
    first = render_link_map(
        media_counts(), medium_links(), tmp_path / "map.png", title="Test topic — overall"
    )
    second = render_link_map(
        media_counts(), medium_links(), tmp_path / "again.png", title="Test topic — overall"
    )
    data = first.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data == second.read_bytes()  # fixed layout seed: the same picture every time
    pixels = mpimg.imread(first)
    assert pixels.shape[:2] == (1260, 1200)
    assert np.allclose(pixels[5, 5, :3], 1.0)  # white background
    # non-trivial: a good share of pixels is drawn (nodes, edges, labels), not a blank page
    drawn = (pixels[:, :, :3].mean(axis=2) < 0.9).mean()
    assert drawn > 0.01


def _weighted_graph(nodes: int, edges: int, seed: int) -> nx.Graph:
    rng = np.random.default_rng(seed)
    graph = nx.Graph()
    graph.add_nodes_from(range(nodes))
    for a, b, weight in zip(
        rng.integers(0, nodes, edges), rng.integers(0, nodes, edges), rng.integers(1, 60, edges), strict=True
    ):
        if a != b:
            graph.add_edge(int(a), int(b), spring=float(np.log1p(weight)))
    return graph


@pytest.mark.parametrize(
    ("nodes", "edges", "iterations"),
    [(250, 8000, 200), (40, 30, 200), (2, 1, 50), (12, 0, 200), (1, 0, 200), (520, 3000, 20)],
)
def test_spring_layout_places_every_node_where_networkx_does(nodes, edges, iterations):
    """The pictures keep their bytes only if every position is networkx's to the last bit (isolated nodes,
    two nodes, a single node and graphs past networkx's dense solver included)."""
    graph = _weighted_graph(nodes, edges, seed=nodes)
    k = 1.8 / np.sqrt(nodes)
    ours = spring_layout(graph, weight="spring", seed=42, iterations=iterations, k=k)
    theirs = nx.spring_layout(graph, weight="spring", seed=42, iterations=iterations, k=k)
    assert list(ours) == list(theirs)
    assert all(np.asarray(ours[n]).tobytes() == np.asarray(theirs[n]).tobytes() for n in graph)


def test_link_map_without_links_still_renders(tmp_path):
    path = render_link_map(
        media_counts(), medium_links().iloc[:0], tmp_path / "empty.png", title="Quiet week"
    )
    pixels = mpimg.imread(path)
    drawn = (pixels[:, :, :3].mean(axis=2) < 0.9).mean()
    assert 0 < drawn < 0.01  # only the title and the note


def test_link_map_graph_keeps_the_most_linked_media_and_merges_directions():
    graph, linked = link_map_graph(media_counts(), medium_links())
    assert linked == 4 and sorted(graph.nodes) == [1, 2, 3, 4]
    # ranks by media inlinks (2: 3), then inlinks (1: 3 beats 3: 2), then stories; 4 has no inlinks
    assert sorted(graph.nodes, key=lambda m: graph.nodes[m]["rank"]) == [2, 1, 3, 4]
    assert graph.edges[1, 2]["weight"] == 3  # 2->1 (2 links) and 1->2 (1 link)
    assert graph.edges[2, 3]["weight"] == 3  # 2->3 (1) and 3->2 (2)
    assert graph.number_of_edges() == 5

    capped, linked = link_map_graph(media_counts(), medium_links(), max_media=2)
    assert linked == 4 and sorted(capped.nodes) == [1, 2] and capped.number_of_edges() == 1

    self_and_isolated = pd.concat(
        [medium_links(), pd.DataFrame({"source_media_id": [4], "ref_media_id": [4], "link_count": [5]})]
    )
    counts = pd.concat([media_counts(), media_counts().tail(1).assign(media_id=9, name="Lonely")])
    graph, linked = link_map_graph(counts, self_and_isolated)
    assert 9 not in graph.nodes and not graph.has_edge(4, 4)  # no links: not drawn; self links never count


def test_link_map_colours_media_by_a_tag_set(tmp_path, monkeypatch):
    """With a tag set chosen, each medium is coloured by its tag, the legend names the tags and their media, and
    an untagged medium is set apart."""
    from matplotlib.colors import to_hex

    from topicmap.snapshots import linkmap

    drawn = []
    real_save = linkmap.save_png
    monkeypatch.setattr(
        linkmap, "save_png", lambda figure, path: (drawn.append(figure), real_save(figure, path))[1]
    )
    groups = {1: "newspaper", 2: "newspaper", 3: "blog"}  # 4 (Delta Wire) untagged
    render_link_map(
        media_counts(), medium_links(), tmp_path / "tags.png", groups=groups, groups_title="media_type"
    )
    render_link_map(media_counts(), medium_links(), tmp_path / "communities.png")
    tagged, communities = drawn
    (axes,) = tagged.axes
    (nodes,) = axes.collections[1:]  # the edges' LineCollection, then the media
    # the media are drawn by area, smallest first (ties by id): media 4, 1, 3, 2 (media inlinks 0, 2, 2, 3)
    colour_of = dict(zip([4, 1, 3, 2], (to_hex(c) for c in nodes.get_facecolors()), strict=True))
    assert colour_of[1] == colour_of[2]
    assert colour_of[1] != colour_of[3] and colour_of[4] not in (colour_of[1], colour_of[3])
    legend = axes.get_legend()
    assert legend.get_title().get_text() == "media_type"
    assert [t.get_text() for t in legend.get_texts()] == ["newspaper (2)", "blog (1)", "untagged (1)"]
    assert communities.axes[0].get_legend().get_title().get_text() == "link communities (media)"
    assert (tmp_path / "tags.png").read_bytes() != (tmp_path / "communities.png").read_bytes()
