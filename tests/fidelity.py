"""End-to-end fidelity of a topic run on real news pages: what the pipeline STORES, scored page by page
against what the benchmarked extractor returns for the same pages. Used by tests/test_fidelity_e2e.py
(thresholds) and benchmarks/eval_fidelity.py (the full figures); the scoring lives here only.

The run, as a user would make it:

- every page of the news corpus (``expected.jsonl``) is written to a WARC as an HTTP 200 response under its
  URL (a page without a URL, or sharing its URL with an earlier page, gets a URL of its own: a crawl holds
  one capture per URL). No charset is declared, as many servers do not: both the spider and the extractor
  read the page's own declaration;
- a topic whose query matches about half of the extracted stories, with a NOT clause whose words occur in
  the raw HTML (navigation, image templates) of some relevant pages, lists every page URL in a seed CSV
  judged by the query (``assume_match: false``), so every page is judged;
- ``topicmap topic run`` drives it (seeds, spider iterations replaying the WARC, post-spider stages) in a
  fresh TOPICMAP_HOME / DAGSTER_HOME with the embedded SQLite store.

What is scored, from the topic store (``stories``, ``topic_fetch_urls``, ``topic_stories``,
``topic_merged_stories_map``, ``story_sentence_hashes``) against ``extract_story`` on the same bytes and URL:

1. relevant pages missing from the topic (goal 0), by cause: rejected on the raw page (the prefilter), the
   stored story does not match where the extractor's does, something else. A page rejected because the
   sentences that match were claimed first by another story of its medium and week is counted apart: that is
   Media Cloud's rule of new sentences, not a loss;
2. stored title, text, date and language that differ from the extractor's (goal 0);
3. text F1, title and publisher-day rates of the stored stories against ``expected.jsonl``, next to the
   extractor's own on the same pages: the metrics of benchmarks/eval_extraction.py, imported;
4. the pipeline's relevance decisions against the same rule applied to the extractor's story alone.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path

from sqlalchemy import Connection, select

from benchmarks.eval_extraction import Page, Prediction, Score, as_day, score, token_f1
from tests.shared_data import NEWS_HTML
from topicmap.spider.judging import sentences, week_start
from topicmap.spider.store import CONTENT_MATCH_FAILED
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore, utc, utc_offset_minutes
from topicmap.topics.query import TopicQuery, parse
from topicmap.web.extract import ExtractedStory, decode_html, extract_story

REPO = Path(__file__).resolve().parent.parent
TOPIC = "fidelity"
#: the words of a politics-and-business topic: they match about half of the corpus's extracted stories
TOPIC_TERMS = (
    "politic* OR president* OR govern* OR election* OR state* OR public OR law* OR compan* OR market*"
)
#: words a researcher excludes; they also occur in the raw HTML of relevant pages (a "Recipes" navigation
#: link, an image URL template), where a prefilter must not read them as the story's words
EXCLUDED_TERMS = 'recipe* OR "game day"'
QUERY = f"({TOPIC_TERMS}) AND NOT ({EXCLUDED_TERMS})"
#: a second topic, run after the first over the same seeds, stores every page the first did not store, so
#: the stored story of EVERY page is compared with the extractor's (its query matches everything)
EVERY_PAGE_TOPIC = "fidelity-every-page"
EVERY_PAGE_QUERY = "*"
#: the share of pages whose extracted story must match, for the run to test both decisions
RELEVANT_SHARE_BOUNDS = (0.35, 0.65)
#: the host of pages the corpus gives no URL for (a ``.test`` name: never a real site)
FIXTURE_HOST = "fixtures.test"
#: the environment variables of the caller that must not leak into the run (its store, its page source ...)
_RUN_ENV_PREFIXES = ("TOPICMAP_", "DAGSTER_")


# --------------------------------------------------------------------------------------------------
# the corpus and the reference


@dataclass(frozen=True)
class Reference:
    """What the benchmarked extractor makes of a page, and whether the topic's rule keeps that story."""

    story: ExtractedStory
    relevant: bool
    excluded_word_in_raw_page: bool


def corpus_available(news_dir: Path = NEWS_HTML) -> bool:
    return (news_dir / "expected.jsonl").is_file()


