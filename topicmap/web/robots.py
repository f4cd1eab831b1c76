"""robots.txt parsing and matching per RFC 9309 (the Robots Exclusion Protocol).

Not ``urllib.robotparser``: it applies the *first* matching rule in file order and knows neither ``*`` nor
``$`` in paths, while RFC 9309 (and Google, Bing) use the *longest* matching rule, with Allow winning ties.
With the stdlib parser, "Disallow: /" followed by "Allow: /news/" would block /news/ pages that every other
crawler treats as allowed.

The fetcher (``topicmap.web.fetch``) reads an origin's robots.txt as requests of their own and keeps the rules
in a `RobotsCache`; with a `SharedRobots` (the topic store's ``robots_txt`` table,
``topicmap.store.robots_txt``), every process using the store reads an origin's robots.txt once per cache
period, and the others take what it read.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from topicmap.web.expiring_cache import ExpiringCache

# RFC 9309 §2.5: crawlers must parse at least 500 KiB; content past the limit is ignored.
MAX_ROBOTS_BYTES = 500 * 1024
ROBOTS_MAX_REDIRECTS = 5  # RFC 9309 §2.3.1.2
ROBOTS_TTL = 24 * 3600.0  # RFC 9309 §2.4: do not use a cached robots.txt for more than 24 hours
ROBOTS_UNREACHABLE_TTL = 600.0  # a 5xx robots.txt means "disallow all" for a while, then ask again
# A fetch whose origin's robots.txt another fetch is reading looks again after this long.
ROBOTS_WAIT_POLL = 0.05
# The longest one fetch may take to read an origin's robots.txt for every process sharing a store (a request,
# redirect hops each waiting for its domain's turn, retries): past it another process may read it again.
ROBOTS_READ_HOLD = 120.0
# Origins whose robots.txt rules one fetcher keeps at most: an iteration of a large topic meets tens of
# thousands of sites, most of them once (StormCrawler's robots cache holds 10,000 too). Past the bound the
# least recently used goes first; it is read again if its site returns.
MAX_CACHED_ROBOTS = 10_000


@dataclass(frozen=True)
class _Rule:
    allow: bool
    path: str  # normalized (percent-encoding canonicalized) pattern
    regex: re.Pattern[str]

    @property
    def specificity(self) -> int:
        return len(self.path)


@dataclass
class _Group:
    agents: list[str] = field(default_factory=list)
    rules: list[_Rule] = field(default_factory=list)


def _normalize_path(path: str) -> str:
    """Canonical percent-encoding so "/a%7Eb" and "/a~b" compare equal (RFC 9309 §2.2.2)."""
    return quote(unquote(path), safe="/?=&;:@!$'()*+,-._~%")


def _compile(pattern: str) -> re.Pattern[str]:
    anchored = pattern.endswith("$")
    body = pattern[:-1] if anchored else pattern
    regex = ".*".join(re.escape(part) for part in body.split("*"))
    return re.compile(regex + ("$" if anchored else ""))


class RobotsRules:
    """The parsed rules of one robots.txt, answering ``allows(url_or_path, user_agent)``."""

    def __init__(
        self,
        groups: list[_Group],
        *,
        allow_all: bool = False,
        disallow_all: bool = False,
        note: str | None = None,
    ) -> None:
        self._groups = groups
        self.allow_all = allow_all
        self.disallow_all = disallow_all
        self.note = note  # why everything is allowed/disallowed, for messages

    @classmethod
    def parse(cls, text: str) -> RobotsRules:
        groups: list[_Group] = []
        current: _Group | None = None
        in_agent_lines = False
        for raw_line in text[:MAX_ROBOTS_BYTES].splitlines():
            line = raw_line.split("#", 1)[0].strip()
            if ":" not in line:
                continue
            key, _, value = line.partition(":")
            key = key.strip().lower()
            value = value.strip()
            if key == "user-agent":
                # Consecutive user-agent lines share one group; a user-agent after rules starts a new one.
                if current is None or not in_agent_lines:
                    current = _Group()
                    groups.append(current)
                current.agents.append(value.lower())
                in_agent_lines = True
            elif key in ("allow", "disallow"):
                in_agent_lines = False
                if current is None or not value:
                    continue  # rules before any user-agent are ignored; an empty Disallow allows everything
                path = _normalize_path(value if value.startswith(("/", "*")) else "/" + value)
                current.rules.append(_Rule(key == "allow", path, _compile(path)))
            else:
                # Sitemap, Crawl-delay and unknown keys do not end the user-agent line run (RFC 9309 §2.2.4).
                continue
        return cls(groups)

    @classmethod
    def allowing_all(cls, note: str | None = None) -> RobotsRules:
        return cls([], allow_all=True, note=note)

    @classmethod
    def disallowing_all(cls, note: str | None = None) -> RobotsRules:
        return cls([], disallow_all=True, note=note)

    def _rules_for(self, product_token: str) -> list[_Rule]:
        token = product_token.lower()
        # RFC 9309 §2.2.1: all groups naming the crawler are merged; otherwise all "*" groups are.
        named = [rule for group in self._groups if token in group.agents for rule in group.rules]
        if any(token in group.agents for group in self._groups):
            return named
        return [rule for group in self._groups if "*" in group.agents for rule in group.rules]

    def allows(self, url: str, product_token: str) -> bool:
        """Whether ``product_token`` (e.g. "topicmap") may fetch ``url`` (absolute URL or path)."""
        if self.allow_all:
            return True
        if self.disallow_all:
            return False
        parts = urlsplit(url)
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        target = _normalize_path(target)
        if target == "/robots.txt":
            return True
        best: _Rule | None = None
        for rule in self._rules_for(product_token):
            if rule.regex.match(target) and (
                best is None
                or rule.specificity > best.specificity
                or (rule.specificity == best.specificity and rule.allow and not best.allow)
            ):
                best = rule
        return best is None or best.allow


def product_token(user_agent: str) -> str:
    """The robots.txt product token of a User-Agent string: "topicmap/0.1 (+...)" -> "topicmap"."""
    token = re.match(r"[A-Za-z_-]+", user_agent.strip())
    if token is None:
        raise ValueError(f"user agent {user_agent!r} does not start with a product token (letters, '-', '_')")
    return token.group(0)


def robots_refusal(url: str, rules: RobotsRules) -> str:
    where = f"{url_origin(url)}/robots.txt"
    if rules.disallow_all and rules.note:
        return f"robots: {where} {rules.note}"
    return f"robots: {where} disallows {urlsplit(url).path or '/'}"


def url_origin(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), "", "", ""))


class RobotsCache:
    """The rules of the MAX_CACHED_ROBOTS origins used last, each for its time to live, and which fetch is
    reading an origin's robots.txt (one per origin even when many threads ask at once). Thread-safe."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._rules: ExpiringCache[str, RobotsRules] = ExpiringCache(MAX_CACHED_ROBOTS, clock)
        self._readers: dict[str, int] = {}  # origin -> the fetch reading its robots.txt
        self._guard = threading.Lock()

    def get(self, origin: str) -> RobotsRules | None:
        return self._rules.get(origin)

    def put(self, origin: str, rules: RobotsRules, ttl: float) -> None:
        self._rules.put(origin, rules, ttl)

    def claim(self, origin: str, reader: int) -> bool:
        """Whether ``reader`` is the one to read ``origin``'s robots.txt (it is, unless another one is)."""
        with self._guard:
            return self._readers.setdefault(origin, reader) == reader

    def release(self, origin: str, reader: int) -> None:
        """``reader`` stopped reading ``origin``'s robots.txt (read, or gave up): another may try."""
        with self._guard:
            if self._readers.get(origin) == reader:
                del self._readers[origin]


