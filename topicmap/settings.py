"""Every environment variable topicmap reads, declared once: its name, what an unset one means, whether it is a
secret, and one line of doc.

Code reads a variable only through its :class:`Setting` here (``settings.TOPICS_FILE.value()``); a Dagster resource
gets a secret or a location as ``dg.EnvVar(setting.name)``, so Dagster resolves it at run time and never shows it.
Each read happens when it is called, not when this module is imported: tests and the demo set variables first.
README's configuration table lists the same variables (tests/test_settings.py checks both ways).

Some variables are read by other programs than Python code: ``make`` (``TOPICMAP_INSTANCE``) and Dagster's instance
file (``DAGSTER_PG_*`` in deploy/dagster.yaml); they are declared here too, with the reader named, so the one list
is whole. Variables only tests read (``TOPICMAP_TEST_DATABASE_URL``, ``CI``) are the tests' own (tests/conftest.py).

No import of topicmap or Dagster here: every layer may use this module.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

#: who reads a variable: Python code through this module, the Makefile, or Dagster's instance file
Reader = Literal["code", "make", "dagster.yaml"]


@dataclass(frozen=True)
class Setting:
    """One environment variable. An empty value counts as unset."""

    name: str
    doc: str
    #: what an unset variable reads as (``value()``); "" where the reader decides (said in ``unset``)
    default: str = ""
    #: what an unset variable means, in words, where ``default`` does not say it
    unset: str = ""
    #: a password, token or URL that may carry one: given to Dagster as an EnvVar, never logged
    secret: bool = False
    reader: Reader = "code"
    #: False for a variable the project sets for its own child processes (not configuration)
    documented: bool = True

    def raw(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The variable as set (None: unset)."""
        return (os.environ if environ is None else environ).get(self.name)

    def is_set(self, environ: Mapping[str, str] | None = None) -> bool:
        return bool(self.raw(environ))

    def value(self, environ: Mapping[str, str] | None = None) -> str:
        """The variable, or ``default`` when unset or empty."""
        return self.raw(environ) or self.default

    def integer(self, environ: Mapping[str, str] | None = None) -> int:
        text = self.value(environ)
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"{self.name} must be a whole number, got {text!r}") from None

    def items(self, environ: Mapping[str, str] | None = None) -> list[str]:
        """A comma- or whitespace-separated list (outlets, crawls, networks)."""
        return [item for item in self.value(environ).replace(",", " ").split() if item]


_DECLARED: list[Setting] = []


def _declare(name: str, doc: str, **fields: object) -> Setting:
    setting = Setting(name, doc, **fields)  # type: ignore[arg-type]
    _DECLARED.append(setting)
    return setting


# Where things are
HOME = _declare(
    "TOPICMAP_HOME",
    "state folder: SQLite store, drops, exports, Dagster home",
    unset="`./.topicmap` (the checkout's for `make` and the `topicmap` commands)",
)
DATABASE_URL = _declare(
    "TOPICMAP_DATABASE_URL",
    "the topic store (`postgresql+psycopg2://…` for production)",
    unset="SQLite under `TOPICMAP_HOME`",
    secret=True,
)
TOPICS_FILE = _declare("TOPICMAP_TOPICS_FILE", "topic declarations", default="topics.yaml")
DROPS_DIR = _declare(
    "TOPICMAP_DROPS_DIR", "folder of archive drops (CSV, Parquet, WARC)", unset="`TOPICMAP_HOME/drops`"
)
PAGE_SOURCE_JSON = _declare(
    "TOPICMAP_PAGE_SOURCE_JSON",
    "fetcher settings (JSON of `PageSourceResource` fields)",
    default="{}",
    unset="live web, SSRF guard on",
)
MEDIA_DUPS_FILE = _declare(
    "TOPICMAP_MEDIA_DUPS_FILE",
    "CSV of declared duplicate media (`medium_url,dup_of_medium_url`)",
    unset="none",
)
MEDIA_TAGS_FILE = _declare(
    "TOPICMAP_MEDIA_TAGS_FILE",
    "CSV of media tags (`medium_url,tag_set,tag`)",
    unset="none: media carry no tags",
)
LINK_MAP_TAG_SET = _declare(
    "TOPICMAP_LINK_MAP_TAG_SET", "tag set whose tags colour the link maps' media", unset="link communities"
)

# Social metrics (docs/social.md)
BITLY_TOKEN = _declare(
    "TOPICMAP_BITLY_TOKEN", "Bit.ly access token", unset="Bit.ly not configured", secret=True
)
BITLY_BASE_URL = _declare("TOPICMAP_BITLY_BASE_URL", "Bit.ly API base", unset="the public API")
RAW_STORE_DIR = _declare(
    "TOPICMAP_RAW_STORE_DIR", "folder of raw Bit.ly answers", unset="`TOPICMAP_HOME/raw`"
)
FACEBOOK_APP_ID = _declare(
    "TOPICMAP_FACEBOOK_APP_ID", "Graph API app ID", unset="Facebook not configured", secret=True
)
FACEBOOK_APP_SECRET = _declare(
    "TOPICMAP_FACEBOOK_APP_SECRET", "Graph API app secret", unset="Facebook not configured", secret=True
)
FACEBOOK_BASE_URL = _declare("TOPICMAP_FACEBOOK_BASE_URL", "Graph API base", unset="the public API")

