"""Facebook figures as stories join (Media Cloud's ``facebook_fetch_story_stats`` jobs, queued as each story was
added): while a topic is spidered, the ``statistics_as_stories_join`` sensor asks for a ``statistics_job`` run
whenever stories joined that have no figure yet, one run at a time per topic. The post-spider run's
``story_statistics`` still fetches whatever is left before the snapshot (which so waits for every story's figure
or soft failure), and the spider sensor starts that run only once no statistics run of the topic is in progress.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class JoiningFacts:
    """What the sensor knows of one topic."""

    topic: str
    awaiting: int  # topic stories without a statistics row (no figure, no soft failure)
    newest_awaiting: int | None  # the newest of them (stories_id)
    runs_in_progress: int  # the topic's statistics or post-spider runs queued or running


@dataclass(frozen=True)
class JoiningDecision:
    run_key: str | None
    reason: str


def decide_statistics_run(facts: JoiningFacts) -> JoiningDecision:
    """A statistics run for the stories that joined without a figure, keyed by how many there are and the newest
    one: a run that measured some (or stopped part way) leaves another key for the rest, the same stories never
    launch two runs, and a run whose stories are all still awaiting (refused credentials) is not repeated."""
    if facts.awaiting == 0 or facts.newest_awaiting is None:
        return JoiningDecision(None, f"{facts.topic}: every story has its Facebook figure or soft failure")
    if facts.runs_in_progress:
        return JoiningDecision(
            None, f"{facts.topic}: {facts.awaiting} stories await a figure; a statistics run is in progress"
        )
    return JoiningDecision(
        f"statistics:{facts.topic}:through-{facts.newest_awaiting}:awaiting-{facts.awaiting}",
        f"{facts.topic}: {facts.awaiting} stories joined without a Facebook figure",
    )
