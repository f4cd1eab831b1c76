"""Spark MLlib's streaming KMeans model, re-created in numpy so a topic's weekly state needs no JVM.

``StreamingKMeans`` follows ``org.apache.spark.mllib.clustering.StreamingKMeansModel`` (Spark 4.x) step by step:

- ``predict``: KMeans' nearest centre (EuclideanDistanceMeasure.findClosest): centres scanned in order, one
  skipped when ``(|c| - |x|)^2`` already reaches the best distance, else its exact squared distance (dense
  vectors take MLUtils.fastSquaredDistance's ``Vectors.sqdist`` branch) replaces the best only when strictly
  smaller: the lowest index wins ties, and sums are added in Spark's order so ties stay ties;
- ``update``: one batch. Weights are discounted by ``a`` per batch (``time_unit="batches"``) or ``a**N`` for the
  batch's N points (``"points"``); only clusters that received points move, each by
  ``lambda = m / max(n + m, 1e-16)`` towards the mean of its m new points (n its discounted weight); then at most
  one dying cluster per batch (smallest weight below 1e-8 of the largest, first index on ties) takes half of the
  largest cluster: both weights become their mean and the two centres become ``x + p`` and ``x - p`` with
  ``p = 1e-14 * max(|x|, 1)`` element-wise.

tests/test_clusters_streaming.py compares every step with outputs of the real pyspark 4.3.0 kept in
tests/data/streaming_kmeans_reference.json (made by tests/data/make_streaming_kmeans_reference.py).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

TimeUnit = Literal["batches", "points"]
TIME_UNITS: tuple[str, ...] = ("batches", "points")
#: Spark: a cluster weighing less than this fraction of the largest is dying
DYING_FRACTION = 1e-8
#: Spark: the split moves the two centres apart by this much, relative to each coordinate (at least absolute)
SPLIT_PERTURBATION = 1e-14


def _sequential_sum(squares: np.ndarray) -> np.ndarray:
    """Row sums added left to right, as Spark's Vectors.sqdist and Vectors.norm loops add them (numpy's sum
    adds pairwise): the last column of a running sum. Equal distances then compare equal as they do in Spark,
    so ties go to the same (lowest) index."""
    if squares.shape[1] == 0:
        return np.zeros(squares.shape[0])
    return np.cumsum(squares, axis=1)[:, -1]


def _as_points(points: object, dims: int, what: str = "points") -> np.ndarray:
    array = np.asarray(points, dtype=np.float64)
    if array.ndim == 1 and array.size == 0:
        array = array.reshape(0, dims)
    if array.ndim != 2 or array.shape[1] != dims:
        raise ValueError(f"{what} must be a 2-d array with {dims} columns, got shape {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError(f"{what} contain NaN or infinite values")
    return array


class StreamingKMeans:
    """Spark's StreamingKMeansModel: centres and weights updated batch by batch with a forgetful rule.

    ``decay_factor`` 1 remembers everything, 0 only the newest batch; ``half_life(...)`` builds the model with
    Spark's ``exp(log(0.5) / half_life)``.
    """

    def __init__(
        self,
        centers: object,
        weights: object,
        decay_factor: float = 1.0,
        time_unit: TimeUnit = "batches",
    ) -> None:
        centers_array = np.array(centers, dtype=np.float64)  # a copy: updates never touch the caller's array
        if centers_array.ndim != 2 or centers_array.shape[0] < 1 or centers_array.shape[1] < 1:
            raise ValueError(
                f"centers must be a non-empty 2-d array (k x dims), got shape {centers_array.shape}"
            )
        if not np.isfinite(centers_array).all():
            raise ValueError("centers contain NaN or infinite values")
        weights_array = np.array(weights, dtype=np.float64).reshape(-1)
        if weights_array.shape[0] != centers_array.shape[0]:
            raise ValueError(
                f"weights has {weights_array.shape[0]} entries for {centers_array.shape[0]} centers"
            )
        if not np.isfinite(weights_array).all() or (weights_array < 0).any():
            raise ValueError("weights must be finite and non-negative")
        if not (isinstance(decay_factor, int | float) and 0.0 <= decay_factor <= 1.0):
            # Spark only asks for >= 0; above 1 the past would weigh more than the present, which no one means
            raise ValueError(f"decay_factor must lie in [0, 1], got {decay_factor!r}")
        if time_unit not in TIME_UNITS:
            raise ValueError(f"time_unit must be one of {TIME_UNITS}, got {time_unit!r}")
        self.centers = centers_array
        self.weights = weights_array
        self.decay_factor = float(decay_factor)
        self.time_unit: TimeUnit = time_unit

    @classmethod
    def half_life(
        cls, centers: object, weights: object, half_life: float, time_unit: TimeUnit = "batches"
    ) -> StreamingKMeans:
        """Spark's setHalfLife: the decay after which old data weighs half, in batches or in points."""
        if not (isinstance(half_life, int | float) and half_life > 0 and math.isfinite(half_life)):
            raise ValueError(f"half_life must be a positive number, got {half_life!r}")
        return cls(centers, weights, math.exp(math.log(0.5) / half_life), time_unit)

    @property
    def k(self) -> int:
        return int(self.centers.shape[0])

    @property
    def dims(self) -> int:
        return int(self.centers.shape[1])

    def copy(self) -> StreamingKMeans:
        return StreamingKMeans(self.centers, self.weights, self.decay_factor, self.time_unit)

    # ----------------------------------------------------------------------------------------- predict

    def distances(self, points: object) -> np.ndarray:
        """Squared distances to every centre, summed as Spark sums them (see ``_sequential_sum``)."""
        x = _as_points(points, self.dims)
        return np.stack([_sequential_sum((x - centre) ** 2) for centre in self.centers], axis=1)

    def _norms(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.sqrt(_sequential_sum(x * x)), np.sqrt(_sequential_sum(self.centers * self.centers))

    def predict(self, points: object) -> np.ndarray:
        """Index of the nearest centre of each point (int64), Spark's scan: lowest index on ties."""
        x = _as_points(points, self.dims)
        return self._predict(x, with_distances=False)[0]

    def nearest(self, points: object) -> tuple[np.ndarray, np.ndarray]:
        """``predict`` and each point's squared distance to the centre it was given."""
        return self._predict(_as_points(points, self.dims))

    def _predict(self, x: np.ndarray, with_distances: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Spark's scan, done fast: the expanded |x|^2 + |c|^2 - 2 x.c (one matrix product) settles every point
        whose two nearest centres are clearly apart; the others, near-ties, go through the exact scan."""
        if len(x) == 0 or self.k == 1:
            return self._scan(x)
        squared_x = np.einsum("ij,ij->i", x, x)
        squared_c = np.einsum("ij,ij->i", self.centers, self.centers)
        approximate = squared_x[:, None] + squared_c[None, :] - 2.0 * (x @ self.centers.T)
        two = np.partition(approximate, 1, axis=1)[:, :2]
        # the expansion errs by a few ulps of |x|^2 + |c|^2; a margin a million times larger is decisive
        tolerance = 1e-9 * (squared_x + squared_c.max()) + 1e-300
        decided = two[:, 1] - two[:, 0] > tolerance
        best_index = approximate.argmin(axis=1).astype(np.int64)
        best = np.full(len(x), np.nan)
        rows = np.flatnonzero(decided)
        if with_distances:
            best[rows] = _sequential_sum((x[rows] - self.centers[best_index[rows]]) ** 2)
        undecided = np.flatnonzero(~decided)
        if len(undecided):
            best_index[undecided], best[undecided] = self._scan(x[undecided])
        return best_index, best

    def _scan(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """EuclideanDistanceMeasure.findClosest, literally (vectorised over the points)."""
        point_norms, center_norms = self._norms(x)
        best = np.full(len(x), np.inf)
        best_index = np.zeros(len(x), dtype=np.int64)
        for i, centre in enumerate(self.centers):
            lower_bound = (center_norms[i] - point_norms) ** 2
            candidates = np.flatnonzero(lower_bound < best)
            if len(candidates) == 0:
                continue
            distance = _sequential_sum((x[candidates] - centre) ** 2)
            better = distance < best[candidates]
            best[candidates[better]] = distance[better]
            best_index[candidates[better]] = i
        return best_index, best

    def cost(self, points: object) -> float:
        """Sum of squared distances to the nearest centres (Spark's computeCost)."""
        x = _as_points(points, self.dims)
        return float(self._predict(x)[1].sum()) if len(x) else 0.0

    # ----------------------------------------------------------------------------------------- update

    def update(self, points: object) -> StreamingKMeans:
        """Train on one batch (Spark's StreamingKMeansModel.update); the model changes in place and is returned."""
        x = _as_points(points, self.dims)
        labels = self._predict(x, with_distances=False)[0] if len(x) else np.zeros(0, dtype=np.int64)
        counts = np.bincount(labels, minlength=self.k)
        sums = np.zeros_like(self.centers)
        if len(x):
            self._add_sums(sums, x, labels)
        discount = self.decay_factor if self.time_unit == "batches" else self.decay_factor ** int(len(x))
        self.weights *= discount
        for label in np.flatnonzero(counts):
            count = float(counts[label])
            updated_weight = self.weights[label] + count
            step = count / max(updated_weight, 1e-16)
            self.weights[label] = updated_weight
            # the same two BLAS steps as Spark: scal(1 - lambda, c); axpy(lambda / m, sum, c)
            self.centers[label] *= 1.0 - step
            self.centers[label] += (step / count) * sums[label]
        self._split_dying()
        return self

    @staticmethod
    def _add_sums(sums: np.ndarray, x: np.ndarray, labels: np.ndarray) -> None:
        order = np.argsort(labels, kind="stable")
        sorted_labels = labels[order]
        starts = np.flatnonzero(np.r_[True, sorted_labels[1:] != sorted_labels[:-1]])
        sums[sorted_labels[starts]] = np.add.reduceat(x[order], starts, axis=0)

    def _split_dying(self) -> None:
        largest = int(np.argmax(self.weights))  # first index on ties, like Scala's maxBy / minBy
        smallest = int(np.argmin(self.weights))
        if not self.weights[smallest] < DYING_FRACTION * self.weights[largest]:
            return
        weight = (self.weights[largest] + self.weights[smallest]) / 2.0
        self.weights[largest] = weight
        self.weights[smallest] = weight
        centre = self.centers[largest].copy()
        perturbation = SPLIT_PERTURBATION * np.maximum(np.abs(centre), 1.0)
        self.centers[largest] = centre + perturbation
        self.centers[smallest] = centre - perturbation

    def __repr__(self) -> str:
        return (
            f"StreamingKMeans(k={self.k}, dims={self.dims}, decay_factor={self.decay_factor:g}, "
            f"time_unit={self.time_unit!r}, weights={np.array2string(self.weights, precision=3)})"
        )
