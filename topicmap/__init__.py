"""topicmap: the domain library (pure Python, no dagster import)."""
