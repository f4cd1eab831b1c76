"""Subtopics (foci): declared with the topic, refused precisely when wrong, and computed in every snapshot as the
same tables the whole topic gets, restricted to the focus's stories."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import date
from pathlib import Path

import dagster as dg
import matplotlib.dates as mdates
import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from sqlalchemy import func, select, update

from assets.metadata import MARKDOWN_INLINE_LIMIT
from assets.snapshots import snapshots
from resources.store import TopicStoreResource
from resources.topics import TopicsFileResource
from tests.shared_data import NEWS_HTML, require_shared
from tests.snapshot_exports import check_snapshot_folder
from tests.test_snapshot import (
    A,
    B,
    D,
    links_frame,
    media_frame,
    rows,
    stats_frame,
    stories_frame,
    topic_timespans,
)
from tests.test_snapshot_assets import TOPIC as SNAP_TOPIC
from tests.test_snapshot_assets import TOPICS_YAML, build_topic
from tests.test_snapshot_assets import A as SA
from tests.test_snapshot_assets import C as SC
from topicmap.snapshots import charts
from topicmap.snapshots.checks import snapshot_problems
from topicmap.snapshots.cli import format_snapshot_paths
from topicmap.snapshots.compute import compute_snapshot
from topicmap.snapshots.files import write_snapshot_files
from topicmap.snapshots.foci import Focus, topic_foci
from topicmap.snapshots.inputs import read_snapshot_inputs
from topicmap.snapshots.key import SnapshotOptions, snapshot_key
from topicmap.snapshots.results import SnapshotResult
from topicmap.snapshots.store import build_snapshot, snapshot_paths
from topicmap.snapshots.words import stop_words
from topicmap.store import schema as s
from topicmap.store.media_tags import load_media_tags, read_media_tags_csv
from topicmap.store.topic_store import TopicStore
from topicmap.topics.declarations import FocalSetDefinition, FocusDefinition, TopicConfig, load_topics
from topicmap.topics.focus_kinds import MediaTagSelection, QuerySelection
from topicmap.web.extract import guess_language

TOPIC_START, TOPIC_END = "2026-01-07", "2026-02-10"

TOPIC_HEAD = """
  - name: {name}
    query: climate
    start_date: 2026-01-01
    end_date: 2026-03-31
"""


def topics_file(tmp_path: Path, *topics: tuple[str, str]) -> Path:
    """A topics file of ``(name, focal_sets YAML indented under the topic)`` entries."""
    text = "topics:\n" + "".join(TOPIC_HEAD.format(name=name) + body for name, body in topics)
    path = tmp_path / "topics.yaml"
    path.write_text(text, encoding="utf-8")
    return path


GOOD_FOCI = """    focal_sets:
      - name: Subtopics
        description: what the coverage is about
        foci:
          - {name: Energy transition, query: '"renewable energy" OR solar OR wind*'}
      - name: Media type
        foci:
          - name: Newspapers and wires
            media_tags: {media_type: [wire, newspaper], partisanship: center}