#: How a stored robots.txt answer reads: its rules, or everything allowed / disallowed (RFC 9309's unavailable
#: and unreachable cases).
RULES, ALLOW_ALL, DISALLOW_ALL = "rules", "allow-all", "disallow-all"


@dataclass(frozen=True)
class StoredRobots:
    """An origin's robots.txt answer as a store shared by processes keeps it: ``verdict`` is RULES (``body`` is
    the robots.txt), ALLOW_ALL or DISALLOW_ALL (``note`` says why); usable until wall-clock ``expires_at``."""

    verdict: str
    body: str | None
    note: str | None
    expires_at: float

    @classmethod
    def of(cls, rules: RobotsRules, body: str | None, expires_at: float) -> StoredRobots:
        verdict = ALLOW_ALL if rules.allow_all else DISALLOW_ALL if rules.disallow_all else RULES
        return cls(verdict, body if verdict == RULES else None, rules.note, expires_at)

    def rules(self) -> RobotsRules:
        if self.verdict == RULES:
            return RobotsRules.parse(self.body or "")
        if self.verdict == ALLOW_ALL:
            return RobotsRules.allowing_all(self.note)
        if self.verdict == DISALLOW_ALL:
            return RobotsRules.disallowing_all(self.note)
        raise ValueError(
            f"stored robots.txt verdict must be {RULES!r}, {ALLOW_ALL!r} or {DISALLOW_ALL!r}, "
            f"got {self.verdict!r}"
        )


@runtime_checkable
class SharedRobots(Protocol):
    """robots.txt answers shared by every process of a store, and which fetch is reading an origin's now."""

    def lookup(self, origin: str) -> StoredRobots | None:
        """The answer kept for ``origin`` if it is still usable, else None."""
        ...

    def claim(self, origin: str, reader: str, hold: float) -> bool:
        """Whether ``reader`` is now the one to read ``origin``'s robots.txt (no usable answer is kept and no
        other reader holds it); the claim lapses after ``hold`` seconds."""
        ...

    def put(self, origin: str, answer: StoredRobots) -> None:
        """Keep ``answer`` for ``origin``; the claim of whoever was reading it ends."""
        ...

    def release(self, origin: str, reader: str) -> None:
        """``reader`` gave up reading ``origin``'s robots.txt: another may."""
        ...