def replay_pages(news_dir: Path = NEWS_HTML) -> list[Page]:
    """Every page of ``expected.jsonl``, each under a URL of its own (see the module doc)."""
    pages: list[Page] = []
    taken: set[str] = set()
    with open(news_dir / "expected.jsonl", encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            stem = row["file"].removesuffix(".html.gz")
            url = row.get("url") or f"http://{FIXTURE_HOST}/{stem}"
            if url in taken:
                url = f"{url}{'&' if '?' in url else '?'}fixture={stem.rsplit('/', 1)[-1]}"
            taken.add(url)
            html = gzip.decompress((news_dir / row["file"]).read_bytes())
            pages.append(Page(row["file"], url, html, row))
    return pages


def relevant_by_sentences(
    query: TopicQuery,
    title: str | None,
    description: str | None,
    url: str | None,
    story_sentences: Sequence[str],
) -> bool:
    """The spider's full relevance test (Media Cloud's): the title, description or URL match (each alone,
    or together), else the given sentences of the story (those it owns within its medium and week), joined."""
    if any(value and query.matches(value) for value in (title, description, url)):
        return True
    if query.matches_story(title, None, url, description):
        return True
    return bool(story_sentences) and query.matches(" ".join(story_sentences))


def relevant_alone(
    query: TopicQuery, title: str | None, description: str | None, url: str | None, text: str | None
) -> bool:
    """The full relevance test of a story none of whose sentences another story claimed before it: the
    harness's reference for the extractor's story, and the stored story's verdict on its own."""
    return relevant_by_sentences(query, title, description, url, sentences(text or ""))


def reference_of(pages: Sequence[Page], query: str = QUERY) -> dict[str, Reference]:
    """``extract_story`` on each page's bytes and replay URL, judged by ``query``; by page file."""
    parsed, excluded = parse(query), parse(EXCLUDED_TERMS)
    references = {}
    for page in pages:
        story = extract_story(page.html, page.url)
        references[page.file] = Reference(
            story=story,
            relevant=relevant_alone(parsed, story.title, story.description, page.url, story.text),
            excluded_word_in_raw_page=excluded.matches(decode_html(page.html, None)),
        )
    return references


def publisher_days(references: Iterable[Reference]) -> list[date]:
    return sorted(day for r in references if (day := as_day(r.story.publish_date)) is not None)


# --------------------------------------------------------------------------------------------------
# the run


def write_replay_warc(pages: Sequence[Page], path: Path) -> Path:
    """Each page as an HTTP 200 ``text/html`` response record under its URL (no charset declared)."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    with path.open("wb") as handle:
        writer = WARCWriter(handle, gzip=True)
        for page in pages:
            body = page.html
            headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
            writer.write_record(
                writer.create_warc_record(
                    page.url,
                    "response",
                    payload=io.BytesIO(body),
                    length=len(body),
                    http_headers=headers,
                    warc_headers_dict={"WARC-Date": "2024-01-01T00:00:00Z"},
                )
            )
    return path


def topics_yaml(seed_file: str, start: date, end: date) -> str:
    """Both topics: every page a seed URL judged by the query (``assume_match: false``); dates spanning the pages' own days (links are
    mined within them, as for any topic); one overall snapshot (weekly ones over 13 years would only cost)."""
    declarations = []
    for name, query in ((TOPIC, QUERY), (EVERY_PAGE_TOPIC, EVERY_PAGE_QUERY)):
        quoted = query.replace("'", "''")
        declarations.append(
            f"  - name: {name}\n"
            f"    query: '{quoted}'\n"
            f"    start_date: {start.isoformat()}\n"
            f"    end_date: {end.isoformat()}\n"
            "    max_iterations: 1\n"
            # a list of candidates: each page judged by the query (a seed list's default is to take its
            # stories as relevant)
            f"    seed_urls: [{{path: {seed_file}, assume_match: false}}]\n"
            "    snapshot_periods: [overall]\n"
        )
    return "topics:\n" + "".join(declarations)


@dataclass
class RunFolder:
    """The replay WARC, the seed list, the topics file and a fresh TOPICMAP_HOME / DAGSTER_HOME under
    ``workdir``; ``run`` drives one topic there with ``topicmap topic run`` (``python -m orchestration.cli``),
    as a user would, with the embedded SQLite store."""

    workdir: Path
    output: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def home(self) -> Path:
        return self.workdir / "home"

    @property
    def database_url(self) -> str:
        return f"sqlite:///{self.home / 'topicmap.sqlite3'}"

    def prepare(self, pages: Sequence[Page], references: dict[str, Reference]) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        write_replay_warc(pages, self.workdir / "pages.warc.gz")
        seeds = "url\n" + "".join(f"{page.url}\n" for page in pages)
        (self.workdir / "seeds.csv").write_text(seeds, encoding="utf-8")
        days = publisher_days(references.values())
        if not days:
            raise ValueError(
                "the extractor found no publish date on any page: the topic has no dates to span"
            )
        (self.workdir / "topics.yaml").write_text(
            topics_yaml("seeds.csv", days[0], days[-1]), encoding="utf-8"
        )

    def run(self, topic: str) -> None:
        """Run ``topic`` to its snapshot; raises with the command's output when it fails."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(_RUN_ENV_PREFIXES)}
        warc = self.workdir / "pages.warc.gz"
        env.update(
            {
                "TOPICMAP_HOME": str(self.home),
                "DAGSTER_HOME": str(self.home / "dagster_home"),
                "TOPICMAP_TOPICS_FILE": str(self.workdir / "topics.yaml"),
                "TOPICMAP_PAGE_SOURCE_JSON": json.dumps({"mode": "warc", "warc_paths": [str(warc)]}),
            }
        )
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "orchestration.cli", "topic", "run", topic],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        self.seconds[topic] = time.monotonic() - started
        self.output.append(done.stdout)
        if done.returncode != 0:
            raise RuntimeError(
                f"topicmap topic run {topic} exited {done.returncode}:\n{done.stdout[-3000:]}\n"
                f"{done.stderr[-5000:]}"
            )