"""


# ----------------------------------------------------------------------------------------------- declarations


def test_focal_sets_are_read_with_the_topic(tmp_path: Path) -> None:
    loaded = load_topics(topics_file(tmp_path, ("with-foci", GOOD_FOCI), ("plain", "")))
    assert loaded.errors == []
    with_foci, plain = loaded.topics
    assert with_foci.focal_sets == (
        FocalSetDefinition(
            name="Subtopics",
            description="what the coverage is about",
            foci=(
                FocusDefinition(
                    name="Energy transition", selection=QuerySelection('"renewable energy" OR solar OR wind*')
                ),
            ),
        ),
        FocalSetDefinition(
            name="Media type",
            foci=(
                FocusDefinition(
                    name="Newspapers and wires",
                    selection=MediaTagSelection(
                        {"media_type": ("newspaper", "wire"), "partisanship": ("center",)}
                    ),
                ),
            ),
        ),
    )
    assert '"focal_sets"' in with_foci.to_json()
    # a topic without foci keeps its declaration JSON (and config hash): declaring foci elsewhere re-seeds nothing
    assert plain.focal_sets == () and "focal_sets" not in plain.to_json()


@pytest.mark.parametrize(
    ("foci", "field", "message"),
    [
        (
            "      - name: Subtopics\n        foci:\n          - {name: Fine, query: solar}\n"
            "          - {name: Jobs, query: 'jobs AND (tax'}\n",
            "focal_sets[0].foci[1].query",
            "focus 'Jobs' of focal set 'Subtopics': at position 9:",
        ),
        (
            "      - name: Subtopics\n        foci:\n          - {name: Both, query: solar, media_tags: {a: [b]}}\n",
            "focal_sets[0].foci[0]",
            "focus 'Both' of focal set 'Subtopics': expected a query or media_tags, not both",
        ),
        (
            "      - name: Kinds\n        foci:\n          - {name: Papers, media_tags: {Media Type: [newspaper]}}\n",
            "focal_sets[0].foci[0].media_tags.Media Type",
            "focus 'Papers' of focal set 'Kinds': tag_set 'Media Type' must be lower-case",
        ),
        (
            "      - name: Kinds\n        foci:\n          - {name: Papers, media_tags: {media_type: []}}\n",
            "focal_sets[0].foci[0].media_tags.media_type",
            "lists no tag",
        ),
        (
            "      - name: Kinds\n        foci:\n          - {name: A b, query: a}\n          - {name: a-B, query: b}\n",
            "focal_sets[0].foci[1].name",
            "focus 'a-B' of focal set 'Kinds' has the folder name of 'A b'",
        ),
        (
            "      - name: Kinds\n        foci: []\n",
            "focal_sets[0].foci",
            "expected a non-empty list of foci",
        ),
        (
            "      - name: '???'\n        foci: [{name: x, query: y}]\n",
            "focal_sets[0].name",
            "needs a letter",
        ),
        (
            "      - name: Kinds\n        foci:\n          - {name: x, query: y, colour: red}\n",
            "focal_sets[0].foci[0].colour",
            "unknown field",
        ),
    ],
)
def test_a_bad_focus_is_refused_naming_topic_place_and_focus_while_the_others_load(
    tmp_path: Path, foci: str, field: str, message: str
) -> None:
    loaded = load_topics(
        topics_file(tmp_path, ("first", GOOD_FOCI), ("broken", "    focal_sets:\n" + foci), ("last", ""))
    )
    assert [t.name for t in loaded.topics] == ["first", "last"]
    (error,) = loaded.errors
    assert (error.topic, error.field) == ("broken", field)
    assert message in error.problem


def test_foci_are_bounded(tmp_path: Path) -> None:
    many = "".join(f"          - {{name: f{i}, query: word{i}}}\n" for i in range(51))
    loaded = load_topics(
        topics_file(tmp_path, ("crowded", f"    focal_sets:\n      - name: s\n        foci:\n{many}"))
    )
    (error,) = loaded.errors
    assert error.field == "focal_sets" and "more than 50 foci" in error.problem


# ----------------------------------------------------------------------------------------------- computing

TABLES = ("story_links", "story_link_counts", "medium_links", "medium_link_counts")
#: the fixture's media kinds: A, B papers; D a wire; C, E untagged
MEDIA_TAGS = pd.DataFrame(
    {
        "media_id": [A, B, D, B],
        "tag_set": ["media_type", "media_type", "media_type", "region"],
        "tag": ["newspaper", "newspaper", "wire", "north"],
    }
)


def texts_stories() -> pd.DataFrame:
    """The hand-made topic of test_snapshot with texts: odd stories speak of solar power, even ones of football;
    501's title (not its text) says solar."""
    stories = stories_frame()
    odd = stories["stories_id"] % 2 == 1
    stories["text"] = np.where(
        odd, "Solar panels and the climate grid.", "Football match report, goals and fans."
    )
    stories.loc[stories["stories_id"] == 501, ["title", "text"]] = ["Solar farm opens", "A ribbon was cut."]
    stories["language"] = "en"
    return stories


