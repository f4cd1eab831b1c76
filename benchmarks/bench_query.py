"""Benchmark: one 5-clause topic query over 100k synthetic stories of ~500 words.

Anchor: Media Cloud's query-to-regex translation, rebuilt faithfully for the same query: one regex with a
left-only word boundary ``(?:^|\\W)``, AND as a both-orders alternation with ``.*`` between operands, every
NOT dropped, wildcard = plain prefix, phrase whitespace as ``\\s+`` (Python ``re`` has no POSIX
``[[:space:]]``; Media Cloud used re2), searched with IGNORECASE|VERBOSE|DOTALL on the first 1 MiB.
Its results differ from ours on purpose (NOT dropped, prefix matches); the table reports both counts.

The corpus is generated deterministically (seeded) chunk by chunk, so memory stays small; the generator
records which query words it planted in each story, which gives the ground truth for our semantics.

Run: .venv/bin/python benchmarks/bench_query.py [--stories 100000] [--words 500] [--seed 7]

``--pages``: the spider's raw-page prefilter (``TopicQuery.may_match``) on the real news pages instead
(the corpus of tests/shared_data.py, each page extracted once): its cost per page, how many pages it lets
through, and how many pages whose extracted story the spider would keep it rejects (must be 0). Anchor: the whole query
evaluated on the fully folded raw page, the rule the prefilter followed before it was relaxed (a NOT clause
or a ``title:`` clause decided on the raw HTML); it loses stories. Extraction's own cost is shown beside.
"""

from __future__ import annotations

import argparse
import platform
import random
import re
import time
from dataclasses import dataclass

import numpy as np

from topicmap.topics.query import parse

QUERY = '"climate change" AND emission* AND (treaty OR accord) AND NOT hoax'

# (text planted, counts for our engine) per clause; decoys show where Media Cloud's regex differs.
PHRASE_VARIANTS = [
    ("climate change", True),
    ("Climate Change", True),
    ("CLIMATE\nchange", True),
    ("climate-change", True),  # one token pair for a tokenizer; Media Cloud's \s+ misses it
    ("climate changes", False),  # no right boundary in Media Cloud: it matches
]
EMISSION_VARIANTS = [("emission", True), ("Emissions", True), ("emissionless", True), ("remission", False)]
AGREEMENT_VARIANTS = [
    ("treaty", True),
    ("Accord", True),
    ("accords", False),  # prefix match in Media Cloud
    ("accordion", False),
    ("treatyless", False),
]
HOAX_VARIANTS = [("hoax", True), ("HOAX", True), ("hoaxes", False)]
QUERY_STEMS = ("climate", "change", "emission", "treaty", "accord", "hoax")


@dataclass
class Timing:
    seconds: float = 0.0  # wall clock
    cpu_seconds: float = 0.0  # this process only: steadier on a shared machine
    matched: int = 0
    correct: int = 0


def make_vocabulary(rng: random.Random, size: int) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words: set[str] = set()
    while len(words) < size:
        word = "".join(rng.choice(letters) for _ in range(rng.randint(2, 11)))
        if not word.startswith(QUERY_STEMS):
            words.add(word)
    vocabulary = sorted(words)
    rng.shuffle(vocabulary)
    # A little punctuation and capitalisation, as in real text.
    return [
        w + "." if i % 17 == 0 else w.capitalize() if i % 23 == 0 else w for i, w in enumerate(vocabulary)
    ]


def make_chunk(
    rng: random.Random,
    np_rng: np.random.Generator,
    vocabulary: np.ndarray,
    weights: np.ndarray,
    count: int,
    words: int,
) -> tuple[list[str], list[bool]]:
    """Stories and, for each, whether our semantics must match it (from what was planted)."""
    indices = np_rng.choice(len(vocabulary), size=(count, words), p=weights)
    stories: list[str] = []
    truth: list[bool] = []
    for row in indices:
        tokens = vocabulary[row].tolist()
        phrase = emission = agreement = hoax = False
        for variants, rate in (
            (PHRASE_VARIANTS, 0.25),
            (EMISSION_VARIANTS, 0.3),
            (AGREEMENT_VARIANTS, 0.35),
            (HOAX_VARIANTS, 0.15),
        ):
            if rng.random() < rate:
                text, counts = rng.choice(variants)
                tokens.insert(rng.randrange(len(tokens) + 1), text)
                if variants is PHRASE_VARIANTS:
                    phrase |= counts
                elif variants is EMISSION_VARIANTS:
                    emission |= counts
                elif variants is AGREEMENT_VARIANTS:
                    agreement |= counts
                else:
                    hoax |= counts
        stories.append(" ".join(tokens))
        truth.append(phrase and emission and agreement and not hoax)
    return stories, truth


