"""Claimed work: a pending URL is claimed atomically before it is fetched, so any number of processes or
Celery workers spidering one topic fetch each URL once.

A claim is two columns of ``topic_fetch_urls``: ``claimed_by`` (the holder) and ``claim_expires_at`` (a lease,
seconds since the epoch on the holder's clock, as the politeness throttle's slots are: hosts must run NTP).
The holder renews its lease while it works (:class:`ClaimHeartbeat`); a holder that dies stops renewing, its
claims expire, and any other worker takes those URLs again. A URL's claim ends when its outcome is written
(its state leaves "pending" in the same transaction as the stories it produced), so a URL is never
lost in a claimed state: it is either done, or pending with a claim that expires.

A holder that is part of an orchestrator run is named after the run (:func:`run_holder`: run id, then step or
shard). When the run is known to be over, failed or canceled (its worker died, it was canceled, a step failed), its
claims are released at once (:func:`release_run_claims`, which the Dagster layer calls on every failed or canceled
run) instead of after their lease: the run that follows it starts fetching at once rather than a lease later.

One claim is ONE statement, atomic on both databases:

- PostgreSQL: ``UPDATE ... WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED) RETURNING``. Rows another claimer
  has locked are skipped instead of waited for, and the claimable condition is checked again on the locked row
  (READ COMMITTED re-evaluates it), so two claimers never get the same row. The claims of one topic are also
  serialized by a transaction-scoped advisory lock taken just before that statement: the candidates are ranked
  per site with a window function, which cannot lock rows itself, so two concurrent claimers would rank the same
  rows, and the one that finds them locked would get NOTHING though hundreds of URLs are open (seen: a worker
  idling while another took all 293). Serialized, each claim ranks after the previous one committed; a claim is
  one short statement per few dozen URLs, so the lock costs the workers nothing measurable.
- SQLite: the same UPDATE; SQLite takes its write lock when a write statement starts, before it reads, so
  claims are serialized.

What a claim takes (StormCrawler's "max URLs per bucket" rule, Heritrix's per-host queues): the candidates are
ranked per site (``domain``, the URL's throttle domain) and at most ``per_domain`` URLs of one site are taken
per claim, in ``shard_key`` order (a hash: URLs of one site found together are spread out), sites interleaved.
A site whose politeness interval makes it slow therefore never fills a worker's whole window while other sites
wait.

Site affinity: while several holders work on one iteration, a claim takes the sites that fall to this holder
first and others' sites only when its own have nothing claimable left (the tail of the iteration, a holder that
died). So two workers rarely use one site's politeness slots at once, without fixing who has which site. Sites
fall to holders on a hash ring (consistent hashing, as distributed crawlers from UbiCrawler on assign hosts:
:func:`site_arcs`): a holder that joins takes about 1/n of the sites, some from each holder, and one that leaves
hands on only its own, so the other holders keep the sites whose politeness slots they are using (a modulo over
the holders moved most sites whenever one joined or left). The live holders are the rows of
``topic_spider_holders`` for the iteration that were renewed within a lease: a holder joins when it starts,
renews with its claims and leaves when it stops.
With ``exclusive_sites`` (a polite crawl whose workers share one pool of claims), a claim also never takes a
site another live holder is fetching (holds an open claim of), as Heritrix never gives a busy host queue to a
second thread: taking it would not make the site faster, whose slots bound it, and would lose slots between the
two. The claimer then waits for that site like for URLs others hold (``others``). Without politeness a site has
no slots to lose, and an idle worker helps with any site; a shard's URLs of a busy site cannot go to the worker
fetching it, and waiting for them measured slower than sharing the site (two shard workers at 0.5 s a site:
1.31x one worker when kept off, 1.52-1.79x sharing).

``shard_key % count == index`` selects a shard of an iteration (the Celery fan-out). Shards split URLs, not
sites: they are of equal size whatever the sites, and site affinity keeps concurrent shards off each other's
sites until their tails. (Static shards by site, as Heritrix and Nutch partition a crawl, were measured against
this and not kept: unequal shards, 50 sites hashed 30/20, and a shard with few sites is held to their
politeness slots when it runs alone; deploy/celery.md.)
"""

