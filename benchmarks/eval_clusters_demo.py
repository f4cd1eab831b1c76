"""Cluster quality on the full demo web (3,000 stories): subjects recovered (adjusted Rand index), a planted
drifting story followed week by week. The same measurement as tests/test_clusters_demo.py, at full size.

    .venv/bin/python benchmarks/eval_clusters_demo.py [--seed 7] [--stories 3000]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.test_clusters_demo import evaluate_demo  # noqa: E402  (the repository root is on the path now)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--stories", type=int, default=3000)
    args = parser.parse_args()
    started = time.perf_counter()
    result = evaluate_demo(args.seed, args.stories)
    result["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
