"""Sensors that watch a file people curate and re-run some assets for each topic when its content changes.

The cursor is the file's sha256 ("none" for a missing file: removing it is a change too). The first evaluation only
records the file; a later one that finds another digest requests one run per topic, run key
``<prefix>:<digest[:16]>:<topic>``, so one content of the file is requested once per topic.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import dagster as dg


@dataclass(frozen=True)
class WatchedFile:
    """What a watched-file sensor says and requests: ``what`` names the file in its messages ("media tags file"),
    ``run_key_prefix`` starts its run keys, ``assets`` are re-run for each topic."""

    what: str
    run_key_prefix: str
    assets: Sequence[dg.AssetKey]

    def evaluate(
        self,
        context: dg.SensorEvaluationContext,
        path: Path | None,
        digest: Callable[[Path], str | None],
        topics: Callable[[], list[str]],
    ) -> dg.SensorResult:
        """One tick: ``digest`` reads the file's sha256 (None when it is missing), ``topics`` lists the topics to
        re-run (read only when the file changed)."""
        if path is None:
            return dg.SensorResult(skip_reason=dg.SkipReason(f"no {self.what} configured"))
        current = digest(path) or "none"  # a removed file is a change too
        if context.cursor is None:
            return dg.SensorResult(
                skip_reason=dg.SkipReason(f"watching {path} (sha256 {current[:12]})"), cursor=current
            )
        if context.cursor == current:
            return dg.SensorResult(skip_reason=dg.SkipReason(f"{path} unchanged (sha256 {current[:12]})"))
        names = topics()
        context.log.info(
            f"{self.what} {path} changed ({context.cursor[:12]} -> {current[:12]}): {len(names)} topics"
        )
        return dg.SensorResult(
            run_requests=[
                dg.RunRequest(
                    run_key=f"{self.run_key_prefix}:{current[:16]}:{topic}",
                    partition_key=topic,
                    asset_selection=list(self.assets),
                )
                for topic in names
            ],
            cursor=current,
        )
