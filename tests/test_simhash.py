"""topicmap.dedup.simhash: fingerprints, exact near-duplicate pairs, the stored index, the verifying stage."""

from __future__ import annotations

import subprocess
import sys
import threading

import numpy as np
import pandas as pd
import pytest

from topicmap.dedup.shingles import jaccard, jaccard_sorted, shingle_array, shingle_set
from topicmap.dedup.simhash import (
    FEATURE_VERSION,
    NearDuplicateIndex,
    fingerprint,
    fingerprint_and_shingles,
    fingerprints,
    hamming,
    near_duplicate_groups,
    near_duplicate_pairs,
    near_duplicate_pairs_with_distances,
    pair_distances,
    verified_near_duplicate_pairs,
)

_VOCABULARY = [f"v{i}" for i in range(20_000)]
_STOPWORDS = [f"s{i}" for i in range(60)]


def article_words(seed: int, n: int = 400) -> list[str]:
    """A synthetic article: shared Zipf-distributed function words plus its own topical vocabulary."""
    rng = np.random.default_rng(seed)
    topic = rng.choice(len(_VOCABULARY), 300, replace=False)
    words = []
    for _ in range(n):
        if rng.random() < 0.45:
            words.append(_STOPWORDS[min(int(rng.zipf(1.5)), 60) - 1])
        else:
            words.append(_VOCABULARY[topic[min(int(rng.zipf(1.3)), 300) - 1]])
    return words


def brute_force(values: np.ndarray, k: int) -> np.ndarray:
    distance = np.bitwise_count(values[:, None] ^ values[None, :])
    i, j = np.nonzero(np.triu(distance <= k, 1))
    return np.stack((i, j), axis=1).astype(np.int64)


