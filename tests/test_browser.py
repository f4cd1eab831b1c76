"""The Dagster UI in a real browser (headless Chromium through selenium), on an instance with a topic in it.

The test runs a small demo topic in process up to its snapshot (as `make demo` does) while it starts
`dagster-webserver` on that instance (its runs' steps in their run worker), and checks what a user sees: the global lineage graph shows every
asset, the snapshots asset page shows its link map and attention chart as pictures and its top lists as
tables without a click, each within the page (its Overview and its Events page), a materialization
launched by clicking the UI's Materialize button succeeds (read back through GraphQL), the topic's own
seeds run re-executes from its run page ("Re-execute all") and succeeds, an asset page shows its owners
and freshness policy, a week of click totals is backfilled from the asset's launch dialog (no daemon
runs here, so the backfill is checked as launched; tests/test_ui_runs.py follows one into its runs), and the weekly
clusters: the launch dialog offers the topic's weeks, and after one week is built again from a late story the
asset's Checks tab shows every later week stale until one run over them rebuilds them.

It runs where Debian's `chromium` and `chromium-driver` are installed (`.ci/run` installs them), and under
CI=true always: there a missing browser is a failure. Every step saves a screenshot in pytest's tmp dir.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import NamedTuple
from urllib.parse import quote

import dagster as dg
import pytest
import requests
from dagster_graphql import DagsterGraphQLClient

from tests import demo_topic
from tests.dagster_deploy import ROOT, DagsterGraphQL, free_port, stop_process_tree, write_instance
from topicmap.topics import load_topics

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
#: a page that shows nothing new for this long is broken (a busy machine renders slower, not never)
PAGE_PATIENCE_SECONDS = 120
#: a launched run that makes no progress for this long is stuck
RUN_PATIENCE_SECONDS = 300
#: how often a wait looks whether the page still changes
PAGE_CHANGE_WINDOW_SECONDS = 5
#: how often a wait looks at the page for what it waits for (each look runs in the page, Chromium's CPU)
PAGE_POLL_SECONDS = 0.5
#: how often a wait asks the webserver whether a run is over (a run takes seconds; each ask is a GraphQL query)
RUN_POLL_SECONDS = 1.0


def _require_browser() -> None:
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not os.access(path, os.X_OK)]
    if not missing:
        return
    reason = f"headless UI test needs Debian chromium and chromium-driver; missing {missing}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true: {reason} (.ci/run installs them)")
    pytest.skip(reason)


class Deployment(NamedTuple):
    """The webserver's GraphQL, and the folder its processes share (TOPICMAP_HOME: the store, the topics file)."""

    graphql: DagsterGraphQL
    home: Path


