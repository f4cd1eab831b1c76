"""The topicmap code location with the click automation's clock frozen, for tests that run the real daemon.

A daemon test cannot monkeypatch the processes the daemon starts (the code server that evaluates sensors, the run
workers that materialize `click_totals`); each of them loads the code location from this module instead, so each
reads the time the test chose through ``refetch.current_time``, which every click sensor and asset calls.
"""

from datetime import UTC, datetime

from topicmap.social import refetch

#: 06:00 UTC, after the catch-up hour: every stage of January 2024's stories is due
FROZEN_NOW = datetime(2024, 3, 15, 6, 0, tzinfo=UTC)
refetch.current_time = lambda: FROZEN_NOW

from orchestration.definitions import defs  # noqa: E402  (loaded after the clock is frozen)

__all__ = ["FROZEN_NOW", "defs"]
