"""How a problem in a topics file is reported: the error naming the topic and the field, and values quoted short."""

from __future__ import annotations

import reprlib
from collections.abc import Collection, Mapping
from typing import Any

#: values quoted in messages are cut short: a message names what is wrong, it is not a copy of the file
shown = reprlib.Repr()
shown.maxstring = shown.maxother = 80


class TopicConfigError(ValueError):
    """One topic (or the file itself) is invalid; the message names the topic and the field."""

    def __init__(self, topic: str, field_name: str, problem: str) -> None:
        self.topic = topic
        self.field = field_name
        self.problem = problem
        super().__init__(f"topic {topic!r}: field {field_name!r}: {problem}")


def reject_unknown(
    topic: str, where: str, mapping: Mapping, known: Collection[str], what: str = "setting"
) -> None:
    """Raise a TopicConfigError naming the first key of ``mapping`` that is not ``known`` (at ``where.key``)."""
    unknown = sorted(map(str, set(mapping) - set(known)))
    if unknown:
        place = f"{where}.{unknown[0]}" if where else unknown[0]
        raise TopicConfigError(topic, place, f"unknown {what} (known: {sorted(known)})")


def checked_flag(topic: str, where: str, value: Any) -> bool:
    """``value`` if it is true or false, else a TopicConfigError naming ``where``."""
    if not isinstance(value, bool):
        raise TopicConfigError(topic, where, f"expected true or false, got {shown.repr(value)}")
    return value
