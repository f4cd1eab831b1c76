"""topicmap.clusters.StreamingKMeans against outputs of the real Spark MLlib (pyspark 4.3.0).

tests/data/streaming_kmeans_reference.json was made by tests/data/make_streaming_kmeans_reference.py, which runs
Spark's own StreamingKMeansModel.update and KMeansModel.predict; this suite needs no Spark.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from topicmap.clusters import StreamingKMeans

REFERENCE = json.loads((Path(__file__).parent / "data" / "streaming_kmeans_reference.json").read_text())
CASES = {case["name"]: case for case in REFERENCE["cases"]}


def test_reference_was_made_by_spark_4_3() -> None:
    assert REFERENCE["spark_version"] == "4.3.0"
    expected = {
        "drifting_means",
        "half_life_batches",
        "half_life_points",
        "decay_0",
        "decay_1",
        "dying_cluster",
        "starving_cluster",
        "zero_weights_256",
        "ties",
        "empty_batch",
        "empty_batch_points",
    }
    assert expected <= set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_batch_matches_spark(name: str) -> None:
    case = CASES[name]
    if "half_life" in case:
        model = StreamingKMeans.half_life(
            case["centers"], case["weights"], case["half_life"], case["time_unit"]
        )
        assert model.decay_factor == case["decay_factor"]  # Spark's exp(log(0.5) / half_life), bit for bit
    else:
        model = StreamingKMeans(case["centers"], case["weights"], case["decay_factor"], case["time_unit"])
    dims = len(case["centers"][0])
    for t, step in enumerate(case["steps"]):
        points = np.asarray(step["points"], dtype=float).reshape(-1, dims)
        assert model.predict(points).tolist() == step["assigned"], f"batch {t}: assignments"
        returned = model.update(points)
        assert returned is model
        np.testing.assert_allclose(model.centers, step["centers"], rtol=0, atol=1e-9, err_msg=f"batch {t}")
        np.testing.assert_allclose(model.weights, step["weights"], rtol=1e-12, atol=0, err_msg=f"batch {t}")
        assert model.predict(case["probes"]).tolist() == step["probe_predictions"], f"batch {t}: probes"


def test_the_reference_exercises_what_it_claims() -> None:
    """Guards the test data: each case really contains the situation it is named after."""
    dying = CASES["dying_cluster"]["steps"][0]["weights"]
    assert dying[2] == dying[0]  # the dying cluster took half of the largest
    starving = [step["weights"][1] for step in CASES["starving_cluster"]["steps"]]
    assert starving[0] < 10 and any(
        b > a for a, b in zip(starving, starving[1:], strict=False)
    )  # died, split
    assert CASES["ties"]["steps"][0]["assigned"] == [0, 0, 0, 1, 2]
    assert [len(step["points"]) for step in CASES["half_life_points"]["steps"]] == [10, 40, 5, 80]
    assert len(CASES["empty_batch"]["steps"][0]["points"]) == 0


def test_split_is_spark_rule_one_per_batch() -> None:
    model = StreamingKMeans([[1.0, -300.0], [0.0, 0.0], [5.0, 5.0]], [10.0, 0.0, 0.0])
    model.update(np.zeros((0, 2)))
    # only one of the two dead clusters (the first) is revived per batch
    assert model.weights.tolist() == [5.0, 5.0, 0.0]
    assert model.centers[0].tolist() == [1.0 + 1e-14, -300.0 + 300.0 * 1e-14]
    assert model.centers[1].tolist() == [1.0 - 1e-14, -300.0 - 300.0 * 1e-14]
    model.update(np.zeros((0, 2)))
    assert model.weights.tolist() == [2.5, 5.0, 2.5]


def test_half_life_means_half_the_weight() -> None:
    model = StreamingKMeans.half_life([[0.0]], [8.0], 2.0)
    model.update([]).update([])
    assert model.weights[0] == pytest.approx(4.0, rel=1e-12)
    points = StreamingKMeans.half_life([[0.0]], [8.0], 10.0, "points")
    points.update([[0.0]] * 10)
    assert points.weights[0] == pytest.approx(14.0, rel=1e-12)
    assert math.isclose(StreamingKMeans.half_life([[0.0]], [1.0], 1.0).decay_factor, 0.5)


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="weights has 1 entries for 2 centers"):
        StreamingKMeans([[0.0], [1.0]], [1.0])
    with pytest.raises(ValueError, match="time_unit"):
        StreamingKMeans([[0.0]], [1.0], 0.5, "hours")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="decay_factor"):
        StreamingKMeans([[0.0]], [1.0], -0.1)
    with pytest.raises(ValueError, match="half_life"):
        StreamingKMeans.half_life([[0.0]], [1.0], 0)
    with pytest.raises(ValueError, match="non-negative"):
        StreamingKMeans([[0.0]], [-1.0])
    model = StreamingKMeans([[0.0, 0.0]], [1.0])
    with pytest.raises(ValueError, match="2 columns"):
        model.update([[1.0, 2.0, 3.0]])
    with pytest.raises(ValueError, match="NaN"):
        model.predict([[np.nan, 0.0]])
    assert model.weights.tolist() == [1.0]  # a refused batch changed nothing
