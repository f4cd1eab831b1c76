"""Near-duplicate quality on the demo web's planted syndicated copies (topicmap.demo.web).

Run: .venv/bin/python benchmarks/eval_demo_near_duplicates.py [--seed 7] [--stories 3000]

Texts are what the spider stores: topicmap.web.extract.extract_story on each page's HTML. Items:

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
simhash k=3; the two-stage topicmap.dedup.simhash.verified_near_duplicate_pairs at its defaults (k=6, Jaccard
>= DEFAULT_MIN_JACCARD, 0.7: what the ``near_duplicates`` asset runs); datasketch MinHash LSH (threshold 0.8, 128 permutations,
word-bigram shingles). Each method runs once per subject, as the asset runs once per topic and a demo topic
is one subject's query (every planted pair lies within one subject; checked). Negatives are therefore the
pairs within a subject. k=8 is left out: on this template-built text it sends ~half of all pairs to the
Jaccard stage and would take minutes.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections import Counter
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

from topicmap.dedup.shingles import jaccard, shingle_set
from topicmap.dedup.simhash import DEFAULT_CANDIDATE_DISTANCE, fingerprints, near_duplicate_groups
from topicmap.demo.web import DemoWeb, generate_demo_web  # noqa: E402
from topicmap.web.extract import extract_story  # noqa: E402


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
        same_medium.setdefault("retitled (same medium)", []).extend(
            (min(x, y), max(x, y)) for x in items_of_story[first] for y in items_of_story[second]
        )
    return positives, same_medium


def canonical_only(pairs: dict[str, list[Pair]], n: int) -> dict[str, list[Pair]]:
    kept = {name: [p for p in values if p[1] < n] for name, values in pairs.items()}
    return {name: values for name, values in kept.items() if values}


def detect_per_subject(
    subject_of_item: list[str], texts: list[str], fps: np.ndarray
) -> tuple[dict[str, set[Pair]], dict[str, set[Pair]]]:
    """Every method run once per subject, as the asset runs once per topic (a demo topic is one subject's
    query); pairs come back as global item indices (i < j, since each subject keeps the global order)."""
    detected: dict[str, set[Pair]] = {}
    candidates: dict[str, set[Pair]] = {}
    for subject in sorted(set(subject_of_item)):
        members = np.array([i for i, s in enumerate(subject_of_item) if s == subject], dtype=np.int64)
        found, first_stage = detect_pairs(
            [texts[i] for i in members],
            fps[members],
            candidate_distances=(DEFAULT_CANDIDATE_DISTANCE,),
            include_pypi=False,
        )
        for into, source in ((detected, found), (candidates, first_stage)):
            for label, pairs in source.items():
                into.setdefault(label, set()).update((int(members[i]), int(members[j])) for i, j in pairs)
    return detected, candidates


def negative_distances(fps: np.ndarray, subject_of_item: list[str], not_negative: set[Pair]) -> np.ndarray:
    """Hamming distances of every negative pair within each subject (i < j minus ``not_negative``)."""
    parts = []
    for subject in sorted(set(subject_of_item)):
        members = np.array([i for i, s in enumerate(subject_of_item) if s == subject], dtype=np.int64)
        values = fps[members]
        matrix = np.bitwise_count(values[:, None] ^ values[None, :])
        keep = np.triu(np.ones((len(members), len(members)), dtype=bool), k=1)
        local = {int(g): k for k, g in enumerate(members)}
        for i, j in not_negative:
            if i in local and j in local:
                keep[local[i], local[j]] = False
        parts.append(matrix[keep].astype(np.int64))
    return np.concatenate(parts)


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


def comparable_pairs(subject_of_item: list[str]) -> int:
    """Pairs a per-subject run compares: within each subject."""
    counts = Counter(subject_of_item)
    return sum(c * (c - 1) // 2 for c in counts.values())


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
    subject_of_item = [web.stories[item.story].subject for item in items]
    positives, same_medium = label_pairs(web, items)
    for pair in (p for values in list(positives.values()) + list(same_medium.values()) for p in values):
        if subject_of_item[pair[0]] != subject_of_item[pair[1]]:
            raise ValueError(f"planted pair {pair} spans two subjects: a per-subject run cannot find it")

    fps = fingerprints(texts)
    detected, candidates = detect_per_subject(subject_of_item, texts, fps)
    detected_at = time.perf_counter()
    two_stage = next(label for label in detected if "2 stages" in label)

    def report(title: str, scope: int) -> None:
        """Tables over the items with index < scope (n: canonical pages only; len(items): everything)."""
        pos = canonical_only(positives, scope)
        excl = canonical_only(same_medium, scope)
        positive_set = {p for values in pos.values() for p in values}
        excluded_set = {p for values in excl.values() for p in values} - positive_set
        n_negatives = comparable_pairs(subject_of_item[:scope]) - len(positive_set) - len(excluded_set)

        def is_negative(pair: Pair) -> bool:
            return pair not in positive_set and pair not in excluded_set

        methods = restrict(detected, scope)
        columns = dict(pos)
        columns["all syndication pairs"] = sorted(positive_set)
        labelled = with_candidate_share(methods, restrict(candidates, scope), is_negative, n_negatives)
        print(f"\n### {title}\n")
        print(
            f"documents: {scope}, syndication pairs: {len(positive_set)}, same-medium pairs excluded: "
            f"{len(excluded_set)}, negative pairs (within a subject): {n_negatives}\n"
        )
        print("\n".join(recall_precision_lines(labelled, columns, is_negative, n_negatives)))
        print("\nShare flagged among the excluded same-medium pairs (not syndication, not counted above)\n")
        print("\n".join(flagged_lines(methods, excl)))
        if scope != n:
            return
        print("\nFalse positives per subject (canonical pages)\n")
        largest_planted = max(1 + len(group["copies"]) for group in web.truth.syndication_groups)
        print(
            "| subject | stories | syndication pairs | "
            + " | ".join(methods)
            + f" | largest group the asset would form (largest planted: {largest_planted}) |"
        )
        print("|" + "---|" * (len(methods) + 4))
        for subject in web.subjects:
            in_subject = [p for p in positive_set if subject_of_item[p[0]] == subject]
            false_positives = [
                sum(is_negative(p) and subject_of_item[p[0]] == subject for p in pairs)
                for pairs in methods.values()
            ]
            # The asset groups verified pairs by connected components (near_duplicate_groups).
            members = [i for i in range(n) if subject_of_item[i] == subject]
            local = {g: k for k, g in enumerate(members)}
            subject_pairs = np.array(
                [(local[i], local[j]) for i, j in methods[two_stage] if i in local], dtype=np.int64
            ).reshape(-1, 2)
            largest = np.bincount(near_duplicate_groups(subject_pairs, len(members))).max()
            print(
                f"| {subject} | {len(members)} | {len(in_subject)} | "
                + " | ".join(map(str, false_positives))
                + f" | {largest} |"
            )
        kept_negatives = [p for p in methods[two_stage] if is_negative(p)]
        shingles: dict[int, set[int]] = {}

        def similarity(pair: Pair) -> float:
            for i in pair:
                if i not in shingles:
                    shingles[i] = shingle_set(texts[i], 2)
            return jaccard(shingles[pair[0]], shingles[pair[1]])

        syndicated = np.array([similarity(p) for p in sorted(positive_set)])
        unrelated = np.array([similarity(p) for p in kept_negatives] or [0.0])
        print(
            f"\nword-bigram Jaccard: syndication pairs min {syndicated.min():.3f}, 5th percentile "
            f"{np.percentile(syndicated, 5):.3f}, median {np.median(syndicated):.3f}; unrelated pairs the "
            f"two-stage method keeps: {len(kept_negatives)}, median {np.median(unrelated):.3f}, max "
            f"{unrelated.max():.3f}, >= 0.6: {int((unrelated >= 0.6).sum())}, >= 0.7: "
            f"{int((unrelated >= 0.7).sum())}, >= 0.8: {int((unrelated >= 0.8).sum())}"
        )

    n_groups = len(web.truth.syndication_groups)
    n_copies = sum(len(g["copies"]) for g in web.truth.syndication_groups)
    print(
        f"demo web seed {args.seed}: {n} stories in {len(web.subjects)} subjects, {n_groups} syndication "
        f"groups ({n_copies} copies), {len(items) - n} alternate-URL documents; median text "
        f"{np.median([len(t.split()) for t in texts[:n]]):.0f} words. Each method runs once per subject."
    )
    report("Canonical story pages only (one document per story)", n)
    report("All documents (canonical pages + m./bare-host/old-host/tracking copies)", len(items))

    print("\n### Hamming distance of our fingerprints (all documents; negatives: canonical pages)\n")
    distances = {name: hamming(fps, pairs) for name, pairs in positives.items()}
    distances.update({name: hamming(fps, pairs) for name, pairs in same_medium.items()})
    canonical_not_negative = {
        p for values in list(positives.values()) + list(same_medium.values()) for p in values if p[1] < n
    }
    unrelated = negative_distances(fps[:n], subject_of_item[:n], canonical_not_negative)
    distances["unrelated (negatives, same subject)"] = unrelated
    print("\n".join(distance_lines(distances)))
    print(
        f"\nunrelated pairs: min distance {unrelated.min()}, 1st percentile {np.percentile(unrelated, 1):.0f}, "
        f"within 3 bits {int((unrelated <= 3).sum())}, within 6 bits {int((unrelated <= 6).sum())}"
    )
    print(
        f"\ntime: generate {generated - started:.1f} s, extract {extracted - generated:.1f} s, "
        f"fingerprint + detect {detected_at - extracted:.1f} s, total {time.perf_counter() - started:.1f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
