"""The calendar of the declared topics: which publication days, weeks and CC-NEWS days can hold a topic's data.

The partitions of `click_totals` (publication days), `cluster_weeks` (topic x week pairs) and `ccnews_stories`
(CC-NEWS days) are these sets, kept equal to what the topics file declares by the topic registry on each tick, so a
day or a topic's week that can never hold data is not offered (nor counted missing), and an open-ended topic's new
days and weeks come in as they begin, without reloading the code location.

- a topic's **days** run from its ``start_date`` to its last day (``end_date``; the current day for an open-ended
  topic), and never past yesterday, the last whole UTC day;
- its **weeks** are the Mondays of the weeks from its start to its last day, each once it is over (a week is built
  from its whole seven days); a week of `cluster_weeks` is the pair ``topic|monday`` (:func:`topic_week_key`);
- **CC-NEWS days** are the topics' days from CC-NEWS' first day; a set ``TOPICMAP_CCNEWS_START`` adds every day from
  it to yesterday (a deployment that loads the archive whatever the topics).

The sets are plain sorted ISO strings; :func:`plan_key_sync` says which keys to add and delete so a partition set
equals one of them, in date order. No Dagster here.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta

from topicmap.archive.cc_settings import CCNEWS_START
from topicmap.topics.declarations import TopicConfig

#: Media Cloud's earliest trusted publish date: no click day before it
EARLIEST_CLICKS_DAY = date(2008, 1, 1)
#: CC-NEWS' first day: no CC-NEWS partition before it
CCNEWS_FIRST_DAY = CCNEWS_START


def monday_of(day: date) -> date:
    return day - timedelta(days=day.weekday())


def _days(first: date, last: date) -> Iterable[date]:
    day = first
    while day <= last:
        yield day
        day += timedelta(days=1)


def topic_days(topic: TopicConfig, today: date, floor: date | None = None) -> list[date]:
    """The topic's days up to yesterday (``today`` excluded: a day is whole once it is over), from ``floor`` on."""
    first = max(topic.start_date, floor) if floor else topic.start_date
    return list(_days(first, min(topic.last_day(today), today - timedelta(days=1))))


def click_days(topics: Sequence[TopicConfig], today: date, first: date | None = None) -> list[str]:
    """`click_totals`' publication days: every declared topic's days, none before ``first``
    (``TOPICMAP_CLICKS_START_DATE``) nor before ``EARLIEST_CLICKS_DAY``."""
    floor = max(first or EARLIEST_CLICKS_DAY, EARLIEST_CLICKS_DAY)
    return sorted({day.isoformat() for topic in topics for day in topic_days(topic, today, floor)})


def topic_week_keys(topic: TopicConfig, today: date, first: date | None = None) -> list[str]:
    """The Mondays of the topic's weeks that are over by ``today`` (from the Monday of ``first`` on, if given)."""
    monday = monday_of(max(topic.start_date, first) if first else topic.start_date)
    last = min(monday_of(topic.last_day(today)), monday_of(today) - timedelta(weeks=1))
    weeks = []
    while monday <= last:
        weeks.append(monday.isoformat())
        monday += timedelta(weeks=1)
    return weeks


def topic_weeks_by_name(
    topics: Sequence[TopicConfig], today: date, first: date | None = None
) -> dict[str, list[str]]:
    """``{topic: its weeks}`` (a topic declared twice keeps its first declaration, as the topic registry does)."""
    weeks: dict[str, list[str]] = {}
    for topic in topics:
        weeks.setdefault(topic.name, topic_week_keys(topic, today, first))
    return weeks


#: between the topic and the Monday in a `cluster_weeks` key (a topic name holds no "|": TOPIC_NAME_PATTERN)
TOPIC_WEEK_SEPARATOR = "|"


def topic_week_key(topic: str, week: str) -> str:
    """The `cluster_weeks` key of a topic's week: ``topic|monday``, as Dagster wrote a topic x week key."""
    return f"{topic}{TOPIC_WEEK_SEPARATOR}{week}"


def parse_topic_week(key: str) -> tuple[str, str] | None:
    """``(topic, monday)`` of a `cluster_weeks` key, None for a key that is not ``topic|monday`` (one added by
    hand)."""
    topic, separator, week = key.partition(TOPIC_WEEK_SEPARATOR)
    try:
        valid = bool(topic and separator) and date.fromisoformat(week).weekday() == 0
    except ValueError:
        valid = False
    return (topic, week) if valid else None


