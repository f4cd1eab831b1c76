"""Top words of a timespan (Media Cloud's word counts): the most used words of its stories' own text.

* The words are those of each story's title and extracted text (the article, not the page's navigation or
  boilerplate: what extraction kept), lower-cased and split at every character that is not a letter or a mark:
  "Côte d'Ivoire's" gives côte, ivoire (single letters and numbers are left out).
* The stop words of the stories' languages are left out (the ``stop-words`` package, as the clusters' labels
  do; a story of unknown language counts as English).
* Like Media Cloud's word counts, a timespan's words are counted on a sample of its stories: at most
  ``sample_size`` of them (1000 by default, as Media Cloud's), always the same ones for the same stories (those
  whose id hashes lowest), so a focus and the whole topic, or a week and its month, share most of their samples.
  ``sample_size`` 0 counts every story.
* Words are ranked by ``stories`` (sampled stories using the word), as a researcher reads "how many stories
  talk about it": a recipe page repeating "tsp" 78 times counts once. Each word comes with ``stories``,
  ``count`` (occurrences in the sample) and ``share`` (stories / sampled stories), the column researchers
  compare across timespans and foci.

The texts of the union of all samples are read once (``StoryTexts``), tokenized by pyarrow's compute kernels and
kept as per-story word counts; each timespan then adds up its sample's rows (``np.bincount``).

Scripts written without spaces (Chinese, Japanese, Thai) are not segmented: a run of such characters counts as
one word.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from topicmap.snapshots.foci import StoryTexts

#: Media Cloud's default sample size for word counts
DEFAULT_WORD_SAMPLE = 1000
#: words listed per timespan
TOP_WORDS = 100
#: a word's characters: letters and combining marks (RE2 classes, as pyarrow's split kernel reads them)
_SEPARATORS = r"[^\p{L}\p{M}]+"
_MIN_LETTERS = 2
#: a story of unknown language: its stop words are these
DEFAULT_LANGUAGE = "en"

TOP_WORD_COLUMNS: tuple[str, ...] = ("rank", "word", "count", "stories", "share")


def _mix(values: np.ndarray) -> np.ndarray:
    """splitmix64 of each id: a fixed, well-spread order of the stories that does not follow ids or dates."""
    with np.errstate(over="ignore"):
        z = values.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def sample_order(stories_ids: np.ndarray) -> np.ndarray:
    """Each story's sampling key: the splitmix64 hash of its id (computed once per snapshot)."""
    return _mix(np.asarray(stories_ids, dtype=np.int64))


def sample_positions(positions: np.ndarray, keys: np.ndarray, sample_size: int) -> np.ndarray:
    """Of the stories at ``positions`` (ascending), the ``sample_size`` whose keys (``sample_order``) are
    lowest, ascending; all when ``sample_size`` is 0 or more than there are. Nested sets give nested samples:
    a sampled story of a month is sampled in its week."""
    if sample_size <= 0 or len(positions) <= sample_size:
        return positions
    chosen = np.argpartition(keys[positions], sample_size - 1)[:sample_size]
    return np.sort(positions[chosen])


@lru_cache(maxsize=64)
def stop_words(languages: tuple[str, ...]) -> frozenset[str]:
    """The stop words of these language codes (``en``, ``fr``, ``pt-BR``), split into words as texts are."""
    from stop_words import AVAILABLE_LANGUAGES, LANGUAGE_MAPPING, get_stop_words

    words: set[str] = set()
    for code in languages:
        name = LANGUAGE_MAPPING.get(code, code)
        if name in AVAILABLE_LANGUAGES:
            listed = get_stop_words(name)
            words.update(listed)
            if code in _WRITTEN_WITHOUT_MARKS:
                words.update(_with_marks(listed, _WRITTEN_WITHOUT_MARKS[code]))
    # "aujourd'hui" or "don't" reach the counts as their parts: stop those too
    parts = pa.array(sorted(words), type=pa.string())
    split = pc.list_flatten(pc.split_pattern_regex(pc.utf8_lower(parts), _SEPARATORS))
    return frozenset(w for w in split.to_pylist() if w) | {w.lower() for w in words}


#: languages whose ``stop-words`` list is written without the language's diacritics (Romanian's has "in",
#: "si", "sa" where texts write "în", "și", "să"): each listed word is also stopped in every spelling that
#: puts these marks back (letter -> the letters it stands for)
_WRITTEN_WITHOUT_MARKS: dict[str, dict[str, str]] = {
    "ro": {"a": "aăâ", "i": "iî", "s": "sșş", "t": "tțţ"},
}


def _with_marks(listed: Sequence[str], marks: dict[str, str]) -> set[str]:
    """Every spelling of the ``listed`` words with the letters of ``marks`` replaced by their marked forms
    (a word of at most 8 such letters; the lists' words are short)."""
    from itertools import product

    spelled: set[str] = set()
    for word in listed:
        options = [marks.get(letter, letter) for letter in word.lower()]
        if sum(len(option) > 1 for option in options) <= 8:
            spelled.update("".join(letters) for letters in product(*options))
    return spelled


def _language_code(language: str | None) -> str:
    return language.split("-")[0].split("_")[0].lower() if language else DEFAULT_LANGUAGE