from __future__ import annotations

import bisect
import hashlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Float, Integer, and_, bindparam, case, delete, func, literal, or_, select, text, update

from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore, chunks
from topicmap.web.throttle import throttle_domain

log = logging.getLogger(__name__)

OPEN_STATES = ("pending",)
#: A holder renews its claims every LEASE / 4; one that stopped renewing loses them after LEASE.
DEFAULT_LEASE_SECONDS = 120.0
#: URLs of one site taken by one claim.
DEFAULT_PER_DOMAIN = 16
#: Points of each live holder on the site-affinity hash ring: the more, the more even the holders' shares of the
#: sites (about 1/sqrt(points) apart) and the more ranges a claim tests each site key against.
RING_POINTS_PER_HOLDER = 32
SHARD_KEY_BITS = 31  # fits a signed 32-bit INTEGER on both databases


def _stable_hash(text: str) -> int:
    """31 bits of the MD5 of ``text``: the same on every worker, host and Python run."""
    return int.from_bytes(hashlib.md5(text.encode("utf-8", "surrogatepass")).digest()[:4], "big") >> (
        32 - SHARD_KEY_BITS
    )


def url_shard_key(url: str) -> int:
    """A stable hash of the URL: its URL-hash shard, and its place among its site's URLs."""
    return _stable_hash(url)


def site_hash(domain: str) -> int:
    """A stable hash of the site (the URL's throttle domain): which live holder the site falls to."""
    return _stable_hash(domain)


def _ring(holders: Collection[str]) -> list[tuple[int, str]]:
    """The site-affinity hash ring: RING_POINTS_PER_HOLDER points of each holder on the 31-bit keys, in order."""
    return sorted(
        {(_stable_hash(f"{name}#{i}"), name) for name in holders for i in range(RING_POINTS_PER_HOLDER)}
    )


def site_holder(holders: Collection[str], key: int) -> str:
    """The live holder the site with ``site_key`` ``key`` falls to: the holder of the first point of the ring at or
    after the key, wrapping around."""
    ring = _ring(holders)
    place = bisect.bisect_left(ring, (key, ""))
    return ring[place % len(ring)][1]


def site_arcs(holders: Collection[str], holder: str) -> list[tuple[int, int]]:
    """The site keys that fall to ``holder`` among the live ``holders`` (:func:`site_holder`), as ranges
    [low, high) of ``site_key``, in order: at most RING_POINTS_PER_HOLDER + 1 of them."""
    ring = _ring(holders)
    arcs: list[tuple[int, int]] = []
    for index, (point, name) in enumerate(ring):
        if name != holder:
            continue
        if index == 0:  # the arc that wraps: after the last point, then from 0 to this one
            arcs.append((ring[-1][0] + 1, 1 << SHARD_KEY_BITS))
            arcs.append((0, point + 1))
        else:
            arcs.append((ring[index - 1][0] + 1, point + 1))
    merged: list[tuple[int, int]] = []
    for low, high in sorted(arc for arc in arcs if arc[0] < arc[1]):
        if merged and merged[-1][1] == low:  # consecutive points of one holder: one range
            merged[-1] = (merged[-1][0], high)
        else:
            merged.append((low, high))
    return merged


def url_domain(url: str) -> str:
    """The site a URL's claim is counted under: its throttle domain ("" when it has no host)."""
    try:
        return throttle_domain(url)[:256]
    except ValueError:
        return ""


def claim_keys(url: str) -> dict[str, object]:
    """The claim keys a new ``topic_fetch_urls`` row is written with."""
    domain = url_domain(url)
    return {"domain": domain, "shard_key": url_shard_key(url), "site_key": site_hash(domain)}


def new_holder(label: str = "") -> str:
    """A holder name that says where the work runs: host, process, and a random part (or ``label``)."""
    return f"{socket.gethostname()[:60]}:{os.getpid()}:{label or uuid.uuid4().hex[:12]}"[:128]