# --------------------------------------------------------------------------------------------------
# what was stored


@dataclass(frozen=True)
class StoredStory:
    stories_id: int
    media_id: int
    url: str
    title: str | None
    description: str | None
    text: str
    publish_date: datetime | None  # UTC
    publish_utc_offset: int | None  # minutes, as the page wrote its date
    collect_date: datetime
    language: str | None

    @property
    def publisher_day(self) -> date | None:
        """The calendar day where the page was published (the day snapshots count it on)."""
        if self.publish_date is None:
            return None
        return (self.publish_date + timedelta(minutes=self.publish_utc_offset or 0)).date()


@dataclass
class StoredPage:
    """What the run made of one page's URL."""

    state: str | None  # its topic_fetch_urls state (None: the URL never reached the spider)
    message: str | None
    story: StoredStory | None  # the page's own story (stories.url is the page's URL)
    in_topic: bool = False
    #: the survivor, when dedup merged the page's story into another story of the topic
    merged_into: int | None = None
    #: other stories that own some of the story's sentences within its medium and week
    claimed_by: set[int] = field(default_factory=set)
    #: the stored story, judged alone (all its sentences) and with only the sentences it owns
    stored_relevant_alone: bool | None = None
    stored_relevant_own_sentences: bool | None = None


def _sentence_key(sentence: str) -> str:
    # the spider's claim key of a sentence: lower-cased, whitespace collapsed, md5
    return hashlib.md5(" ".join(sentence.lower().split()).encode("utf-8")).hexdigest()  # noqa: S324


def _stories_by_url(conn: Connection, urls: Sequence[str]) -> dict[str, StoredStory]:
    """The stories stored under ``urls`` (the spider stores a page's story under the URL it fetched)."""
    st = s.stories
    return {
        r.url: StoredStory(
            stories_id=r.stories_id,
            media_id=r.media_id,
            url=r.url,
            title=r.title,
            description=r.description,
            text=r.text or "",
            publish_date=utc(r.publish_date),
            publish_utc_offset=r.publish_utc_offset,
            collect_date=utc(r.collect_date),
            language=r.language,
        )
        for r in conn.execute(select(st).where(st.c.url.in_(list(urls))))
    }


def read_stories(database_url: str, pages: Sequence[Page]) -> dict[str, StoredStory | None]:
    """Each page's stored story (whichever topic stored it), by page file."""
    store = TopicStore.open(database_url)
    try:
        with store.engine.connect() as conn:
            stories = _stories_by_url(conn, [page.url for page in pages])
    finally:
        store.dispose()
    return {page.file: stories.get(page.url) for page in pages}


