"""A bounded, thread-safe cache whose entries expire: the fetcher's checked addresses and robots.txt rules."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

_Key = TypeVar("_Key")
_Value = TypeVar("_Value")


class ExpiringCache(Generic[_Key, _Value]):
    """At most ``max_entries`` values, each until its expiry on ``clock``; past the bound the least recently
    used is dropped. Thread-safe (the fetch threads share one)."""

    def __init__(self, max_entries: int, clock: Callable[[], float]) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be >= 1, got {max_entries!r}")
        self.max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[_Key, tuple[float, _Value]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: _Key) -> _Value | None:
        """The value kept for ``key``, or None when there is none or it has expired (then it is dropped)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if entry[0] <= self._clock():
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return entry[1]

    def put(self, key: _Key, value: _Value, ttl: float) -> None:
        with self._lock:
            self._entries[key] = (self._clock() + ttl, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
