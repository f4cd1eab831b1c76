"""The runs sensors request for one topic, and how they find that topic's runs already on their way.

A topic's run is for the topic's partition and tagged with the topic (``assets.jobs.TOPIC_TAG``): the run queue's
per-topic limits and these look-ups are keyed on that tag.
"""

import dagster as dg

from assets.jobs import TOPIC_TAG
from sensors.settings import RUNS_IN_PROGRESS


def topic_run_request(topic: str, run_key: str, tags: dict[str, str] | None = None) -> dg.RunRequest:
    """A run of the sensor's target for ``topic``'s partition, tagged with the topic (and ``tags``)."""
    return dg.RunRequest(run_key=run_key, partition_key=topic, tags={TOPIC_TAG: topic, **(tags or {})})


def topic_run_in_progress(
    instance: dg.DagsterInstance, topic: str, job_name: str | None = None, asset: dg.AssetKey | None = None
) -> bool:
    """A run of ``topic`` is queued or running: its work is on its way. With ``job_name``, only a run of that job
    counts, or (with ``asset``) a run launched from the asset graph (Dagster's `__ASSET_JOB`) that selects it."""
    if job_name is None:
        return bool(
            instance.get_run_records(
                filters=dg.RunsFilter(tags={TOPIC_TAG: topic}, statuses=RUNS_IN_PROGRESS), limit=1
            )
        )
    records = instance.get_run_records(
        filters=dg.RunsFilter(tags={TOPIC_TAG: topic}, statuses=RUNS_IN_PROGRESS)
    )
    return any(
        record.dagster_run.job_name == job_name
        or (asset is not None and asset in (record.dagster_run.asset_selection or ()))
        for record in records
    )