def foci() -> list[Focus]:
    return [
        Focus("Subtopics", "Solar", QuerySelection("solar")),
        Focus("Subtopics", "Solar in titles", QuerySelection("title:solar")),
        Focus("Media type", "Papers", MediaTagSelection({"media_type": ["newspaper"]})),
        Focus(
            "Media type",
            "Northern papers or wires",
            MediaTagSelection({"media_type": ["newspaper", "wire"], "region": ["north"]}),
        ),
    ]


def compute(stories: pd.DataFrame, chosen: list[Focus], word_sample: int = 3):
    return compute_snapshot(
        stories,
        media_frame(),
        links_frame(),
        topic_timespans(),
        story_stats=stats_frame(),
        foci=chosen,
        media_tags=MEDIA_TAGS,
        word_sample=word_sample,
    )


@pytest.fixture(scope="module")
def result() -> SnapshotResult:
    """The topic with its four foci, computed once for the tests that only read it (writing files changes it)."""
    return compute(texts_stories(), foci())


def test_each_focus_holds_its_stories_as_relevance_and_media_tags_say(result: SnapshotResult) -> None:
    members = {found.focus.key: found.stories_id.tolist() for found in result.foci}
    assert members == {
        "subtopics/solar": [101, 201, 203, 301, 401, 403, 501],  # title or text
        "subtopics/solar-in-titles": [501],  # title: looks at the title alone
        "media-type/papers": [101, 102, 201, 202, 203],  # media A and B
        "media-type/northern-papers-or-wires": [201, 202, 203],  # paper or wire AND north: B only
    }


def test_a_focus_has_the_tables_the_topic_would_have_with_the_focus_stories_alone(
    result: SnapshotResult,
) -> None:
    stories = texts_stories()
    assert snapshot_problems(result, TOPIC_START, TOPIC_END) == []
    for found in result.foci:
        alone = compute(stories[stories["stories_id"].isin(found.stories_id)], [])
        assert [s.timespan for s in found.timespans] == [s.timespan for s in alone.timespans]
        for mine, theirs in zip(found.timespans, alone.timespans, strict=True):
            where = f"{found.focus.key} {mine.timespan.key}"
            assert mine.counts == theirs.counts, where
            for table in TABLES:
                pd.testing.assert_frame_equal(
                    getattr(mine, table), getattr(theirs, table), obj=f"{where} {table}"
                )
            for part in ("days", "media_days", "top_media", "top_stories", "top_words"):
                pd.testing.assert_frame_equal(
                    getattr(mine.summary, part), getattr(theirs.summary, part), obj=f"{where} {part}"
                )
    # and a focus is not the whole topic: the papers' overall timespan lost the links from C and D
    papers = result.focus("media-type/papers")["overall"]
    assert set(map(tuple, papers.story_links.to_numpy().tolist())) == {(101, 201), (201, 101), (202, 102)}
    assert papers.counts.story_count == 5 < result["overall"].counts.story_count


def test_top_words_count_a_fixed_sample_without_stop_words() -> None:
    result = compute(texts_stories(), foci(), word_sample=0)
    words = result["overall"].summary.top_words
    assert result["overall"].summary.words_sampled == result["overall"].counts.story_count == 11
    top = words.set_index("word")
    assert "and" not in top.index and "the" not in top.index  # English stop words
    # "story" is in every title; "solar" in the six odd stories of the overall timespan, "football" in five
    assert top.loc["story", "stories"] == 11 and top.loc["story", "share"] == 1.0
    assert (top.loc["solar", "stories"], top.loc["football", "stories"]) == (6, 5)
    assert words["rank"].tolist() == list(range(1, len(words) + 1))
    sampled = compute(texts_stories(), [], word_sample=4)["overall"].summary
    assert sampled.words_sampled == 4 and sampled.top_words["stories"].max() <= 4


