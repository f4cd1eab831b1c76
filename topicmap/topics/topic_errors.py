"""How a problem in a topics file is reported: the error naming the topic and the field, and values quoted short."""

from __future__ import annotations

import reprlib

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