def _judge_stored_story(conn: Connection, query: TopicQuery, story: StoredStory, outcome: StoredPage) -> None:
    """The stored story judged alone and with only the sentences it owns; who owns the others."""
    ssh = s.story_sentence_hashes
    keys: dict[str, str] = {}  # claim key -> the story's first sentence with it, as the spider keeps it
    for sentence in sentences(story.text):
        keys.setdefault(_sentence_key(sentence), sentence)
    week = week_start((story.publish_date or story.collect_date).date())
    owners = dict(
        conn.execute(
            select(ssh.c.sentence_md5, ssh.c.stories_id).where(
                ssh.c.media_id == story.media_id,
                ssh.c.week_start_date == week,
                ssh.c.sentence_md5.in_(sorted(keys)),
            )
        ).all()
    )
    outcome.claimed_by = {owner for owner in owners.values() if owner != story.stories_id}
    outcome.stored_relevant_alone = relevant_alone(
        query, story.title, story.description, story.url, story.text
    )
    own = [sentence for key, sentence in keys.items() if owners.get(key) == story.stories_id]
    outcome.stored_relevant_own_sentences = relevant_by_sentences(
        query, story.title, story.description, story.url, own
    )


def read_topic(
    database_url: str, pages: Sequence[Page], topic: str = TOPIC, query: str = QUERY
) -> dict[str, StoredPage]:
    """Each page's outcome in ``topic``, by page file (read before another topic stores more of the pages)."""
    parsed = parse(query)
    store = TopicStore.open(database_url)
    try:
        topics_id = store.topic_row(topic)["topics_id"]
        f, ts, merged = s.topic_fetch_urls, s.topic_stories, s.topic_merged_stories_map
        urls = [page.url for page in pages]
        with store.engine.connect() as conn:
            fetches = {
                r.url: r
                for r in conn.execute(
                    select(f.c.url, f.c.state, f.c.message, f.c.stories_id).where(
                        f.c.topics_id == topics_id, f.c.url.in_(urls)
                    )
                )
            }
            stories = _stories_by_url(conn, urls)
            in_topic = set(conn.execute(select(ts.c.stories_id).where(ts.c.topics_id == topics_id)).scalars())
            merged_into = dict(
                conn.execute(
                    select(merged.c.source_stories_id, merged.c.target_stories_id).where(
                        merged.c.topics_id == topics_id
                    )
                ).all()
            )
            outcomes: dict[str, StoredPage] = {}
            for page in pages:
                fetch = fetches.get(page.url)
                story = stories.get(page.url)
                outcome = StoredPage(fetch.state if fetch else None, fetch.message if fetch else None, story)
                stories_id = story.stories_id if story else (fetch.stories_id if fetch else None)
                survivor, seen = stories_id, set()
                while survivor in merged_into and survivor not in seen:  # a merge chain ends at its survivor
                    seen.add(survivor)
                    survivor = merged_into[survivor]
                outcome.in_topic = survivor is not None and survivor in in_topic
                if outcome.in_topic and survivor != stories_id:
                    outcome.merged_into = survivor
                if story is not None:
                    _judge_stored_story(conn, parsed, story, outcome)
                outcomes[page.file] = outcome
    finally:
        store.dispose()
    return outcomes


# --------------------------------------------------------------------------------------------------
# scoring

#: why a relevant page is not in the topic
PREFILTER = "rejected on the raw page (prefilter)"
STORED_DIFFERS = "the stored story does not match, the extractor's does"
NOT_STORED = "not fetched or not stored"
UNEXPLAINED = "rejected, no cause the harness can see"
#: not a loss: Media Cloud's rule of sentences new within a medium and week
CLAIMED = "its matching sentences were claimed first by another story of its medium and week"
#: why a page the reference rejects is in the topic
FALSE_STORED_DIFFERS = "the stored story matches, the extractor's does not"
FALSE_UNJUDGED = "kept although neither story matches (not judged?)"
MISSING_CAUSES = (PREFILTER, STORED_DIFFERS, NOT_STORED, UNEXPLAINED)

FIELDS = ("title", "text", "date", "language")
METRICS = ("text_f1", "title", "date", "language")


@dataclass
class StoryComparison:
    """A page's stored story (None: nothing stored) against the extractor's story of the same page."""

    page: Page
    reference: Reference
    story: StoredStory | None
    differing: tuple[str, ...] = ()  # the fields of the stored story that differ from the extractor's