def test_top_words_leave_out_the_stop_words_of_the_stories_own_languages() -> None:
    """French stories lose French stop words ("les", "des", "sur"), which are ordinary words in English."""
    stories = texts_stories()
    french = stories["stories_id"] % 2 == 1
    stories.loc[french, "text"] = "Les panneaux solaires des villes: un débat sur les toits."

    def top(languages: pd.Series) -> pd.DataFrame:
        return compute(stories.assign(language=languages), [], word_sample=0)["overall"].summary.top_words

    labelled = top(pd.Series(np.where(french, "fr", "en"), index=stories.index)).set_index("word")
    assert {"les", "des", "sur", "un"}.isdisjoint(labelled.index)  # French stop words, in French stories
    assert {"and", "the"}.isdisjoint(labelled.index)  # English stop words, in the English ones
    # six of the overall timespan's eleven stories are the French ones: the share is of the stories counted
    assert labelled.loc["panneaux", "stories"] == 6 and labelled.loc["panneaux", "share"] == 6 / 11
    assert labelled.loc["débat", "count"] == 6  # accented letters are part of the word
    # the same texts said to be English keep those words: the stop words follow each story's language
    as_english = top(pd.Series("en", index=stories.index)).set_index("word")
    assert as_english.loc["les", "stories"] == 6 and as_english.loc["les", "count"] == 12
    assert "des" in as_english.index and "sur" in as_english.index


def test_top_words_rank_by_the_stories_using_them() -> None:
    """One long recipe page repeating "tsp" forty times does not outrank a word six stories use."""
    stories = texts_stories()
    stories.loc[stories["stories_id"] == 102, "text"] = "tsp " * 40 + "football"
    words = compute(stories, [], word_sample=0)["overall"].summary.top_words.set_index("word")
    assert words.loc["tsp", "count"] == 40 and words.loc["tsp", "stories"] == 1
    assert words.loc["solar", "stories"] == 6 and words.loc["solar", "count"] < 40
    assert words.loc["solar", "rank"] < words.loc["tsp", "rank"]
    # the ranks follow the stories column, ties by occurrences then the word
    ranked = words.sort_values("rank")
    keys = list(zip(-ranked["stories"], -ranked["count"], ranked.index, strict=True))
    assert keys == sorted(keys)


def test_stop_words_cover_the_languages_of_the_real_pages() -> None:
    """Every language the real pages are written in has its stop words; Romanian's list, written without
    diacritics, stops "în", "și", "să" as texts write them."""
    expected = require_shared(NEWS_HTML / "expected.jsonl")
    texts = [json.loads(line).get("text") for line in expected.read_text(encoding="utf-8").splitlines()]
    languages = {guess_language(text) for text in texts} - {None}
    assert {"en", "pt", "ja", "ru", "zh", "it", "ar", "es"} <= languages, languages
    for code in sorted(languages | {"ro", "fr", "de"}):
        assert len(stop_words((code,))) >= 40, code
    romanian = stop_words(("ro",))
    assert {"în", "și", "să", "că", "după", "in", "si"} <= romanian
    assert "climă" not in romanian and "guvernul" not in romanian
    assert {"the", "and"}.isdisjoint(romanian)  # a language's list only


def test_attention_and_top_lists_per_timespan() -> None:
    summary = compute(texts_stories(), [])["overall"].summary
    days = summary.days
    assert len(days) == 35 and days["day"].iloc[0] == pd.Timestamp("2026-01-07")  # every day of Jan 7..Feb 10
    assert days["story_count"].sum() == 11 - 1 - 1  # 402 is undated, 401 (Dec 15) is in through a link
    assert (summary.undated_stories, summary.outside_stories) == (1, 1)
    by_shares = summary.top_stories[summary.top_stories["metric"] == "facebook_share_count"]
    # 401 (100 shares) leads; 202 (0 shares) and the unknown ones do not rank
    assert by_shares["stories_id"].tolist() == [401, 101, 102]
    assert by_shares["media_name"].tolist() == ["Delta Wire", "Alpha News", "Alpha News"]
    by_inlinks = summary.top_media[summary.top_media["metric"] == "media_inlink_count"]
    assert by_inlinks["media_id"].tolist()[0] == B


