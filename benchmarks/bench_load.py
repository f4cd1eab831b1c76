"""How long the code location takes to load, against a bare `import dagster` (goal: at most 1.6x).

Run: .venv/bin/python benchmarks/bench_load.py [--rounds 7] [--runs 3]

Every process the deployment starts pays the load: the webserver and daemon on each reload, every run twice
(launcher and step), every sensor tick's code server. Measured as fresh interpreters, paired and alternating
(bare `import dagster`, then `import orchestration.definitions`, then the other order), because this machine's
speed drifts within a minute: the ratio of each pair is what counts, reported as the median over the rounds.

Also: how many times a BetaWarning is printed on one load, and the wall time of a trivial run
(`dagster job execute -j archive_job` over an empty drops folder: the step itself takes milliseconds) against the
same command on an anchor code location holding one no-op asset.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ANCHOR = """import dagster as dg


@dg.asset
def noop() -> None:
    return None


defs = dg.Definitions(assets=[noop], jobs=[dg.define_asset_job("noop_job", selection=[noop])])
"""


def _timed(args: list[str], env: dict[str, str], cwd: Path = ROOT) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return elapsed, done.stderr


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="bench-load-") as tmp:
        home = Path(tmp)
        (home / "dagster_home").mkdir()
        (home / "dagster_home" / "dagster.yaml").write_text(
            "telemetry:\n  enabled: false\n", encoding="utf-8"
        )
        (home / "drops").mkdir()
        (home / "anchor").mkdir()
        (home / "anchor" / "anchor_defs.py").write_text(ANCHOR, encoding="utf-8")
        env = {
            **os.environ,
            "TOPICMAP_HOME": str(home),
            "DAGSTER_HOME": str(home / "dagster_home"),
            "PYTHONWARNINGS": "default",
        }
        bare_cmd = [python, "-c", "import dagster"]
        defs_cmd = [python, "-c", "import orchestration.definitions"]
        _timed(defs_cmd, env)  # warm the file cache and write the bytecode once
        bare, defs, ratios = [], [], []
        warnings_seen = 0
        for round_no in range(options.rounds):
            order = [("bare", bare_cmd), ("defs", defs_cmd)]
            if round_no % 2:
                order.reverse()
            times = {}
            for name, cmd in order:
                times[name], stderr = _timed(cmd, env)
                if name == "defs":
                    warnings_seen = max(warnings_seen, stderr.count("BetaWarning"))
            bare.append(times["bare"])
            defs.append(times["defs"])
            ratios.append(times["defs"] / times["bare"])
            print(
                f"round {round_no + 1}: dagster {times['bare']:.2f} s, definitions {times['defs']:.2f} s",
                flush=True,
            )

        dagster = str(Path(python).parent / "dagster")
        run_cmd = [dagster, "job", "execute", "-j", "archive_job", "-m", "orchestration.definitions"]
        anchor_cmd = [
            dagster,
            "job",
            "execute",
            "-j",
            "noop_job",
            "-f",
            str(home / "anchor" / "anchor_defs.py"),
        ]
        run_times, anchor_times = [], []
        for _ in range(options.runs):
            run_times.append(_timed(run_cmd, env)[0])
            anchor_times.append(_timed(anchor_cmd, env, cwd=home / "anchor")[0])

    median = statistics.median
    print(f"\n## Code location load time, {datetime.now(UTC):%Y-%m-%d}")
    print(
        f"\nCommand: `.venv/bin/python benchmarks/bench_load.py --rounds {options.rounds} --runs {options.runs}`"
    )
    print(f"Machine: {platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}.\n")
    print("| measure | median | min | max |")
    print("|---|---:|---:|---:|")
    print(f"| `import dagster` (anchor) | {median(bare):.2f} s | {min(bare):.2f} s | {max(bare):.2f} s |")
    print(
        f"| `import orchestration.definitions` | {median(defs):.2f} s | {min(defs):.2f} s | {max(defs):.2f} s |"
    )
    print(
        f"| ratio per pair (goal <= 1.6) | {median(ratios):.2f}x | {min(ratios):.2f}x | {max(ratios):.2f}x |"
    )
    print(
        f"| trivial run, no-op anchor location (`dagster job execute`) | {median(anchor_times):.2f} s | "
        f"{min(anchor_times):.2f} s | {max(anchor_times):.2f} s |"
    )
    print(
        f"| trivial run, archive_job over an empty drops folder | {median(run_times):.2f} s | "
        f"{min(run_times):.2f} s | {max(run_times):.2f} s |"
    )
    print(f"| BetaWarning mentions on stderr per load (max over rounds) | {warnings_seen} | | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
