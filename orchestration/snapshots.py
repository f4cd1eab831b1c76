"""The snapshot stage: the partitioned `snapshots` asset (+ its consistency checks) and the files-intact check.

See docs/snapshots.md. ``report_snapshot`` is what `make demo` prints for each topic's snapshot.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import dagster as dg

from assets.snapshots import snapshot_files_intact, snapshots

if TYPE_CHECKING:
    from orchestration.runs import FinishedRun

snapshot_defs = dg.Definitions(assets=[snapshots], asset_checks=[snapshot_files_intact])


def report_snapshot(result: FinishedRun, topic: str, say: Callable[[str], None] = print) -> dict[str, object]:
    """Print a run's snapshot of ``topic`` (its checks, where its files and link map are); return its paths.

    Raises SystemExit naming the failed checks if any check failed.
    """
    from topicmap.snapshots.cli import format_snapshot_paths
    from topicmap.snapshots.store import snapshot_paths
    from topicmap.store.topic_store import TopicStore

    evaluations = result.check_evaluations(snapshots.key.to_user_string())
    failed_checks = [e.check_name for e in evaluations if not e.passed]
    if failed_checks:
        raise SystemExit(f"demo: snapshots [{topic}] failed its checks {failed_checks}")
    meta = result.metadata("snapshots")
    say(
        f"  snapshot {meta['snapshot_id'].value} of {topic}: "
        f"{'written' if meta['written_now'].value else 'unchanged inputs, existing snapshot kept'}; "
        f"{len(evaluations)} checks passed"
    )
    found = snapshot_paths(TopicStore.open(), topic)
    say("  " + format_snapshot_paths(found, brief=True).replace("\n", "\n  "))
    return found
