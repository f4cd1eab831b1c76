"""The lookup service's default limits, in a module of their own so that the `topicmap` command can show them
without loading the service (Starlette, uvicorn, the fetcher and the extractors)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from topicmap import settings

# URL lookups that fetch a page: the threads that run them (each waits on one site at a time, mostly for the
# network or a politeness slot, so a few serve many sites), and how many may be accepted at once, queued or
# running, before one more answers 503.
DEFAULT_URL_WORKERS = 8
DEFAULT_MAX_PENDING_URLS = 100

MIB = 1024 * 1024
# A POSTed text: far above any article (a lookup compares at most 20,000 words, ~150 KB), far below what would
# hurt the service.
MAX_BODY_BYTES = MIB
# Bodies of a declared length up to this size are small (an article is a few KB): a quarter of the body budget
# is kept for them, so that large uploads, however many, never shut out a lookup of an article.
SMALL_BODY_BYTES = 64 * 1024
# JSON nested deeper than this is refused (400) before it is parsed; the service's own body is 1 level deep.
MAX_JSON_DEPTH = 32
# What a 503 for a full connection table or body budget asks the client to wait: both free up as requests end,
# which the read timeout bounds.
BUSY_RETRY_AFTER_SECONDS = 1


@dataclass(frozen=True)
class ClientLimits:
    """What the service lets its clients hold at once (see docs/near-duplicates.md, "Limits on clients").

    ``max_connections``: connections open at once; one more is answered 503 with ``Retry-After`` and closed.
    ``body_budget_bytes``: request body bytes held at once, all requests together; a body that does not fit is
    answered 503 with ``Retry-After`` (bodies other than small ones may hold three quarters of it).
    ``read_timeout``: seconds a request may take to arrive, headers and body, from its connection or the answer
    before it on the connection; a slower one is answered 408 and its connection closed."""

    max_connections: int = int(settings.SERVICE_MAX_CONNECTIONS.default)
    body_budget_bytes: int = int(settings.SERVICE_BODY_BUDGET_MB.default) * MIB
    read_timeout: float = float(settings.SERVICE_READ_TIMEOUT.default)

    def __post_init__(self) -> None:
        if self.max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {self.max_connections}")
        if self.body_budget_bytes < 2 * MAX_BODY_BYTES:
            # three quarters of it must hold the largest body accepted
            raise ValueError(
                f"the body budget must be at least {2 * MAX_BODY_BYTES // MIB} MiB, got {self.body_budget_bytes}"
                " bytes"
            )
        if not self.read_timeout > 0:
            raise ValueError(f"read_timeout must be above 0 seconds, got {self.read_timeout}")

    @classmethod
    def from_settings(cls, environ: Mapping[str, str] | None = None) -> ClientLimits:
        """The limits the environment sets (``TOPICMAP_SERVICE_*``), an error naming the variable otherwise."""
        checks = (
            (settings.SERVICE_MAX_CONNECTIONS, 1),
            (settings.SERVICE_BODY_BUDGET_MB, 2),
        )
        for setting, least in checks:
            if setting.integer(environ) < least:
                raise ValueError(f"{setting.name} must be at least {least}, got {setting.value(environ)!r}")
        raw_timeout = settings.SERVICE_READ_TIMEOUT.value(environ)
        try:
            read_timeout = float(raw_timeout)
        except ValueError:
            read_timeout = 0.0
        if not read_timeout > 0:
            raise ValueError(
                f"{settings.SERVICE_READ_TIMEOUT.name} must be a number of seconds above 0, got {raw_timeout!r}"
            )
        return cls(
            max_connections=settings.SERVICE_MAX_CONNECTIONS.integer(environ),
            body_budget_bytes=settings.SERVICE_BODY_BUDGET_MB.integer(environ) * MIB,
            read_timeout=read_timeout,
        )
