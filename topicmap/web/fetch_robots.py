"""The fetcher's robots.txt (RFC 9309): read for an origin as requests of their own, each in a throttle slot of
the domain it goes to, and kept in a ``topicmap.web.robots.RobotsCache`` (and, when given, in a ``SharedRobots``
that every process using the store reads first: one read per origin and cache period for all of them); the rules
are parsed and matched by ``topicmap.web.robots``."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from urllib.parse import urljoin, urlsplit

from requests.structures import CaseInsensitiveDict

from topicmap.web.fetch_scheduler import NeedSlot
from topicmap.web.fetch_state import FetchState, Refused
from topicmap.web.http_head import DRAIN_LIMIT, REDIRECT_STATUSES
from topicmap.web.robots import (
    MAX_ROBOTS_BYTES,
    ROBOTS_MAX_REDIRECTS,
    ROBOTS_READ_HOLD,
    ROBOTS_TTL,
    ROBOTS_UNREACHABLE_TTL,
    ROBOTS_WAIT_POLL,
    RobotsCache,
    RobotsRules,
    SharedRobots,
    StoredRobots,
)
from topicmap.web.throttle import throttle_domain
from topicmap.web.transport import BodyPlan, Response


class RobotsReader:
    """Reads and keeps the robots.txt rules of the origins a fetcher meets. ``send`` is the fetcher's guarded
    request (``send(state, url, plan)``), ``precheck`` its refusals that need no network (a reason, or None);
    ``shared`` the answers every process using the store shares (None: this fetcher's own only)."""

    def __init__(
        self,
        cache: RobotsCache,
        *,
        send: Callable[[FetchState, str, Callable[[int, CaseInsensitiveDict], BodyPlan]], Response],
        precheck: Callable[[str], tuple[str, str] | None],
        wall_clock: Callable[[], float],
        shared: SharedRobots | None = None,
    ) -> None:
        self._cache = cache
        self._send = send
        self._precheck = precheck
        self._wall = wall_clock
        self._shared = shared
        self._reader_prefix = uuid.uuid4().hex[:16]  # names this process's readers in the shared store

    def cached(self, origin: str) -> RobotsRules | None:
        """The rules kept for ``origin`` in this fetcher, or None when they have to be read (or looked up)."""
        return self._cache.get(origin)

    def stop(self, state: FetchState) -> None:
        """``state`` no longer reads (or waits to read) its origin's robots.txt: another fetch may."""
        origin, state.robots_claim, state.robots_url = state.robots_claim, None, None
        if origin is None:
            return
        self._cache.release(origin, id(state))
        if state.robots_shared:
            state.robots_shared = False
            self._shared.release(origin, self._reader(state))  # type: ignore[union-attr]

    def _reader(self, state: FetchState) -> str:
        return f"{self._reader_prefix}-{id(state)}"

    def read(self, state: FetchState, origin: str) -> RobotsRules | NeedSlot:
        """Read ``origin``'s robots.txt, one request per slot of the domain each request goes to.

        RFC 9309: 2xx parse; 4xx allow all; 5xx disallow all for a while; up to 5 redirects. Network failures
        propagate (retried like a page request). Returns the rules (cached), or the slot this fetch needs next:
        a redirect to another domain continues in a slot of that domain, and while another fetch (of this
        process, or of another one sharing the store) reads the same robots.txt, this one looks again a moment
        later. Of this process's fetches waiting for an origin, one alone asks the shared store."""
        if not self._cache.claim(origin, id(state)):
            return NeedSlot(state.domain, earliest=self._wall() + ROBOTS_WAIT_POLL)
        state.robots_claim = origin
        if state.robots_url is None:
            cached = self._cache.get(origin)
            if cached is not None:  # another fetch finished reading it meanwhile
                self.stop(state)
                return cached
            if self._shared is not None and not state.robots_shared:
                stored = self._shared.lookup(origin)
                if stored is not None:  # another process read it
                    rules = stored.rules()
                    self._cache.put(origin, rules, stored.expires_at - self._wall())
                    self.stop(state)
                    return rules
                if not self._shared.claim(origin, self._reader(state), ROBOTS_READ_HOLD):
                    return NeedSlot(state.domain, earliest=self._wall() + ROBOTS_WAIT_POLL)
                state.robots_shared = True
            state.robots_url, state.robots_hops = origin + "/robots.txt", 0
        while True:
            url = state.robots_url
            domain = throttle_domain(url)
            if domain != state.domain:
                state.domain = domain
                return NeedSlot(domain)  # a redirect to another domain: wait for its slot, like a page's
            try:
                response = self._send(state, url, _robots_plan)
            except Refused as refusal:
                if state.robots_hops == 0:
                    raise  # the page's own origin is refused: so is the page
                # robots.txt redirects somewhere we may not go: no rules can be read (RFC 9309: unavailable).
                return self._found(
                    state, origin, RobotsRules.allowing_all(f"redirects to a refused address ({refusal})")
                )
            status = response.status
            if status in REDIRECT_STATUSES and response.headers.get("Location"):
                target = urljoin(url, response.headers["Location"])
                state.robots_hops += 1
                if state.robots_hops > ROBOTS_MAX_REDIRECTS:
                    # RFC 9309 §2.3.1.2: more redirects than that count as "unavailable".
                    return self._found(state, origin, RobotsRules.allowing_all("redirects too many times"))
                if urlsplit(target).scheme not in ("http", "https"):
                    return self._found(state, origin, RobotsRules.allowing_all("redirects to a non-HTTP URL"))
                problem = self._precheck(target)
                if problem is not None:
                    note = f"redirects to a refused address ({problem[1]})"
                    return self._found(state, origin, RobotsRules.allowing_all(note))
                state.robots_url = target
                state.domain = throttle_domain(target)
                return NeedSlot(state.domain)  # the next hop is a request of its own: a slot of its domain
            if 200 <= status < 300:
                text = response.body.decode("utf-8", "replace")
                return self._found(state, origin, RobotsRules.parse(text), body=text)
            if 400 <= status < 500:
                return self._found(
                    state, origin, RobotsRules.allowing_all(f"answered HTTP {status}: no rules")
                )
            note = f"answered HTTP {status}: unreachable, so everything is disallowed for now (RFC 9309)"
            return self._found(state, origin, RobotsRules.disallowing_all(note), ttl=ROBOTS_UNREACHABLE_TTL)

    def _found(
        self,
        state: FetchState,
        origin: str,
        rules: RobotsRules,
        ttl: float = ROBOTS_TTL,
        body: str | None = None,
    ) -> RobotsRules:
        self._cache.put(origin, rules, ttl)
        if state.robots_shared:
            state.robots_shared = False  # ``put`` ends the claim
            self._shared.put(origin, StoredRobots.of(rules, body, self._wall() + ttl))  # type: ignore[union-attr]
        self.stop(state)
        return rules


def _robots_plan(status: int, headers: CaseInsensitiveDict) -> BodyPlan:
    """robots.txt: up to MAX_ROBOTS_BYTES of a 2xx body, the rest ignored (RFC 9309 §2.5); a small drain else."""
    return BodyPlan(MAX_ROBOTS_BYTES) if 200 <= status < 300 else BodyPlan(DRAIN_LIMIT)