# ---- Media Cloud's regex, as its query translation builds it -----------------------------------------

MC_BOUNDARY = r"(?:^|\W)"


def mc_term(term: str) -> str:
    return MC_BOUNDARY + re.sub(r"(\W)", r"\\\1", term.lower())


def mc_phrase(phrase: str) -> str:
    escaped = re.sub(r"([^\w\s])", r"\\\1", phrase.lower().replace("*", ""))
    return MC_BOUNDARY + re.sub(r"\s+", r"\\s+", escaped)


def mc_or(operands: list[str]) -> str:
    return "(?: " + " | ".join(operands) + " )"


def mc_and(operands: list[str]) -> str:
    """AND of [a, rest...] = (?: (?: A .* R ) | (?: R .* A ) ), recursively: exponential in operands."""
    if len(operands) == 1:
        return operands[0]
    first, rest = operands[0], mc_and(operands[1:])
    return f"(?: (?: {first} .* {rest} ) | (?: {rest} .* {first} ) )"


def mediacloud_pattern() -> re.Pattern[str]:
    # The tree of QUERY with its NOT node filtered out (Media Cloud drops every NOT); emission* loses its '*'.
    pattern = mc_and(
        [mc_phrase("climate change"), mc_term("emission"), mc_or([mc_term("treaty"), mc_term("accord")])]
    )
    return re.compile(pattern, re.I | re.X | re.S)


# ---- the raw-page prefilter on real pages ------------------------------------------------------------

PAGE_QUERIES = (
    # the shape of the query whose topic lost 19 relevant stories: "recipe" sits in menus and image templates
    "(politic* OR president* OR election* OR congress OR parliament* OR minister*)"
    ' AND NOT (recipe* OR "game day")',
    'title:(climate OR weather) OR "climate change"~3 OR emission*',
    '"european union" OR brexit OR nato',
    "zzyzx",  # matches no page: the cost of a rejection
)


@dataclass
class RealPage:
    name: str
    url: str
    page: str
    title: str | None
    text: str
    description: str | None


