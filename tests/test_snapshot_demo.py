"""The demo topic's foci as `make demo` shows them: the topic in topics.yaml declares a query focus and a media-tag
focus, the demo's tags file tags its outlets, and the demo's summary prints each focus's size and top words.

The topic's stories here are the demo web's archived stories that its query matches (what the spider starts
from), loaded by the archive asset; the tags file is the one `make demo` writes; the snapshot is the `snapshots`
asset run on the topic as declared in the repository's topics.yaml; the lines are those `make demo` prints."""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

import dagster as dg
import pytest
from sqlalchemy import insert, select

from assets.archive import archive_stories
from assets.media_tags import media_tags
from assets.snapshots import snapshots
from orchestration import demo
from resources.archive import ArchiveDropsResource
from resources.media_tags import MediaTagsResource
from resources.store import TopicStoreResource
from resources.topics import TopicsFileResource
from tests.snapshot_exports import check_snapshot_folder
from topicmap.demo.web import generate_demo_web
from topicmap.snapshots.words import stop_words
from topicmap.store import schema as s
from topicmap.store.media_tags import read_media_tags_csv
from topicmap.store.topic_store import TopicStore, now_utc
from topicmap.topics.declarations import load_topics

ROOT = Path(__file__).resolve().parent.parent
TOPIC = "climate-demo"
#: the clean-energy focus's query, read as a person reads it: one of these in the title
CLEAN_ENERGY_TITLE = re.compile(r"\b(wind|solar|heat pump\w*|renewable energy)\b", re.IGNORECASE)


def test_the_demo_topic_declares_a_query_focus_and_a_media_tag_focus() -> None:
    loaded = load_topics(ROOT / "topics.yaml")
    assert loaded.errors == []
    topic = loaded.by_name()[TOPIC]
    foci = {(focal_set.name, focus.name): focus for focal_set in topic.focal_sets for focus in focal_set.foci}
    kinds = {key: focus.selection.kind for key, focus in foci.items()}
    assert sorted(kinds.values()) == ["media_tags", "query"]
    (papers,) = (focus for focus in foci.values() if focus.selection.kind == "media_tags")
    assert papers.selection.declaration() == {"media_type": ("newspaper",)}


def test_make_demo_prints_each_focus_size_and_top_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, sqlite_store_url: str
) -> None:
    # the demo writes its tags file and points the settings at it: restored after the test
    for name in ("TOPICMAP_MEDIA_TAGS_FILE", "TOPICMAP_LINK_MAP_TAG_SET"):
        monkeypatch.setenv(name, "")
    monkeypatch.setenv("TOPICMAP_HOME", str(tmp_path / "home"))
    web = generate_demo_web(n_stories=600)
    drops = tmp_path / "drops"
    drops.mkdir()
    web.write_archive_parquet(drops / "demo_archive.parquet")
    tags_file = tmp_path / "media_tags.csv"
    demo._write_media_tags(web, tags_file)
    tag_rows = read_media_tags_csv(tags_file)
    assert tag_rows.problems == [] and {row.tag for row in tag_rows.rows} == {
        "newspaper",
        "wire",
        "digital_native",
    }
    newspapers = {row.medium_url for row in tag_rows.rows if row.tag == "newspaper"}

    topic = load_topics(ROOT / "topics.yaml").by_name()[TOPIC]
    db = sqlite_store_url  # an empty store, upgraded
    resources = {
        "store": TopicStoreResource(database_url=db),
        "topics_file": TopicsFileResource(path=str(ROOT / "topics.yaml")),
        "drops": ArchiveDropsResource(drops_dir=str(drops)),
        "media_tags_file": MediaTagsResource(path=str(tags_file)),
    }
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("topics", [TOPIC])
    dg.materialize([archive_stories], instance=instance, resources=resources)

    # the topic's stories: the archived ones its query matches within its dates
    in_topic = [
        story
        for story in web.archive_stories
        if topic.start_date <= date.fromisoformat(story["publish_date"][:10]) <= topic.end_date
        and topic.parsed_query.matches_story(story["title"], story["text"])
    ]
    store = TopicStore.open(db)
    topics_id = store.upsert_topic(topic)
    with store.engine.begin() as conn:
        ids = dict(conn.execute(select(s.stories.c.url, s.stories.c.stories_id)).all())
        now = now_utc()
        conn.execute(
            insert(s.topic_stories),
            [{"topics_id": topics_id, "stories_id": ids[st["url"]], "added_at": now} for st in in_topic],
        )
    store.dispose()

    result = dg.materialize(
        [media_tags, snapshots],
        partition_key=TOPIC,
        instance=instance,
        resources=resources,
        # no link map picture: the lines printed and the files checked here do not show one
        run_config={"ops": {"snapshots": {"config": {"picture_periods": []}}}},
    )
    demo._print_foci(result.asset_materializations_for_node("snapshots")[0].metadata)
    lines = capsys.readouterr().out.splitlines()
    # every timespan of the topic and of both foci reconciles; the data dictionary validates
    (folder,) = (tmp_path / "home" / "exports" / "snapshots" / TOPIC).iterdir()
    spans = check_snapshot_folder(folder)
    assert set(spans["focus"].dropna()) == {"media-type/newspapers", "subtopics/clean-energy"}

    clean_energy = [st for st in in_topic if CLEAN_ENERGY_TITLE.search(st["title"])]
    papers = [st for st in in_topic if st["medium_url"] in newspapers]
    assert 0 < len(clean_energy) < len(in_topic) and 0 < len(papers) < len(in_topic)
    pattern = re.compile(r"  focus (\S+) \((\w+): (.*)\): (\d+) stories, (\d+) story links; top words: (.*)")
    shown = {match[1]: match for match in map(pattern.fullmatch, lines) if match}
    assert sorted(shown) == ["media-type/newspapers", "subtopics/clean-energy"], lines
    energy, paper = shown["subtopics/clean-energy"], shown["media-type/newspapers"]
    assert (energy[2], energy[3]) == ("query", topic.focal_sets[0].foci[0].selection.declaration())
    assert (paper[2], paper[3]) == ("media_tags", "media_type: newspaper")
    assert int(energy[4]) == len(clean_energy) and int(paper[4]) == len(papers)
    english = stop_words(("en",))
    for match, stories in ((energy, clean_energy), (paper, papers)):
        words = match[6].split(", ")
        assert len(words) == 5 and not english & set(words), match[0]
        # each top word is used by the focus's stories (their own text, not the page around it)
        text = " ".join(f"{st['title']} {st['text']}" for st in stories).lower()
        assert all(re.search(rf"\b{word}\b", text) for word in words), match[0]
    # the clean-energy stories are about energy: a word of their query is among their five top words
    assert {"wind", "solar", "energy", "renewable", "heat", "pumps", "pump"} & set(energy[6].split(", "))
