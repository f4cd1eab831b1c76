"""Which executor runs the code location's steps, from the environment (TOPICMAP_EXECUTOR, TOPICMAP_CELERY_*).

Kept apart from the Celery worker app (``orchestration/celery_app.py``) so that loading the code location does
not import Celery unless it is chosen. See that module and deploy/celery.md.
"""

from __future__ import annotations

import os

import dagster as dg

DEFAULT_BROKER = "amqp://guest:guest@127.0.0.1:5672//"
DEFAULT_BACKEND = "rpc://"

#: what every worker and the run's executor must agree on (worker-side: acks and redelivery)
CELERY_SETTINGS = {
    "task_acks_late": True,
    "task_reject_on_worker_lost": True,
    "worker_prefetch_multiplier": 1,  # a worker holds no task it has not started: a free worker takes it
    "broker_connection_retry_on_startup": True,
}


def broker_url() -> str:
    return os.environ.get("TOPICMAP_CELERY_BROKER") or DEFAULT_BROKER


def backend_url() -> str:
    return os.environ.get("TOPICMAP_CELERY_BACKEND") or DEFAULT_BACKEND


def executor_from_env() -> dg.ExecutorDefinition | None:
    """The celery executor when TOPICMAP_EXECUTOR=celery; None keeps Dagster's default executor."""
    choice = (os.environ.get("TOPICMAP_EXECUTOR") or "").strip().lower()
    if choice in ("", "default", "multiprocess", "in_process"):
        return None
    if choice != "celery":
        raise ValueError(f"TOPICMAP_EXECUTOR must be 'celery' or unset, got {choice!r}")
    from dagster_celery import celery_executor  # celery loads only where it is chosen

    # The broker URL may carry a password: it is passed as an env reference, never as a literal in run config.
    return celery_executor.configured(
        {
            "broker": {"env": "TOPICMAP_CELERY_BROKER"}
            if os.environ.get("TOPICMAP_CELERY_BROKER")
            else DEFAULT_BROKER,
            "backend": {"env": "TOPICMAP_CELERY_BACKEND"}
            if os.environ.get("TOPICMAP_CELERY_BACKEND")
            else DEFAULT_BACKEND,
            "config_source": CELERY_SETTINGS,
        },
        name="topicmap_celery",
    )
