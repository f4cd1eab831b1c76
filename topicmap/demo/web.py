"""A deterministic demo news web: ~40 outlets under the reserved `.test` TLD, a few thousand stories.

`generate_demo_web(seed)` builds, in memory and byte-identically for a given seed, everything a topic mapper
meets on the real web, with the truth about it recorded so tests and benchmarks can score themselves:

- stories on six subjects (climate, elections, health, sports, tech, culture), each written from its own
  vocabulary so that `web.topic_query_for(subject)` selects exactly that subject's stories;
- realistic pages: `<title>` with the outlet's suffix style, publish dates in several common forms (Open Graph
  meta, itemprop, `<time>`, JSON-LD, a visible dateline, only in the URL, or nowhere), the body inside page
  chrome (navigation, share bar, "most read" sidebar, footer), two outlets in windows-1252;
- in-article links: cross-media and self links, links to tag/category/author pages, to PDFs and images, to
  dead pages (404), to robots-disallowed /private/ pages, to other subjects' stories;
- planted structures: syndicated near-copies (1-3 % of words changed, maybe a sentence added), duplicate media
  (`m.` mirrors, bare hosts of `www.` outlets, renamed outlets whose old host answers 301), the same story
  twice in one medium (tracking-tail URL, changed headline the same day);
- a split between the archive (`web.archive_stories`) and the stories only reachable by following links
  from archived ones, several hops deep (`web.truth.hop_depth`).

Pages are static (`web.pages`, `web.lookup`); `topicmap.demo.server` serves them over loopback HTTP. All
URLs use http:// because the loopback server speaks plain HTTP.

Determinism: one `random.Random(seed)` drives every choice; nothing iterates a set or uses `hash()`.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from urllib.parse import urlsplit

from topicmap.demo.model import Brand, DemoStory, DemoTruth, Page, Story, strip_markers
from topicmap.demo.pages import PageRenderer, attr, simple_page
from topicmap.demo.vocab import SUBJECTS
from topicmap.demo.world import DEAD_HOST

DEMO_SUBJECT = "climate"
# ---------------------------------------------------------------------------------------------------------
# The generator
# ---------------------------------------------------------------------------------------------------------


class _Builder(PageRenderer):
    """Builds a DemoWeb step by step (``WorldBuilder``, then ``PageRenderer``), then the records and the truth."""

    # -- assembly ---------------------------------------------------------------------------------------

    def build(self) -> DemoWeb:
        self.build_outlets()
        self.build_stories()
        self.assign_urls()
        self.split_archive()
        self.build_links()
        self.render()
        depths = self._hop_depths()
        media, duplicate_media = self._media()
        archive, archive_dups = self._archive_rows()
        stories = [self._public_story(s, depths[s.sid]) for s in self.stories]
        truth = self._truth(stories, duplicate_media, archive_dups, depths)
        host_redirects = {}
        for outlet in self.outlets:
            if outlet.bare_host:
                host_redirects[outlet.bare_host] = outlet.host
            if outlet.old_host:
                host_redirects[outlet.old_host] = outlet.host
        hosts = sorted({urlsplit(url).hostname or "" for url in self.pages} | set(host_redirects))
        hosts = [h for h in hosts if h and h != DEAD_HOST]
        return DemoWeb(
            seed=self.seed,
            start=self.start,
            end=self.end,
            media=media,
            pages=self.pages,
            archive_stories=archive,
            stories=stories,
            truth=truth,
            hosts=hosts,
            host_redirects=host_redirects,
        )

    def _hop_depths(self) -> dict[int, int | None]:
        """Breadth-first search from the archive over same-subject in-article links: the spider's view."""
        url_to_story: dict[str, Story] = {}
        for story in self.stories:
            url_to_story[story.url] = story
            url_to_story[story.origin_url] = story
            if story.tracking_url:
                url_to_story[story.tracking_url] = story
            if story.outlet.spec.mobile_host:
                url_to_story[f"http://{story.outlet.spec.mobile_host}{story.path}"] = story
            if story.outlet.bare_host:
                url_to_story[f"http://{story.outlet.bare_host}{story.path}"] = story
        depth: dict[int, int | None] = {s.sid: None for s in self.stories}
        frontier = [s for s in self.stories if s.archived]
        for story in frontier:
            depth[story.sid] = 0
        hops = 0
        while frontier:
            hops += 1
            next_frontier = []
            for story in frontier:
                for link in story.links:
                    target = url_to_story.get(link.url)
                    if target is None or target.subject is not story.subject or depth[target.sid] is not None:
                        continue
                    depth[target.sid] = hops
                    next_frontier.append(target)
            frontier = next_frontier
        return depth

    def _media(self) -> tuple[list[dict], list[dict]]:
        media: list[dict] = []
        duplicates: list[dict] = []
        for outlet in self.outlets:
            spec = outlet.spec
            aliases = [h for h in (outlet.bare_host, spec.mobile_host, outlet.old_host) if h]
            media.append(
                {
                    "name": spec.name,
                    "url": f"http://{spec.host}/",
                    "host": spec.host,
                    "aliases": aliases,
                    "dup_of": None,
                }
            )
            if spec.mobile_host:
                name = f"{spec.name} Mobile"
                media.append(
                    {
                        "name": name,
                        "url": f"http://{spec.mobile_host}/",
                        "host": spec.mobile_host,
                        "aliases": [],
                        "dup_of": spec.name,
                    }
                )
                duplicates.append(
                    {"medium": name, "host": spec.mobile_host, "dup_of": spec.name, "kind": "mobile"}
                )
            if spec.bare_dup and outlet.bare_host:
                media.append(
                    {
                        "name": outlet.bare_host,
                        "url": f"http://{outlet.bare_host}/",
                        "host": outlet.bare_host,
                        "aliases": [],
                        "dup_of": spec.name,
                    }
                )
                duplicates.append(
                    {
                        "medium": outlet.bare_host,
                        "host": outlet.bare_host,
                        "dup_of": spec.name,
                        "kind": "bare_host",
                    }
                )
            if spec.renamed_from and outlet.rename_date:
                old_name, old_host, _ = spec.renamed_from
                media.append(
                    {
                        "name": old_name,
                        "url": f"http://{old_host}/",
                        "host": old_host,
                        "aliases": [],
                        "dup_of": spec.name,
                    }
                )
                duplicates.append(
                    {
                        "medium": old_name,
                        "host": old_host,
                        "dup_of": spec.name,
                        "kind": "renamed",
                        "renamed_on": outlet.rename_date.isoformat(),
                    }
                )
        return media, duplicates

    def _archive_rows(self) -> tuple[list[dict], list[dict]]:
        """Archive rows of archived stories, some under a duplicate medium's URL, some twice."""
        rng = self.rng
        rows: list[dict] = []
        duplicates: list[dict] = []
        for story in self.stories:
            if not story.archived:
                continue
            outlet = story.outlet
            spec = outlet.spec
            current = Brand(outlet.name, spec.abbr, outlet.host)
            canonical_row = self._row(
                story, story.url, current, current.name, outlet.host, self.rendered[story.sid]
            )
            story_rows = []
            roll = rng.random()
            if story.old_branded:  # archived before the rename: old host, old name, old branding
                old = self._brand(outlet, story.published)
                old_html = self._render_story(story, old, mobile=False)
                story_rows.append(self._row(story, story.origin_url, old, old.name, old.host, old_html))
                if roll < 0.1:
                    story_rows.append(canonical_row)
            elif spec.mobile_host and roll < 0.4:  # archived from the m. host, as its own medium
                mirror_url = f"http://{spec.mobile_host}{story.path}"
                html = self.pages[mirror_url].body.decode(spec.charset)
                mirror = Brand(outlet.name, spec.abbr, spec.mobile_host)
                story_rows.append(
                    self._row(story, mirror_url, mirror, f"{spec.name} Mobile", spec.mobile_host, html)
                )
                if roll < 0.15:
                    story_rows.append(canonical_row)
            elif spec.bare_dup and outlet.bare_host and roll < 0.4:  # archived from the bare host
                story_rows.append(
                    self._row(
                        story,
                        f"http://{outlet.bare_host}{story.path}",
                        current,
                        outlet.bare_host,
                        outlet.bare_host,
                        self.rendered[story.sid],
                    )
                )
                if roll < 0.1:
                    story_rows.append(canonical_row)
            else:
                story_rows.append(canonical_row)
            if story.tracking_url and rng.random() < 0.4:
                story_rows.append(
                    self._row(
                        story,
                        story.tracking_url,
                        current,
                        current.name,
                        outlet.host,
                        self.rendered[story.sid],
                    )
                )
            if len(story_rows) > 1:
                duplicates.append(
                    {
                        "kind": "archived_twice",
                        "medium": outlet.name,
                        "media": [r["medium"] for r in story_rows],
                        "urls": [r["url"] for r in story_rows],
                    }
                )
            rows.extend(story_rows)
        rows.sort(key=lambda r: (r["publish_date"], r["url"]))
        return rows, duplicates

    def _row(
        self, story: Story, url: str, page_brand: Brand, medium: str, medium_host: str, html: str
    ) -> dict:
        return {
            "url": url,
            "title": self.title_of(story, page_brand),
            "text": self.plain_text(story),
            "publish_date": story.published.isoformat(),
            "medium": medium,
            "medium_url": f"http://{medium_host}/",
            "html": html,
        }

    def _public_story(self, story: Story, depth: int | None) -> DemoStory:
        outlet = story.outlet
        alternates = []
        if story.old_branded:
            alternates.append(story.origin_url)
        if outlet.spec.mobile_host:
            alternates.append(f"http://{outlet.spec.mobile_host}{story.path}")
        if outlet.bare_host:
            alternates.append(f"http://{outlet.bare_host}{story.path}")
        if story.tracking_url:
            alternates.append(story.tracking_url)
        text = self.plain_text(story)
        return DemoStory(
            url=story.url,
            medium=outlet.name,
            subject=story.subject.name,
            headline=story.headline,
            title=self.title_of(story, Brand(outlet.name, outlet.spec.abbr, outlet.host)),
            publish_date=story.published,
            date_form=story.date_form,
            kind=story.kind,
            archived=story.archived,
            hop_depth=depth,
            alt_urls=tuple(alternates),
            word_count=len(text.split()),
        )

    def _truth(
        self,
        stories: list[DemoStory],
        duplicate_media: list[dict],
        archive_dups: list[dict],
        depths: dict[int, int | None],
    ) -> DemoTruth:
        rng = self.rng
        subject_of: dict[str, str] = {}
        for story in stories:
            subject_of[story.url] = story.subject
            for alt in story.alt_urls:
                subject_of[alt] = story.subject
        groups = []
        for original, copies in self.groups:
            groups.append(
                {
                    "original": original.url,
                    "medium": original.outlet.name,
                    "copies": [
                        {
                            "url": c.url,
                            "medium": c.outlet.name,
                            "substituted_words": c.substituted_words,
                            "word_count": len(self.plain_text(c).split()),
                            "added_sentence": (
                                strip_markers(self.body_segments_cached(c)[-1][0][0])
                                if c.credit
                                else c.added_sentence
                            ),
                        }
                        for c in copies
                    ],
                }
            )
        duplicate_stories: list[dict] = []
        for story in self.stories:
            if story.tracking_url:
                duplicate_stories.append(
                    {
                        "kind": "tracking_url",
                        "medium": story.outlet.name,
                        "urls": [story.url, story.tracking_url],
                    }
                )
        for original, story in self.retitled:
            duplicate_stories.append(
                {
                    "kind": "retitled",
                    "medium": story.outlet.name,
                    "urls": [original.url, story.url],
                    "headline_change": story.headline_change,
                    "headlines": [original.headline, story.headline],
                }
            )
        duplicate_stories.extend(archive_dups)
        unarchived = sorted(s.url for s in self.stories if not s.archived and s.date_form != "none")
        flaky = rng.sample(unarchived, min(8, len(unarchived)))
        return DemoTruth(
            subject_of=subject_of,
            publish_dates={s.url: s.publish_date.isoformat() for s in stories},
            date_forms={s.url: s.date_form for s in stories},
            hop_depth={s.url: s.hop_depth for s in stories},
            syndication_groups=groups,
            duplicate_media=duplicate_media,
            duplicate_stories=duplicate_stories,
            redirects=dict(self.redirects),
            dead_urls=list(dict.fromkeys(self.truth_dead)),
            binary_urls=list(dict.fromkeys(self.truth_binary)),
            robots_disallowed=list(dict.fromkeys(self.truth_private)),
            flaky_once=flaky,
        )


