"""Benchmark: one 5-clause topic query over 100k synthetic stories of ~500 words.

Anchor: Media Cloud's approach (fact sheet §1), rebuilt faithfully for the same query: one regex with a
left-only word boundary ``(?:^|\\W)``, AND as a both-orders alternation with ``.*`` between operands, every
NOT dropped, wildcard = plain prefix, phrase whitespace as ``\\s+`` (Python ``re`` has no POSIX
``[[:space:]]``; Media Cloud used re2), searched with IGNORECASE|VERBOSE|DOTALL on the first 1 MiB.
Its results differ from ours on purpose (NOT dropped, prefix matches); the table reports both counts.

The corpus is generated deterministically (seeded) chunk by chunk, so memory stays small; the generator
records which query words it planted in each story, which gives the ground truth for our semantics.

Run: .venv/bin/python benchmarks/bench_query.py [--stories 100000] [--words 500] [--seed 7]
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


# ---- Media Cloud's regex, as fact sheet §1 describes it -----------------------------------------

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stories", type=int, default=100_000)
    parser.add_argument("--words", type=int, default=500)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--chunk", type=int, default=5_000)
    args = parser.parse_args()

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
