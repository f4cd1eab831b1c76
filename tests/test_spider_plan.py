"""The spider sensor's decision: next iteration, completion, failure after repeated failures or no progress."""

from __future__ import annotations

from dataclasses import replace

from topicmap.spider.plan import ProgressMark, SpiderFacts, decide

BASE = SpiderFacts(
    topic="climate",
    known=True,
    state="running",
    pending_iteration=2,
    iterations_done=2,
    processed_in_pending_iteration=0,
    runs_in_progress=0,
    failed_attempts=0,
)


def test_pending_urls_request_the_next_iteration_with_a_progress_keyed_run_key() -> None:
    decision = decide(BASE, None, now=1000.0)
    assert decision.action == "run_iteration" and decision.iteration == 2
    assert decision.run_key == "spider:climate:seeds-0:iteration-2:processed-0:done-2:attempt-0"
    # The same facts give the same key (no double launch); progress gives a new one.
    assert decide(BASE, None, now=1001.0).run_key == decision.run_key
    moved = replace(BASE, processed_in_pending_iteration=40)
    assert decide(moved, None, now=1002.0).run_key != decision.run_key


def test_first_run_of_a_new_topic_is_iteration_zero() -> None:
    fresh = replace(BASE, pending_iteration=None, iterations_done=0, state="created but not queued")
    decision = decide(fresh, None, now=0.0)
    assert (decision.action, decision.iteration) == ("run_iteration", 0)


def test_no_pending_url_left_means_post_spider_stages() -> None:
    done = replace(BASE, pending_iteration=None, iterations_done=5)
    decision = decide(done, None, now=0.0)
    assert decision.action == "post_spider"
    assert decision.run_key == "post-spider:climate:seeds-0:iterations-5"


def test_unmined_stories_or_new_seeds_keep_the_spider_going() -> None:
    more = replace(BASE, pending_iteration=None, iterations_done=5, unmined_stories=3)
    assert decide(more, None, now=0.0).action == "run_iteration"


def test_new_seeds_after_the_topic_was_spidered_start_a_pass_of_its_own() -> None:
    """A topic that keeps running is seeded again when the archive grows: its spidering goes on with keys never
    used before (Dagster skips a run key it launched), and the time since its last pass is not a stall."""
    done = replace(BASE, pending_iteration=None, iterations_done=3, seeds=4)
    finished = decide(done, None, now=0.0)
    assert finished.action == "post_spider"
    # a day later the archive grew: two new seeds, not imported yet
    grown = replace(done, seeds=6, unmined_stories=2)
    again = decide(grown, finished.progress, now=86_400.0, no_progress_seconds=3600)
    assert again.action == "run_iteration" and again.iteration == 3
    # the pass after it: the same iteration numbers again, other keys
    passes = [replace(grown, pending_iteration=1, unmined_stories=0), replace(done, seeds=6)]
    later = [decide(facts, again.progress, now=86_401.0) for facts in passes]
    assert [d.action for d in later] == ["run_iteration", "post_spider"]
    third = [decide(replace(facts, seeds=9), None, now=0.0) for facts in [grown, *passes]]
    keys = [finished.run_key, again.run_key, *(d.run_key for d in later), *(d.run_key for d in third)]
    assert len(set(keys)) == len(keys), keys


def test_a_run_in_progress_means_wait() -> None:
    decision = decide(replace(BASE, runs_in_progress=1), None, now=0.0)
    assert decision.action == "wait"


def test_repeated_failures_fail_the_topic_with_the_reason() -> None:
    decision = decide(replace(BASE, failed_attempts=2), None, now=0.0)
    assert decision.action == "run_iteration" and decision.run_key.endswith("attempt-2")
    failed = decide(replace(BASE, failed_attempts=3), None, now=0.0, max_attempts=3)
    assert failed.action == "fail"
    assert failed.reason == "iteration 2 failed 3 times (limit 3)"


def test_no_progress_for_too_long_fails_the_topic() -> None:
    first = decide(BASE, None, now=1000.0, no_progress_seconds=600)
    assert first.progress == ProgressMark("2:0:2:0", 1000.0)
    still = decide(replace(BASE, runs_in_progress=1), first.progress, now=1500.0, no_progress_seconds=600)
    assert still.action == "wait"
    stuck = decide(replace(BASE, runs_in_progress=1), first.progress, now=1700.0, no_progress_seconds=600)
    assert stuck.action == "fail" and "no progress for 700 s at iteration 2" in stuck.reason
    # progress resets the clock
    moved = decide(
        replace(BASE, processed_in_pending_iteration=1), first.progress, now=1700.0, no_progress_seconds=600
    )
    assert moved.action == "run_iteration" and moved.progress.since == 1700.0


def test_failed_or_unknown_topics_are_left_alone() -> None:
    assert decide(replace(BASE, state="error"), None, now=0.0).action == "nothing"
    assert decide(replace(BASE, known=False), None, now=0.0).action == "nothing"
