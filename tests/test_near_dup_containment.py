"""Looking up part of a story: a paragraph or a quote of a few sentences finds the stories that contain it,
with how much of it they hold beside the whole-document similarity, through the catalog, `POST
/near-duplicates` and `topicmap near-dups --text`; the containment index's keys, segments and bounds; and
`find_near_duplicates` honouring its `max_distance`."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime

import numpy as np
import pytest

from tests.shared_data import NEWS_HTML, require_shared
from tests.test_near_dup_service import ARTICLE, OTHER, _Running
from topicmap.cli import main as cli_main
from topicmap.dedup.catalog import FingerprintCatalog
from topicmap.dedup.containment import (
    MIN_QUERY_WORDS,
    ContainmentIndex,
    containment_keys,
    containment_keys_many,
    containment_keys_of_token_hashes,
)
from topicmap.dedup.service import create_app
from topicmap.dedup.shingles import containment_sorted, shingle_array
from topicmap.dedup.simhash import fingerprint, text_features
from topicmap.dedup.store import find_near_duplicates
from topicmap.dedup.tokens import tokenize
from topicmap.store import schema as s
from topicmap.store.topic_store import NewStory, TopicStore, now_utc
from topicmap.topics.declarations import TopicConfig

HELD_OUT = 8  # the corpus's last articles are not stored: texts from no story


@dataclass
class RealStore:
    store: TopicStore
    url: str  # sqlite URL, for the command line
    catalog: FingerprintCatalog
    urls: list[str]  # stored article i is at urls[i]
    texts: list[str]
    held_out: list[str]

    def long_story(self) -> int:
        """The longest stored article under 25,000 characters (one of 13,000-20,000 in this corpus)."""
        sizes = [len(text) if len(text) < 25_000 else 0 for text in self.texts]
        return int(np.argmax(sizes))


def real_articles() -> list[str]:
    expected = require_shared(NEWS_HTML / "expected.jsonl")
    rows = [json.loads(line) for line in expected.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [
        row["text"] for row in rows if isinstance(row.get("text"), str) and len(row["text"].split()) >= 80
    ]


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealStore]:
    texts = real_articles()
    stored, held_out = texts[:-HELD_OUT], texts[-HELD_OUT:]
    url = f"sqlite:///{tmp_path_factory.mktemp('containment') / 'store.sqlite3'}"
    store = TopicStore.open(url)
    urls = [f"https://outlet{i % 9}.test/news/{i}" for i in range(len(stored))]
    store.add_stories(
        [
            NewStory(u, f"Article {i}", text, None)
            for i, (u, text) in enumerate(zip(urls, stored, strict=True))
        ],
        "archive:test",
    )
    catalog = FingerprintCatalog(store)
    catalog.refresh()
    yield RealStore(store, url, catalog, urls, stored, held_out)
    store.dispose()


def middle_paragraph(text: str) -> str:
    paragraphs = [p.strip() for p in text.split("\n") if len(p.split()) >= 40]
    return paragraphs[len(paragraphs) // 2]


def three_sentence_quote(text: str) -> str:
    sentences = [s for s in re.split(r"(?<=[.!?\u201d\"])\s+", text.replace("\n", " ")) if s.strip()]
    start = len(sentences) // 2
    while len(" ".join(sentences[start : start + 3]).split()) < 25:
        start += 1
    return " ".join(sentences[start : start + 3])


def parts_of_the_long_story(real: RealStore) -> dict[str, str]:
    text = real.texts[real.long_story()]
    return {
        "paragraph": middle_paragraph(text),
        "3-sentence quote": three_sentence_quote(text),
        "first 3,000 characters": text[:3000],
    }


def test_a_paragraph_and_a_quote_of_a_long_story_are_found_inside_it(real: RealStore) -> None:
    story = real.long_story()
    assert len(real.texts[story]) > 10_000
    for name, part in parts_of_the_long_story(real).items():
        _, matches = real.catalog.lookup(part)
        by_url = {m.url: m for m in matches}
        assert real.urls[story] in by_url, f"the {name} did not find its story"
        found = by_url[real.urls[story]]
        assert found.containment >= 0.99, name
        # However it was found, a match shows the distance of its stored fingerprint.
        assert found.hamming_distance == bin(fingerprint(part) ^ fingerprint(real.texts[story])).count("1")
        # The whole-document similarity stays as low as it is: a part is not a copy.
        assert found.shingle_similarity < (0.5 if name.startswith("first") else 0.1), name
        assert matches[0].containment >= 0.99  # the stories holding all of it come first
        assert all(m.containment >= 0.5 or m.shingle_similarity >= 0.7 for m in matches)


def test_the_service_and_the_command_line_answer_the_same(
    real: RealStore, capsys: pytest.CaptureFixture
) -> None:
    story = real.long_story()
    quote = parts_of_the_long_story(real)["3-sentence quote"]
    with _Running(create_app(real.catalog, refresh_seconds=0, load_on_start=False)) as client:
        response = client.post("/near-duplicates", json={"text": quote})
    assert response.status_code == 200, response.text
    served = response.json()["matches"]
    assert served[0]["url"] == real.urls[story] and served[0]["containment"] >= 0.99

    assert cli_main(["near-dups", "--text", quote, "--database-url", real.url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["containment", "jaccard", "bits", "story", "url", "title"]
    rows = [line.split() for line in lines[1:]]
    assert [row[4] for row in rows] == [m["url"] for m in served]
    for row, match in zip(rows, served, strict=True):
        assert abs(float(row[0]) - match["containment"]) <= 0.006
        assert abs(float(row[1]) - match["shingle_similarity"]) <= 0.006


def test_a_text_from_no_story_finds_nothing(real: RealStore, capsys: pytest.CaptureFixture) -> None:
    stored_shingles = [shingle_array(text) for text in real.texts]
    looked_up = []
    for text in real.held_out:
        paragraph = middle_paragraph(text) if "\n" in text else text[:600]
        own = shingle_array(paragraph)
        if max(containment_sorted(own, theirs) for theirs in stored_shingles) >= 0.5:
            continue  # the corpus holds another copy of this article: it is in a story
        looked_up.append(paragraph)
        assert real.catalog.lookup(paragraph)[1] == []
    assert len(looked_up) >= 3
    assert cli_main(["near-dups", "--text", looked_up[-1], "--database-url", real.url]) == 0
    assert capsys.readouterr().out.startswith("no story contains the text or copies it")


def test_a_text_too_short_to_tell_anything_is_refused_with_the_reason(
    real: RealStore, capsys: pytest.CaptureFixture
) -> None:
    assert cli_main(["near-dups", "--text", "the president said on Tuesday", "--database-url", real.url]) == 2
    assert f"a lookup needs at least {MIN_QUERY_WORDS}" in capsys.readouterr().err
    with _Running(create_app(real.catalog, refresh_seconds=0, load_on_start=False)) as client:
        response = client.post("/near-duplicates", json={"text": "the president said on Tuesday"})
    assert response.status_code == 422 and "the text has 5 word(s)" in response.json()["error"]


def when(day: int) -> datetime:
    return datetime(2026, 2, day, 9, tzinfo=UTC)


def test_stories_holding_all_of_a_text_come_first_then_the_most_similar(tmp_path) -> None:  # noqa: ANN001
    paragraph = ARTICLE.split(". ", 2)[2]  # the last sentences, ~55 words
    quoted = f"{OTHER} As the herald reported: {paragraph} The club did not comment."
    edited = paragraph.replace("two hundred million", "a lot of money")
    store = TopicStore.open(f"sqlite:///{tmp_path / 'store.sqlite3'}")
    store.add_stories(
        [
            NewStory("https://herald.test/carbon", "Council approves carbon plan", ARTICLE, when(3)),
            NewStory("https://sports.test/stadium", "Stadium, and the plan", quoted, when(4)),
            NewStory("https://digest.test/carbon", "Digest", f"{edited} More news tomorrow.", when(5)),
            NewStory("https://sports.test/other", "Stadium", OTHER, when(6)),
        ],
        "archive:test",
    )
    catalog = FingerprintCatalog(store)
    catalog.refresh()
    _, matches = catalog.lookup(paragraph)
    store.dispose()
    assert [m.url for m in matches] == [
        "https://herald.test/carbon",  # all of it, and the most similar of the two that hold all of it
        "https://sports.test/stadium",  # all of it, in a story about something else
        "https://digest.test/carbon",  # most of it, edited
    ]
    assert matches[0].containment == matches[1].containment == 1.0 > matches[2].containment >= 0.5
    assert matches[0].shingle_similarity > matches[1].shingle_similarity
    # Each match has the distance of its stored fingerprint, however it was found.
    assert [m.hamming_distance for m in matches] == [
        bin(fingerprint(paragraph) ^ fingerprint(text)).count("1")
        for text in (ARTICLE, quoted, f"{edited} More news tomorrow.")
    ]


def test_every_verbatim_run_of_the_minimum_length_shares_all_its_keys_with_the_text(real: RealStore) -> None:
    rng = random.Random(31)
    for text in real.texts[:40]:
        tokens = tokenize(text)
        keys = containment_keys(tokens)
        for _ in range(10):
            start = rng.randrange(0, len(tokens) - MIN_QUERY_WORDS + 1)
            run = tokens[start : start + MIN_QUERY_WORDS + rng.randrange(0, 30)]
            run_keys = containment_keys(run)
            assert len(run_keys) >= 1 and np.isin(run_keys, keys).all()


def test_keys_of_many_documents_at_once_equal_each_document_alone() -> None:
    rng = random.Random(7)
    words = ARTICLE.split() + OTHER.split()
    documents = [tokenize(" ".join(rng.choices(words, k=n))) for n in (0, 1, 3, 4, 5, 14, 15, 16, 40, 300, 2)]
    doc, keys = containment_keys_many(documents)
    for index, tokens in enumerate(documents):
        assert keys[doc == index].tolist() == containment_keys(tokens).tolist()
    assert containment_keys(documents[2]).size == 0  # three words: no 4-gram
    assert containment_keys(documents[4]).size == 1  # shorter than a window: its smallest 4-gram
    for tokens in documents:  # the lookup's path: from the token hashes its fingerprint computed
        features = text_features(tokens)
        assert features.fingerprint == fingerprint(" ".join(tokens))
        assert (
            containment_keys_of_token_hashes(features.token_hashes).tolist()
            == containment_keys(tokens).tolist()
        )


def test_an_index_built_in_batches_answers_as_one_built_at_once() -> None:
    rng = random.Random(5)
    words = (ARTICLE + " " + OTHER).split()
    documents = [tokenize(" ".join(rng.choices(words, k=rng.randrange(20, 200)))) for _ in range(300)]
    at_once, in_batches = ContainmentIndex(), ContainmentIndex()
    at_once.add(range(300), documents)
    for start in range(0, 300, 7):
        in_batches.add(range(start, min(start + 7, 300)), documents[start : start + 7])
    assert in_batches.postings == at_once.postings and len(in_batches) == 300
    assert in_batches.segment_count <= 2 * int(np.log2(at_once.postings)) + 1  # merged as they grow
    for tokens in documents[::17]:
        keys = containment_keys(tokens)
        a, b = at_once.query(keys), in_batches.query(keys)
        assert a.stories_ids.tolist() == b.stories_ids.tolist() and a.shared.tolist() == b.shared.tolist()


def test_a_query_reads_its_rarest_keys_first_and_at_most_max_postings() -> None:
    index = ContainmentIndex()
    common, rare = tokenize(ARTICLE), tokenize(OTHER)
    index.add(range(100), [common] * 99 + [common + rare])  # ARTICLE is everywhere, OTHER in story 99 only
    keys = containment_keys(common + rare)
    everything = index.query(keys)
    assert everything.stories_ids[0] == 99 and everything.keys_used == everything.keys
    assert everything.shared.tolist() == [everything.keys] + [len(containment_keys(common))] * 99
    bounded = index.query(keys, max_postings=20)
    # The keys that only story 99 has (OTHER's and the seam's) fit; those of all 100 stories are left out.
    assert bounded.keys_used == bounded.keys - len(containment_keys(common)) < bounded.keys
    assert bounded.stories_ids.tolist() == [99]  # found by its rare keys alone
    one_key = index.query(containment_keys(common)[:1], max_postings=10)
    assert len(one_key.stories_ids) == 10  # a key over the bound alone: cut to the bound
    sampled = index.query(keys, max_keys=5)
    assert sampled.keys == sampled.keys_used == 5  # the 5 smallest keys stand for the text
    assert sampled.shared.tolist() == [5] + [int(np.isin(keys[:5], containment_keys(common)).sum())] * 99


def test_bad_input_to_the_index_names_what_is_wrong(real: RealStore) -> None:
    index = ContainmentIndex()
    with pytest.raises(ValueError, match="2 story ids but 1 token lists"):
        index.add([1, 2], [["a", "b"]])
    with pytest.raises(ValueError, match="document indexes must be in 0..0"):
        index.add_keys([1], np.array([0, 1]), np.array([5, 6], dtype=np.uint32))
    with pytest.raises(ValueError, match="min_containment must be between 0 and 1"):
        real.catalog.lookup(ARTICLE, min_containment=1.5)


# ---------------------------------------------------------------------------------------------------
# find_near_duplicates(max_distance): the value asked is the value used

# ARTICLE with six words substituted: its fingerprint is 4 bits from ARTICLE's, its word-bigram Jaccard 0.8.
EDITED = (
    "The morning council approved a new plan on Tuesday to cut carbon emissions from public buildings by forty "
    "percent before the end of the decade. The plan replaces oil boilers in schools with heat pumps, adds solar "
    "panels morning votes roofs of libraries, and retrofits the insulation of older town halls. Council members "
    "argued for hours city the cost, which officials put morning two hundred city over eight years. Supporters "
    "said the savings on energy bills would repay most of it, while opponents warned that the region could not "
    "borrow more without raising taxes on households already struggling with prices."
)


def test_find_near_duplicates_uses_the_max_distance_it_is_given(store: TopicStore) -> None:
    assert bin(fingerprint(ARTICLE) ^ fingerprint(EDITED)).count("1") == 4
    topics_id = store.upsert_topic(
        TopicConfig(name="t", query="carbon", start_date=date(2026, 1, 1), end_date=date(2026, 3, 31))
    )
    ids = store.add_stories(
        [
            NewStory("https://herald.test/carbon", "Carbon plan", ARTICLE, when(3)),
            NewStory("https://gazette.test/carbon", "Carbon plan", EDITED, when(4)),
        ],
        "test",
    ).stories_ids
    with store.engine.begin() as conn:
        store.insert_ignore(
            conn,
            s.topic_stories,
            [{"topics_id": topics_id, "stories_id": i, "iteration": 0, "added_at": now_utc()} for i in ids],
            ["topics_id", "stories_id"],
        )
    assert [g["size"] for g in find_near_duplicates(store, topics_id).groups] == [2]  # default: 6 bits
    assert find_near_duplicates(store, topics_id, max_distance=3).groups == []  # 4 bits apart: not within 3
    assert [g["size"] for g in find_near_duplicates(store, topics_id, max_distance=4).groups] == [2]
    for wrong, error in ((-1, ValueError), (65, ValueError), (3.5, TypeError), (True, TypeError)):
        with pytest.raises(error, match="max_distance must be"):
            find_near_duplicates(store, topics_id, max_distance=wrong)  # type: ignore[arg-type]
