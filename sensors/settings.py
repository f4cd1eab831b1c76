"""Sensor settings read once at import: how often sensors tick (tests and demos shorten it)."""

import os

import dagster as dg

#: Seconds between two evaluations of each sensor; TOPICMAP_SENSOR_INTERVAL_SECONDS overrides.
SENSOR_INTERVAL_SECONDS = int(os.environ.get("TOPICMAP_SENSOR_INTERVAL_SECONDS") or 30)

#: run states that mean "this work is already on its way": a sensor requests nothing more for it
RUNS_IN_PROGRESS = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]
