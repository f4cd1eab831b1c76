"""Every sensor settles after `make demo`: with nothing changing, no tick requests a run, and each says why.

The demo runs once (tests/settle_demo.py: the demo on a smaller web, in a process of its own, in an instance from
deploy/dagster.local.yaml as `make demo` leaves it); then each sensor of the code location is ticked three times in a
row against its end state, with the settings `make demo-ui` gives the UI (Bit.ly token, the curated files), each
tick from the cursor the one before left, the first from none (a sensor just started, as the daemon starts it).

A tick that returns a run request the daemon would skip (its run key already launched) counts as a request too: the
UI lists it as "0 runs requested" with no reason, tick after tick.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.dagster_deploy import ROOT, write_instance
from tests.settle_demo import EMPTY_RESULT

pytestmark = pytest.mark.deployment

TICKS = 3


def _run(args: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "tests.settle_demo", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def demo_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of `make demo-ui` on an instance where the demo ran."""
    from topicmap.demo.standins import StandinDataset

    home = tmp_path_factory.mktemp("settle") / "home"
    write_instance(home / "dagster_home", "dagster.local.yaml")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("TOPICMAP_", "DAGSTER_HOME"))},
        "TOPICMAP_HOME": str(home),
        "DAGSTER_HOME": str(home / "dagster_home"),
    }
    demo_output = _run(["demo"], env)
    (home / "demo_output.txt").write_text(demo_output)
    # what `make demo-ui` adds: the demo's curated files (which the demo wrote) and a Bit.ly token
    return {
        **env,
        "TOPICMAP_MEDIA_DUPS_FILE": str(home / "media_dups.csv"),
        "TOPICMAP_MEDIA_TAGS_FILE": str(home / "media_tags.csv"),
        "TOPICMAP_LINK_MAP_TAG_SET": "media_type",
        "TOPICMAP_BITLY_TOKEN": StandinDataset().bitly_token,
    }


def test_the_demo_fetches_facebook_figures_for_its_stories(demo_env: dict[str, str]) -> None:
    # the post-spider runs fetch statistics before the click backfill: the stand-in must know the stories by then
    output = (Path(demo_env["TOPICMAP_HOME"]) / "demo_output.txt").read_text()
    shares = [
        int(m.group(1)) for m in re.finditer(r"story_statistics \[[^]]+\]: \d+ stories; shares (\d+)", output)
    ]
    assert shares and all(count > 0 for count in shares), output[-3000:]


def test_no_sensor_requests_a_run_after_the_demo_and_each_tick_says_why(demo_env: dict[str, str]) -> None:
    sensors = json.loads(_run(["ticks", str(TICKS)], demo_env).splitlines()[-1])
    # every sensor of the code location was ticked, the demo's own among them
    assert {"spider_iterations", "click_refetch_30d", "snapshot_refresh", "cluster_weeks_automation"} <= set(
        sensors
    )
    requested = {
        name: [tick["run_requests"] + tick["partition_requests"] for tick in found["ticks"]]
        for name, found in sensors.items()
        if any(tick["run_requests"] or tick["partition_requests"] for tick in found["ticks"])
    }
    assert requested == {}, json.dumps(requested, indent=1)
    # the project's sensors say why they skipped; Dagster's own (run status, automation condition) say what it says
    unexplained = {
        name: [tick["skip_reason"] for tick in found["ticks"]]
        for name, found in sensors.items()
        if found["kind"] == "own"
        and any(tick["skip_reason"] in (None, EMPTY_RESULT) for tick in found["ticks"])
    }
    assert unexplained == {}
    reasons = {name: found["ticks"][-1]["skip_reason"] for name, found in sensors.items()}
    assert "already launched under run key post-spider:climate-demo:" in reasons["spider_iterations"]
    assert "no publication day has topic stories lacking the 30d click totals" in reasons["click_refetch_30d"]