def planted(n: int, seed: int) -> np.ndarray:
    """Random fingerprints where a fifth are 1-3-bit variants of others and a tenth exact copies."""
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 2**64, n, dtype=np.uint64, endpoint=False)
    if n < 4:
        return values
    near = rng.integers(0, n, n // 5)
    for target, source in zip(rng.integers(0, n, n // 5), near, strict=True):
        for bit in rng.choice(64, size=int(rng.integers(1, 4)), replace=False):
            values[target] = values[source] ^ (np.uint64(1) << np.uint64(bit))
    values[rng.integers(0, n, n // 10)] = values[rng.integers(0, n, n // 10)]
    return values


# ---------------------------------------------------------------------------------------------- pairs


@pytest.mark.parametrize("n", [0, 1, 2, 60, 700, 2500])
@pytest.mark.parametrize("k", [0, 1, 2, 3, 4, 5])
def test_pairs_equal_brute_force(n: int, k: int) -> None:
    values = planted(n, seed=n * 10 + k)
    expected = brute_force(values, k)
    got = near_duplicate_pairs(values, k)
    assert got.dtype == np.int64 and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("n_blocks", [0, None, "k+1", "k+2", "k+4"])
@pytest.mark.parametrize("k", [1, 3, 6])
def test_every_table_layout_gives_the_same_pairs(n_blocks: object, k: int) -> None:
    values = planted(1500, seed=k)
    blocks = {None: None, 0: 0, "k+1": k + 1, "k+2": k + 2, "k+4": k + 4}[n_blocks]  # type: ignore[index]
    np.testing.assert_array_equal(near_duplicate_pairs(values, k, n_blocks=blocks), brute_force(values, k))


def test_pairs_on_clustered_fingerprints_sharing_blocks() -> None:
    # Many fingerprints agreeing on the low 48 bits: huge groups in three of four tables, still exact.
    rng = np.random.default_rng(4)
    values = np.uint64(0xABCDEF123456) | (rng.integers(0, 2**16, 1500, dtype=np.uint64) << np.uint64(48))
    np.testing.assert_array_equal(near_duplicate_pairs(values, 3), brute_force(values, 3))


def test_large_group_of_identical_fingerprints() -> None:
    values = np.concatenate([np.full(1500, 12345, dtype=np.uint64), planted(500, seed=9)])
    pairs, distances = near_duplicate_pairs_with_distances(values, 2)
    np.testing.assert_array_equal(pairs, brute_force(values, 2))
    assert (distances[(pairs[:, 0] < 1500) & (pairs[:, 1] < 1500)] == 0).all()
    expected = np.bitwise_count(values[pairs[:, 0]] ^ values[pairs[:, 1]])
    np.testing.assert_array_equal(distances, expected)
    np.testing.assert_array_equal(pair_distances(values, pairs), expected)


def test_pairs_format_and_input_forms() -> None:
    big = 2**64 - 1
    pairs = near_duplicate_pairs([big, big ^ 1, 0, big ^ 0b111, 5], max_distance=3)
    assert pairs.tolist() == [[0, 1], [0, 3], [1, 3], [2, 4]]
    assert near_duplicate_pairs([], 3).shape == (0, 2)
    assert near_duplicate_pairs(np.array([7, 7], dtype=np.int64), 0).tolist() == [[0, 1]]


@pytest.mark.parametrize(
    ("values", "k", "error"),
    [
        ([-1, 2], 3, ValueError),
        ([1.5, 2.0], 3, TypeError),
        ([1, 2], -1, ValueError),
        ([1, 2], 65, ValueError),
    ],
)
def test_pairs_reject_bad_input(values: list, k: int, error: type[Exception]) -> None:
    with pytest.raises(error):
        near_duplicate_pairs(values, k)


def test_groups_are_connected_components() -> None:
    labels = near_duplicate_groups(np.array([[0, 1], [1, 4], [2, 5]]), 7)
    assert labels.tolist() == [0, 0, 1, 2, 0, 1, 3]
    with pytest.raises(ValueError, match="outside"):
        near_duplicate_groups(np.array([[0, 9]]), 3)


# ------------------------------------------------------------------------------------------ fingerprints


GOLDEN_TEXT = (
    "The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs away into the forest."
)


def test_fingerprint_golden_value_is_stable() -> None:
    # If this fails, the features changed: bump FEATURE_VERSION (stored fingerprints become stale).
    assert FEATURE_VERSION == 1
    assert fingerprint(GOLDEN_TEXT) == 14901862143078606683


def test_fingerprint_is_the_same_in_another_process() -> None:
    code = (
        "from topicmap.dedup.simhash import fingerprint;"
        f"print(fingerprint({GOLDEN_TEXT!r}), fingerprint('Ünïcödé tëxt — 東京 と 大阪'))"
    )
    env_seed = {"PYTHONHASHSEED": "12345"}  # a different str-hash salt must not matter
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env_seed
    )
    assert out.stdout.split() == [
        str(fingerprint(GOLDEN_TEXT)),
        str(fingerprint("Ünïcödé tëxt — 東京 と 大阪")),
    ]


def test_batch_equals_single_whatever_the_batch() -> None:
    texts = [" ".join(article_words(s)) for s in range(12)] + ["", "one", "Two words"]
    batch = fingerprints(texts)
    assert batch.dtype == np.uint64
    reversed_batch = fingerprints(texts[::-1])[::-1]
    singles = [fingerprint(t) for t in texts]
    assert batch.tolist() == reversed_batch.tolist() == singles


def test_normalization_casefold_and_punctuation() -> None:
    assert fingerprint("Hello, WORLD! Straße") == fingerprint("hello world strasse")
    assert fingerprint("") == 0 and fingerprint("  ... !!! ") == 0


def test_copies_edits_and_unrelated_texts() -> None:
    small_edit, unrelated = [], []
    for seed in range(20):
        words = article_words(seed)
        assert hamming(fingerprint(" ".join(words)), fingerprint(" ".join(words))) == 0
        edited = list(words)
        for position in (50, 200, 350):  # < 1% of the words
            edited[position] = f"typo{position}"
        small_edit.append(hamming(fingerprint(" ".join(words)), fingerprint(" ".join(edited))))
        unrelated.append(
            hamming(fingerprint(" ".join(words)), fingerprint(" ".join(article_words(seed + 1000))))
        )
    assert max(small_edit) <= 3
    assert min(unrelated) > 3 and np.mean(unrelated) > 12


def test_hamming() -> None:
    assert hamming(0, 2**64 - 1) == 64
    assert hamming(0b1011, 0b0001) == 2
    with pytest.raises(ValueError):
        hamming(-1, 0)
    with pytest.raises(TypeError):
        hamming("1", 0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        fingerprint(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        fingerprints(["ok", 3])  # type: ignore[list-item]


# ----------------------------------------------------------------------------------------------- index


def test_index_query_matches_brute_force_and_incremental_adds() -> None:
    values = planted(3000, seed=21)
    ids = [f"story-{i}" for i in range(len(values))]
    whole = NearDuplicateIndex(ids, values, max_distance=3)
    grown = NearDuplicateIndex(max_distance=3)
    for start in range(0, len(values), 700):
        grown.add(ids[start : start + 700], values[start : start + 700])
    assert len(whole) == len(grown) == 3000
    rng = np.random.default_rng(0)
    for q in rng.choice(len(values), 200, replace=False).tolist() + [0]:
        distance = np.bitwise_count(values ^ values[q])
        expected = sorted((int(d), i) for i, d in enumerate(distance.tolist()) if d <= 3)
        for index in (whole, grown):
            got = index.query(int(values[q]))
            assert [(d, int(i.split("-")[1])) for i, d in got] == expected
    assert whole.query(int(values[5]), max_distance=0)[0] == ("story-5", 0)


def test_queries_during_adds_see_the_index_of_before_or_after_each_add() -> None:
    """The lookup service queries while its refresh adds: an answer is never of half an add."""
    rng = np.random.default_rng(5)
    stored = rng.integers(0, 2**64, 20_000, dtype=np.uint64)
    query = int(stored[0])
    batches = []
    for _ in range(25):  # each add: random items and three near copies of the query, so answers change
        flips = [
            sum(1 << int(b) for b in rng.choice(64, int(rng.integers(1, 6)), replace=False)) for _ in range(3)
        ]
        batches.append(
            np.concatenate(
                (
                    rng.integers(0, 2**64, 2000, dtype=np.uint64),
                    np.array([query ^ f for f in flips], dtype=np.uint64),
                )
            )
        )
    index = NearDuplicateIndex(range(len(stored)), stored, max_distance=6)
    states = [index.query(query)]
    items = stored
    for batch in batches:  # the answer after each add, from an index built in one go
        items = np.concatenate((items, batch))
        states.append(NearDuplicateIndex(range(len(items)), items, max_distance=6).query(query))
    assert len({len(state) for state in states}) == len(states)  # every add changes the answer

    def add_all() -> None:
        start = len(stored)
        for batch in batches:
            index.add(range(start, start + len(batch)), batch)
            start += len(batch)

    writer = threading.Thread(target=add_all)
    answers = []
    writer.start()
    while writer.is_alive():
        answers.append(index.query(query))
    writer.join()
    answers.append(index.query(query))
    assert all(answer in states for answer in answers)
    assert answers[-1] == states[-1]


def test_index_query_many_and_errors() -> None:
    assert NearDuplicateIndex(max_distance=2).query(123) == []
    index = NearDuplicateIndex([10, 20, 30], [0b0, 0b1, 0b1111], max_distance=3)
    q, p, d = index.query_many([0b11, 2**63])
    # per query: nearest first, then by insertion order
    assert list(zip(q.tolist(), p.tolist(), d.tolist(), strict=True)) == [
        (0, 1, 1),
        (0, 0, 2),
        (0, 2, 2),
        (1, 0, 1),
        (1, 1, 2),
    ]
    with pytest.raises(ValueError, match="already"):
        index.add([20], [5])
    with pytest.raises(ValueError, match="ids but"):
        index.add([40, 50], [5])
    with pytest.raises(ValueError, match="max_distance"):
        index.query(0, max_distance=4)


# ------------------------------------------------------------------------------------ verifying stage


def test_shingles_and_jaccard() -> None:
    assert shingle_set("a b c", 2) == shingle_set("A, b. C!", 2)
    assert len(shingle_set("a b c a b", 2)) == 3
    assert jaccard(shingle_set("a b c d", 2), shingle_set("a b c e", 2)) == pytest.approx(2 / 4)
    assert jaccard(set(), set()) == 1.0


def test_shingle_arrays_hold_the_shingle_sets_and_give_the_same_jaccard() -> None:
    """The lookup service's array path answers exactly what the set path answers (same floats)."""
    originals = [" ".join(article_words(seed, n)) for seed, n in ((0, 400), (1, 900), (2, 50))]
    texts = [*originals, "Ünïcode ÉTÉ été, été!", "one", "", "   ,;  ", "x y", "a b a b a b"]
    rng = np.random.default_rng(3)
    for text in originals:  # edited copies: partial overlaps, not only 0 and 1
        words = text.split()
        for position in rng.choice(len(words), len(words) // 10, replace=False):
            words[position] = f"sub{position}"
        texts.append(" ".join(words))
    for size in (1, 2, 3):
        arrays = [shingle_array(t, size) for t in texts]
        for text, array in zip(texts, arrays, strict=True):
            assert array.dtype == np.uint64 and (np.diff(array.astype(object)) > 0).all()
            assert set(array.tolist()) == shingle_set(text, size)
        for a, text_a in zip(arrays, texts, strict=True):
            for b, text_b in zip(arrays, texts, strict=True):
                assert jaccard_sorted(a, b) == jaccard(shingle_set(text_a, size), shingle_set(text_b, size))
    for text in texts:  # the query's path: one set of features for both, the same fingerprint bits
        value, array = fingerprint_and_shingles(text)
        assert value == fingerprint(text) and np.array_equal(array, shingle_array(text))
    assert 0.0 < jaccard_sorted(shingle_array(texts[0]), shingle_array(texts[-3])) < 1.0  # its copy
    with pytest.raises(ValueError, match="shingle size"):
        shingle_array("a b", 0)


def test_the_query_path_gives_the_bulk_fingerprint_bit_for_bit() -> None:
    """``fingerprint_and_shingles`` groups one text's features its own way; every bit must still agree."""
    texts = [" ".join(article_words(seed, n)) for seed, n in enumerate((1, 2, 3, 5, 40, 400, 1500, 4000))]
    texts += ["s0 s0 s0 s0", "v1 s0 v1 s0 v1", "Straße STRASSE straße", "ﬁne ﬁnd — “quoted” 3.5 x_y"]
    for text in texts:
        value, array = fingerprint_and_shingles(text)
        assert value == fingerprint(text) == int(fingerprints([text, "other words"])[0])
        assert set(array.tolist()) == shingle_set(text)
    value, array = fingerprint_and_shingles(" ,. ")
    assert value == 0 == fingerprint(" ,. ") and array.size == 0


def test_verified_pairs_find_edited_copies_and_reject_unrelated() -> None:
    originals = [article_words(seed) for seed in range(8)]
    texts = [" ".join(w) for w in originals]
    rng = np.random.default_rng(1)
    for words in originals[:4]:
        edited = list(words)
        for position in rng.choice(len(words), 20, replace=False):  # 5% substituted
            edited[position] = f"sub{position}"
        texts.append(" ".join(edited))
    result = verified_near_duplicate_pairs(texts)
    assert isinstance(result, pd.DataFrame)
    assert list(result.columns) == ["i", "j", "distance", "jaccard"]
    assert sorted(zip(result["i"], result["j"], strict=True)) == [(0, 8), (1, 9), (2, 10), (3, 11)]
    assert (result["jaccard"] >= 0.5).all()