def run_holder(run_id: str, part: str) -> str:
    """The holder name of the claims one part (a step, a shard) of the orchestrator's run ``run_id`` makes: the run
    id, a slash, the part. Claims named so are released by run (:func:`release_run_claims`) once the run has
    ended failed or canceled, and a part run again within its run (a step retry, a redelivered task) takes its
    claims back at once."""
    if not part:
        raise ValueError(f"the part of run {run_id} that holds claims needs a name, got {part!r}")
    return _run_prefix(run_id) + part


def _run_prefix(run_id: str) -> str:
    """``<run_id>/``: what the names of the run's holders start with."""
    if not run_id or "/" in run_id:
        raise ValueError(
            f"a run id names a claim holder only if it is not empty and has no '/', got {run_id!r}"
        )
    return f"{run_id}/"


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count``: the URLs whose ``shard_key % count == index``. ``Shard()`` is everything."""

    index: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.count, int) or self.count < 1:
            raise ValueError(f"shard count must be an integer >= 1, got {self.count!r}")
        if not isinstance(self.index, int) or not 0 <= self.index < self.count:
            raise ValueError(f"shard index must be in 0..{self.count - 1}, got {self.index!r}")

    def __str__(self) -> str:
        return f"shard {self.index + 1}/{self.count}"


@dataclass
class OthersWork:
    """Open URLs of the claimer's part of the iteration that other holders have claimed."""

    count: int
    next_expiry: float | None  # the earliest of their leases, seconds since the epoch


_F = s.topic_fetch_urls
_H = s.topic_spider_holders
#: the advisory lock (class, topics_id) that serializes a topic's claims on PostgreSQL ("tmcl" in ASCII)
CLAIM_LOCK_CLASS = 0x746D636C
_CLAIM_LOCK = text("SELECT pg_advisory_xact_lock(:lock_class, :topics_id)")