# ---------------------------------------------------------------------------------------------------------
# The web
# ---------------------------------------------------------------------------------------------------------


@dataclass(eq=False)
class DemoWeb:
    """The generated demo web: media, static pages, the archive part, and the planted truth."""

    seed: int
    start: date
    end: date  # last day with stories (inclusive)
    media: list[dict]  # name, url, host, aliases, dup_of
    pages: dict[str, Page]  # absolute http:// URL → response
    archive_stories: list[dict]  # url, title, text, publish_date (ISO UTC), medium, medium_url, html
    stories: list[DemoStory]
    truth: DemoTruth
    hosts: list[str]  # every hostname the demo server answers for
    host_redirects: dict[str, str]  # host → host it redirects every path to (bare → www., old → renamed)

    @property
    def subjects(self) -> tuple[str, ...]:
        return tuple(SUBJECTS)

    def topic_query_for(self, subject: str = DEMO_SUBJECT) -> str:
        """The boolean query selecting `subject`'s stories, e.g. for the demo topic in topics.yaml."""
        if subject not in SUBJECTS:
            raise ValueError(f"unknown demo subject {subject!r}; expected one of {sorted(SUBJECTS)}")
        return SUBJECTS[subject].query

    def lookup(self, url: str) -> Page | None:
        """The response for a URL (http or https), as the demo server gives it; None means 404."""
        parts = urlsplit(url)
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        return self.lookup_path(parts.hostname or "", path)

    def lookup_path(self, host: str, path: str) -> Page | None:
        """The response for a Host header and request path: exact page, host-wide 301, or None (404).

        Like real sites, a story page answers under any extra query string (a tracking tail that is not
        recorded still serves the story)."""
        host = host.lower().rstrip(".")
        if not path.startswith("/"):
            path = "/" + path
        page = self.pages.get(f"http://{host}{path}")
        if page is not None:
            return page
        target_host = self.host_redirects.get(host)
        if target_host is not None:
            target = f"http://{target_host}{path}"
            body = simple_page("Moved Permanently", f'<p>Moved to <a href="{attr(target)}">here</a>.</p>')
            return Page(
                301,
                {"Location": target, "Content-Type": "text/html; charset=utf-8"},
                body.encode(),
                "text/html",
            )
        if "?" in path:
            page = self.pages.get(f"http://{host}{path.split('?', 1)[0]}")
            if page is not None and page.status == 200 and page.content_type == "text/html":
                return page
        return None

    def story_for_url(self, url: str) -> DemoStory | None:
        """The story a URL (canonical or alternate) shows, if any."""
        index = self.__dict__.get("_story_index")
        if index is None:
            index = {}
            for story in self.stories:
                index[story.url] = story
                for alt in story.alt_urls:
                    index[alt] = story
            self.__dict__["_story_index"] = index
        return index.get(url)

    def archive_rows(self) -> Iterator[dict]:
        """Archive rows with the loader's columns (url, title, text, publish_date, medium)."""
        for row in self.archive_stories:
            yield {k: row[k] for k in ("url", "title", "text", "publish_date", "medium")}

    def write_archive_csv(self, path: str | Path, include_html: bool = False) -> Path:
        """Write the archive as CSV (UTF-8, header line), the format the archive loader reads."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        columns = ["url", "title", "text", "publish_date", "medium"] + (["html"] if include_html else [])
        with path.open("w", encoding="utf-8", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
            writer.writeheader()
            for row in self.archive_stories:
                writer.writerow(row)
        return path

    def write_archive_parquet(self, path: str | Path, include_html: bool = False) -> Path:
        """Write the archive as Parquet with the same columns as the CSV."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        columns = ["url", "title", "text", "publish_date", "medium"] + (["html"] if include_html else [])
        table = pa.table(
            {c: pa.array([row[c] for row in self.archive_stories], type=pa.string()) for c in columns}
        )
        pq.write_table(table, path)
        return path

    def digest(self) -> str:
        """SHA-256 over every page, archive row and truth record: equal digests mean identical webs."""
        h = hashlib.sha256()
        for url in sorted(self.pages):
            page = self.pages[url]
            h.update(url.encode())
            h.update(str(page.status).encode())
            h.update(json.dumps(page.headers, sort_keys=True).encode())
            h.update(hashlib.sha256(page.body).digest())
        h.update(json.dumps(self.archive_stories, sort_keys=True).encode())
        h.update(json.dumps(self.media, sort_keys=True).encode())
        truth = self.truth
        h.update(
            json.dumps(
                [
                    truth.subject_of,
                    truth.publish_dates,
                    truth.date_forms,
                    truth.hop_depth,
                    truth.syndication_groups,
                    truth.duplicate_media,
                    truth.duplicate_stories,
                    truth.redirects,
                    truth.dead_urls,
                    truth.binary_urls,
                    truth.robots_disallowed,
                    truth.flaky_once,
                ],
                sort_keys=True,
            ).encode()
        )
        return h.hexdigest()


def generate_demo_web(
    seed: int = 7,
    n_media: int = 40,
    n_stories: int = 3000,
    start: date = date(2026, 1, 1),
    months: int = 4,
) -> DemoWeb:
    """Generate the demo news web; the same arguments give a byte-identical web in any process."""
    if not isinstance(seed, int):
        raise ValueError(f"seed must be an int, got {seed!r}")
    if not 3 <= n_media <= 150:
        raise ValueError(f"n_media must be between 3 and 150, got {n_media}")
    if not 100 <= n_stories <= 200_000:
        raise ValueError(f"n_stories must be between 100 and 200000, got {n_stories}")
    if not 1 <= months <= 36:
        raise ValueError(f"months must be between 1 and 36, got {months}")
    if not isinstance(start, date):
        raise ValueError(f"start must be a date, got {start!r}")
    return _Builder(seed, n_media, n_stories, start, months).build()