# Automation and partitions
SENSOR_INTERVAL_SECONDS = _declare(
    "TOPICMAP_SENSOR_INTERVAL_SECONDS", "seconds between two evaluations of each sensor", default="30"
)
CLICKS_START_DATE = _declare(
    "TOPICMAP_CLICKS_START_DATE",
    "no `click_totals` day before it (ISO day)",
    unset="the declared topics' days",
)
WEEKS_START = _declare(
    "TOPICMAP_WEEKS_START",
    "no `cluster_weeks` week before it (ISO day; its Monday)",
    unset="the declared topics' weeks",
)
CCNEWS_START = _declare(
    "TOPICMAP_CCNEWS_START",
    "every `ccnews_stories` day from it to yesterday (ISO day), beside the declared topics' days",
    unset="the declared topics' days from CC-NEWS' first day, 2016-08-26",
)
ASSET_OWNERS = _declare(
    "TOPICMAP_ASSET_OWNERS",
    "owners every asset shows (comma-separated `team:<name>` or email addresses)",
    unset="`team:topicmap`",
)

# Common Crawl (docs/commoncrawl.md)
CC_INDEX_URL = _declare(
    "TOPICMAP_CC_INDEX_URL", "Common Crawl index, with `{collection}`", unset="Common Crawl's public index"
)
CC_DATA_URL = _declare(
    "TOPICMAP_CC_DATA_URL", "Common Crawl data endpoint", unset="Common Crawl's public data"
)
CC_COLLECTIONS = _declare("TOPICMAP_CC_COLLECTIONS", "crawls to query (comma-separated)", unset="none")
CC_OUTLETS = _declare("TOPICMAP_CC_OUTLETS", "outlets to load (comma-separated)", unset="none")
CC_ALLOW_NETWORKS = _declare(
    "TOPICMAP_CC_ALLOW_NETWORKS",
    "exceptions to the SSRF guard for an index or data mirror (CIDR or IP:PORT, comma-separated)",
    unset="none",
)
CC_WORKERS = _declare("TOPICMAP_CC_WORKERS", "outlet loader worker processes", default="1")
CC_BREADTH = _declare(
    "TOPICMAP_CC_BREADTH",
    "`true`: the outlet loader takes one index page per outlet in turn instead of draining each outlet",
    default="false",
)

# Running steps (deploy/celery.md)
SPIDER_SHARDS = _declare(
    "TOPICMAP_SPIDER_SHARDS", "shard steps one spider iteration fans out into", default="1"
)
EXECUTOR = _declare(
    "TOPICMAP_EXECUTOR",
    "where steps run: `celery`, `in_process`, or Dagster's multiprocess",
    unset="multiprocess",
)
CELERY_BROKER = _declare(
    "TOPICMAP_CELERY_BROKER", "Celery broker URL", unset="`amqp://guest:guest@127.0.0.1:5672//`", secret=True
)
CELERY_BACKEND = _declare(
    "TOPICMAP_CELERY_BACKEND", "Celery result backend URL", unset="`rpc://`", secret=True
)
CELERY_START_TIMEOUT = _declare(
    "TOPICMAP_CELERY_START_TIMEOUT",
    "seconds a Celery run's steps may wait in a queue no worker consumes before the run fails",
    unset="120",
)
RUN_WORKER_PID = _declare(
    "TOPICMAP_RUN_WORKER_PID",
    "set by a run worker for the step processes it starts, so they die with it",
    documented=False,
)

# The near-duplicate lookup service (`topicmap serve`)
SERVICE_TOKEN = _declare(
    "TOPICMAP_SERVICE_TOKEN",
    "bearer token `topicmap serve` requires off loopback",
    unset="none: loopback only",
    secret=True,
)
SERVICE_MAX_CONNECTIONS = _declare(
    "TOPICMAP_SERVICE_MAX_CONNECTIONS",
    "connections `topicmap serve` holds open at once; one more is answered 503 with `Retry-After` and closed",
    default="500",
)
SERVICE_BODY_BUDGET_MB = _declare(
    "TOPICMAP_SERVICE_BODY_BUDGET_MB",
    "MiB of request bodies `topicmap serve` holds at once, all requests together; a body that does not fit "
    "is answered 503 with `Retry-After` (at least 2)",
    default="32",
)
SERVICE_READ_TIMEOUT = _declare(
    "TOPICMAP_SERVICE_READ_TIMEOUT",
    "seconds a request to `topicmap serve` may take to arrive, headers and body; a slower one is answered "
    "408 and its connection closed",
    default="10",
)

# The Dagster instance
DAGSTER_HOME = _declare(
    "DAGSTER_HOME", "Dagster's instance folder (Dagster's own variable)", unset="`TOPICMAP_HOME/dagster_home`"
)
INSTANCE = _declare(
    "TOPICMAP_INSTANCE",
    "the Dagster instance `make ui`/`make demo` use: `local` or `postgres`",
    default="local",
    reader="make",
)
DAGSTER_PG_HOST = _declare("DAGSTER_PG_HOST", "the Dagster instance's PostgreSQL host", reader="dagster.yaml")
DAGSTER_PG_PORT = _declare("DAGSTER_PG_PORT", "its port", reader="dagster.yaml")
DAGSTER_PG_DB = _declare("DAGSTER_PG_DB", "its database", reader="dagster.yaml")
DAGSTER_PG_USERNAME = _declare("DAGSTER_PG_USERNAME", "its user", reader="dagster.yaml")
DAGSTER_PG_PASSWORD = _declare(
    "DAGSTER_PG_PASSWORD", "its password (may be empty, must be set)", secret=True, reader="dagster.yaml"
)

#: every declared variable, in the order above
SETTINGS: tuple[Setting, ...] = tuple(_DECLARED)


def by_name() -> dict[str, Setting]:
    return {setting.name: setting for setting in SETTINGS}