def fill_claim_keys(store: TopicStore, topics_id: int) -> int:
    """Give the open URLs written before schema version 4 (no ``domain``/``shard_key``) or 10 (no
    ``site_key``) their claim keys."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(_F.c.topic_fetch_urls_id, _F.c.url).where(
                _F.c.topics_id == topics_id,
                _F.c.state.in_(OPEN_STATES),
                or_(_F.c.domain.is_(None), _F.c.shard_key.is_(None), _F.c.site_key.is_(None)),
            )
        ).all()
    if not rows:
        return 0
    statement = (
        update(_F)
        .where(_F.c.topic_fetch_urls_id == bindparam("b_id"))
        .values(
            domain=bindparam("b_domain"), shard_key=bindparam("b_shard_key"), site_key=bindparam("b_site_key")
        )
    )
    for chunk in chunks(rows, 1000):
        with store.engine.begin() as conn:
            conn.execute(
                statement,
                [
                    {"b_id": row.topic_fetch_urls_id} | {f"b_{k}": v for k, v in claim_keys(row.url).items()}
                    for row in chunk
                ],
            )
    log.info("topic %s: claim keys given to %d URLs written before they had them", topics_id, len(rows))
    return len(rows)


class ClaimQueue:
    """Claims the open URLs of one topic iteration (or of one shard of it) for ``holder``."""

    def __init__(
        self,
        store: TopicStore,
        topics_id: int,
        iteration: int,
        holder: str,
        shard: Shard = Shard(),
        lease: float = DEFAULT_LEASE_SECONDS,
        per_domain: int = DEFAULT_PER_DOMAIN,
        clock: Callable[[], float] = time.time,
        exclusive_sites: bool = False,
    ) -> None:
        if not lease > 0:
            raise ValueError(f"claim lease must be > 0 seconds, got {lease!r}")
        if per_domain < 1:
            raise ValueError(f"per_domain must be >= 1, got {per_domain!r}")
        if not holder or len(holder) > 128:
            raise ValueError(f"claim holder must be 1..128 characters, got {holder!r}")
        self.store = store
        self.topics_id = topics_id
        self.iteration = iteration
        self.holder = holder
        self.shard = shard
        self.lease = lease
        self.per_domain = per_domain
        self.exclusive_sites = exclusive_sites
        self._clock = clock
        self._postgres = store.dialect == "postgresql"
        # the claim statement, by (some sites saturated, other holders live)
        self._statements: dict[tuple[bool, bool], Any] = {}

    def _mine(self, table=_F):  # noqa: ANN001, ANN202 - a SQLAlchemy table and condition
        """This iteration's open URLs in this claimer's shard."""
        condition = and_(
            table.c.topics_id == self.topics_id,
            table.c.iteration == self.iteration,
            table.c.state.in_(OPEN_STATES),
        )
        if self.shard.count > 1:
            condition = and_(condition, table.c.shard_key % self.shard.count == self.shard.index)
        return condition

    def _claimable(self, now, table=_F):  # noqa: ANN001, ANN202 - seconds, or a bound parameter
        return or_(table.c.claimed_by.is_(None), table.c.claim_expires_at < now)

    def open_count(self) -> int:
        """This iteration's open URLs in this claimer's shard, claimed or not."""
        with self.store.engine.connect() as conn:
            return int(conn.execute(select(func.count()).where(self._mine())).scalar_one())

    def take_back(self) -> int:
        """Free the open URLs a previous run of this holder claimed (a Celery task redelivered after its worker
        died runs under the same holder): they are claimable again at once instead of after their lease."""
        return self.release()

    def claim(self, limit: int, saturated: Collection[str] = ()) -> list[dict]:
        """Claim up to ``limit`` open URLs, at most ``per_domain`` per site, none of the ``saturated`` sites
        (where the caller already holds enough). Returns the claimed rows (topic_fetch_urls_id, url, state,
        assume_match, domain, shard_key), sites interleaved, in the order to fetch them."""
        if limit < 1:
            return []
        now = self._clock()
        params: dict[str, object] = {
            "c_now": now,
            "c_expires": now + self.lease,
            "c_limit": limit,
            "c_per_domain": self.per_domain,
        }
        if saturated:
            params["c_saturated"] = sorted(saturated)
        with self.store.engine.begin() as conn:
            if self._postgres:  # one claimer of the topic at a time (module doc); released at commit
                conn.execute(_CLAIM_LOCK, {"lock_class": CLAIM_LOCK_CLASS, "topics_id": self.topics_id})
            holders = self._live_holders(conn, now)
            if len(holders) > 1:
                arcs = site_arcs(holders, self.holder)
                # a fixed number of bound ranges, so the statement is built once; (0, 0) matches no key
                arcs += [(0, 0)] * (RING_POINTS_PER_HOLDER + 1 - len(arcs))
                for index, (low, high) in enumerate(arcs):
                    params[f"c_low_{index}"], params[f"c_high_{index}"] = low, high
            statement = self._claim_statement(bool(saturated), len(holders) > 1)
            rows = [dict(r) for r in conn.execute(statement, params).mappings()]
        # RETURNING keeps no order: interleave the sites again
        by_site: dict[str | None, list[dict]] = {}
        for row in sorted(rows, key=lambda r: (r["shard_key"] or 0, r["topic_fetch_urls_id"])):
            by_site.setdefault(row["domain"], []).append(row)
        groups = list(by_site.values())
        return [
            group[rank]
            for rank in range(max(map(len, groups), default=0))
            for group in groups
            if rank < len(group)
        ]

    def join(self) -> None:
        """Count this holder among the iteration's live holders (site affinity), until it leaves."""
        with self.store.engine.begin() as conn:
            self._seen(conn)

    def _seen(self, conn) -> None:  # noqa: ANN001 - a SQLAlchemy connection
        row = {"topics_id": self.topics_id, "iteration": self.iteration, "holder": self.holder}
        self.store.upsert(conn, _H, [row | {"seen_at": self._clock()}], list(row), ["seen_at"])

    def leave(self) -> None:
        """Stop counting this holder among the live ones (its sites go to the others at their next claim)."""
        with self.store.engine.begin() as conn:
            conn.execute(
                delete(_H).where(
                    _H.c.topics_id == self.topics_id,
                    _H.c.iteration == self.iteration,
                    _H.c.holder == self.holder,
                )
            )

    def live_holders(self) -> list[str]:
        """The holders working on this iteration now (any shard), this one among them, sorted by name."""
        with self.store.engine.connect() as conn:
            return self._live_holders(conn, self._clock())

    def _live_holders(self, conn, now: float) -> list[str]:  # noqa: ANN001 - a SQLAlchemy connection
        others = conn.execute(
            select(_H.c.holder).where(
                _H.c.topics_id == self.topics_id,
                _H.c.iteration == self.iteration,
                _H.c.seen_at >= now - self.lease,
            )
        ).scalars()
        return sorted({self.holder, *others})

    def _claim_statement(self, saturated: bool, affinity: bool):  # noqa: ANN202 - a SQLAlchemy UPDATE
        """The claim UPDATE, built once per queue and kind (with or without a list of saturated sites, with or
        without other live holders) and run with bound values: building it and computing its cache key cost ~1
        ms of the spider's main thread per claim."""
        statement = self._statements.get((saturated, affinity))
        if statement is not None:
            return statement
        now = bindparam("c_now", type_=Float)
        candidate = _F.alias("candidate")  # the subqueries must not correlate with the UPDATE's own table
        where = and_(self._mine(candidate), self._claimable(now, candidate))
        if saturated:
            where = and_(
                where,
                or_(
                    candidate.c.domain.is_(None),
                    candidate.c.domain.not_in(bindparam("c_saturated", expanding=True)),
                ),
            )
        if affinity and self.exclusive_sites:  # not a site another live holder is fetching (module doc)
            busy = _F.alias("busy")
            where = and_(
                where,
                ~select(busy.c.topic_fetch_urls_id)
                .where(
                    busy.c.topics_id == self.topics_id,
                    busy.c.iteration == self.iteration,
                    busy.c.state.in_(OPEN_STATES),
                    busy.c.domain == candidate.c.domain,
                    busy.c.claimed_by != self.holder,
                    busy.c.claim_expires_at >= now,
                )
                .exists(),
            )
        # this holder's own sites first (module doc: the ranges of site_arcs); 0 for every site without affinity
        site_key = func.coalesce(candidate.c.site_key, 0)
        own_site = or_(
            *(
                and_(
                    site_key >= bindparam(f"c_low_{index}", type_=Integer),
                    site_key < bindparam(f"c_high_{index}", type_=Integer),
                )
                for index in range(RING_POINTS_PER_HOLDER + 1)
            )
        )
        preferred = case((own_site, 0), else_=1) if affinity else literal(0)
        ranked = (
            select(
                candidate.c.topic_fetch_urls_id.label("id"),
                candidate.c.shard_key.label("shard_key"),
                preferred.label("preferred"),
                func.row_number()
                .over(
                    partition_by=candidate.c.domain,
                    order_by=(candidate.c.shard_key, candidate.c.topic_fetch_urls_id),
                )
                .label("rank"),
            )
            .where(where)
            .subquery("ranked")
        )
        # own sites first, then rank: the first URL of every site, then the second... (sites interleaved)
        picked = (
            select(ranked.c.id)
            .where(ranked.c.rank <= bindparam("c_per_domain", type_=Integer))
            .order_by(ranked.c.preferred, ranked.c.rank, ranked.c.shard_key, ranked.c.id)
            .limit(bindparam("c_limit", type_=Integer))
        )
        if self._postgres:
            locked = _F.alias("locked")
            picked = (
                select(locked.c.topic_fetch_urls_id)
                .where(locked.c.topic_fetch_urls_id.in_(picked.scalar_subquery()))
                .with_for_update(skip_locked=True)
            )
        statement = (
            update(_F)
            # the claimable test again on the row itself: PostgreSQL re-checks it on a row another claimer
            # changed meanwhile, so a row is never claimed twice
            .where(_F.c.topic_fetch_urls_id.in_(picked.scalar_subquery()), self._claimable(now))
            .values(claimed_by=self.holder, claim_expires_at=bindparam("c_expires", type_=Float))
            .returning(
                _F.c.topic_fetch_urls_id,
                _F.c.url,
                _F.c.state,
                _F.c.assume_match,
                _F.c.domain,
                _F.c.shard_key,
            )
        )
        self._statements[(saturated, affinity)] = statement
        return statement

    def renew(self) -> int:
        """Extend the lease of every open URL this holder has claimed, and its place among the live holders.
        Returns how many URLs."""
        with self.store.engine.begin() as conn:
            self._seen(conn)
            return conn.execute(
                update(_F)
                .where(self._mine(), _F.c.claimed_by == self.holder)
                .values(claim_expires_at=self._clock() + self.lease)
            ).rowcount

    def release(self) -> int:
        """Give back the open URLs this holder claimed and did not finish (a clean stop: others take them at
        once instead of waiting for the lease to run out). Returns how many."""
        with self.store.engine.begin() as conn:
            return conn.execute(
                update(_F)
                .where(self._mine(), _F.c.claimed_by == self.holder)
                .values(claimed_by=None, claim_expires_at=None)
            ).rowcount

    def others(self) -> OthersWork:
        """Open URLs of this claimer's part that other live holders have claimed, and (``exclusive_sites``)
        those of sites other live holders are fetching: what is left to wait for once a claim finds nothing."""
        now = self._clock()
        claimed_by_others = and_(
            _F.c.claimed_by.is_not(None), _F.c.claimed_by != self.holder, _F.c.claim_expires_at >= now
        )
        with self.store.engine.connect() as conn:
            count, next_expiry = conn.execute(
                select(func.count(), func.min(_F.c.claim_expires_at)).where(self._mine(), claimed_by_others)
            ).one()
            if self.exclusive_sites:
                # a claim that found nothing leaves unclaimed URLs only on sites others are fetching
                count += conn.execute(
                    select(func.count()).where(self._mine(), self._claimable(now))
                ).scalar_one()
        return OthersWork(int(count), None if next_expiry is None else float(next_expiry))