def test_the_attention_chart_has_a_date_axis_and_compares_a_focus_with_the_topic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drawn: list[Figure] = []
    real_save = charts.save_png

    def keep(figure: Figure, path: Path) -> Path:
        drawn.append(figure)
        return real_save(figure, path)

    monkeypatch.setattr(charts, "save_png", keep)
    days = pd.DataFrame({"day": pd.date_range("2026-01-01", "2026-04-30", freq="D")})
    days["story_count"] = np.arange(len(days)) % 7
    topic_days = days.assign(story_count=days["story_count"] * 3)
    path = charts.render_attention_chart(
        days, tmp_path / "attention.png", "stories per day: focus", topic_days=topic_days
    )
    again = charts.render_attention_chart(
        days, tmp_path / "again.png", "stories per day: focus", topic_days=topic_days
    )
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.read_bytes() == again.read_bytes()
    (axes,) = drawn[0].axes
    drawn[0].canvas.draw()
    # a calendar axis: the months of the four months by name, and the first and last day in view
    labels = [label.get_text() for label in axes.get_xticklabels() if label.get_text()]
    assert labels == ["2026", "Feb", "Mar", "Apr"]
    first, last = (mdates.num2date(x).date() for x in axes.get_xlim())
    assert (first, last) == (date(2025, 12, 31), date(2026, 4, 30))  # half a day either side
    legend = [text.get_text() for text in axes.get_legend().get_texts()]
    assert legend == ["7-day mean", "whole topic, 7-day mean", "stories a day"]


def test_long_spans_are_drawn_by_week_or_month_and_partial_ones_are_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Daily bars of years are invisible: over 180 days by week, over three years by month; the first and last
    week or month the span only partly covers are named under the chart; the axis names the day counted."""
    drawn: list[Figure] = []
    real_save = charts.save_png
    monkeypatch.setattr(
        charts, "save_png", lambda figure, path: drawn.append(figure) or real_save(figure, path)
    )
    year = pd.DataFrame(
        {"day": pd.date_range("2026-01-01", "2026-12-31", freq="D")}
    )  # a Thursday to a Thursday
    year["story_count"] = 1
    unit, weeks = charts.binned(year)
    assert unit == "week" and weeks["story_count"].sum() == 365
    assert weeks["day"].iloc[0] == pd.Timestamp("2025-12-29")  # the Monday of the first week
    assert weeks["partial"].tolist() == [True, *[False] * (len(weeks) - 2), True]
    decade = pd.DataFrame({"day": pd.date_range("2010-01-15", "2025-12-31", freq="D")})
    decade["story_count"] = 2
    unit, months = charts.binned(decade)
    assert unit == "month" and months["story_count"].sum() == 2 * len(decade)
    assert months["partial"].sum() == 1 and months["partial"].iloc[0]  # January 2010, from the 15th
    charts.render_attention_chart(year, tmp_path / "year.png", "a year")
    (axes,) = drawn[-1].axes
    assert axes.get_xlabel() == f"week of the {charts.DAY_BASIS}"
    assert [t.get_text() for t in axes.get_legend().get_texts()] == ["stories a week"]
    notes = [text.get_text() for text in drawn[-1].texts]
    assert "partial weeks (lighter): 2025-12-29, 2026-12-28" in notes
    charts.render_attention_chart(year.head(30), tmp_path / "month.png", "a month")
    assert drawn[-1].axes[0].get_xlabel() == charts.DAY_BASIS


def test_a_focus_files_sit_under_foci_and_every_table_is_keyed_by_focus_and_timespan(tmp_path: Path) -> None:
    result = compute(texts_stories(), foci())  # its own: writing the files adds columns to its tables
    written = write_snapshot_files(result, tmp_path)
    papers = tmp_path / "foci" / "media-type" / "papers"
    assert sorted(p.name for p in (papers / "overall").iterdir()) == sorted(
        [
            *(f"{table}.parquet" for table in TABLES),
            "media.csv",
            "medium_links.csv",
            "stories.csv",
            "stories.parquet",
            "story_links.csv",
        ]
    )
    assert written["foci/media-type/papers/overall"]
    spans = pd.read_parquet(tmp_path / "timespans.parquet")
    assert spans["focus"].isna().sum() == len(topic_timespans())
    assert len(spans) == len(topic_timespans()) * (1 + len(foci()))
    row = spans[(spans["focus"] == "media-type/papers") & (spans["key"] == "overall")].iloc[0]
    assert row["story_count"] == 5
    words = pd.read_parquet(tmp_path / "top_words.parquet")
    # 501, the one story with solar in its title, was published after the topic: that focus has no words
    assert set(words["focus"].dropna()) == {f.key for f in foci()} - {"subtopics/solar-in-titles"}
    overall = words[words["focus"].isna() & (words["timespan"] == "overall")].drop(
        columns=["focus", "timespan"]
    )
    pd.testing.assert_frame_equal(overall.reset_index(drop=True), result["overall"].summary.top_words)
    per_day = pd.read_csv(tmp_path / "stories_per_day.csv")
    assert list(per_day.columns) == ["focus", "timespan", "day", "story_count"]
    table = pd.read_csv(tmp_path / "foci.csv")
    assert table["definition"].tolist() == [
        "solar",
        "title:solar",
        "media_type: newspaper",
        "media_type: newspaper, wire; region: north",
    ]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert [f["key"] for f in manifest["foci"]] == [f.key for f in foci()]
    assert manifest["foci"][2]["timespans"][0] == {
        "key": "overall",
        "folder": "foci/media-type/papers/overall",
        "counts": asdict(result.focus("media-type/papers")["overall"].counts),
        "empty": False,
    }
    # the same inputs write the same bytes
    write_snapshot_files(compute(texts_stories(), foci()), tmp_path / "again")
    for name in (
        "top_words.parquet",
        "top_stories.csv",
        "timespans.parquet",
        "foci/subtopics/solar/overall/stories.csv",
    ):
        assert (tmp_path / name).read_bytes() == (tmp_path / "again" / name).read_bytes(), name


def test_problems_in_a_focus_name_the_focus() -> None:
    result = compute(texts_stories(), foci())
    solar = result.focus("subtopics/solar")["overall"]
    solar.story_link_counts = pd.concat([solar.story_link_counts, solar.story_link_counts.iloc[:0]])
    solar.story_links = solar.story_links.iloc[1:]
    problems = snapshot_problems(result, TOPIC_START, TOPIC_END)
    assert problems and all(p.startswith("foci/subtopics/solar/overall:") for p in problems)


# ----------------------------------------------------------------------------------------------- the store


FOCI_YAML = """    focal_sets:
      - name: Subtopics
        foci:
          - {name: Energy, query: 'solar OR wind'}
      - name: Media type
        foci:
          - {name: Papers, media_tags: {media_type: [newspaper]}}