@pytest.fixture(scope="module")
def deployment() -> Iterator[Deployment]:
    """A webserver on an instance holding a topic materialized up to its snapshot."""
    _require_browser()
    pytest.importorskip("selenium")
    from topicmap.demo.server import serve_demo_web

    tmp = Path(tempfile.mkdtemp(prefix="topicmap-browser-"))
    web = demo_topic.demo_web()
    with serve_demo_web(web) as server:
        env = demo_topic.prepare(tmp, web, server.port, interval=0.0, max_iterations=1)
        env["DAGSTER_HOME"] = str(tmp / "dagster_home")
        # the instance `make ui` uses, except that runs launch straight from the webserver: this test
        # starts no daemon to dequeue them (the daemon end-to-end test covers the queue)
        write_instance(
            tmp / "dagster_home",
            "dagster.local.yaml",
            run_coordinator={"module": "dagster.core.run_coordinator", "class": "DefaultRunCoordinator"},
        )
        # the instance's SQLite storages made here, once: the topic's build and the webserver then start together
        # (the webserver loads its code location while the topic is built)
        with dg.DagsterInstance.from_config(str(tmp / "dagster_home")):
            pass
        build_log = tmp / "build.log"
        with open(build_log, "wb") as out:
            build = subprocess.Popen(
                [sys.executable, "-m", "tests.demo_topic", "--post-spider"],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        port = free_port()
        log = tmp / "webserver.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(
                [
                    str(Path(sys.executable).parent / "dagster-webserver"),
                    *("-h", "127.0.0.1", "-p", str(port), "-w", "workspace.yaml"),
                ],
                cwd=ROOT,
                # the runs launched from the UI run their steps in their run worker: the UI is the subject here,
                # not step processes (tests/test_daemon_e2e.py runs them)
                env={**env, "TOPICMAP_EXECUTOR": "in_process"},
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        graphql = DagsterGraphQL(port)
        try:
            last_size, since = -1, time.monotonic()
            while True:
                assert process.poll() is None, log.read_text()[-4000:]
                assert build.poll() in (None, 0), build_log.read_text(errors="replace")[-4000:]
                try:
                    if (
                        requests.get(f"http://127.0.0.1:{port}/server_info", timeout=5).ok
                        and graphql.location_loaded()
                    ):
                        break
                except requests.ConnectionError:
                    pass
                size = log.stat().st_size  # the webserver logs as it loads: waiting on progress, not a clock
                if size != last_size:
                    last_size, since = size, time.monotonic()
                assert time.monotonic() - since < PAGE_PATIENCE_SECONDS, log.read_text()[-4000:]
                time.sleep(0.5)
            assert build.wait() == 0, build_log.read_text(errors="replace")[-4000:]
            yield Deployment(graphql, tmp)
        finally:
            stop_process_tree(build)
            stop_process_tree(process)
            shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def webserver(deployment: Deployment) -> DagsterGraphQL:
    return deployment.graphql


@pytest.fixture(scope="module")
def chromium(deployment: Deployment) -> Iterator:
    """One browser for the module: its HTTP cache (the UI's scripts, compiled once) is shared by the tests."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="topicmap-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",  # needed as root without a display
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--window-size=1600,1000",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(argument)
    # an explicit driver: Selenium Manager would otherwise try to download one
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def browser(chromium, deployment: Deployment) -> Iterator:  # noqa: ANN001
    """The module's browser for one test, as a new visitor: no cookies or stored site data from an earlier test
    (the UI keeps state in local storage and IndexedDB), on a blank page."""
    chromium.get("about:blank")
    chromium.execute_cdp_cmd(
        "Storage.clearDataForOrigin",
        {
            "origin": deployment.graphql.base_url,
            "storageTypes": "cookies,indexeddb,local_storage,service_workers,cache_storage,websql,file_systems",
        },
    )
    chromium.execute_cdp_cmd("Network.clearBrowserCookies", {})
    yield chromium
    # the UI polls the webserver while it shows a page: leave none open between tests
    chromium.get("about:blank")


def _leave_page(driver) -> None:  # noqa: ANN001
    """Show a blank page while the test waits on something else: an open UI page keeps polling and rendering."""
    driver.get("about:blank")


@contextmanager
def screenshot(driver, folder: Path, name: str) -> Iterator[None]:  # noqa: ANN001
    """Keep what the browser showed at the end of a step, passed or failed: ``<folder>/<name>.png`` (pytest's
    tmp dir, kept after the run, to look at what a person would have seen)."""
    try:
        yield
    finally:
        driver.save_screenshot(str(folder / f"{name}.png"))


def _wait(  # noqa: ANN202
    driver,  # noqa: ANN001
    what: str,
    condition,  # noqa: ANN001
    patience: float = PAGE_PATIENCE_SECONDS,
    poll: float = PAGE_POLL_SECONDS,
):
    """Wait (WebDriverWait, polling ``condition``) while the page keeps changing; give up only after
    ``patience`` seconds without any change: a busy machine renders slower, a broken page never."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.wait import WebDriverWait

    # a condition raising mid-render (an element gone stale, a lookup between two renders) is looked at again
    wait = WebDriverWait(
        driver, PAGE_CHANGE_WINDOW_SECONDS, poll_frequency=poll, ignored_exceptions=(Exception,)
    )
    # the page source (a serialization of the whole page) is read only when a window passes without the condition
    last, since = None, time.monotonic()
    while True:
        try:
            return wait.until(condition)
        except TimeoutException:
            source = driver.page_source
            if source != last:
                last, since = source, time.monotonic()
            elif time.monotonic() - since > patience:
                raise AssertionError(
                    f"UI: {what} did not appear (page unchanged for {patience:.0f} s)"
                ) from None


def test_lineage_graph_shows_every_asset(webserver: DagsterGraphQL, browser, tmp_path: Path) -> None:  # noqa: ANN001
    from selenium.webdriver.common.by import By

    nodes = webserver.query("{ assetNodes { assetKey { path } groupName } }")["assetNodes"]
    names = {"/".join(node["assetKey"]["path"]) for node in nodes}
    assert {"archive_stories", "seeds", "fetched_links", "snapshots", "click_totals"} <= names
    # the UI collapses groups when there are several; open them all, as a user clicking each group would
    groups = sorted({node["groupName"] for node in nodes})
    expanded = ",".join(f"global@global:{group}" for group in groups)
    browser.get(f"{webserver.base_url}/asset-groups?expanded={quote(expanded)}")

    def nodes_shown(driver) -> set[str] | None:  # noqa: ANN001
        # asset nodes are SVG foreignObjects (bare names also appear in the sidebar, so look in the graph)
        shown = {
            element.text.split("\n")[0].strip()
            for element in driver.find_elements(By.CSS_SELECTOR, "[class*='AssetNode_assetNodeContainer']")
        }
        if names <= shown:
            return shown
        if shown:  # the graph renders only what is in view: zoom out, as a user would, until all is
            driver.find_element(By.XPATH, "//*[@aria-label='zoom_out']/ancestor::button").click()
        return None

    with screenshot(browser, tmp_path, "lineage"):
        shown = _wait(browser, f"all {len(names)} asset nodes in the lineage graph", nodes_shown)
    assert names <= shown


#: what the snapshot's asset page shows as pictures and as top lists, each in its row of the metadata table
SNAPSHOT_PICTURES = ("link_map_preview", "attention")
SNAPSHOT_TOP_LISTS = ("top_media", "top_stories")
#: a picture narrower than this on the page is a thumbnail nobody reads
SHOWN_PICTURE_MIN_WIDTH = 400

#: where an element sits against what shows it: its nearest ancestor that clips or scrolls sideways (the metadata
#: table's scroll container, or the page), and how far that ancestor's content reaches past its right side
_PLACEMENT_JS = """
const element = arguments[0], box = element.getBoundingClientRect();
let clip = element.parentElement;
while (clip && getComputedStyle(clip).overflowX === 'visible') clip = clip.parentElement;
const shown = clip ? clip.getBoundingClientRect() : {left: 0, right: window.innerWidth};
return {left: box.left, right: box.right, width: box.width, height: box.height,
        clipLeft: shown.left, clipRight: shown.right, viewport: window.innerWidth,
        hiddenRight: clip ? clip.scrollWidth - clip.clientWidth : 0,
        naturalWidth: element.naturalWidth || 0, complete: element.complete === undefined || element.complete};
"""


def _metadata_row(driver, label: str):  # noqa: ANN001, ANN202
    """The row of the metadata table whose key is ``label`` (None until it is rendered)."""
    from selenium.webdriver.common.by import By

    rows = driver.find_elements(By.XPATH, f"//tr[td[1][normalize-space(.)='{label}']]")
    return rows[0] if rows else None


def _snapshot_metadata_shown(driver):  # noqa: ANN001, ANN202
    """Once the metadata table is rendered and its pictures loaded: label -> the picture or table shown in that
    row without a click, None where there is none (no row, or the value waits behind a button)."""
    from selenium.webdriver.common.by import By

    if _metadata_row(driver, "snapshot_key") is None:  # the table renders every row at once
        return None
    shown = {}
    for label in (*SNAPSHOT_PICTURES, *SNAPSHOT_TOP_LISTS):
        row = _metadata_row(driver, label)
        # "[Show Markdown]", "[Show JSON]": a value the UI shows only in a dialog
        behind_a_button = row is not None and row.find_elements(
            By.XPATH, ".//*[starts-with(text(), '[Show ')]"
        )
        if row is None or behind_a_button:
            shown[label] = None
        elif label in SNAPSHOT_TOP_LISTS:
            shown[label] = next(iter(row.find_elements(By.TAG_NAME, "table")), None)
        else:
            images = row.find_elements(By.TAG_NAME, "img")
            # markdown renders a moment after the table, and an image loads after that
            if not images or not driver.execute_script("return arguments[0].complete", images[0]):
                return None
            shown[label] = images[0]
    return shown


def _latest_snapshot(webserver: DagsterGraphQL) -> tuple[Path, dict[str, list[list[str]]]]:
    """The folder of the topic's latest snapshot and its top lists as the materialization records them (label ->
    rows of cells): what the UI is given."""
    data = webserver.query(
        'query($partition: String!) { assetNodeOrError(assetKey: {path: ["snapshots"]}) { ... on AssetNode { '
        "assetMaterializations(partitions: [$partition], limit: 1) { metadataEntries { label "
        "... on PathMetadataEntry { path } "
        "... on TableMetadataEntry { table { records schema { columns { name } } } } } } } } }",
        partition=demo_topic.TOPIC,
    )
    (materialization,) = data["assetNodeOrError"]["assetMaterializations"]
    entries = {entry["label"]: entry for entry in materialization["metadataEntries"]}
    top_lists = {
        label: [
            [json.loads(record)[column["name"]] for column in entries[label]["table"]["schema"]["columns"]]
            for record in entries[label]["table"]["records"]
        ]
        for label in SNAPSHOT_TOP_LISTS
    }
    return Path(entries["snapshot_folder"]["path"]), top_lists


def test_snapshot_page_shows_its_pictures_and_top_lists_without_a_click(
    webserver: DagsterGraphQL, browser, tmp_path: Path
) -> None:  # noqa: ANN001
    """The asset's Overview page (where the catalog leads) and its Events page show the snapshot's link map and
    attention chart as pictures and its top media and stories as tables, all without a click, each whole within
    the page: nothing cut off on the right, no sideways scrolling."""
    from PIL import Image
    from selenium.webdriver.common.by import By

    pages = {
        "snapshot-overview": f"{webserver.base_url}/assets/snapshots",
        "snapshot-events": f"{webserver.base_url}/assets/snapshots?view=events&partition={demo_topic.TOPIC}",
    }
    for name, url in pages.items():
        browser.get(url)
        with screenshot(browser, tmp_path, name):
            shown = _wait(browser, "the snapshot's metadata", _snapshot_metadata_shown)
            missing = [label for label, element in shown.items() if element is None]
            assert not missing, f"{name}: not on the page without a click: {missing}"
            browser.execute_script("arguments[0].scrollIntoView({block: 'start'})", shown["link_map_preview"])
            placement = {label: browser.execute_script(_PLACEMENT_JS, e) for label, e in shown.items()}
            for label, where in placement.items():
                # the whole element is in view sideways: within what shows it, which hides nothing on the right
                within = where["clipLeft"] - 1 <= where["left"] and where["right"] <= where["clipRight"] + 1
                assert within and where["right"] <= where["viewport"], (name, label, where)
                assert where["hiddenRight"] <= 1, (name, label, where)
            for label in SNAPSHOT_PICTURES:
                # shown at its own size (a copy made to fit), large enough to read
                where = placement[label]
                assert where["width"] >= SHOWN_PICTURE_MIN_WIDTH, (name, label, where)
                assert where["naturalWidth"] == round(where["width"]), (name, label, where)
                # what a person sees there: the picture's pixels, not a broken-image icon or a blank box
                seen = Image.open(io.BytesIO(shown[label].screenshot_as_png)).convert("RGB")
                assert seen.width >= SHOWN_PICTURE_MIN_WIDTH and seen.height >= 150, (label, seen.size)
                colours = seen.getcolors(maxcolors=4096)  # None: more than that
                assert colours is None or len(colours) > 64, (label, colours)
            folder, records = _latest_snapshot(webserver)
            assert all(len(rows) >= 5 for rows in records.values()), records
            for label, rows in records.items():
                cells = [
                    [cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
                    for row in shown[label].find_elements(By.XPATH, "./tbody/tr")
                ]
                assert cells == rows, (name, label)
            # what a person sees further down: the top lists
            top_lists = _metadata_row(browser, "top_media")
            browser.execute_script("arguments[0].scrollIntoView({block: 'start'})", top_lists)
            browser.save_screenshot(str(tmp_path / f"{name}-top-lists.png"))
            lines = _body_text(browser).split("\n")
            # nothing waits behind a button, and the snapshot's other metadata is still there
            assert not [line for line in lines if "Show Markdown" in line]
            assert {"summary_overall", "snapshot_folder", "snapshot_key", "timespan_counts"} <= set(lines)
    # a click on the link map downloads the full picture of the snapshot's folder, byte for byte
    link = shown["link_map_preview"].find_element(By.XPATH, "./ancestor::a")
    full = requests.get(link.get_attribute("href"), timeout=60)
    assert full.ok and full.content == (folder / "overall" / "link_map.png").read_bytes()


def test_materialize_button_launches_a_run_that_succeeds(
    webserver: DagsterGraphQL, browser, tmp_path: Path
) -> None:  # noqa: ANN001
    from selenium.webdriver.common.by import By

    before = {run["runId"] for run in webserver.runs()}
    browser.get(f"{webserver.base_url}/assets/archive_stories")

    def materialize_button(driver):  # noqa: ANN001, ANN202
        for button in driver.find_elements(By.TAG_NAME, "button"):
            if button.text.strip() == "Materialize" and button.is_enabled():
                return button
        return None

    with screenshot(browser, tmp_path, "materialize"):
        _wait(browser, "the Materialize button", materialize_button).click()

        def launched() -> dict | None:
            new = [run for run in webserver.runs() if run["runId"] not in before]
            return new[0] if new else None

        run = _wait(browser, "a run launched by the click", lambda _: launched())
    _leave_page(browser)
    assert run["assets"] == {"archive_stories"}
    # the run is read back through GraphQL; patience is measured from its last status change
    client = DagsterGraphQLClient("127.0.0.1", port_number=int(webserver.base_url.rsplit(":", 1)[1]))
    status, since = None, time.monotonic()
    while status not in ("SUCCESS", "FAILURE", "CANCELED"):
        current = client.get_run_status(run["runId"]).value
        if current != status:
            status, since = current, time.monotonic()
        assert time.monotonic() - since < RUN_PATIENCE_SECONDS, f"run {run['runId']} stuck in {status}"
        time.sleep(1)
    assert status == "SUCCESS", webserver.run_messages(run["runId"])[-10:]


def _body_text(driver) -> str:  # noqa: ANN001
    from selenium.webdriver.common.by import By

    return driver.find_element(By.TAG_NAME, "body").text


def _backfills(webserver: DagsterGraphQL) -> list[dict]:
    """Every partition backfill on the instance: id, status, partition names and target assets."""
    data = webserver.query(
        "{ partitionBackfillsOrError(limit: 100) { ... on PartitionBackfills { results { "
        "id status partitionNames assetSelection { path } } } } }"
    )
    return data["partitionBackfillsOrError"]["results"]


def test_a_topic_run_re_executes_from_its_run_page(
    webserver: DagsterGraphQL, browser, tmp_path: Path
) -> None:  # noqa: ANN001
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    # the topic's seeds run, made by the code location's job as `topicmap topic run` makes it
    (seeds_run,) = [
        run
        for run in webserver.runs()
        if run["jobName"] == "seeds_job" and not run["tags"].get("dagster/parent_run_id")
    ]
    browser.get(f"{webserver.base_url}/runs")
    # each step's screenshot shows the page before the click that leaves it
    with screenshot(browser, tmp_path, "1-runs-list"):
        # the Runs list names each run by the first 8 characters of its id
        run_link = _wait(
            browser,
            "the seeds run in the Runs list",
            ec.element_to_be_clickable((By.LINK_TEXT, seeds_run["runId"][:8])),
        )
    run_link.click()
    with screenshot(browser, tmp_path, "2-seeds-run-page"):
        _wait(browser, "the seeds run's page", ec.url_contains(seeds_run["runId"]))
        re_execute = _wait(
            browser,
            "the Re-execute all button",
            ec.element_to_be_clickable(
                (By.XPATH, "//button[starts-with(normalize-space(.), 'Re-execute all')]")
            ),
        )
    re_execute.click()

    def re_execution() -> dict | None:
        children = webserver.runs({"dagster/parent_run_id": seeds_run["runId"]})
        return children[0] if children else None

    with screenshot(browser, tmp_path, "3-re-executed-run-page"):
        rerun = _wait(browser, "the run the click launched", lambda _: re_execution())
        # the UI opens the new run's page; its status tag reads Success once the run is over
        _wait(browser, "the new run's page", ec.url_contains(rerun["runId"]))

        def over() -> str | None:
            status = next(run["status"] for run in webserver.runs() if run["runId"] == rerun["runId"])
            return status if status in ("SUCCESS", "FAILURE", "CANCELED") else None

        status = _wait(
            browser,
            "the new run's end",
            lambda _: over(),
            patience=RUN_PATIENCE_SECONDS,
            poll=RUN_POLL_SECONDS,
        )
        assert status == "SUCCESS", webserver.run_messages(rerun["runId"])[-10:]
        text = _wait(
            browser,
            "the new run's Success status",
            lambda driver: "Success" in (text := _body_text(driver)).split("\n") and text,
        )
    assert rerun["jobName"] == "seeds_job"
    # the page lists the first run and its re-execution together
    assert "Re-executions (1)" in text and seeds_run["runId"][:8] in text and rerun["runId"][:8] in text


def test_an_asset_page_shows_its_owners_and_freshness_policy(
    webserver: DagsterGraphQL, browser, tmp_path: Path
) -> None:  # noqa: ANN001
    browser.get(f"{webserver.base_url}/assets/ccnews_stories")
    with screenshot(browser, tmp_path, "asset-owners-freshness"):
        # the freshness panel fills in after the definition: wait for its deadline line
        lines = _wait(
            browser,
            "the asset's freshness policy",
            lambda driver: (
                (lines := _body_text(driver).split("\n")) and "Deadline: At 12:00 PM UTC" in lines and lines
            ),
        )
    # team owners are shown by their name (with a team icon) under Owners
    assert lines[lines.index("Owners") + 1] == "topicmap"
    # the CC-NEWS day must be loaded in the 24 hours before each noon UTC
    freshness = lines[lines.index("Freshness policy", lines.index("Owners")) :]
    assert any("24 hours before each" in line for line in freshness), freshness[:8]


def test_the_missing_click_days_backfill_from_the_asset_page(
    deployment: Deployment, browser, tmp_path: Path
) -> None:  # noqa: ANN001
    """ "Missing" in the launch dialog targets the click days the topics declare, and only those: no day after a
    topic's end or before its start is offered, so none is backfilled."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    webserver = deployment.graphql
    topic = load_topics(deployment.home / "topics.yaml").by_name()[demo_topic.TOPIC]
    declared = [
        str(topic.start_date + timedelta(days=n)) for n in range((topic.end_date - topic.start_date).days + 1)
    ]
    browser.get(f"{webserver.base_url}/assets/click_totals")
    with screenshot(browser, tmp_path, "1-click-totals-page"):
        materialize = _wait(
            browser,
            "the Materialize button",
            ec.element_to_be_clickable(
                (By.XPATH, "//button[starts-with(normalize-space(.), 'Materialize')]")
            ),
        )
    materialize.click()
    days = webserver.query(
        '{ assetNodeOrError(assetKey: {path: ["click_totals"]}) { ... on AssetNode { partitionKeys } } }'
    )["assetNodeOrError"]["partitionKeys"]
    assert days == declared, (days[:1], days[-1:], declared[:1], declared[-1:])  # the topic's days, no others
    with screenshot(browser, tmp_path, "2-launch-dialog-missing-chosen"):
        missing = _wait(
            browser,
            "the launch dialog's Missing button",
            ec.element_to_be_clickable(
                (By.XPATH, "//*[@role='dialog']//button[normalize-space(.)='Missing']")
            ),
        )
        missing.click()
        _wait(
            browser,
            "the missing days selected",
            lambda driver: f"{len(days)} partitions selected" in _body_text(driver).split("\n"),
        )
        launch = _wait(
            browser,
            "the Launch backfill button",
            ec.element_to_be_clickable(
                (By.XPATH, "//*[@role='dialog']//button[normalize-space(.)='Launch backfill']")
            ),
        )
    before = {backfill["id"] for backfill in _backfills(webserver)}
    launch.click()

    def launched() -> dict | None:
        new = [backfill for backfill in _backfills(webserver) if backfill["id"] not in before]
        return new[0] if new else None

    backfill = _wait(browser, "the backfill the click launched", lambda _: launched())
    assert (
        sorted(backfill["partitionNames"]) == days
    )  # each declared day once, in the order the UI picked them
    assert [key["path"] for key in backfill["assetSelection"]] == [["click_totals"]]
    browser.get(f"{webserver.base_url}/runs/b/{backfill['id']}")
    with screenshot(browser, tmp_path, "3-backfill-page"):
        lines = _wait(
            browser,
            "the backfill's page",
            lambda driver: (lines := _body_text(driver).split("\n")) and "click_totals" in lines and lines,
        )
    # the backfill's page says how many days it targets
    assert lines[lines.index("Partition selection") + 1] == f"{len(days)} partitions"


FINAL_RUN_STATUSES = ("SUCCESS", "FAILURE", "CANCELED")


def _run_ends(webserver: DagsterGraphQL, run_id: str) -> str:
    """The run's final status; patience runs from its last new event (a busy machine is slower, a stuck run is
    silent). Each look is one query, for the status and the events stored since the last look (not all of them)."""
    seen, cursor, since = None, None, time.monotonic()
    while True:
        data = webserver.query(
            "query($runId: ID!, $after: String) { runOrError(runId: $runId) { ... on Run { status } } "
            "logsForRun(runId: $runId, afterCursor: $after, limit: 1000) { "
            "... on EventConnection { cursor events { __typename } } } }",
            runId=run_id,
            after=cursor,
        )
        status, logs = data["runOrError"]["status"], data["logsForRun"]
        if status in FINAL_RUN_STATUSES:
            return status
        if status != seen or logs.get("events"):
            seen, cursor, since = status, logs.get("cursor", cursor), time.monotonic()
        assert time.monotonic() - since < RUN_PATIENCE_SECONDS, f"run {run_id} stuck in {status}"
        time.sleep(1)


def _build_weeks(webserver: DagsterGraphQL, first: str, last: str) -> str:
    """One run over the topic's weeks ``first`` to ``last``, as the launch dialog starts a range as one run (the
    backfill daemon, not running here, would launch the same run); it must succeed. Its id."""
    keys = [f"{demo_topic.TOPIC}|{week}" for week in (first, last)]
    tags = dict(
        zip(("dagster/asset_partition_range_start", "dagster/asset_partition_range_end"), keys, strict=True)
    )
    if first == last:  # one partition: its key, as the UI tags it
        tags = {"dagster/partition": keys[0]}
    run_id = webserver.launch_assets("cluster_weeks", tags=tags)
    assert _run_ends(webserver, run_id) == "SUCCESS", webserver.run_messages(run_id)[-10:]
    return run_id


def _week_check(webserver: DagsterGraphQL) -> dict:
    """The latest evaluation of `later_weeks_follow_this_state` as the asset's Checks tab reads it."""
    data = webserver.query(
        '{ assetNodeOrError(assetKey: {path: ["cluster_weeks"]}) { ... on AssetNode { assetChecksOrError { '
        "... on AssetChecks { checks { name executionForLatestMaterialization { runId status evaluation { "
        "severity description metadataEntries { label ... on JsonMetadataEntry { jsonString } } } } } } } } } }"
    )
    (check,) = data["assetNodeOrError"]["assetChecksOrError"]["checks"]
    assert check["name"] == "later_weeks_follow_this_state"
    execution = check["executionForLatestMaterialization"]
    evaluation = execution["evaluation"]
    metadata = {entry["label"]: json.loads(entry["jsonString"]) for entry in evaluation["metadataEntries"]}
    return {"runId": execution["runId"], "status": execution["status"], **evaluation, **metadata}


