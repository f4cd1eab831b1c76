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


def topic_run_in_progress(instance: dg.DagsterInstance, topic: str, job_name: str | None = None) -> bool:
    """A run of ``topic`` (of ``job_name`` only, if given) is queued or running: its work is on its way."""
    return bool(
        instance.get_run_records(
            filters=dg.RunsFilter(job_name=job_name, tags={TOPIC_TAG: topic}, statuses=RUNS_IN_PROGRESS),
            limit=1,
        )
    )
