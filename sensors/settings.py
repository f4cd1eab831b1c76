"""Sensor settings read once at import: how often sensors tick (tests and demos shorten it)."""

import dagster as dg

from topicmap import settings

#: Seconds between two evaluations of each sensor; TOPICMAP_SENSOR_INTERVAL_SECONDS overrides.
SENSOR_INTERVAL_SECONDS = settings.SENSOR_INTERVAL_SECONDS.integer()

#: run states that mean "this work is already on its way": a sensor requests nothing more for it
RUNS_IN_PROGRESS = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]
