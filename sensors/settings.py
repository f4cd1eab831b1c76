"""Sensor settings read once at import: how often sensors tick (tests and demos shorten it)."""

import os

#: Seconds between two evaluations of each sensor; TOPICMAP_SENSOR_INTERVAL_SECONDS overrides.
SENSOR_INTERVAL_SECONDS = int(os.environ.get("TOPICMAP_SENSOR_INTERVAL_SECONDS") or 30)
