"""Near-duplicate quality on the demo web's planted syndicated copies (topicmap.demo_web).

Run: .venv/bin/python benchmarks/eval_demo_near_duplicates.py [--seed 7] [--stories 3000]

Texts are what the spider stores: topicmap.extract.extract_story on each page's HTML. Items:

- every story's canonical page (``DemoStory.url``, one item per story, all subjects);
- every other URL that serves the same story as its own document: the ``m.`` mirror page, and the archive
  rows kept under a duplicate medium's URL (bare host of a ``www.`` outlet, a renamed outlet's old host,
  rendered with the old branding) or under a tracking-tail URL. Alternates that only answer 301 on the web
  and are not in the archive are skipped: the spider follows the redirect to the canonical page.

What is planted (DemoTruth), and how pairs are labelled:

- ``syndication_groups``: an original and 1-3 near-copies in *other outlets* (1-3% of words swapped for
  synonyms or filler words, a quarter with an added sentence, a quarter with a credit line; each copy also
  carries its own in-article link sentences). Positive pairs = two items of different stories of one group.
- ``duplicate_media`` (``m.`` mirrors, bare hosts, renamed outlets' old hosts) name the outlet they
  duplicate (``dup_of``): the same medium, not syndication. The builder picks copy outlets distinct from
  the original's outlet, and aliases are not outlets, so no group may hold two stories of one medium once
  aliases are resolved; the script checks this and stops if it fails. Pairs of one story under two URLs
  are "same-medium copies": excluded from both positives and negatives, reported on their own (the
  exact-copy distances).
- ``duplicate_stories`` of kind ``retitled``: one medium republishing a story the same day under a changed
  headline with an "Update:" lead. Same medium, near-identical text, not syndication: also excluded and
  reported on their own (counting them as false positives would charge the detector for a true duplicate).
- everything else is negative, including pairs of different stories drawn from the same sentence templates.

Methods, all in this run on the same texts (shared code: benchmarks/eval_near_duplicates.py):
simhash k=3; the two-stage topicmap.simhash.verified_near_duplicate_pairs at its defaults (k=6, Jaccard
>= 0.5, what the ``near_duplicates`` asset runs) and at k=8; datasketch MinHash LSH (threshold 0.8, 128
permutations, word-bigram shingles).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval_near_duplicates import (  # noqa: E402
    Pair,
    detect_pairs,
    distance_lines,
    hamming,
    recall_precision_lines,
    restrict,
    with_candidate_share,
)

from topicmap.demo_web import DemoWeb, generate_demo_web  # noqa: E402
from topicmap.extract import extract_story  # noqa: E402
from topicmap.simhash import fingerprints  # noqa: E402


@dataclass(frozen=True)
class Item:
    """One document the detector sees: a story under one URL."""

    url: str
    story: int  # index into web.stories
    kind: str  # canonical | mobile | bare_host | renamed | tracking_url
    medium: str  # the medium as the URL presents it (e.g. "Metro Ledger Mobile")
    same_medium_as: str  # that medium with duplicate-media aliases resolved (DemoTruth.duplicate_media)


def collect_items(web: DemoWeb) -> tuple[list[Item], list[bytes | str]]:
    """Canonical pages first (indices 0..n_stories-1), then alternate URLs serving their own document."""
    alias_of = {d["medium"]: d["dup_of"] for d in web.truth.duplicate_media}
    alias_by_host = {d["host"]: d for d in web.truth.duplicate_media}

    def resolve(medium: str) -> str:
        seen = {medium}
        while medium in alias_of:
            medium = alias_of[medium]
            if medium in seen:
                raise ValueError(f"duplicate_media aliases loop at {medium!r}")
            seen.add(medium)
        return medium

    archived_html = {row["url"]: row["html"] for row in web.archive_stories}
    items: list[Item] = []
    html: list[bytes | str] = []
    for index, story in enumerate(web.stories):
        items.append(Item(story.url, index, "canonical", story.medium, resolve(story.medium)))
        html.append(web.pages[story.url].body)
    for index, story in enumerate(web.stories):
        for url in story.alt_urls:
            page = web.pages.get(url)
            if page is not None and page.status == 200:
                body: bytes | str = page.body
            elif url in archived_html:
                body = archived_html[url]
            else:
                continue
            host = url.split("/")[2]
            alias = alias_by_host.get(host)
            kind = alias["kind"] if alias else "tracking_url"
            medium = alias["medium"] if alias else story.medium
            items.append(Item(url, index, kind, medium, resolve(medium)))
            html.append(body)
    for item in items:
        if item.same_medium_as != web.stories[item.story].medium:
            raise ValueError(f"{item.url}: truth resolves {item.medium!r} to another outlet than the story's")
    return items, html


def label_pairs(web: DemoWeb, items: list[Item]) -> tuple[dict[str, list[Pair]], dict[str, list[Pair]]]:
    """Syndication positives by class, and the excluded same-medium pairs by kind (all item pairs)."""
    story_index = {story.url: i for i, story in enumerate(web.stories)}
    items_of_story: dict[int, list[int]] = {}
    for position, item in enumerate(items):
        items_of_story.setdefault(item.story, []).append(position)

    positives: dict[str, list[Pair]] = {"original - copy": [], "copy - copy": []}
    for group in web.truth.syndication_groups:
        members = [story_index[group["original"]]] + [story_index[c["url"]] for c in group["copies"]]
        media = [items[m].same_medium_as for m in members]  # canonical items: position == story index
        if len(set(media)) != len(media):
            raise ValueError(f"syndication group of {group['original']} holds one medium twice: {media}")
        for a, b in itertools.combinations(range(len(members)), 2):
            kind = "original - copy" if a == 0 else "copy - copy"
            for x in items_of_story[members[a]]:
                for y in items_of_story[members[b]]:
                    positives[kind].append((min(x, y), max(x, y)))

    same_medium: dict[str, list[Pair]] = {}
    for positions in items_of_story.values():
        canonical, alternates = positions[0], positions[1:]
        for alternate in alternates:  # alternates of one story are copies of each other too
            same_medium.setdefault(f"{items[alternate].kind} copy (same story)", []).append(
                (canonical, alternate)
            )
        for x, y in itertools.combinations(alternates, 2):
            same_medium.setdefault("two alternate URLs (same story)", []).append((x, y))
    for record in web.truth.duplicate_stories:
        if record["kind"] != "retitled":
            continue
        first, second = (story_index[url] for url in record["urls"])
        same_medium["retitled (same medium)"] = same_medium.get("retitled (same medium)", []) + [
            (min(x, y), max(x, y)) for x in items_of_story[first] for y in items_of_story[second]
        ]
    return positives, same_medium


def canonical_only(pairs: dict[str, list[Pair]], n: int) -> dict[str, list[Pair]]:
    kept = {name: [p for p in values if p[1] < n] for name, values in pairs.items()}
    return {name: values for name, values in kept.items() if values}


def negative_distances(fps: np.ndarray, not_negative: set[Pair]) -> np.ndarray:
    """Hamming distances of every negative pair among ``fps`` (all i < j pairs minus ``not_negative``)."""
    n = len(fps)
    matrix = np.bitwise_count(fps[:, None] ^ fps[None, :]).astype(np.uint8)
    keep = np.triu(np.ones((n, n), dtype=bool), k=1)
    for i, j in not_negative:
        keep[i, j] = False
    return matrix[keep].astype(np.int64)


def flagged_lines(methods: dict[str, set[Pair]], classes: dict[str, list[Pair]]) -> list[str]:
    """Share of each excluded class that every method flags as near-duplicate."""
    names = list(classes)
    lines = [
        "| method | " + " | ".join(f"{name} (n={len(classes[name])})" for name in names) + " |",
        "|" + "---|" * (len(names) + 1),
    ]
    for method, detected in methods.items():
        cells = [f"{sum(p in detected for p in classes[name]) / len(classes[name]):.3f}" for name in names]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7, help="demo web seed (the demo's default is 7)")
    parser.add_argument("--stories", type=int, default=3000)
    args = parser.parse_args()

    started = time.perf_counter()
    web = generate_demo_web(seed=args.seed, n_stories=args.stories)
    generated = time.perf_counter()
    items, html = collect_items(web)
    texts = [extract_story(body, item.url).text or "" for item, body in zip(items, html, strict=True)]
    extracted = time.perf_counter()
    n = len(web.stories)
    positives, same_medium = label_pairs(web, items)

    fps = fingerprints(texts)
    detected, candidates = detect_pairs(texts, fps, include_pypi=False)
    detected_at = time.perf_counter()

    def report(title: str, methods: dict[str, set[Pair]], size: int, scope: int | None) -> None:
        pos = positives if scope is None else canonical_only(positives, scope)
        excl = same_medium if scope is None else canonical_only(same_medium, scope)
        positive_set = {p for values in pos.values() for p in values}
        excluded_set = {p for values in excl.values() for p in values} - positive_set
        n_negatives = size * (size - 1) // 2 - len(positive_set) - len(excluded_set)

        def is_negative(pair: Pair) -> bool:
            return pair not in positive_set and pair not in excluded_set

        columns = dict(pos)
        columns["all syndication pairs"] = sorted(positive_set)
        labelled = with_candidate_share(
            methods,
            {k: {p for p in v if p[1] < size} for k, v in candidates.items()},
            is_negative,
            n_negatives,
        )
        print(f"\n### {title}\n")
        print(
            f"items: {size}, syndication pairs: {len(positive_set)}, same-medium pairs excluded: "
            f"{len(excluded_set)}, negative pairs: {n_negatives}\n"
        )
        print("\n".join(recall_precision_lines(labelled, columns, is_negative, n_negatives)))
        print("\nShare flagged among the excluded same-medium pairs (not syndication, not counted above)\n")
        print("\n".join(flagged_lines(methods, excl)))

    n_groups = len(web.truth.syndication_groups)
    print(
        f"demo web seed {args.seed}: {n} stories, {n_groups} syndication groups "
        f"({sum(len(g['copies']) for g in web.truth.syndication_groups)} copies), "
        f"{len(items) - n} alternate-URL documents; median text {np.median([len(t.split()) for t in texts[:n]]):.0f} words"
    )
    report("Canonical story pages only (one item per story)", restrict(detected, n), n, n)
    report(
        "All documents (canonical pages + m./bare-host/old-host/tracking copies)", detected, len(items), None
    )

    print("\n### Hamming distance of our fingerprints (all documents; negatives: canonical pages)\n")
    distances = {name: hamming(fps, pairs) for name, pairs in positives.items()}
    distances.update({name: hamming(fps, pairs) for name, pairs in same_medium.items()})
    canonical_not_negative = {
        p for values in list(positives.values()) + list(same_medium.values()) for p in values if p[1] < n
    }
    unrelated = negative_distances(fps[:n], canonical_not_negative)
    distances["unrelated (negatives)"] = unrelated
    print("\n".join(distance_lines(distances)))
    print(
        f"\nunrelated pairs: min distance {unrelated.min()}, 1st percentile {np.percentile(unrelated, 1):.0f}, "
        f"within 3 bits {int((unrelated <= 3).sum())}, within 6 bits {int((unrelated <= 6).sum())}"
    )
    missed = sorted(set(positives["original - copy"]) - detected["simhash k=3 (ours)"])
    print(f"original - copy pairs missed by simhash k=3: {len(missed)}")
    print(
        f"\ntime: generate {generated - started:.1f} s, extract {extracted - generated:.1f} s, "
        f"fingerprint + detect {detected_at - extracted:.1f} s, total {time.perf_counter() - started:.1f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