"""
TAGS_CSV = "medium_url,tag_set,tag\nhttps://alphamirror.test/,media_type,newspaper\nhttps://gamma.test/,media_type,blog\n"


def stored_topic(store: TopicStore, tmp_path: Path) -> tuple[Path, TopicConfig]:
    """The hand-made store topic of test_snapshot_assets, declared with two foci; its mirror of Alpha tagged
    newspaper (so Alpha is), Gamma blog; stories 11, 21 and 31 speak of solar power."""
    topics_file = tmp_path / "topics.yaml"
    topics_file.write_text(TOPICS_YAML + FOCI_YAML, encoding="utf-8")
    build_topic(store, topics_file)
    (tmp_path / "tags.csv").write_text(TAGS_CSV, encoding="utf-8")
    load_media_tags(store, read_media_tags_csv(tmp_path / "tags.csv").rows)
    with store.engine.begin() as conn:
        conn.execute(update(s.stories).values(text="Politics as usual.", language="en"))
        conn.execute(
            update(s.stories)
            .where(s.stories.c.stories_id.in_([11, 21, 31]))
            .values(text="Solar power grows.")
        )
    return topics_file, load_topics(topics_file).topics[0]


def test_the_store_snapshot_holds_and_records_each_focus(store: TopicStore, tmp_path: Path) -> None:
    _, topic = stored_topic(store, tmp_path)
    foci_of_topic = topic_foci(topic)
    inputs = read_snapshot_inputs(store, SNAP_TOPIC, foci_of_topic)
    # the mirror's tag counts for Alpha, its final medium
    assert inputs.media_tags.to_numpy().tolist() == [
        [SA, "media_type", "newspaper"],
        [SC, "media_type", "blog"],
    ]
    options = SnapshotOptions(
        picture_periods=("overall",), link_map_tag_set="media_type", focus_pictures=True
    )
    built = build_snapshot(store, SNAP_TOPIC, options, home=tmp_path, foci=foci_of_topic)
    assert not any(built.problems.values())
    check_snapshot_folder(built.folder)  # counts reconcile, the data dictionary validates
    manifest = json.loads((built.folder / "manifest.json").read_text())
    # each focal set's foci on one chart
    assert {"foci/subtopics/attention.png", "foci/media-type/attention.png"} <= set(manifest["files"])
    energy, papers = built.result.focus("subtopics/energy"), built.result.focus("media-type/papers")
    assert energy.stories_id.tolist() == [11, 21, 31]
    assert papers.stories_id.tolist() == [
        11,
        12,
        41,
        61,
    ]  # Alpha's stories, its mirror's and archive's included
    assert rows(energy["overall"].story_links) == [(11, 21), (21, 11), (31, 21)]
    assert papers["overall"].counts.story_link_count == 0  # all its links stay within Alpha
    with store.engine.connect() as conn:
        recorded = conn.execute(
            select(s.foci.c.name, s.foci.c.story_count, func.count(s.focus_timespans.c.focus_timespans_id))
            .join(s.focus_timespans, s.focus_timespans.c.foci_id == s.foci.c.foci_id)
            .group_by(s.foci.c.name, s.foci.c.story_count)
            .order_by(s.foci.c.name)
        ).all()
        sets = conn.execute(select(s.focal_sets.c.name).order_by(s.focal_sets.c.name)).scalars().all()
    assert [tuple(r) for r in recorded] == [("Energy", 3, 9), ("Papers", 4, 9)]
    assert sets == ["Media type", "Subtopics"]
    paths = snapshot_paths(store, SNAP_TOPIC, home=tmp_path)
    assert [f["key"] for f in paths["foci"]] == ["subtopics/energy", "media-type/papers"]
    assert paths["foci"][0]["attention_png"].is_file() and paths["foci"][0]["link_map_png"].is_file()
    assert paths["attention_png"].is_file()
    report = format_snapshot_paths(paths, brief=True)
    assert "subtopics/energy  (Subtopics / Energy): 3 stories, 3 story links overall" in report
    assert (
        'for="tags:media_type" value="newspaper"' in (built.folder / "overall" / "link_map.gexf").read_text()
    )

    # the key covers the foci, the tags and the texts: the same inputs keep the snapshot, a change makes another.
    # The build's key is the key of what it read, so the changed inputs' keys are compared as read; a build
    # writes a whole folder, pictures included: one build, after both changes, shows a new snapshot written
    assert snapshot_key(inputs, options) == built.snapshot_key
    again = build_snapshot(store, SNAP_TOPIC, options, home=tmp_path, foci=foci_of_topic)
    assert (again.snapshot_key, again.written) == (built.snapshot_key, False)
    assert snapshot_key(read_snapshot_inputs(store, SNAP_TOPIC), options) != built.snapshot_key
    (tmp_path / "tags.csv").write_text(TAGS_CSV.replace("blog", "magazine"), encoding="utf-8")
    load_media_tags(store, read_media_tags_csv(tmp_path / "tags.csv").rows)
    retagged = snapshot_key(read_snapshot_inputs(store, SNAP_TOPIC, foci_of_topic), options)
    assert retagged != built.snapshot_key
    with store.engine.begin() as conn:
        conn.execute(update(s.stories).where(s.stories.c.stories_id == 22).values(text="Wind farms."))
    rewritten = build_snapshot(store, SNAP_TOPIC, options, home=tmp_path, foci=foci_of_topic)
    assert rewritten.snapshot_key not in (retagged, built.snapshot_key) and rewritten.written
    assert rewritten.result.focus("subtopics/energy").stories_id.tolist() == [11, 21, 22, 31]


def test_the_asset_page_sums_up_the_topic_and_each_focus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sqlite_store_url: str
) -> None:
    monkeypatch.setenv("TOPICMAP_HOME", str(tmp_path / "home"))
    store = TopicStore.open(sqlite_store_url)
    topics_file, _ = stored_topic(store, tmp_path)
    (tmp_path / "dagster").mkdir()
    # an instance with its compute logs in a local folder, as deployed: the webserver serves the pictures from it
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster"))
    instance.add_dynamic_partitions("topics", [SNAP_TOPIC])
    config = {
        "picture_periods": ["overall"],
        "link_map_tag_set": "media_type",
        "word_sample": 0,
    }  # no focus maps
    result = dg.materialize(
        [snapshots],
        partition_key=SNAP_TOPIC,
        instance=instance,
        resources={
            "store": TopicStoreResource(database_url=store.engine.url.render_as_string(hide_password=False)),
            "topics_file": TopicsFileResource(path=str(topics_file)),
        },
        run_config={"ops": {"snapshots": {"config": config}}},
    )
    entries = result.asset_materializations_for_node("snapshots")[0].metadata
    # the UI shows a markdown value inline only when it is short: every one here is, pictures included
    long = {k: len(v.md_str) for k, v in entries.items() if isinstance(v, dg.MarkdownMetadataValue)}
    assert long and max(long.values()) < MARKDOWN_INLINE_LIMIT, long
    meta = {k: v.value for k, v in entries.items()}
    overall = meta["summary_overall"]
    assert overall.startswith("### snaptest: the whole topic\n\n2026-01-05 to 2026-02-08: **7** stories, ")
    assert "**Top words** (share of the 7 stories whose words were counted): story 100%" in overall
    # the top media as the snapshot's files rank them
    folder = Path(meta["snapshot_folder"])
    files = pd.read_parquet(folder / "top_media.parquet")
    ranked = files[
        files["focus"].isna() & (files["timespan"] == "overall") & (files["metric"] == "media_inlink_count")
    ]
    columns = ["name", "media_id", "media_inlink_count", "story_count"]
    media = [
        (r.data["medium"], r.data["media inlinks"], r.data["stories"]) for r in meta["top_media"].records
    ]
    assert media == [(f"{n} ({i})", str(m), str(c)) for n, i, m, c in ranked[columns].itertuples(index=False)]
    assert media[0] == ("Beta (2)", "2", "2")
    stories = [(r.data["story"], r.data["media inlinks"]) for r in meta["top_stories"].records]
    assert stories[0] == ("Story 21 · Beta, 2026-01-13", "2")
    assert meta["link_map_preview"].startswith(
        "[![media link map of snaptest](/logs/topicmap/snapshots/snaptest/"
    )
    assert meta["attention"].startswith(
        "[![stories per day: snaptest: the whole topic](/logs/topicmap/snapshots/snaptest/"
    )
    energy = meta["focus subtopics/energy summary"]
    assert energy.startswith("### focus Subtopics / Energy (query: solar OR wind)")
    assert "**3** stories, **3** cross-media story links" in energy and "solar 100%" in energy
    assert [r.data["media inlinks"] for r in meta["focus subtopics/energy top_stories"].records][0] == "2"
    focus_rows = [(r.data["focus"], r.data["definition"], r.data["stories"]) for r in meta["foci"].records]
    assert focus_rows == [
        ("subtopics/energy", "query: solar OR wind", "3"),
        ("media-type/papers", "media_tags: media_type: newspaper", "4"),
    ]
    papers = folder / "foci" / "media-type" / "papers" / "overall"
    assert (papers / "attention.png").is_file() and (papers / "link_map.gexf").is_file()
    assert not (papers / "link_map.png").exists()  # focus pictures only with focus_pictures
    assert "focus media-type/papers attention" in meta and "focus media-type/papers link_map" not in meta
    instance.dispose()
    store.dispose()
