"""What the spider sensor should do next for a topic: a pure decision over facts the sensor gathers.

Keeping the decision here (not in the sensor) makes every branch testable without Dagster, and keeps the
sensor a thin translation of facts into run requests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from topicmap.spider.store import SpiderStore
from topicmap.store.names import StoreError
from topicmap.store.topic_store import TopicStore

Action = Literal["run_iteration", "post_spider", "fail", "wait", "nothing"]
FAILED_STATES = ("error", "failed")
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_NO_PROGRESS_SECONDS = 3600.0


@dataclass(frozen=True)
class SpiderFacts:
    """The state of one topic's spidering, read from the topic store and the Dagster instance."""

    topic: str
    known: bool  # the topic is in the store (its seeds have been materialized)
    state: str
    pending_iteration: int | None  # lowest iteration with pending URLs (within max_iterations)
    iterations_done: int  # iterations with recorded metrics
    processed_in_pending_iteration: int
    runs_in_progress: int
    failed_attempts: int  # failed runs for the pending iteration
    unmined_stories: int = 0  # topic stories whose links are not mined yet, plus seeds not yet imported
    # the topic's seeds: a re-seeding that adds some (the archive grew, the dates changed) starts a new spidering
    # pass, whose runs must not carry the keys of the pass before (Dagster would skip them as already launched)
    seeds: int = 0
    # the topic's Facebook runs as stories join (topicmap.social.joining), queued or running: not counted in
    # runs_in_progress (iterations go on beside them), but the post-spider run waits for them
    statistics_runs: int = 0


@dataclass(frozen=True)
class ProgressMark:
    """Last seen progress of a topic (kept in the sensor cursor)."""

    token: str
    since: float


@dataclass(frozen=True)
class SpiderDecision:
    action: Action
    reason: str
    iteration: int | None = None
    run_key: str | None = None
    progress: ProgressMark | None = None


def progress_token(facts: SpiderFacts) -> str:
    return f"{facts.pending_iteration}:{facts.processed_in_pending_iteration}:{facts.iterations_done}:{facts.seeds}"


def decide(
    facts: SpiderFacts,
    last_progress: ProgressMark | None,
    now: float,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    no_progress_seconds: float = DEFAULT_NO_PROGRESS_SECONDS,
) -> SpiderDecision:
    """The next step for one topic.

    - run the next iteration (run_key = topic + seeds + iteration + progress + attempt: a new key only when
      something changed, so a tick never launches the same work twice; new seeds start a new pass);
    - or the post-spider stages once no pending URL is left;
    - or fail the topic when an iteration failed ``max_attempts`` times or made no progress for
      ``no_progress_seconds``; the reason is returned so the sensor can record it.
    """
    if not facts.known:
        return SpiderDecision("nothing", f"topic {facts.topic!r} has no seeds yet")
    if facts.state in FAILED_STATES:
        return SpiderDecision("nothing", f"topic {facts.topic!r} is {facts.state}")
    token = progress_token(facts)
    mark = last_progress if last_progress and last_progress.token == token else ProgressMark(token, now)
    spidering = facts.pending_iteration is not None or facts.iterations_done == 0 or facts.unmined_stories > 0
    if spidering and now - mark.since > no_progress_seconds:
        return SpiderDecision(
            "fail",
            f"no progress for {int(now - mark.since)} s at iteration {facts.pending_iteration} "
            f"(limit {int(no_progress_seconds)} s)",
            iteration=facts.pending_iteration,
            progress=mark,
        )
    if facts.runs_in_progress:
        return SpiderDecision("wait", f"{facts.runs_in_progress} run(s) in progress", progress=mark)
    if spidering:
        iteration = facts.pending_iteration if facts.pending_iteration is not None else facts.iterations_done
        if facts.failed_attempts >= max_attempts:
            return SpiderDecision(
                "fail",
                f"iteration {iteration} failed {facts.failed_attempts} times (limit {max_attempts})",
                iteration=iteration,
                progress=mark,
            )
        run_key = (
            f"spider:{facts.topic}:seeds-{facts.seeds}:iteration-{iteration}"
            f":processed-{facts.processed_in_pending_iteration}:done-{facts.iterations_done}"
            f":attempt-{facts.failed_attempts}"
        )
        return SpiderDecision(
            "run_iteration", f"iteration {iteration} has pending URLs", iteration, run_key, mark
        )
    if facts.statistics_runs:
        return SpiderDecision(
            "wait",
            f"spidering is done; waiting for {facts.statistics_runs} Facebook statistics run(s) before the "
            "post-spider run",
            progress=mark,
        )
    run_key = f"post-spider:{facts.topic}:seeds-{facts.seeds}:iterations-{facts.iterations_done}"
    return SpiderDecision(
        "post_spider", "no pending URL left: spidering is done", facts.iterations_done, run_key, mark
    )


def read_spider_facts(
    store: TopicStore, topic: str, max_iterations: int, runs_in_progress: int = 0, failed_attempts: int = 0
) -> SpiderFacts:
    """The store's half of the facts (the sensor adds the run counts from the Dagster instance)."""
    try:
        row = store.topic_row(topic)
    except StoreError:
        return SpiderFacts(topic, False, "unknown", None, 0, 0, runs_in_progress, failed_attempts)
    progress = SpiderStore(store, int(row["topics_id"])).progress(max_iterations)
    return SpiderFacts(
        topic=topic,
        known=True,
        state=row["state"],
        pending_iteration=progress.pending_iteration,
        iterations_done=progress.iterations_done,
        processed_in_pending_iteration=progress.processed_in_pending_iteration,
        runs_in_progress=runs_in_progress,
        failed_attempts=failed_attempts,
        unmined_stories=progress.unmined_stories + progress.unprocessed_seeds,
        seeds=progress.seeds,
    )
