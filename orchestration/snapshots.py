"""The snapshot stage: the partitioned `snapshots` asset (+ its consistency checks) and the files-intact check.

See docs/snapshots.md. ``run_snapshot_demo`` is what `make demo` calls at the end.
"""

from __future__ import annotations

from collections.abc import Callable

import dagster as dg

from assets.snapshots import snapshot_files_intact, snapshots
from orchestration.runs import materialize_selection
from topicmap.snapshots.cli import format_snapshot_paths
from topicmap.snapshots.store import snapshot_paths
from topicmap.store.topic_store import TopicStore

snapshot_defs = dg.Definitions(assets=[snapshots], asset_checks=[snapshot_files_intact])


def run_snapshot_demo(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    topics: list[str],
    say: Callable[[str], None] = print,
) -> dict[str, dict]:
    """Materialize `snapshots` for each topic (with its checks) and print where the files and the link map are.

    Returns ``snapshot_paths`` per topic. Raises SystemExit naming the failure if a run or a check fails.
    """
    store = TopicStore.open()
    found: dict[str, dict] = {}
    for topic in topics:
        result = materialize_selection(defs, instance, ["snapshots"], topic)
        failed_checks = [e.check_name for e in result.get_asset_check_evaluations() if not e.passed]
        if failed_checks:
            raise SystemExit(f"demo: snapshots [{topic}] failed its checks {failed_checks}")
        meta = result.asset_materializations_for_node("snapshots")[0].metadata
        say(
            f"  snapshot {meta['snapshot_id'].value} of {topic}: "
            f"{'written' if meta['written_now'].value else 'unchanged inputs, existing snapshot kept'}; "
            f"{len(result.get_asset_check_evaluations())} checks passed"
        )
        found[topic] = snapshot_paths(store, topic)
        say("  " + format_snapshot_paths(found[topic], brief=True).replace("\n", "\n  "))
    return found
