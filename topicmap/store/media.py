"""The media of the store: the medium a story URL belongs to (found, created or named) and the end of a
medium's duplicate chain. ``TopicStore.media`` is the one instance a store keeps; its caches hold ids for the
life of the process and are forgotten when a transaction that may have created media rolls back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Connection, Table, bindparam, func, select, update

from topicmap.store import schema as s
from topicmap.store.names import StoreError
from topicmap.web.media import host_like, medium_url_and_name
from topicmap.web.urls import normalize_url_lossy

log = logging.getLogger(__name__)

#: the store's ``insert_ignore``: insert rows, skipping those whose unique keys exist; returns rows inserted
InsertIgnore = Callable[[Connection, Table, Sequence[dict], Sequence[str]], int]


class MediaResolver:
    """Media by story URL, as Media Cloud's guess_medium finds or creates them."""

    def __init__(self, insert_ignore: InsertIgnore) -> None:
        self._insert_ignore = insert_ignore
        self._medium_cache: dict[str, int] = {}
        self._named_media: set[int] = set()  # media whose name _name_medium has settled
        self._statements: dict[str, Any] = {}

    def forget(self) -> None:
        """Drop the cached ids: media created in a rolled-back transaction are gone."""
        self._medium_cache.clear()
        self._named_media.clear()

    def medium_for_url(
        self, conn: Connection, story_url: str, name: str | None = None, site_name: str | None = None
    ) -> int:
        """The medium of a story URL (Media Cloud's guess_medium): found by lossy medium URL or name, else
        created, named ``name`` (a drop's medium), else ``site_name`` (the page's og:site_name), else its host.
        A medium known only by its host takes the first such name it meets (``_name_medium``): media are
        shown by name wherever one is known. ``site_name`` is never looked up: sites share og:site_names
        ("Blogger").

        The dup_media_id chain is followed to its end; a cycle raises StoreError naming the media.
        """
        guessed = medium_url_and_name(story_url)
        if guessed is None:
            raise StoreError(f"cannot derive a medium from url {story_url!r}")
        medium_url, host = guessed
        normalized = normalize_url_lossy(medium_url) or medium_url
        proper = next((n.strip() for n in (name, site_name) if n and not host_like(n, host)), None)
        cached = self._medium_cache.get(normalized)
        if cached is not None:
            if proper and cached not in self._named_media:
                self._name_medium(conn, cached, proper, host)
            return cached
        media = s.media
        row = conn.execute(self._medium_statement("by_normalized_url"), {"m_url": normalized}).first()
        if row is None and name:
            row = conn.execute(
                select(media.c.media_id).where(func.lower(media.c.name) == name.lower()).limit(1)
            ).first()
        if row is None:
            media_id = self._create_medium(conn, medium_url, normalized, name or proper or host, host)
        else:
            media_id = self.final_medium(conn, row.media_id)
        if proper:
            self._name_medium(conn, media_id, proper, host)
        self._medium_cache[normalized] = media_id
        return media_id

    def _name_medium(self, conn: Connection, media_id: int, name: str, host: str) -> None:
        """Give a medium known by its host (its name a host name) the name ``name``, unless another medium
        has that name; a medium with a name keeps it. Once per medium and process."""
        media = s.media
        current = conn.execute(select(media.c.name).where(media.c.media_id == media_id)).scalar_one_or_none()
        if current is not None and host_like(current, host):
            taken = conn.execute(
                select(media.c.media_id).where(func.lower(media.c.name) == name.lower()[:256]).limit(1)
            ).first()
            if taken is None:
                conn.execute(update(media).where(media.c.media_id == media_id).values(name=name[:256]))
                log.debug("medium %s named %r (was %r)", media_id, name, current)
        self._named_media.add(media_id)

    def _create_medium(self, conn: Connection, medium_url: str, normalized: str, name: str, host: str) -> int:
        media = s.media
        taken_names = {
            r.lower()
            for r in conn.execute(
                self._medium_statement("names_taken"),
                {"m_names": [name.lower(), host.lower(), normalized.lower()]},
            ).scalars()
        }
        chosen_name = next((n for n in (name, host, normalized) if n.lower() not in taken_names), None)
        taken_urls = set(
            conn.execute(
                self._medium_statement("urls_taken"), {"m_urls": [medium_url, medium_url + "#spider"]}
            ).scalars()
        )
        chosen_url = next((u for u in (medium_url, medium_url + "#spider") if u not in taken_urls), None)
        if chosen_name is None or chosen_url is None:
            raise StoreError(f"cannot create a medium for {medium_url!r}: its name and url are taken")
        inserted = self._insert_ignore(
            conn,
            media,
            [{"url": chosen_url, "name": chosen_name[:256], "normalized_url": normalized}],
            ["url"],
        )
        row = conn.execute(self._medium_statement("by_url"), {"m_url": chosen_url}).scalar_one()
        if inserted:
            log.debug("created medium %s (%s)", chosen_name, chosen_url)
        return int(row)

    def _medium_statement(self, name: str) -> Any:
        """The media look-ups of ``medium_for_url``, built once and run with bound values: building a statement
        and its cache key each time cost about half of the 1.3 ms of CPU that a new medium took (the spider
        meets a new site every few pages)."""
        stmt = self._statements.get(name)
        if stmt is None:
            media = s.media
            stmt = {
                "by_normalized_url": lambda: (
                    select(media.c.media_id)
                    .where(media.c.normalized_url == bindparam("m_url"), media.c.foreign_rss_links.is_(False))
                    .order_by(media.c.dup_media_id.is_(None).desc(), media.c.media_id)
                    .limit(1)
                ),
                "names_taken": lambda: select(media.c.name).where(
                    func.lower(media.c.name).in_(bindparam("m_names", expanding=True))
                ),
                "urls_taken": lambda: select(media.c.url).where(
                    media.c.url.in_(bindparam("m_urls", expanding=True))
                ),
                "by_url": lambda: select(media.c.media_id).where(media.c.url == bindparam("m_url")),
            }[name]()
            self._statements[name] = stmt
        return stmt

    def final_medium(self, conn: Connection, media_id: int) -> int:
        seen = [media_id]
        current = media_id
        while True:
            dup = conn.execute(
                select(s.media.c.dup_media_id).where(s.media.c.media_id == current)
            ).scalar_one_or_none()
            if dup is None:
                return current
            if dup in seen:
                cycle = " -> ".join(str(m) for m in [*seen[seen.index(dup) :], dup])
                raise StoreError(f"duplicate-media cycle: media {cycle}")
            seen.append(dup)
            current = dup
