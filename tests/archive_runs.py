"""For the drop tests: ``archive_stories`` materialized over a drops folder, again and again on one instance, and a
reader run in a process of its own whose peak memory is measured."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import dagster as dg

from assets.archive import archive_stories
from resources.archive import ArchiveDropsResource
from resources.store import TopicStoreResource

ROOT = Path(__file__).resolve().parents[1]


def archive_runs(drops: Path, database_url: str) -> Callable[[], dict]:
    """A function that materializes ``archive_stories`` over ``drops`` into the store at ``database_url`` and
    returns the materialization's metadata; each call is one more run on the same instance."""
    resources = {
        "store": TopicStoreResource(database_url=database_url),
        "drops": ArchiveDropsResource(drops_dir=str(drops)),
    }
    instance = dg.DagsterInstance.ephemeral()

    def run() -> dict:
        result = dg.materialize([archive_stories], instance=instance, resources=resources)
        return result.asset_materializations_for_node("archive_stories")[0].metadata

    return run


def script_report(script: str, *args: str) -> dict:
    """Run a Python ``script`` in a process of its own (from the repository's root, so that it imports the project)
    with ``args``, and return the JSON it prints: what it read, and the peak memory it measured of itself."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)
