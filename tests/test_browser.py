"""The Dagster UI in a real browser (headless Chromium through selenium), on an instance with a topic in it.

The test runs a small demo topic in process up to its snapshot (as `make demo` does), starts
`dagster-webserver` on that instance, and checks what a user sees: the global lineage graph shows every
asset, the snapshots asset page shows its metadata and the link-map picture, and a materialization
launched by clicking the UI's Materialize button succeeds (read back through GraphQL).

It runs where Debian's `chromium` and `chromium-driver` are installed (`.ci/run` installs them), and under
CI=true always: there a missing browser is a failure. A failing step saves a screenshot under /tmp.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import pytest
import requests
from dagster_graphql import DagsterGraphQLClient

from tests import demo_topic
from tests.dagster_deploy import ROOT, DagsterGraphQL, free_port, stop_process_tree, write_instance

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
#: a page that shows nothing new for this long is broken (a busy machine renders slower, not never)
PAGE_PATIENCE_SECONDS = 120
#: a launched run that makes no progress for this long is stuck
RUN_PATIENCE_SECONDS = 300


def _require_browser() -> None:
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not os.access(path, os.X_OK)]
    if not missing:
        return
    reason = f"headless UI test needs Debian chromium and chromium-driver; missing {missing}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true: {reason} (.ci/run installs them)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def webserver() -> Iterator[DagsterGraphQL]:
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
        done = subprocess.run(
            [sys.executable, "-m", "tests.demo_topic", "--post-spider"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-4000:]
        port = free_port()
        log = tmp / "webserver.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(
                [
                    str(Path(sys.executable).parent / "dagster-webserver"),
                    *("-h", "127.0.0.1", "-p", str(port), "-w", "workspace.yaml"),
                ],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        graphql = DagsterGraphQL(port)
        try:
            last_size, since = -1, time.monotonic()
            while True:
                assert process.poll() is None, log.read_text()[-4000:]
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
            yield graphql
        finally:
            stop_process_tree(process)
            shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def browser() -> Iterator:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",  # needed as root without a display
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--window-size=1600,1000",
        f"--user-data-dir={tempfile.mkdtemp(prefix='topicmap-chromium-')}",
    ):
        options.add_argument(argument)
    # an explicit driver: Selenium Manager would otherwise try to download one
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    yield driver
    driver.quit()


@contextmanager
def screenshot_on_failure(driver, name: str) -> Iterator[None]:  # noqa: ANN001
    """Keep what the browser showed when a check failed: /tmp/topicmap-ui-<name>.png.

    With TOPICMAP_UI_SCREENSHOTS=<folder>, every step's screen is kept there, failed or not (to look at)."""
    try:
        yield
    except BaseException:
        shot = Path(tempfile.gettempdir()) / f"topicmap-ui-{name}.png"
        driver.save_screenshot(str(shot))
        print(f"screenshot of the failure: {shot}")
        raise
    if os.environ.get("TOPICMAP_UI_SCREENSHOTS"):
        folder = Path(os.environ["TOPICMAP_UI_SCREENSHOTS"])
        folder.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(folder / f"{name}.png"))


def _wait(driver, what: str, condition, patience: float = PAGE_PATIENCE_SECONDS):  # noqa: ANN001, ANN202
    """Wait while the page keeps changing; give up after ``patience`` seconds without any change."""
    last, since = None, time.monotonic()
    while True:
        try:
            found = condition(driver)
        except Exception:  # noqa: BLE001 - an element that went stale mid-render: look again
            found = None
        if found:
            return found
        source = driver.page_source
        if source != last:
            last, since = source, time.monotonic()
        elif time.monotonic() - since > patience:
            raise AssertionError(f"UI: {what} did not appear (page unchanged for {patience:.0f} s)")
        time.sleep(0.3)


def test_lineage_graph_shows_every_asset(webserver: DagsterGraphQL, browser) -> None:  # noqa: ANN001
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

    with screenshot_on_failure(browser, "lineage"):
        shown = _wait(browser, f"all {len(names)} asset nodes in the lineage graph", nodes_shown)
    assert names <= shown


def test_snapshot_page_shows_its_metadata_and_link_map(webserver: DagsterGraphQL, browser) -> None:  # noqa: ANN001
    from selenium.webdriver.common.by import By

    browser.get(f"{webserver.base_url}/assets/snapshots?view=events&partition={demo_topic.TOPIC}")

    def metadata_shown(driver) -> bool:  # noqa: ANN001
        text = driver.find_element(By.TAG_NAME, "body").text
        return all(label in text for label in ("snapshot_key", "timespan_counts", "link_map_preview"))

    def picture_shown(driver):  # noqa: ANN001, ANN202
        for image in driver.find_elements(By.TAG_NAME, "img"):
            embedded = (image.get_attribute("src") or "").startswith("data:image/png;base64,")
            if embedded and driver.execute_script(
                "return arguments[0].complete && arguments[0].naturalWidth", image
            ):
                return image
        # markdown metadata sits behind a "[Show Markdown]" link in its row of the metadata table
        for link in driver.find_elements(
            By.XPATH,
            "//*[normalize-space(text())='link_map_preview']/ancestor::*[.//*[contains(text(), 'Show Markdown')]][1]"
            "//*[contains(text(), 'Show Markdown')]",
        ):
            link.click()
            break
        return None

    with screenshot_on_failure(browser, "snapshot-page"):
        _wait(browser, "the snapshot's metadata", metadata_shown)
        image = _wait(browser, "the link-map picture", picture_shown)
    assert browser.execute_script("return arguments[0].naturalWidth", image) >= 200


def test_materialize_button_launches_a_run_that_succeeds(webserver: DagsterGraphQL, browser) -> None:  # noqa: ANN001
    from selenium.webdriver.common.by import By

    before = {run["runId"] for run in webserver.runs()}
    browser.get(f"{webserver.base_url}/assets/archive_stories")

    def materialize_button(driver):  # noqa: ANN001, ANN202
        for button in driver.find_elements(By.TAG_NAME, "button"):
            if button.text.strip() == "Materialize" and button.is_enabled():
                return button
        return None

    with screenshot_on_failure(browser, "materialize"):
        _wait(browser, "the Materialize button", materialize_button).click()

        def launched() -> dict | None:
            new = [run for run in webserver.runs() if run["runId"] not in before]
            return new[0] if new else None

        run = _wait(browser, "a run launched by the click", lambda _: launched())
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
