"""Sensors that watch a file people curate and re-run some assets for each topic when its content changes.

The cursor is the file's sha256 ("none" for a missing file: removing it is a change too). The first evaluation only
records the file; a later one that finds another digest requests one run per topic, run key
``<prefix>:<digest[:16]>:<topic>``, so one content of the file is requested once per topic.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from sensors.launched import drop_launched
from topicmap.store.curated_files import curated_file_digest


@dataclass(frozen=True)
class WatchedFile:
    """What a watched-file sensor says and requests: ``sensor_name`` is the sensor's, ``what`` names the file in its
    messages ("media tags file"), ``run_key_prefix`` starts its run keys, ``assets`` are re-run for each topic."""

    sensor_name: str
    what: str
    run_key_prefix: str
    assets: Sequence[dg.AssetKey]

    def evaluate(
        self,
        context: dg.SensorEvaluationContext,
        path: Path | None,
        topics: Callable[[], list[str]],
    ) -> dg.SensorResult:
        """One tick: ``topics`` lists the topics to re-run (read only when the file changed)."""
        if path is None:
            return dg.SensorResult(skip_reason=dg.SkipReason(f"no {self.what} configured"))
        current = curated_file_digest(path) or "none"  # a removed file is a change too
        if context.cursor is None:
            return dg.SensorResult(
                skip_reason=dg.SkipReason(f"watching {path} (sha256 {current[:12]})"), cursor=current
            )
        if context.cursor == current:
            return dg.SensorResult(skip_reason=dg.SkipReason(f"{path} unchanged (sha256 {current[:12]})"))
        names = topics()
        changed = f"{self.what} {path} changed ({context.cursor[:12]} -> {current[:12]}): {len(names)} topics"
        requests, launched = drop_launched(
            context.instance,
            self.sensor_name,
            [
                dg.RunRequest(
                    run_key=f"{self.run_key_prefix}:{current[:16]}:{topic}",
                    partition_key=topic,
                    asset_selection=list(self.assets),
                )
                for topic in names
            ],
        )
        summary = "; ".join([changed, *launched])
        context.log.info(summary)
        if not requests:  # the file went back to a content whose runs were launched already
            return dg.SensorResult(skip_reason=dg.SkipReason(summary), cursor=current)
        return dg.SensorResult(run_requests=requests, cursor=current)