@dataclass
class PageVerdict(StoryComparison):
    """A page's outcome in the topic, against the reference's decision."""

    outcome: StoredPage | None = None
    cause: str | None = None  # the cause of a miss or of a false inclusion; None when both agree

    @property
    def in_topic(self) -> bool:
        return self.outcome is not None and self.outcome.in_topic


@dataclass(frozen=True)
class PairedScore:
    """Stored stories and the extractor's stories of the same pages, scored alike against expected.jsonl."""

    stored: Score
    extractor: Score

    def below_extractor(self) -> list[str]:
        """The metrics where the stored stories score below the extractor."""
        return [
            f"{name}: stored {getattr(self.stored, name):.4f} < extractor {getattr(self.extractor, name):.4f}"
            for name in METRICS
            if getattr(self.stored, name) < getattr(self.extractor, name) - 1e-9
        ]


@dataclass
class FidelityReport:
    verdicts: list[PageVerdict]  # the topic's pages
    every_page: list[StoryComparison]  # every page's stored story, after the second topic stored the rest
    topic_scores: PairedScore  # the stories the topic run stored
    every_page_scores: PairedScore
    run_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def pages(self) -> int:
        return len(self.verdicts)

    @property
    def relevant(self) -> list[PageVerdict]:
        return [v for v in self.verdicts if v.reference.relevant]

    @property
    def stored(self) -> list[PageVerdict]:
        """The pages the topic run stored a story for."""
        return [v for v in self.verdicts if v.story is not None]

    def missing(self, cause: str | None = None) -> list[PageVerdict]:
        """Relevant pages not in the topic (a sentence claim excepted), or those of one cause."""
        return [
            v
            for v in self.relevant
            if not v.in_topic and v.cause != CLAIMED and (cause is None or v.cause == cause)
        ]

    @property
    def claimed(self) -> list[PageVerdict]:
        return [v for v in self.relevant if v.cause == CLAIMED]

    @property
    def falsely_kept(self) -> list[PageVerdict]:
        return [v for v in self.verdicts if not v.reference.relevant and v.in_topic]

    def confusion(self) -> dict[tuple[bool, bool], int]:
        """(reference keeps, pipeline keeps) -> pages; a sentence claim counts as the pipeline keeping."""
        counts = Counter((v.reference.relevant, v.in_topic or v.cause == CLAIMED) for v in self.verdicts)
        return {key: counts[key] for key in ((True, True), (True, False), (False, True), (False, False))}

    @property
    def unstored(self) -> list[StoryComparison]:
        """Pages with no stored story even after the every-page topic (a harness or fetch problem)."""
        return [c for c in self.every_page if c.story is None]

    @staticmethod
    def differing(comparisons: Sequence[StoryComparison], name: str | None = None) -> list[StoryComparison]:
        return [c for c in comparisons if c.differing and (name is None or name in c.differing)]


def _differing_fields(story: StoredStory, extracted: ExtractedStory) -> tuple[str, ...]:
    """The fields the store holds otherwise than the extractor returned. The store's own conventions are
    not differences: NUL characters are dropped (PostgreSQL text cannot hold them), an empty title is NULL,
    a date is kept as its UTC instant plus the offset the page wrote it in."""

    def clean(value: str | None) -> str:
        return (value or "").replace("\x00", "")

    differing = []
    if clean(story.title) != clean(extracted.title):
        differing.append("title")
    if clean(story.text) != clean(extracted.text):
        differing.append("text")
    if story.publish_date != utc(extracted.publish_date) or story.publish_utc_offset != utc_offset_minutes(
        extracted.publish_date
    ):
        differing.append("date")
    if story.language != extracted.language:
        differing.append("language")
    return tuple(differing)


def _compare(page: Page, reference: Reference, story: StoredStory | None) -> StoryComparison:
    differing = _differing_fields(story, reference.story) if story is not None else ()
    return StoryComparison(page, reference, story, differing)


def _cause(reference: Reference, outcome: StoredPage, differing: tuple[str, ...]) -> str | None:
    if reference.relevant == outcome.in_topic:
        return None
    if not reference.relevant:  # kept, although the extractor's story does not match
        return FALSE_STORED_DIFFERS if outcome.stored_relevant_alone and differing else FALSE_UNJUDGED
    if outcome.story is None:
        return PREFILTER if outcome.state == CONTENT_MATCH_FAILED else NOT_STORED
    if not outcome.stored_relevant_alone:
        return STORED_DIFFERS if differing else UNEXPLAINED
    if outcome.claimed_by and not outcome.stored_relevant_own_sentences:
        return CLAIMED
    return UNEXPLAINED