def split_topic_week(key: str) -> tuple[str, str]:
    """``(topic, monday)`` of a `cluster_weeks` key, or a ValueError naming a key that is not ``topic|monday``."""
    parsed = parse_topic_week(key)
    if parsed is None:
        raise ValueError(f"a cluster_weeks key is TOPIC|MONDAY (like climate|2026-01-05), got {key!r}")
    return parsed


def topic_of_week_key(key: str) -> str | None:
    """The topic of a `cluster_weeks` key, None for a key that is not ``topic|monday``."""
    parsed = parse_topic_week(key)
    return parsed[0] if parsed else None


def topic_week_pairs(topics: Sequence[TopicConfig], today: date, first: date | None = None) -> list[str]:
    """`cluster_weeks`' keys: each declared topic's weeks as ``topic|monday`` (``first``: ``TOPICMAP_WEEKS_START``),
    sorted, so a topic's weeks are one range in date order."""
    return sorted(
        topic_week_key(name, week)
        for name, weeks in topic_weeks_by_name(topics, today, first).items()
        for week in weeks
    )


def ccnews_days(topics: Sequence[TopicConfig], today: date, start: date | None = None) -> list[str]:
    """`ccnews_stories`' days: the declared topics' days from CC-NEWS' first day on, and with ``start``
    (``TOPICMAP_CCNEWS_START``) every day from it to yesterday."""
    days = {day.isoformat() for topic in topics for day in topic_days(topic, today, CCNEWS_FIRST_DAY)}
    if start is not None:
        days.update(d.isoformat() for d in _days(max(start, CCNEWS_FIRST_DAY), today - timedelta(days=1)))
    return sorted(days)


#: a publication day's 3-day click stage is due 3 days after the day ends, its 30-day stage 30 days after
FIRST_CLICK_STAGE = timedelta(days=1 + 3)
LAST_CLICK_STAGE = timedelta(days=1 + 30)


def click_cadence(spans: Sequence[tuple[date, date]], today: date) -> bool:
    """True while some topic's days (``(start, last day)``) have a click stage due: from its start + 4 days to its
    last day + 31 days."""
    return any(start + FIRST_CLICK_STAGE <= today <= end + LAST_CLICK_STAGE for start, end in spans)


def snapshot_cadence(spans: Sequence[tuple[date, date]], today: date) -> bool:
    """True while some topic is running or still gets clicks: from its start to its last day + 31 days."""
    return any(start <= today <= end + LAST_CLICK_STAGE for start, end in spans)


def parse_day(name: str, value: str) -> date | None:
    """The ISO day of a setting ``name`` (None when empty), or a ValueError naming the setting."""
    value = value.strip()
    if not value:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError as exc:
        raise ValueError(f"{name} must be an ISO day like 2026-01-05, got {value!r}") from exc


@dataclass(frozen=True)
class KeySync:
    """What brings a partition set to the wanted keys, in date order: remove ``move`` at once, then delete
    ``delete`` and add ``add`` (which holds ``move`` again, in order)."""

    add: tuple[str, ...]
    delete: tuple[str, ...]
    #: present keys that sort after a new one: removed, then added again after it
    move: tuple[str, ...]
    #: keys outside the wanted set that are kept (they hold data)
    kept: tuple[str, ...]

    def __bool__(self) -> bool:
        return bool(self.add or self.delete)


def plan_key_sync(current: Sequence[str], wanted: Sequence[str], keep: Iterable[str] = ()) -> KeySync:
    """The changes that make a dynamic partition set (``current``, in its stored order) hold ``wanted`` in date
    order. Keys not wanted are deleted unless in ``keep`` (they hold data: their materializations stay readable).

    A dynamic partition set keeps the order keys were added in, and the UI lists and ranges them in that order:
    new keys that all sort after the present ones are appended; a new key that sorts before present ones (an
    earlier start declared) moves those after it: they are removed and added again after it. Removing a key loses
    nothing: its materializations stay in the event log and show again with the key."""
    keep = set(keep)
    wanted_set = set(wanted)
    kept = tuple(key for key in current if key not in wanted_set and key in keep)
    stale = tuple(key for key in current if key not in wanted_set and key not in keep)
    remaining = [key for key in current if key not in stale]
    present = set(remaining)
    missing = sorted(key for key in wanted_set if key not in present)
    if remaining != sorted(remaining):
        first_out = next(
            i for i, (a, b) in enumerate(zip(remaining, sorted(remaining), strict=True)) if a != b
        )
        move = remaining[first_out:]
    elif missing:
        move = [key for key in remaining if key > missing[0]]
    else:
        move = []
    return KeySync(add=tuple(sorted([*missing, *move])), delete=stale, move=tuple(move), kept=kept)
