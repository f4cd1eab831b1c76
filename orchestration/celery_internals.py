"""Every name of dagster-celery's internals this project uses, imported here once; the rest of the code imports them
from this module (tests/test_private_apis.py fails on any other import of them, and lists the names held here).

dagster-celery exports one public name, ``celery_executor``: its executor as a definition, with no way to change how
it submits a step or waits for it, and no worker app with other settings. ``topicmap_celery`` (its executor with no
silent waits) and the worker app (late acknowledgement) are built from the pieces below
(orchestration/celery_app.py). dagster-celery is pinned exactly with the Dagster family (pyproject.toml), so these
cannot change under us without an upgrade the tests then run against.
"""

from dagster_celery.config import (
    DEFAULT_CONFIG,  # the worker app's stock Celery settings (queue "dagster", priorities): no public copy
    dict_wrapper,  # the settings dict as the config module make_app reads: make_app takes no plain dict
)
from dagster_celery.core_execution_loop import (
    core_celery_execution_loop,  # the executor's submit-and-poll loop, given the step submitter: not exported
)
from dagster_celery.executor import (
    CELERY_CONFIG,  # celery_executor's config fields, extended here: the definition exposes no field dict
    CeleryExecutor,  # the executor class celery_executor returns, subclassed for its loop: not exported
)
from dagster_celery.executor import (
    _submit_task as submit_task,  # how the stock executor sends one step as a task: no public call does it
)
from dagster_celery.make_app import (
    make_app,  # the Celery app with dagster-celery's queues and routing, from our settings: not exported
)
from dagster_celery.tasks import (
    create_task,  # registers execute_plan (what a worker runs for a step) on that app: not exported
)

__all__ = [
    "CELERY_CONFIG",
    "DEFAULT_CONFIG",
    "CeleryExecutor",
    "core_celery_execution_loop",
    "create_task",
    "dict_wrapper",
    "make_app",
    "submit_task",
]