def _paired_score(comparisons: Sequence[StoryComparison]) -> PairedScore:
    """eval_extraction's metrics over the pages that have a stored story, for both stories of each page."""
    kept = [c for c in comparisons if c.story is not None]
    pages, no_time = [c.page for c in kept], [0.0] * len(kept)
    stored = [Prediction(c.story.title, c.story.text, c.story.publisher_day, c.story.language) for c in kept]
    extracted = [
        Prediction(r.title, r.text, as_day(r.publish_date), r.language)
        for r in (c.reference.story for c in kept)
    ]
    return PairedScore(score(pages, stored, no_time), score(pages, extracted, no_time))


def evaluate(
    pages: Sequence[Page],
    references: dict[str, Reference],
    topic_outcomes: dict[str, StoredPage],
    every_page_stories: dict[str, StoredStory | None],
    run_seconds: dict[str, float] | None = None,
) -> FidelityReport:
    verdicts = []
    for page in pages:
        reference, outcome = references[page.file], topic_outcomes[page.file]
        compared = _compare(page, reference, outcome.story)
        cause = _cause(reference, outcome, compared.differing)
        verdicts.append(PageVerdict(page, reference, outcome.story, compared.differing, outcome, cause))
    every_page = [_compare(p, references[p.file], every_page_stories[p.file]) for p in pages]
    return FidelityReport(
        verdicts=verdicts,
        every_page=every_page,
        topic_scores=_paired_score(verdicts),
        every_page_scores=_paired_score(every_page),
        run_seconds=dict(run_seconds or {}),
    )


def run_and_evaluate(workdir: Path, news_dir: Path = NEWS_HTML) -> FidelityReport:
    """The whole harness: reference, WARC, the topic run, its outcome, the every-page run, the scores."""
    pages = replay_pages(news_dir)
    references = reference_of(pages)
    folder = RunFolder(workdir)
    folder.prepare(pages, references)
    folder.run(TOPIC)
    # read before the every-page topic stores the pages this one did not
    topic_outcomes = read_topic(folder.database_url, pages)
    folder.run(EVERY_PAGE_TOPIC)
    every_page_stories = read_stories(folder.database_url, pages)
    return evaluate(pages, references, topic_outcomes, every_page_stories, folder.seconds)


# --------------------------------------------------------------------------------------------------
# reporting


def describe(comparison: StoryComparison) -> str:
    """One line naming a page and what went wrong, with the numbers to look at."""
    story, extracted = comparison.story, comparison.reference.story
    parts = [comparison.page.file, comparison.page.url]
    if isinstance(comparison, PageVerdict) and comparison.cause:
        parts.append(comparison.cause)
        if comparison.outcome is not None and story is None:
            parts.append(f"state {comparison.outcome.state!r}: {comparison.outcome.message!r}")
        if comparison.cause == CLAIMED and comparison.outcome is not None:
            parts.append(f"sentences owned by stories {sorted(comparison.outcome.claimed_by)}")
    if story is None:
        return " | ".join(parts)
    if "text" in comparison.differing:
        expected = comparison.page.expected.get("text")
        against = (
            f"; F1 vs expected: stored {token_f1(story.text, expected):.3f}, "
            f"extractor {token_f1(extracted.text, expected):.3f}"
            if expected
            else ""
        )
        at = len(os.path.commonprefix([story.text, extracted.text]))
        parts.append(
            f"text: stored {len(story.text)} chars, extractor {len(extracted.text)}, "
            f"F1 between them {token_f1(story.text, extracted.text):.3f}{against}; first difference at "
            f"char {at}: stored {story.text[max(at - 30, 0) : at + 30]!r}, "
            f"extractor {extracted.text[max(at - 30, 0) : at + 30]!r}"
        )
    if "title" in comparison.differing:
        parts.append(f"title: stored {story.title!r}, extractor {extracted.title!r}")
    if "date" in comparison.differing:
        stored_date = story.publish_date.isoformat() if story.publish_date else None
        parts.append(
            f"date: stored {stored_date} (offset {story.publish_utc_offset} min), extractor "
            f"{extracted.publish_date.isoformat() if extracted.publish_date else None}"
        )
    if "language" in comparison.differing:
        parts.append(f"language: stored {story.language!r}, extractor {extracted.language!r}")
    return " | ".join(parts)