@dataclass(frozen=True)
class ReleasedClaims:
    """What :func:`release_run_claims` freed: open URLs, and the run's holders taken off the live ones."""

    urls: int
    holders: tuple[str, ...]


def release_run_claims(store: TopicStore, run_id: str) -> ReleasedClaims:
    """Free the open URLs the parts of run ``run_id`` claimed (holders named by :func:`run_holder`) and take
    those holders off the live ones, in one transaction: for a run that ended failed or canceled, whose holders
    will never renew nor release, so the next run takes their URLs at once instead of after their leases.

    Exactly that run's claims: the holder must start with ``<run_id>/`` (compared byte for byte, not with LIKE,
    which is case-insensitive on SQLite), and a URL another holder took over after a lease ran out is not
    touched. The holders are found in ``topic_spider_holders`` (every claimer joins before it claims,
    :meth:`ClaimQueue.join`), a small table, and their URLs through the claim index; so the call is cheap, and
    idempotent: a second call frees nothing."""
    prefix = _run_prefix(run_id)
    of_run = func.substr(_H.c.holder, 1, len(prefix)) == prefix
    with store.engine.begin() as conn:
        held = conn.execute(select(_H.c.topics_id, _H.c.iteration, _H.c.holder).where(of_run)).all()
        urls = 0
        for topics_id, iteration, holder in held:
            urls += conn.execute(
                update(_F)
                .where(
                    _F.c.topics_id == topics_id,
                    _F.c.iteration == iteration,
                    _F.c.state.in_(OPEN_STATES),
                    _F.c.claimed_by == holder,
                )
                .values(claimed_by=None, claim_expires_at=None)
            ).rowcount
        if held:
            conn.execute(delete(_H).where(of_run))
    return ReleasedClaims(urls, tuple(sorted({holder for _, _, holder in held})))


class ClaimHeartbeat:
    """Renews a claim queue's leases every ``lease / 4`` seconds on a daemon thread, while a block runs."""

    def __init__(self, claims: ClaimQueue, every: float | None = None) -> None:
        self.claims = claims
        self.every = every if every is not None else claims.lease / 4
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="topicmap-claim-heartbeat", daemon=True)

    def __enter__(self) -> ClaimHeartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.claims.renew()
            except Exception:  # noqa: BLE001 - a failed renewal is retried; the lease covers three misses
                log.exception("renewing the claims of %s failed", self.claims.holder)