def load_real_pages() -> tuple[list[RealPage], float]:
    """Every page of the news corpus as the spider reads it, with its extracted story; and the CPU seconds
    the extraction took."""
    import gzip
    import json
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.shared_data import NEWS_HTML
    from topicmap.web.extract import extract_story
    from topicmap.web.page import decode_html

    if not (NEWS_HTML / "expected.jsonl").is_file():
        raise SystemExit(f"the real pages are not at {NEWS_HTML}")
    pages = []
    cpu_seconds = 0.0
    for line in (NEWS_HTML / "expected.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        url = row.get("url") or row.get("url_raw_from_fixture") or ""
        page = decode_html(gzip.decompress((NEWS_HTML / row["file"]).read_bytes()))
        started = time.process_time()
        story = extract_story(page, url)
        cpu_seconds += time.process_time() - started
        pages.append(RealPage(row["file"], url, page, story.title, story.text, story.description))
    return pages, cpu_seconds


def spider_keeps(query, page: RealPage) -> bool:  # noqa: ANN001 - a TopicQuery
    """The spider's full relevance test on the extracted story (the text standing for its new sentences)."""
    return (
        any(value and query.matches(value) for value in (page.title, page.description, page.url))
        or query.matches_story(page.title, None, page.url, page.description)
        or query.matches(page.text)
    )


def best_cpu_seconds(run, repeats: int) -> float:  # noqa: ANN001 - a callable
    best = float("inf")
    for _ in range(repeats):
        started = time.process_time()
        run()
        best = min(best, time.process_time() - started)
    return best


def bench_pages(repeats: int) -> None:
    pages, extraction_seconds = load_real_pages()
    n = len(pages)
    characters = sum(len(page.page) for page in pages)
    print(
        f"{n} real news pages (~{characters / n / 1000:.0f} k characters each), "
        f"python {platform.python_version()}; CPU ms per page, best of {repeats}; "
        f"extraction (extract_story): {extraction_seconds / n * 1e3:.1f} ms per page"
    )
    print()
    print("| query | stories kept | prefilter: ms/page | passed | lost | anchor: ms/page | passed | lost |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for text in PAGE_QUERIES:
        query = parse(text)
        kept = [spider_keeps(query, page) for page in pages]
        ours = [query.may_match(page.page, urls=(page.url,)) for page in pages]
        anchor = [query.matches(page.page) for page in pages]
        ours_seconds = best_cpu_seconds(
            lambda q=query: [q.may_match(p.page, urls=(p.url,)) for p in pages], repeats
        )
        anchor_seconds = best_cpu_seconds(lambda q=query: [q.matches(p.page) for p in pages], repeats)
        lost_ours = sum(k and not m for k, m in zip(kept, ours, strict=True))
        lost_anchor = sum(k and not m for k, m in zip(kept, anchor, strict=True))
        print(
            f"| `{text}` | {sum(kept)} | {ours_seconds / n * 1e3:.2f} | {sum(ours)} | {lost_ours} | "
            f"{anchor_seconds / n * 1e3:.2f} | {sum(anchor)} | {lost_anchor} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stories", type=int, default=100_000)
    parser.add_argument("--words", type=int, default=500)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--chunk", type=int, default=5_000)
    parser.add_argument("--pages", action="store_true", help="the raw-page prefilter on the real news pages")
    parser.add_argument("--repeats", type=int, default=3, help="--pages: timed passes, the best is shown")
    args = parser.parse_args()
    if args.pages:
        bench_pages(args.repeats)
        return

    rng = random.Random(args.seed)
    np_rng = np.random.default_rng(args.seed)
    vocabulary = np.array(make_vocabulary(rng, 30_000), dtype=object)
    ranks = np.arange(1, len(vocabulary) + 1)
    weights = 1.0 / ranks**1.05
    weights /= weights.sum()

    started = time.perf_counter()
    query = parse(QUERY)
    ours_parse = time.perf_counter() - started
    started = time.perf_counter()
    mc = mediacloud_pattern()
    mc_compile = time.perf_counter() - started

    ours, theirs = Timing(), Timing()
    both = characters = generated = 0
    while generated < args.stories:
        count = min(args.chunk, args.stories - generated)
        stories, truth = make_chunk(rng, np_rng, vocabulary, weights, count, args.words)
        generated += count
        characters += sum(map(len, stories))

        started, cpu_started = time.perf_counter(), time.process_time()
        our_hits = [query.matches(story) for story in stories]
        ours.seconds += time.perf_counter() - started
        ours.cpu_seconds += time.process_time() - cpu_started

        started, cpu_started = time.perf_counter(), time.process_time()
        mc_hits = [mc.search(story[: 1 << 20]) is not None for story in stories]
        theirs.seconds += time.perf_counter() - started
        theirs.cpu_seconds += time.process_time() - cpu_started

        for mine, other, expected in zip(our_hits, mc_hits, truth, strict=True):
            ours.matched += mine
            theirs.matched += other
            ours.correct += mine == expected
            theirs.correct += other == expected
            both += mine and other

    n = args.stories
    print(f"query: `{QUERY}`  (ours, normalized: `{query}`)")
    print(
        f"{n} stories, {args.words} words each (~{characters / n:.0f} chars), seed {args.seed}; "
        f"python {platform.python_version()}; parse {ours_parse * 1e3:.1f} ms, MC regex compile "
        f"{mc_compile * 1e3:.1f} ms ({len(mc.pattern)} chars)"
    )
    print()
    print("| engine | matched | agrees with planted truth (our semantics) | wall s | CPU s | stories/CPU s |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, timing in (
        ("topicmap.topics.query (tree over folded text)", ours),
        ("Media Cloud regex (anchor)", theirs),
    ):
        print(
            f"| {name} | {timing.matched} | {timing.correct}/{n} | {timing.seconds:.2f} | "
            f"{timing.cpu_seconds:.2f} | {n / timing.cpu_seconds:,.0f} |"
        )
    print()
    print(f"matched by both: {both}; CPU speed-up {theirs.cpu_seconds / ours.cpu_seconds:.1f}x")


if __name__ == "__main__":
    main()
