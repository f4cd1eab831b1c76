"""Archive drops: good rows load, bad rows are reported with their line and skipped; reloads add nothing."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tests.shared_data import WARC_DIR, require_shared
from topicmap.archive.drop_rows import ArchiveFileError
from topicmap.archive.drops import parse_drop
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore

CSV = """url,title,text,publish_date,medium
https://www.herald.test/2026/02/01/climate,Climate talks,Climate talks resumed.,2026-02-01T10:00:00Z,Daily Herald
not a url,Broken,Text,2026-02-01,Daily Herald
https://www.herald.test/2026/02/02/vote,Vote,"Quoted, with a comma.",2026-02-02,Daily Herald
https://ledger.test/x,Bad date,Text,yesterday,Ledger
https://ledger.test/y,,,2026-02-03,Ledger
https://ledger.test/z,Future,Text,2999-01-01,Ledger
https://ledger.test/old,Old,Text,2001-01-01,Ledger
https://ledger.test/2026/02/04/ok,Fine,Text,,Ledger
"""


def test_csv_drop_reports_each_bad_row_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "drop.csv"
    path.write_text(CSV, encoding="utf-8")
    drop = parse_drop(path)
    assert [st.title for st in drop.stories] == ["Climate talks", "Vote", "Fine"]
    problems = {e.line: e.problem for e in drop.errors}
    assert set(problems) == {3, 5, 6, 7, 8}
    assert "not an absolute http(s) URL" in problems[3]
    assert "'yesterday' is not an ISO date" in problems[5]
    assert "both title and text are empty" in problems[6]
    assert "in the future" in problems[7] and "before 2008" in problems[8]
    assert str(drop.errors[0]).startswith(f"{path}:3: ")


def test_parquet_drop_and_missing_columns(tmp_path: Path) -> None:
    frame = pd.DataFrame(
        {
            "url": ["https://a.test/1", "ftp://a.test/2"],
            "title": ["One", "Two"],
            "text": ["x", "y"],
            "publish_date": ["2026-02-01", "2026-02-02"],
            "medium": ["A", "A"],
        }
    )
    path = tmp_path / "drop.parquet"
    frame.to_parquet(path)
    drop = parse_drop(path)
    assert len(drop.stories) == 1 and drop.errors[0].line == 3
    frame.drop(columns=["text"]).to_parquet(tmp_path / "bad.parquet")
    with pytest.raises(ArchiveFileError, match=r"bad.parquet: missing column\(s\) \['text'\]"):
        parse_drop(tmp_path / "bad.parquet")
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(ArchiveFileError, match="unknown archive format '.json'"):
        parse_drop(tmp_path / "x.json")


def test_loading_a_drop_twice_adds_nothing(store: TopicStore, tmp_path: Path) -> None:
    path = tmp_path / "drop.csv"
    path.write_text(CSV, encoding="utf-8")
    drop = parse_drop(path)
    first = store.add_stories(drop.stories, source="archive:drop.csv")
    second = store.add_stories(parse_drop(path).stories, source="archive:drop.csv")
    assert (first.created, second.created) == (3, 0)
    assert store.table_count(s.stories) == 3
    # two media: the Daily Herald (www.herald.test) and the Ledger
    assert store.table_count(s.media) == 2


def test_warc_drops_load_story_indexer_archives_and_generic_crawls(store: TopicStore, tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from topicmap.archive.warc_stories import StoryArchiveWriter, StoryRecord

    html = (
        b"<html><head><title>Climate summit opens - Herald</title></head><body><article><h1>Climate summit opens</h1>"
        b"<p>Delegates from every continent met on Monday to discuss carbon emissions and the energy transition.</p>"
        b"</article></body></html>"
    )
    with StoryArchiveWriter(tmp_path, prefix="drop", serial=-1, deterministic_ids=True) as writer:
        writer.write_story(
            StoryRecord(
                url="https://www.herald.test/2026/02/01/climate",
                html=html,
                fetch_date=datetime(2026, 2, 1, 12, tzinfo=UTC),
                metadata={
                    "content_metadata": {
                        "article_title": "Climate summit opens",
                        "text_content": "Delegates met.",
                        "publication_date": "2026-02-01",
                    }
                },
            )
        )
    drop = parse_drop(tmp_path / "drop.warc.gz")
    assert [(st.title, st.text) for st in drop.stories] == [("Climate summit opens", "Delegates met.")]
    assert drop.stories[0].publish_date == datetime(2026, 2, 1, tzinfo=UTC)
    assert store.add_stories(drop.stories, source="warc").created == 1


def test_real_generic_warc_files_load_with_extracted_text_or_clear_errors(tmp_path: Path) -> None:
    folder = require_shared(WARC_DIR)
    require_shared(folder / "example.warc.gz")
    drop = parse_drop(folder / "example.warc.gz")
    # the capture of example.com: a generic crawl, title extracted from the HTML
    assert [st.url for st in drop.stories] == ["http://example.com/"]
    assert drop.stories[0].title == "Example Domain"
    bad = parse_drop(folder / "bad.arc")
    assert bad.stories == [] and bad.errors and "unreadable WARC record" in bad.errors[0].problem
