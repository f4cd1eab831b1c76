"""The topicmap code location: every asset, check, sensor, job and resource, assembled in one place."""

from __future__ import annotations

import json

import dagster as dg

from assets.archive import archive_stories
from assets.checks import ASSET_CHECKS
from assets.clusters import cluster_weeks, clusters
from assets.freshness import FRESHNESS_CHECKS
from assets.jobs import ALL_JOBS
from assets.media_tags import media_tags
from assets.seeds import seeds
from assets.spider import spider_iteration, spider_iteration_sharded, spider_shards
from assets.warc_export import story_warc_archive
from orchestration import commoncrawl, dedup, snapshots, social
from orchestration.env import env_or
from orchestration.executor import end_with_run_worker, executor_from_env
from resources.archive import ArchiveDropsResource
from resources.fetcher import PageSourceResource
from resources.media_tags import MediaTagsResource
from resources.store import TopicStoreResource
from resources.topics import TopicsFileResource
from sensors.archive_growth import archive_growth
from sensors.automation import AUTOMATION_SCHEDULES, AUTOMATION_SENSORS
from sensors.media_tags import media_tags_changed
from sensors.retries import retry_decisions
from sensors.run_failures import release_claims_of_canceled_runs, release_claims_of_failed_runs
from sensors.spider import SpiderSensorConfig, spider_iterations
from sensors.topics import topic_registry
from topicmap import settings

# A step process of the multiprocess executor dies with the run worker that started it (orchestration/executor.py):
# this module is what a step process loads before it runs any step.
end_with_run_worker()


def page_source_from_env() -> PageSourceResource:
    """The live web by default; TOPICMAP_PAGE_SOURCE_JSON (written by `make demo`) points at the demo web."""
    overrides = json.loads(settings.PAGE_SOURCE_JSON.value())
    return PageSourceResource(**overrides)


def build_resources() -> dict[str, dg.ConfigurableResource]:
    """Resources from the environment: secrets and locations are EnvVars, never literals."""
    return {
        "store": TopicStoreResource(database_url=env_or(settings.DATABASE_URL, "")),
        "topics_file": TopicsFileResource(path=env_or(settings.TOPICS_FILE, settings.TOPICS_FILE.default)),
        "drops": ArchiveDropsResource(drops_dir=env_or(settings.DROPS_DIR, "")),
        "page_source": page_source_from_env(),
        "media_tags_file": MediaTagsResource(path=env_or(settings.MEDIA_TAGS_FILE, "")),
        "spider_sensor_config": SpiderSensorConfig(),
    }


# One Definitions per stage (orchestration/<stage>.py), merged here with the shared resources. The module
# holds no other Definitions object, so tools that look for "the" Definitions find this one.
# TOPICMAP_SPIDER_SHARDS > 1: each iteration fans out into shard steps; TOPICMAP_EXECUTOR=celery runs steps on
# Celery workers (orchestration/executor.py, orchestration/celery_app.py, deploy/celery.md). Unset: one step, in process.
spider_assets = spider_iteration_sharded if spider_shards() > 1 else spider_iteration
defs = dg.Definitions.merge(
    dg.Definitions(
        assets=[
            archive_stories,
            cluster_weeks,
            clusters,
            media_tags,
            seeds,
            spider_assets,
            story_warc_archive,
        ],
        asset_checks=[*ASSET_CHECKS, *FRESHNESS_CHECKS],
        sensors=[
            topic_registry,
            archive_growth,
            spider_iterations,
            media_tags_changed,
            release_claims_of_failed_runs,
            release_claims_of_canceled_runs,
            retry_decisions,
            *AUTOMATION_SENSORS,
        ],
        schedules=AUTOMATION_SCHEDULES,
        # every run is one of these named jobs (assets/jobs.py): sensors, schedules, the demo, `topicmap topic run`
        jobs=ALL_JOBS,
        executor=executor_from_env(),
    ),
    commoncrawl.commoncrawl_defs,
    dedup.dedup_defs,
    social.social_defs,
    snapshots.snapshot_defs,
    dg.Definitions(resources=build_resources()),
)


def spider_iteration_job() -> dg.JobDefinition:
    """The spider's job with the executor from the environment, for a test or script that launches it with
    ``dg.execute_job(dg.reconstructable(spider_iteration_job), ...)`` (Celery workers rebuild it from here)."""
    return defs.resolve_job_def("spider_iteration_job")
