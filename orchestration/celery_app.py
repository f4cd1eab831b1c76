"""Spider iterations sharded over Celery workers (dagster-celery), selected by the environment.

    TOPICMAP_EXECUTOR=celery         run the code location's steps as Celery tasks (default: in process /
                                     Dagster's multiprocess executor, nothing to set up)
    TOPICMAP_SPIDER_SHARDS=4         one spider iteration fans out into 4 shard steps (default 1: the plain,
                                     single-step iteration)
    TOPICMAP_CELERY_BROKER           amqp://guest:guest@127.0.0.1:5672// by default (RabbitMQ)
    TOPICMAP_CELERY_BACKEND          rpc:// by default; redis://127.0.0.1:6379/0 for a shared result backend

Workers: ``celery -A orchestration.celery_app worker --concurrency=1 --prefetch-multiplier=1`` from the repository
(the code location must be importable on every worker, with the same environment); see deploy/celery.md.

Every worker acknowledges a task only once it has run (``task_acks_late``) and hands it back if its process
dies (``task_reject_on_worker_lost``): a worker killed mid-shard has its shard delivered to another worker,
which takes back the shard's claims at once (same claim holder: run id + shard) and finishes it. With Celery's
defaults the message would be gone and the run would wait forever. A shard run twice is harmless: every write
is keyed, and the URLs the first run wrote are not pending any more.
"""

from __future__ import annotations

import dagster as dg
from dagster_celery.config import DEFAULT_CONFIG, dict_wrapper
from dagster_celery.make_app import make_app
from dagster_celery.tasks import create_task

from orchestration.executor import CELERY_SETTINGS, backend_url, broker_url

# The worker app: `celery -A orchestration.celery_app worker`. dagster-celery's execute_plan task on an app with
# our broker, backend and settings (its stock `dagster_celery.app` would use early acknowledgement).
app = make_app(
    {
        "broker": broker_url(),
        "backend": backend_url(),
        "include": [],
        "config_source": dict_wrapper(dict(DEFAULT_CONFIG, **CELERY_SETTINGS)),
    }
)
execute_plan = create_task(app)


def spider_iteration_job() -> dg.JobDefinition:
    """The job a test or script launches with ``dg.execute_job(dg.reconstructable(spider_iteration_job))``:
    the spider's assets with the executor from the environment (workers rebuild it from this function)."""
    from orchestration.definitions import defs

    return defs.resolve_job_def(SPIDER_JOB)


SPIDER_JOB = "spider_iteration_job"  # assets/jobs.py: the same job, whichever spider asset is defined
