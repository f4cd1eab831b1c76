"""Partitions shared by the asset groups."""

import dagster as dg

#: One partition per declared topic, kept in step with topics.yaml by the topic registry sensor.
topics_partitions = dg.DynamicPartitionsDefinition(name="topics")