def markdown(report: FidelityReport) -> str:
    """The full figures, as markdown tables."""
    relevant, confusion = report.relevant, report.confusion()
    seconds = ", ".join(f"{name} {value:.0f} s" for name, value in report.run_seconds.items())
    lines = [
        f"### A topic run over {report.pages} real news pages replayed from a WARC "
        f"(`topicmap topic run`: {seconds})",
        "",
        f"Query: `{QUERY}`; every page a seed URL judged by the query.",
        "",
        "| pages | extracted story matches | of which the raw HTML has an excluded word | stories stored "
        "| in the topic |",
        "|---|---|---|---|---|",
        f"| {report.pages} | {len(relevant)} ({len(relevant) / report.pages:.1%}) | "
        f"{sum(v.reference.excluded_word_in_raw_page for v in relevant)} | {len(report.stored)} | "
        f"{sum(v.in_topic for v in report.verdicts)} |",
        "",
        "#### Relevance: the pipeline against the extractor's story judged alone (same rule)",
        "",
        "| | pipeline keeps | pipeline rejects |",
        "|---|---|---|",
        f"| extractor's story matches | {confusion[True, True]} | {confusion[True, False]} |",
        f"| extractor's story does not match | {confusion[False, True]} | {confusion[False, False]} |",
        "",
        f"A page whose matching sentences another story of its medium and week claimed first counts as kept "
        f"({len(report.claimed)} pages).",
        "",
        "| relevant page not in the topic, by cause | pages | goal |",
        "|---|---|---|",
        *(f"| {cause} | {len(report.missing(cause))} | 0 |" for cause in MISSING_CAUSES),
        f"| **all lost** | **{len(report.missing())}** of {len(relevant)} | 0 |",
        f"| (not a loss) {CLAIMED} | {len(report.claimed)} | |",
        f"| (the other way) kept, the extractor's story does not match | {len(report.falsely_kept)} | 0 |",
        "",
        "#### Stored story against `extract_story` on the same page",
        "",
        f"| field differing | stories of the topic ({len(report.stored)}) | every page "
        f"({len(report.every_page) - len(report.unstored)} stored of {len(report.every_page)}) | goal |",
        "|---|---|---|---|",
        *(
            f"| {name} | {len(report.differing(report.stored, name))} | "
            f"{len(report.differing(report.every_page, name))} | 0 |"
            for name in FIELDS
        ),
        f"| any | {len(report.differing(report.stored))} | {len(report.differing(report.every_page))} | 0 |",
        "",
        "#### Scores against expected.jsonl (benchmarks/eval_extraction.py's metrics)",
        "",
        "| stories | text F1 | title exact | publisher day | language |",
        "|---|---|---|---|---|",
        _score_row("stored by the topic run", report.topic_scores.stored),
        _score_row("`extract_story`, same pages (anchor)", report.topic_scores.extractor),
        _score_row("stored, every page", report.every_page_scores.stored),
        _score_row("`extract_story`, every page (anchor)", report.every_page_scores.extractor),
        "",
        "(pages scored in parentheses)",
    ]
    return "\n".join(lines)


def _score_row(label: str, result: Score) -> str:
    n_text, n_title, n_date, n_language = result.counts
    return (
        f"| {label} | {result.text_f1:.3f} ({n_text}) | {result.title:.3f} ({n_title}) | "
        f"{result.date:.3f} ({n_date}) | {result.language:.3f} ({n_language}) |"
    )


def page_listing(report: FidelityReport) -> str:
    """Every page the harness faults, one line each."""
    sections: list[tuple[str, Sequence[StoryComparison]]] = [
        ("relevant pages not in the topic", report.missing()),
        ("kept although the extractor's story does not match", report.falsely_kept),
        ("stored story differs from the extractor's (every page)", report.differing(report.every_page)),
        ("no story stored even by the every-page topic", report.unstored),
        ("relevant, rejected by a sentence claim (not a loss)", report.claimed),
    ]
    lines = []
    for title, comparisons in sections:
        lines.append(f"#### {title}: {len(comparisons)}")
        lines += [f"- {describe(c)}" for c in comparisons]
        lines.append("")
    return "\n".join(lines)
