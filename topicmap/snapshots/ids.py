"""Positions of ids in sorted id arrays: how a snapshot joins stories, links and media without a join."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def int64_ids(values: Sequence[Any]) -> np.ndarray:
    """Ids read from the store (a column of rows) as an int64 array."""
    return np.asarray(values, dtype=np.int64)


def positions(sorted_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Position of each id in ``sorted_ids``, -1 where absent."""
    if len(sorted_ids) == 0:
        return np.full(len(ids), -1, dtype=np.int64)
    pos = np.searchsorted(sorted_ids, ids)
    pos[pos >= len(sorted_ids)] = 0
    found = sorted_ids[pos] == ids
    return np.where(found, pos, -1).astype(np.int64)


def to_finals(ids: np.ndarray, sources: np.ndarray, finals: np.ndarray) -> np.ndarray:
    """Each id replaced by its final id where it is one of ``sources`` (sorted; ``finals`` beside them): a merged
    story by the story it was merged into, a duplicate medium by its final medium."""
    if sources.size == 0:  # no duplicate media / no merges: every id is its own final id
        return ids
    pos = positions(sources, ids)
    return np.where(pos >= 0, finals[np.where(pos >= 0, pos, 0)], ids)


def sorted_distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of a SORTED array. ``np.unique`` is avoided on purpose: numpy 2.3+ hashes first
    (``_unique_hash``), which on millions of mostly-distinct link keys is several times slower than a sort
    (it was 62 % of a 300k-story snapshot)."""
    if len(values) < 2:
        return values
    return values[np.concatenate(([True], values[1:] != values[:-1]))]


class IdIndex:
    """Positions of ids in a sorted id array: a dense lookup table when the ids are compact (a gather per id),
    a binary search otherwise (a topic's stories can be a sparse subset of the global story ids)."""

    def __init__(self, sorted_ids: np.ndarray) -> None:
        self.ids = sorted_ids
        self.table: np.ndarray | None = None
        if len(sorted_ids):
            self.low = int(sorted_ids[0])
            span = int(sorted_ids[-1]) - self.low + 1
            if span <= 8 * len(sorted_ids) + (1 << 16):
                self.table = np.full(span, -1, dtype=np.int32 if len(sorted_ids) < 2**31 else np.int64)
                self.table[sorted_ids - self.low] = np.arange(len(sorted_ids), dtype=self.table.dtype)

    def positions(self, ids: np.ndarray) -> np.ndarray:
        """Position of each id, -1 where absent (int64)."""
        if self.table is None:
            return positions(self.ids, ids)
        offset = ids - self.low
        inside = (offset >= 0) & (offset < len(self.table))
        pos = np.full(len(ids), -1, dtype=np.int64)
        pos[inside] = self.table[offset[inside]]
        return pos
