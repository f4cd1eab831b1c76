"""The code location loads light: every process the deployment starts (webserver, daemon,
each run's launcher and step, sensor ticks) loads it, so the store (SQLAlchemy), the network and WARC libraries
and the analysis stack load with the first run or tick that uses them, not with the definitions; and loading
prints no BetaWarning (the beta APIs are used on purpose, through assets.beta.beta_api).

A fresh interpreter per test: the test session itself has long imported everything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from assets.dagster_internals import IMPORTED_ON_USE

ROOT = Path(__file__).resolve().parents[1]
#: top-level packages a code location that only declares the stages must not import
HEAVY = (
    "sqlalchemy",
    "psycopg2",
    "requests",
    "urllib3",
    "warcio",
    "fsspec",
    "zstandard",
    "tld",
    "lxml",
    "pyarrow",
    "numpy",
    "pandas",
    "sklearn",
    "scipy",
    "matplotlib",
    "networkx",
)
LOAD = """
import json, sys
import orchestration.definitions as definitions
definitions.defs.get_repository_def()  # what a code server does after the import
print(json.dumps(sorted(sys.modules)))
"""


@pytest.fixture(scope="module")
def load(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    """One load in a fresh interpreter, with the default settings (no TOPICMAP_* from the caller's shell)."""
    tmp_path = tmp_path_factory.mktemp("load")
    env = {key: value for key, value in os.environ.items() if not key.startswith("TOPICMAP_")}
    (tmp_path / "dagster_home").mkdir()
    env.update(
        TOPICMAP_HOME=str(tmp_path), DAGSTER_HOME=str(tmp_path / "dagster_home"), PYTHONWARNINGS="default"
    )
    done = subprocess.run(
        [sys.executable, "-c", LOAD], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_loading_the_code_location_imports_no_heavy_library(load: subprocess.CompletedProcess[str]) -> None:
    loaded = json.loads(load.stdout.splitlines()[-1])
    heavy = sorted({name for name in loaded if name.split(".")[0] in HEAVY})
    assert heavy == [], "import these where a run or tick uses them, not at module level of the Dagster layer"
    # the store's light names are there; the store itself is not
    assert "topicmap.store.names" in loaded and "topicmap.store.topic_store" not in loaded


def test_loading_the_code_location_imports_no_dagster_internals_kept_for_use(
    load: subprocess.CompletedProcess[str],
) -> None:
    """Dagster's modules that serve a workspace (the webserver's, a run created here), backfills, remote code
    locations, the daemons' passes: assets/dagster_internals.py imports what it holds of them on first use."""
    loaded = set(json.loads(load.stdout.splitlines()[-1]))
    assert {"dagster", "assets.dagster_internals"} <= loaded
    on_use = sorted(set(IMPORTED_ON_USE.values()) & loaded)
    assert on_use == [], "take these from assets.dagster_internals in the function that uses them"


def test_loading_the_code_location_prints_no_beta_warning(load: subprocess.CompletedProcess[str]) -> None:
    warned = [line for line in load.stderr.splitlines() if "BetaWarning" in line]
    assert warned == [], "a beta API used on purpose goes through assets.beta.beta_api"
