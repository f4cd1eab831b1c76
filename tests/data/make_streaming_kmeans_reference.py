"""Reference outputs of Spark MLlib's StreamingKMeansModel, for tests/test_clusters_streaming.py.

Runs the real Spark (pyspark 4.3.0, OpenJDK 17), not our code: each case starts a model from given centres and
weights, feeds it batches with ``StreamingKMeansModel.update`` (PythonMLLibAPI.updateStreamingKMeansModel, the
Scala update), and records after every batch the centres, the weights, and the Scala ``KMeansModel.predict`` of
the batch's points (under the model before the update, as the update assigns them) and of probe points (under the
model after it). The test suite reads the JSON only, so it needs no Spark.

Run it in a scratch environment, never the project's (pyspark is large and only needed here):

    python3 -m venv /tmp/spark-venv && /tmp/spark-venv/bin/pip install pyspark==4.3.0 numpy
    /tmp/spark-venv/bin/python tests/data/make_streaming_kmeans_reference.py
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pyspark
from pyspark import SparkConf, SparkContext
from pyspark.mllib.clustering import StreamingKMeans, StreamingKMeansModel
from pyspark.mllib.common import _py2java
from pyspark.mllib.linalg import DenseVector

OUTPUT = Path(__file__).with_name("streaming_kmeans_reference.json")


def scala_predict(sc: SparkContext, centers: np.ndarray, points: np.ndarray) -> list[int]:
    """The Scala KMeansModel.predict (not pyspark's Python re-implementation of it)."""
    if len(points) == 0:
        return []
    model = sc._jvm.org.apache.spark.mllib.clustering.KMeansModel(
        _py2java(sc, [DenseVector(c) for c in centers])
    )
    return [int(model.predict(_py2java(sc, DenseVector(p)))) for p in points]


def run_case(
    sc: SparkContext, name: str, centers, weights, batches, decay_factor, time_unit, probes, note, **extra
):
    centers = np.asarray(centers, dtype=float)
    weights = [float(w) for w in weights]
    model = StreamingKMeansModel(centers.tolist(), weights)
    steps = []
    for batch in batches:
        batch = np.asarray(batch, dtype=float).reshape(-1, centers.shape[1])
        assigned = scala_predict(sc, np.asarray(model.centers), batch)
        # two partitions, as a streaming batch usually has several: the sums are merged across them
        rdd = sc.parallelize([DenseVector(p) for p in batch], 2)
        model.update(rdd, decay_factor, time_unit)
        after = np.asarray(model.centers, dtype=float)
        steps.append(
            {
                "points": batch.tolist(),
                "assigned": assigned,
                "centers": after.tolist(),
                "weights": [float(w) for w in model.clusterWeights],
                "probe_predictions": scala_predict(sc, after, np.asarray(probes, dtype=float)),
            }
        )
    return {
        "name": name,
        "note": note,
        "centers": centers.tolist(),
        "weights": weights,
        "decay_factor": decay_factor,
        "time_unit": time_unit,
        "probes": np.asarray(probes, dtype=float).tolist(),
        "steps": steps,
        **extra,
    }


def blobs(rng: np.random.Generator, means: np.ndarray, sizes: list[int], spread: float) -> np.ndarray:
    points = [
        rng.normal(mean, spread, size=(n, means.shape[1])) for mean, n in zip(means, sizes, strict=True)
    ]
    stacked = np.vstack(points)
    return stacked[rng.permutation(len(stacked))]


def main() -> None:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # local mode; keep the driver on loopback
    conf = SparkConf().setMaster("local[2]").setAppName("streaming-kmeans-reference")
    conf = conf.set("spark.ui.enabled", "false").set("spark.driver.bindAddress", "127.0.0.1")
    sc = SparkContext(conf=conf)
    sc.setLogLevel("ERROR")
    rng = np.random.default_rng(20)
    cases = []

    # drifting means: three blobs whose means walk, decay 0.6 per batch
    means = np.array([[0.0, 0.0, 0.0], [5.0, 5.0, 0.0], [-5.0, 4.0, 2.0]])
    drift = np.array([[0.4, 0.0, 0.1], [0.0, -0.3, 0.2], [0.3, 0.3, -0.2]])
    batches = [blobs(rng, means + t * drift, [12, 9, 15], 0.5) for t in range(6)]
    probes = rng.normal(0, 4, size=(20, 3))
    cases.append(
        run_case(
            sc,
            "drifting_means",
            means + rng.normal(0, 1, means.shape),
            [10, 10, 10],
            batches,
            0.6,
            "batches",
            probes,
            "three blobs whose means move each batch",
        )
    )

    # half-life in batches (Spark's setHalfLife(2, "batches"))
    decay = StreamingKMeans().setHalfLife(2.0, "batches")._decayFactor
    batches = [blobs(rng, means, [8, 8, 8], 0.8) for _ in range(4)]
    cases.append(
        run_case(
            sc,
            "half_life_batches",
            means + 1.0,
            [3, 0.5, 7],
            batches,
            decay,
            "batches",
            probes,
            "half-life of 2 batches",
            half_life=2.0,
        )
    )

    # half-life in points, batches of unequal sizes
    decay = StreamingKMeans().setHalfLife(50.0, "points")._decayFactor
    batches = [blobs(rng, means, sizes, 0.7) for sizes in ([4, 3, 3], [20, 10, 10], [1, 2, 2], [30, 25, 25])]
    cases.append(
        run_case(
            sc,
            "half_life_points",
            means - 0.5,
            [20, 20, 20],
            batches,
            decay,
            "points",
            probes,
            "half-life of 50 points over batches of 10, 40, 5 and 80 points",
            half_life=50.0,
        )
    )

    # decay 0 (only the newest batch counts) and 1 (all history counts equally)
    batches = [blobs(rng, means + t, [6, 6, 6], 0.6) for t in range(3)]
    for decay in (0.0, 1.0):
        cases.append(
            run_case(
                sc,
                f"decay_{decay:g}",
                means,
                [5, 5, 5],
                batches,
                decay,
                "batches",
                probes,
                f"decay factor {decay:g}",
            )
        )

    # a dying cluster: its weight is below 1e-8 of the largest, so the largest is split in two
    centers = [[0.0, 0.0], [10.0, 10.0], [-3.0, 7.0]]
    batches = [
        rng.normal([0, 0], 1.0, size=(30, 2)),
        rng.normal([10, 10], 1.0, size=(5, 2)),
        np.zeros((0, 2)),
    ]
    cases.append(
        run_case(
            sc,
            "dying_cluster",
            centers,
            [1000.0, 2.0, 1e-9],
            batches,
            0.9,
            "batches",
            rng.normal(3, 5, size=(15, 2)),
            "cluster 2 is dying at once; later batches keep splitting",
        )
    )
    # a cluster that starves: it never receives points and decays until it dies
    batches = [rng.normal([0, 0], 0.5, size=(10, 2)) for _ in range(30)]
    cases.append(
        run_case(
            sc,
            "starving_cluster",
            [[0.0, 0.0], [100.0, 100.0]],
            [10.0, 10.0],
            batches,
            0.5,
            "batches",
            [[50.0, 50.0], [1.0, 1.0], [99.0, 99.0]],
            "cluster 1 gets no points, halves every batch, dies",
        )
    )

    # zero initial weights, as the chapter's setRandomCenters(dim, 0.0): random Gaussian centres, 256 dims,
    # unit-length text-like vectors in 15 groups
    dims, k = 256, 15
    centers = rng.normal(0, 1, size=(k, dims))
    topics = rng.normal(0, 1, size=(k, dims))
    batches = []
    for _ in range(4):
        which = rng.integers(0, k, size=60)
        points = topics[which] + rng.normal(0, 0.8, size=(60, dims))
        batches.append(points / np.linalg.norm(points, axis=1, keepdims=True))
    probe_points = rng.normal(0, 1, size=(30, dims))
    probe_points /= np.linalg.norm(probe_points, axis=1, keepdims=True)
    cases.append(
        run_case(
            sc,
            "zero_weights_256",
            centers,
            [0.0] * k,
            batches,
            math.exp(math.log(0.5) / 2),
            "batches",
            probe_points,
            "k=15 random centres of weight 0 (the chapter's start), unit vectors in 256 dims",
        )
    )

    # ties: points exactly between two centres (lowest index wins), equal largest and smallest weights
    centers = [[0.0, 0.0], [2.0, 0.0], [0.0, 2.0], [2.0, 2.0]]
    batches = [
        [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 1.0], [1.0, 2.0]],
        [[1.0, 1.0], [1.0, 1.0]],
        [],
        [[3.0, 3.0]],
    ]
    probes = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [1.0, 2.0], [2.0, 1.0]]
    cases.append(
        run_case(
            sc,
            "ties",
            centers,
            [4.0, 4.0, 0.0, 0.0],
            batches,
            1.0,
            "batches",
            probes,
            "equidistant points and tied weights: first index wins everywhere",
        )
    )

    # an empty batch only decays the weights (and may let a cluster die)
    cases.append(
        run_case(
            sc,
            "empty_batch",
            means,
            [4.0, 2.0, 1.0],
            [[], [], blobs(rng, means, [2, 2, 2], 0.3), []],
            0.5,
            "batches",
            means,
            "empty batches decay the weights and move nothing",
        )
    )
    cases.append(
        run_case(
            sc,
            "empty_batch_points",
            means,
            [4.0, 2.0, 1.0],
            [[], blobs(rng, means, [2, 2, 2], 0.3)],
            0.9,
            "points",
            means,
            "in points, an empty batch discounts by a**0 = 1",
        )
    )
    sc.stop()
    OUTPUT.write_text(
        json.dumps({"spark_version": pyspark.__version__, "cases": cases}, separators=(",", ":")) + "\n"
    )
    print(f"wrote {len(cases)} cases to {OUTPUT}")


if __name__ == "__main__":
    main()
