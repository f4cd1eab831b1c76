"""Which publication days have a click stage ("3d", "30d") due, and which runs the refetch sensors request.

The click totals are partitioned by publication day (the day of :func:`topicmap.social.clicks.story_timestamp`, UTC). A day
``D``'s stage ``s`` is due once *every* story of ``D`` is due, i.e. at ``(D + 1 day) + delay(s)``: the last story of
the day was published just before midnight. One run per (day, stage) then fetches the whole day.

The sensors keep a tiny cursor: the last day for which they issued the regular run key ``clicks:<day>:<stage>``.
Days come in ascending order, so every day at or before the cursor has had its regular request (or had no topic
story lacking the stage when the sensor passed it). The sensors ask the topic store which days have topic stories
*still lacking* the stage, so:

* after downtime, every due day is found at once and requested oldest first, at most ``max_days`` per tick, the rest
  on the next tick; replaying a tick (same cursor, same store) gives the same run keys, which Dagster deduplicates;
* a story that arrives late — the spider often finds stories weeks after publication, and a topic is often created
  for a past date range — lands on a day at or before the cursor; such a day is requested again with the key
  ``clicks:<day>:<stage>:late-<largest lacking stories_id>``, which is stable until yet another story arrives;
* a day with a click run queued or in progress is left alone (its stories are still lacking until it finishes);
* the 3-day sensor covers only days whose 30-day stage is not yet due: the 30-day run of an older day also fills a
  missing 3-day figure from the same daily clicks (:mod:`topicmap.social.clicks` computes both from one day map), which is
  the rule "a story older than 30 days when it arrives is due once, at once, for the 30-day stage".

* a story that another story was merged into (dedup) after its stage was fetched lacks the stage again: its figure
  must count the merged story's URLs too (:func:`topicmap.social.store.click_stories`); its day is requested again
  with the key ``...:late-<stories_id>-merge-<newest merge id>``.

A run that fails leaves its stories lacking; the next tick re-requests the day once with a ``late-`` key (whose
stories_id is the same as long as no new story arrives), so a failure is retried once, not forever; after that a
data engineer backfills the range from the UI.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from topicmap.social.clicks import STAGE_3D, STAGE_30D, STAGE_DELAYS, as_utc, check_stage

STAGES: tuple[str, ...] = (STAGE_3D, STAGE_30D)
EARLIEST_DAY = date(2008, 1, 1)
"""First publication-day partition (Media Cloud's earliest trusted publish date)."""
MAX_DAYS_PER_TICK = 60
"""Runs one sensor tick requests at most; the rest wait for the next tick."""

# Run tags read by :func:`busy_days` (Dagster's own tag names are plain strings; no dagster import here).
PARTITION_TAG = "dagster/partition"
RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"
STAGE_TAG = "topicmap/clicks_stage"


def current_time() -> datetime:
    """Now (UTC). The sensors and the click asset read the clock only through this function, so a test can
    replace it (in the processes a daemon starts too: tests/frozen_clock_location.py)."""
    return datetime.now(UTC)


def day_start(day: date) -> datetime:
    """Midnight UTC at the start of ``day``."""
    return datetime.combine(day, time.min, tzinfo=UTC)


def day_due_at(day: date, stage: str) -> datetime:
    """When stage ``stage`` is due for every story of publication day ``day``: the day's end plus the delay."""
    return day_start(day + timedelta(days=1)) + STAGE_DELAYS[check_stage(stage)]


def latest_due_day(stage: str, now: datetime) -> date:
    """The last publication day whose ``stage`` is due at ``now`` (``day_due_at(day) <= now``)."""
    return (as_utc(now, "now") - STAGE_DELAYS[check_stage(stage)]).date() - timedelta(days=1)


def stage_day_range(stage: str, now: datetime, earliest_day: date = EARLIEST_DAY) -> tuple[date, date] | None:
    """The publication days a stage's sensor looks after, ``(first, last)`` inclusive, or None if there are none.

    30d: ``[earliest_day, latest_due_day("30d")]``. 3d: the days after that, up to ``latest_due_day("3d")``; older
    days are the 30-day sensor's (see the module docstring).
    """
    last = latest_due_day(stage, now)
    first = earliest_day
    if check_stage(stage) == STAGE_3D:
        first = max(first, latest_due_day(STAGE_30D, now) + timedelta(days=1))
    return (first, last) if first <= last else None


def parse_cursor(cursor: str | None) -> date | None:
    """The sensor cursor (an ISO day, or empty) as a date."""
    if not cursor:
        return None
    try:
        return date.fromisoformat(cursor)
    except ValueError as exc:
        raise ValueError(
            f"click refetch cursor must be an ISO day like '2024-01-31', got {cursor!r}; reset the sensor cursor"
        ) from exc


def run_key(day: date, stage: str) -> str:
    """The one regular run key of a (day, stage)."""
    return f"clicks:{day.isoformat()}:{check_stage(stage)}"


def late_run_key(day: date, stage: str, max_stories_id: int, last_merge_id: int = 0) -> str:
    """The key of a repeat request for stories that arrived after the day's regular request, or whose figures
    predate a merge into them (``-merge-<id>``: a later merge into the same story is requested again)."""
    key = f"{run_key(day, stage)}:late-{max_stories_id}"
    return f"{key}-merge-{last_merge_id}" if last_merge_id else key


@dataclass(frozen=True)
class DayCandidate:
    """A publication day with topic stories still lacking a stage (from the topic store)."""

    day: date
    stories: int
    max_stories_id: int
    last_merge_id: int = 0
    """The newest merge (``topic_merged_stories_map`` id) into a story of the day after its stage was fetched, or 0.
    Such a survivor lacks the stage again: its figure must count the merged stories' URLs too."""


@dataclass(frozen=True)
class StageRequest:
    """One run to request: partition ``day``, run config selecting ``stage``."""

    day: date
    stage: str
    run_key: str
    late: bool
    stories: int


@dataclass(frozen=True)
class RefetchPlan:
    requests: list[StageRequest]
    cursor: str | None
    busy: list[date]
    """Candidate days left alone because a click run covering them is queued or running."""
    deferred: int
    """Candidate days beyond this tick's budget."""

    def describe(self, stage: str) -> str:
        if self.requests:
            late = sum(r.late for r in self.requests)
            return (
                f"{stage}: requesting {len(self.requests)} day(s) "
                f"{self.requests[0].day}..{self.requests[-1].day} ({late} for late stories); "
                f"{len(self.busy)} busy, {self.deferred} deferred to the next tick"
            )
        if self.busy:
            return f"{stage}: {len(self.busy)} due day(s) already have a click run queued or running"
        return f"{stage}: no publication day has topic stories lacking the {stage} click totals"


def plan_refetch(
    stage: str,
    candidates: Iterable[DayCandidate],
    cursor: str | None,
    now: datetime,
    busy: Iterable[date] = (),
    max_days: int = MAX_DAYS_PER_TICK,
    earliest_day: date = EARLIEST_DAY,
) -> RefetchPlan:
    """The runs one sensor tick requests for ``stage``.

    ``candidates``: days with topic stories lacking the stage (any order; days outside the stage's range are
    ignored, so a store answer computed a moment earlier is harmless). Days at or before the cursor get a ``late-``
    key; the cursor moves to the last day requested with its regular key. Deterministic: the same inputs give the
    same requests and cursor.
    """
    if max_days < 1:
        raise ValueError(f"max_days must be at least 1, got {max_days}")
    last_requested = parse_cursor(cursor)
    span = stage_day_range(stage, now, earliest_day)
    busy_days = set(busy)
    requests: list[StageRequest] = []
    busy_found: list[date] = []
    deferred = 0
    for candidate in sorted(candidates, key=lambda c: c.day):
        if span is None or not span[0] <= candidate.day <= span[1] or candidate.stories < 1:
            continue
        if candidate.day in busy_days:
            busy_found.append(candidate.day)
            continue
        if len(requests) >= max_days:
            deferred += 1
            continue
        late = last_requested is not None and candidate.day <= last_requested
        key = (
            late_run_key(candidate.day, stage, candidate.max_stories_id, candidate.last_merge_id)
            if late
            else run_key(candidate.day, stage)
        )
        requests.append(StageRequest(candidate.day, stage, key, late, candidate.stories))
    regular_days = [r.day for r in requests if not r.late]
    new_last = max([d for d in (last_requested, *regular_days) if d is not None], default=None)
    return RefetchPlan(
        requests=requests,
        cursor=new_last.isoformat() if new_last else None,
        busy=busy_found,
        deferred=deferred,
    )


def days_of_run(tags: Mapping[str, str]) -> list[date]:
    """The publication days a click run covers, from its partition tags (one day, or a backfill range)."""
    if tags.get(PARTITION_TAG):
        return [date.fromisoformat(tags[PARTITION_TAG])]
    start, end = tags.get(RANGE_START_TAG), tags.get(RANGE_END_TAG)
    if start and end:
        first, last = date.fromisoformat(start), date.fromisoformat(end)
        return [first + timedelta(days=i) for i in range((last - first).days + 1)]
    return []


def busy_days(run_tags: Iterable[Mapping[str, str]], stage: str) -> set[date]:
    """Days covered by queued/running click runs that will settle ``stage``: runs tagged with that stage, and
    untagged runs (a backfill with stage "auto" fetches whatever is due)."""
    check_stage(stage)
    days: set[date] = set()
    for tags in run_tags:
        run_stage = tags.get(STAGE_TAG)
        if run_stage in (None, "", "auto", stage):
            try:
                days.update(days_of_run(tags))
            except ValueError:
                continue  # not a daily partition key: not a click run
    return days


def stages_due(story_ts: datetime, now: datetime) -> list[str]:
    """The stages whose due time (``story_ts`` + delay) has passed at ``now``."""
    story_utc, now_utc = as_utc(story_ts, "story_ts"), as_utc(now, "now")
    return [stage for stage in STAGES if story_utc + STAGE_DELAYS[stage] <= now_utc]


def stage_for_story(requested: str, story_ts: datetime, now: datetime) -> str | None:
    """Which stage to fetch for one story in a run configured with ``requested`` ("3d", "30d" or "auto").

    An explicit stage is fetched only when due (an early 3-day figure would be incomplete); "auto" picks the latest
    due stage (the 30-day fetch also fills a missing 3-day figure). None: nothing is due yet.
    """
    due = stages_due(story_ts, now)
    if requested == "auto":
        return due[-1] if due else None
    return check_stage(requested) if requested in due else None