@dataclass
class StoryWords:
    """Per-story word counts of some stories: story ``i`` (``stories_id[i]``, ascending) has the words
    ``word[offsets[i]:offsets[i + 1]]`` (ids into ``vocabulary``, distinct) used ``count[...]`` times."""

    stories_id: np.ndarray
    offsets: np.ndarray
    word: np.ndarray
    count: np.ndarray
    vocabulary: np.ndarray  # object array of str
    language: np.ndarray  # object array: each story's language code

    def rows(self, stories_ids: np.ndarray) -> np.ndarray:
        """Positions of the given stories (each must be here)."""
        positions = np.searchsorted(self.stories_id, stories_ids)
        if len(positions) and (
            positions.max(initial=0) >= len(self.stories_id)
            or (self.stories_id[positions] != stories_ids).any()
        ):
            raise ValueError("word counts were not read for every sampled story")
        return positions


def count_words(texts: StoryTexts, stories_ids: np.ndarray) -> StoryWords:
    """Read and count the words of the given stories (ascending ids)."""
    ids = np.asarray(stories_ids, dtype=np.int64)
    index: dict[str, int] = {}
    words: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    lengths: list[np.ndarray] = []
    languages: list[str] = []
    read: list[np.ndarray] = []
    for chunk in texts.chunks(ids):
        n = len(chunk.stories_id)
        read.append(np.asarray(chunk.stories_id, dtype=np.int64))
        languages += [_language_code(language) for language in chunk.language]
        joined = pa.array(
            [f"{title or ''}\n{text or ''}" for title, text in zip(chunk.title, chunk.text, strict=True)],
            type=pa.string(),
        )
        tokens = pc.split_pattern_regex(pc.utf8_lower(joined), _SEPARATORS)
        flat = pc.list_flatten(tokens)
        story = np.asarray(pc.list_parent_indices(tokens), dtype=np.int64)
        long_enough = np.asarray(pc.greater_equal(pc.utf8_length(flat), _MIN_LETTERS))
        encoded = flat.filter(pa.array(long_enough)).dictionary_encode()
        story = story[long_enough]
        local = np.asarray(encoded.indices, dtype=np.int64)
        size = max(len(encoded.dictionary), 1)
        global_ids = np.array(
            [index.setdefault(word, len(index)) for word in encoded.dictionary.to_pylist()], dtype=np.int64
        )
        # distinct (story, word) pairs of the chunk and how often each occurs
        pairs, occurrences = np.unique(story * size + local, return_counts=True)
        pair_story = pairs // size
        words.append(global_ids[pairs % size] if len(global_ids) else np.zeros(0, dtype=np.int64))
        counts.append(occurrences.astype(np.int64))
        lengths.append(np.bincount(pair_story, minlength=n).astype(np.int64))
    got = np.concatenate(read) if read else np.zeros(0, dtype=np.int64)
    if not np.array_equal(got, ids):
        raise ValueError(f"the text source gave {len(got)} stories for {len(ids)} asked, or in another order")
    per_story = np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int64)
    offsets = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum(per_story, out=offsets[1:])
    vocabulary = np.empty(len(index), dtype=object)
    vocabulary[list(index.values())] = list(index.keys())
    return StoryWords(
        stories_id=ids,
        offsets=offsets,
        word=np.concatenate(words) if words else np.zeros(0, dtype=np.int64),
        count=np.concatenate(counts) if counts else np.zeros(0, dtype=np.int64),
        vocabulary=vocabulary,
        language=np.array(languages, dtype=object),
    )


def _stop_mask(
    words: StoryWords, languages: Sequence[str], cache: dict[tuple[str, ...], np.ndarray]
) -> np.ndarray:
    key = tuple(sorted(set(languages)))
    if key not in cache:
        stopped = stop_words(key)
        cache[key] = np.fromiter(
            (w in stopped for w in words.vocabulary), dtype=bool, count=len(words.vocabulary)
        )
    return cache[key]


def top_words(
    words: StoryWords,
    sample: np.ndarray,
    n: int = TOP_WORDS,
    stop_cache: dict[tuple[str, ...], np.ndarray] | None = None,
) -> pd.DataFrame:
    """The ``n`` words used by the most sampled stories (ascending ids): rank, word, count, stories, share.
    Ranked by ``stories`` (one long page repeating a word does not lift it); ties: more occurrences first, then
    the word itself, so the same sample always gives the same list."""
    rows = words.rows(np.asarray(sample, dtype=np.int64))
    if len(rows) == 0:
        return pd.DataFrame(
            {c: pd.Series(dtype="int64" if c != "word" else object) for c in TOP_WORD_COLUMNS}
        ).assign(share=pd.Series(dtype="float64"))
    starts, ends = words.offsets[rows], words.offsets[rows + 1]
    lengths = ends - starts
    take = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(
        int(lengths.sum()), dtype=np.int64
    )
    size = len(words.vocabulary)
    occurrences = np.bincount(words.word[take], weights=words.count[take], minlength=size)
    using = np.bincount(words.word[take], minlength=size)
    stopped = _stop_mask(words, words.language[rows].tolist(), stop_cache if stop_cache is not None else {})
    candidates = np.flatnonzero((using > 0) & ~stopped)
    if len(candidates) > n:  # only the words used by as many stories as the n-th can be listed: sort those
        threshold = np.partition(using[candidates], len(candidates) - n)[len(candidates) - n]
        candidates = candidates[using[candidates] >= threshold]
    order = sorted(candidates.tolist(), key=lambda w: (-using[w], -occurrences[w], words.vocabulary[w]))[:n]
    chosen = np.array(order, dtype=np.int64)
    return pd.DataFrame(
        {
            "rank": np.arange(1, len(chosen) + 1, dtype=np.int64),
            "word": words.vocabulary[chosen] if len(chosen) else np.zeros(0, dtype=object),
            "count": np.rint(occurrences[chosen]).astype(np.int64),
            "stories": using[chosen].astype(np.int64),
            "share": using[chosen] / len(rows),
        }
    )