def test_a_rebuilt_week_shows_every_later_week_stale_until_a_range_rebuild(
    deployment: Deployment, browser, tmp_path: Path
) -> None:  # noqa: ANN001
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    from tests.test_clusters import add_stories
    from topicmap.clusters.store import topic_weeks
    from topicmap.store.topic_store import NewStory, TopicStore
    from topicmap.topics.declarations import load_topics

    webserver = deployment.graphql
    topic = load_topics(deployment.home / "topics.yaml").by_name()[demo_topic.TOPIC]
    # the launch dialog's weeks are the declared topic's weeks, from the week of its start to the week of its end
    (dimension,) = webserver.query(
        '{ assetNodeOrError(assetKey: {path: ["cluster_weeks"]}) { ... on AssetNode { '
        "partitionKeysByDimension { name partitionKeys } } } }"
    )["assetNodeOrError"]["partitionKeysByDimension"]
    weeks = topic_weeks(topic.start_date, topic.end_date)
    assert dimension["partitionKeys"] == [f"{demo_topic.TOPIC}|{week}" for week in weeks] and len(weeks) == 9

    # the launch dialog opens on no partition (Dagster's default); "All" is the topic's weeks
    browser.get(f"{webserver.base_url}/assets/cluster_weeks")
    with screenshot(browser, tmp_path, "1-launch-dialog-all-weeks"):
        _wait(
            browser,
            "the Materialize button",
            ec.element_to_be_clickable(
                (By.XPATH, "//button[starts-with(normalize-space(.), 'Materialize')]")
            ),
        ).click()
        _wait(browser, "the launch dialog", lambda driver: "0 partitions" in _body_text(driver).split("\n"))
        for button in browser.find_elements(
            By.XPATH, "//*[@role='dialog']//button[normalize-space(.)='All']"
        ):
            button.click()
        _wait(
            browser,
            "every week of the topic selected",
            lambda driver: f"{len(weeks)} partitions" in _body_text(driver).split("\n"),
        )
    _leave_page(browser)

    _build_weeks(webserver, weeks[0], weeks[-1])
    assert _week_check(webserver)["status"] == "SUCCEEDED"
    # a story of the first week arrives late; the first week alone is built again from it
    store = TopicStore.open(f"sqlite:///{deployment.home / 'topicmap.sqlite3'}")
    published = datetime.combine(topic.start_date, datetime.min.time(), tzinfo=UTC) + timedelta(hours=12)
    late = NewStory(
        "https://late.test/floods", "Late climate report", "climate emissions carbon tax floods", published
    )
    add_stories(store, [late], topic=demo_topic.TOPIC)
    store.dispose()
    rebuilt = _build_weeks(webserver, weeks[0], weeks[0])
    check = _week_check(webserver)
    assert check["runId"] == rebuilt and check["status"] == "FAILED" and check["severity"] == "WARN"
    assert check["stale_weeks"] == {demo_topic.TOPIC: weeks[1:]}
    assert check["rebuild_from"] == {demo_topic.TOPIC: weeks[1]}

    # what the asset's Checks tab shows: the check's state in its list, the description of its evaluation
    def checks_tab(state: str, description: str):  # noqa: ANN202
        def shown(driver) -> list[str] | None:  # noqa: ANN001
            lines = _body_text(driver).split("\n")
            named = "later_weeks_follow_this_state" in lines
            if (
                named
                and lines[lines.index("later_weeks_follow_this_state") + 1] == state
                and description in lines
            ):
                return lines
            return None

        return shown

    browser.get(f"{webserver.base_url}/assets/cluster_weeks?view=checks")
    stale_text = f"{demo_topic.TOPIC}: {len(weeks) - 1} weeks are stale, rebuild {weeks[1]} to {weeks[-1]}"
    with screenshot(browser, tmp_path, "2-checks-stale-weeks"):
        _wait(
            browser,
            "the check failed, naming the stale weeks",
            checks_tab("Failed", f"{stale_text} (one backfill over the range)"),
        )
    _leave_page(browser)

    # one run over the stale weeks rebuilds them from the new state: the check passes again
    repaired = _build_weeks(webserver, weeks[1], weeks[-1])
    check = _week_check(webserver)
    assert check["runId"] == repaired and check["status"] == "SUCCEEDED" and check["stale_weeks"] == {}
    browser.get(f"{webserver.base_url}/assets/cluster_weeks?view=checks")
    with screenshot(browser, tmp_path, "3-checks-weeks-follow"):
        _wait(
            browser,
            "the check passing again",
            checks_tab("Succeeded", "every built week follows from the week before"),
        )
