"""The demo web's pages: each story rendered as its outlet publishes it (chrome, dates, charset), mirrors and
redirects, listings, binaries and robots.txt."""

from __future__ import annotations

import html as htmllib
import json
from datetime import date, datetime, timedelta, timezone
from urllib.parse import quote, urlsplit

from topicmap.demo import outlets, vocab
from topicmap.demo.model import (
    Brand,
    Outlet,
    Page,
    Slots,
    Story,
    capitalized,
    name_mid_sentence,
    slugify,
    strip_markers,
    time_key,
)
from topicmap.demo.world import WorldBuilder

ROBOTS_TXT = "User-agent: *\nDisallow: /private/\n"
_NAV = (
    ("News", "news"),
    ("Politics", "politics"),
    ("Environment", "environment"),
    ("Health", "health"),
    ("Sport", "sport"),
    ("Technology", "technology"),
    ("Culture", "culture"),
    ("Opinion", "opinion"),
)
_TZ_LABELS = {0: "GMT", 1: "CET", -5: "EST", -6: "CST"}
_PDF_BODY = b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog >>\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n"
_JPEG_BODY = bytes.fromhex("ffd8ffe000104a46494600010100000100010000ffdb004300") + bytes(64) + b"\xff\xd9"


class PageRenderer(WorldBuilder):
    """Renders the built world into ``self.pages``: what each outlet serves at each URL."""

    def __init__(self, seed: int, n_media: int, n_stories: int, start: date, months: int):
        super().__init__(seed, n_media, n_stories, start, months)
        self._segments: dict[int, list[list[tuple[str, str | None]]]] = {}
        self._texts: dict[int, str] = {}
        self._body_html: dict[int, str] = {}

    # -- rendering --------------------------------------------------------------------------------------

    def render(self) -> None:
        """Every page: stories, their mirrors and redirects, listings, binaries, robots.txt."""
        self.by_outlet_subject: dict[tuple[int, str], list[Story]] = {}
        for story in sorted(self.stories, key=time_key):
            self.by_outlet_subject.setdefault((story.outlet.index, story.subject.name), []).append(story)
        self.position_in_outlet_subject = {
            story.sid: i for stories in self.by_outlet_subject.values() for i, story in enumerate(stories)
        }
        self.rendered: dict[int, str] = {}  # sid → HTML served at story.url, for archived stories
        for story in self.stories:
            outlet = story.outlet
            brand = Brand(outlet.name, outlet.spec.abbr, outlet.host)
            text = self._render_story(story, brand, mobile=False)
            if story.archived:  # the archive keeps the HTML as text; other pages only as bytes
                self.rendered[story.sid] = text
            page = self._html_page(outlet, text)
            self.pages[story.url] = page
            if story.tracking_url:
                self.pages[story.tracking_url] = page
            if outlet.spec.mobile_host:
                mirror = self._render_story(
                    story, Brand(outlet.name, outlet.spec.abbr, outlet.spec.mobile_host), mobile=True
                )
                self.pages[f"http://{outlet.spec.mobile_host}{story.path}"] = self._html_page(outlet, mirror)
            if story.old_branded:
                self._redirect(story.origin_url, story.url)
            if outlet.bare_host:
                self._redirect(f"http://{outlet.bare_host}{story.path}", story.url)
        outlet_of_host: dict[str, Outlet] = {}
        for outlet in self.outlets:
            outlet_of_host[outlet.host] = outlet
            if outlet.old_host:
                outlet_of_host[outlet.old_host] = outlet
        for story in self.stories:
            for link in story.links:
                if link.kind not in ("pdf", "image", "private") or link.url in self.pages:
                    continue
                parts = urlsplit(link.url)
                outlet = outlet_of_host[parts.hostname or ""]
                serving_url = f"http://{outlet.host}{parts.path}"
                if serving_url != link.url:  # linked under a renamed outlet's old host
                    self._redirect(link.url, serving_url)
                if link.kind == "pdf":
                    page = Page(200, {"Content-Type": "application/pdf"}, _PDF_BODY, "application/pdf")
                elif link.kind == "image":
                    page = Page(200, {"Content-Type": "image/jpeg"}, _JPEG_BODY, "image/jpeg")
                else:
                    body = simple_page(
                        "Subscribers only", "<p>This interview is for subscribers.</p>", outlet.spec.charset
                    )
                    page = self._html_page(outlet, body)
                self.pages[serving_url] = page
        self._render_listings()

    def _redirect(self, source: str, target: str) -> None:
        self.redirects[source] = target
        body = simple_page(
            "Moved Permanently",
            f'<p>This page has moved to <a href="{attr(target)}">{htmllib.escape(target)}</a>.</p>',
        ).encode()
        self.pages[source] = Page(
            301, {"Location": target, "Content-Type": "text/html; charset=utf-8"}, body, "text/html"
        )

    def _html_page(self, outlet: Outlet, text: str) -> Page:
        charset = outlet.spec.charset
        content_type = f"text/html; charset={charset}" if outlet.spec.charset_in_header else "text/html"
        return Page(200, {"Content-Type": content_type}, text.encode(charset), "text/html")

    def title_of(self, story: Story, brand: Brand) -> str:
        style = outlets.TITLE_STYLES[story.outlet.spec.title_style]
        return style.format(
            h=story.headline, name=brand.name, abbr=brand.abbr, section=story.subject.section_label
        )

    def body_segments(self, story: Story) -> list[list[tuple[str, str | None]]]:
        """Paragraphs as (sentence, link URL or None) pairs, links appended where they were placed."""
        paragraphs: list[list[tuple[str, str | None]]] = [[(s, None) for s in p] for p in story.paragraphs]
        for link in story.links:
            slots = Slots(self.rng, link.cast or story.cast)
            slots["tname"] = link.target_name
            slots["the_tname"] = name_mid_sentence(link.target_name)
            if link.target is not None:
                slots["tweekday"] = vocab.WEEKDAYS[link.target.published.weekday()]
                slots["tmonth"] = vocab.MONTHS[link.target.published.month - 1]
                slots["oname"] = link.target_name
            sentence = capitalized(link.template.format_map(slots))
            paragraph = min(link.paragraph, len(paragraphs) - 1)
            if link.kind == "credit":
                paragraphs.append([(sentence, link.url)])
            else:
                paragraphs[paragraph].append((sentence, link.url))
        return paragraphs

    def plain_text(self, story: Story) -> str:
        """The article text as an extractor would give it: paragraphs separated by blank lines."""
        text = self._texts.get(story.sid)
        if text is None:
            segments = self.body_segments_cached(story)
            text = "\n\n".join(" ".join(strip_markers(s) for s, _ in p) for p in segments)
            self._texts[story.sid] = text
        return text

    def body_segments_cached(self, story: Story) -> list[list[tuple[str, str | None]]]:
        cached = self._segments.get(story.sid)
        if cached is None:
            cached = self.body_segments(story)
            self._segments[story.sid] = cached
        return cached

    def _render_story(self, story: Story, brand: Brand, mobile: bool) -> str:
        outlet = story.outlet
        spec = outlet.spec
        canonical = story.url if mobile else f"http://{brand.host}{story.path}"
        title = self.title_of(story, brand)
        chrome_base = "" if spec.relative_chrome else f"http://{brand.host}"
        local = story.published.astimezone(timezone(timedelta(hours=spec.tz_hours)))
        segments = self.body_segments_cached(story)
        description = strip_markers(segments[0][0][0])
        head = [
            '<!DOCTYPE html>\n<html lang="en">\n<head>\n',
            _charset_meta(spec.charset),
            f"<title>{htmllib.escape(title, quote=False)}</title>\n",
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n',
            f'<link rel="canonical" href="{attr(canonical)}">\n',
            f'<meta property="og:title" content="{attr(story.headline)}">\n',
            '<meta property="og:type" content="article">\n',
            f'<meta property="og:url" content="{attr(canonical)}">\n',
            f'<meta property="og:site_name" content="{attr(brand.name)}">\n',
            f'<meta name="description" content="{attr(description)}">\n',
            f'<meta name="keywords" content="{attr(", ".join(story.tags))}">\n',
        ]
        form = story.date_form
        modified = local + timedelta(hours=3 + story.sid % 40)
        if form == "og":
            head.append(f'<meta property="article:published_time" content="{_iso(local)}">\n')
            if story.sid % 4 == 0:
                head.append(f'<meta property="article:modified_time" content="{_iso(modified)}">\n')
        elif form == "jsonld":
            data = {
                "@context": "https://schema.org",
                "@type": "NewsArticle",
                "headline": story.headline,
                "datePublished": _iso(local),
                "dateModified": _iso(modified if story.sid % 3 == 0 else local),
                "author": {"@type": "Person", "name": story.author},
                "publisher": {"@type": "Organization", "name": brand.name},
                "mainEntityOfPage": canonical,
            }
            head.append(
                '<script type="application/ld+json">'
                + json.dumps(data, ensure_ascii=False).replace("</", "<\\/")
                + "</script>\n"
            )
        head.append(f'<link rel="stylesheet" href="{chrome_base}/static/site.css">\n</head>\n')
        parts = head
        parts.append(f'<body class="article-page layout-{spec.layout}">\n')
        if mobile:
            parts.append(
                f'<header class="m-header"><a class="logo" href="/">{htmllib.escape(brand.abbr)}</a> '
                f'<a class="desktop" href="{attr(story.url)}">Full site</a></header>\n'
            )
        else:
            parts.append(self._header(brand, chrome_base))
            parts.append(self._share_bar(canonical, story.headline))
        author_url = f"http://{brand.host}/author/{slugify(story.author)}"
        byline = f'By <a href="{attr(author_url)}" rel="author">{htmllib.escape(story.author)}</a>'
        if (
            story.kind == "syndicated_copy"
            and story.source is not None
            and story.source.outlet.name == "Atlas Wire Service"
        ):
            byline += ", Atlas Wire Service"
        date_html = ""
        if form == "time":
            date_html = (
                f' <time datetime="{_iso(local)}" class="published">'
                f"{vocab.MONTHS[local.month - 1]} {local.day}, {local.year}</time>"
            )
        elif form == "itemprop":
            date_html = f' <meta itemprop="datePublished" content="{_iso(story.published)}">'
        elif form == "dateline":
            label = _TZ_LABELS.get(spec.tz_hours, f"UTC{spec.tz_hours:+d}")
            if spec.tz_hours < 0:
                hour = local.hour % 12 or 12
                text = (
                    f"{vocab.MONTH_ABBR[local.month - 1]} {local.day}, {local.year} at {hour}:{local:%M} "
                    f"{'a.m.' if local.hour < 12 else 'p.m.'} {label}"
                )
            else:
                text = f"{local.day} {vocab.MONTHS[local.month - 1]} {local.year}, {local:%H:%M} {label}"
            date_html = f'\n<div class="dateline">Published {text}</div>'
        headline_html = htmllib.escape(story.headline, quote=False)
        body_html = self._body_html.get(story.sid)
        if body_html is None:  # the same for every rendering of the story (mirror, old branding)
            body_html = "".join(_paragraph_html(paragraph) for paragraph in segments)
            self._body_html[story.sid] = body_html
        category_url = f"http://{brand.host}/category/{story.subject.section}"
        tag_links = ", ".join(
            f'<a href="http://{brand.host}/tag/{slugify(tag)}" rel="tag">{htmllib.escape(tag)}</a>'
            for tag in story.tags
        )
        tags_html = (
            f'<p class="filed">Filed under <a href="{attr(category_url)}">'
            f"{story.subject.section_label}</a> \u00b7 Topics: {tag_links}</p>\n"
        )
        if spec.layout == 0 or mobile:
            parts.append(
                '<main>\n<article class="story" itemscope itemtype="https://schema.org/NewsArticle">\n'
                f'<h1 class="headline" itemprop="headline">{headline_html}</h1>\n'
                f'<div class="byline">{byline}{date_html}</div>\n'
                f'<div class="article-body" itemprop="articleBody">\n{body_html}{tags_html}</div>\n'
                "</article>\n"
            )
        elif spec.layout == 1:
            parts.append(
                '<main id="content">\n<div class="entry">\n<header class="entry-header">'
                f'<h1 class="entry-title">{headline_html}</h1>\n'
                f'<p class="meta">{byline}{date_html}</p></header>\n'
                f'<div class="entry-content">\n{body_html}{tags_html}</div>\n</div>\n'
            )
        else:
            parts.append(
                '<main>\n<div id="story">\n'
                f"<h1>{headline_html}</h1>\n"
                f'<span class="author">{byline}</span>{date_html}\n'
                f'<section id="story-body">\n{body_html}{tags_html}</section>\n</div>\n'
            )
        if not mobile:
            parts.append(self._most_read(story, chrome_base))
        parts.append("</main>\n")
        parts.append(self._footer(brand, chrome_base))
        parts.append("</body>\n</html>\n")
        return "".join(parts)

    def _header(self, brand: Brand, base: str) -> str:
        nav = "".join(f'<li><a href="{base}/{section}/">{label}</a></li>' for label, section in _NAV)
        return (
            f'<header class="site-header">\n<a class="logo" href="{base}/">{htmllib.escape(brand.name)}</a>\n'
            f'<nav class="main-nav"><ul>{nav}</ul></nav>\n'
            f'<form class="search" action="{base}/search"><input name="q" placeholder="Search"></form>\n'
            "</header>\n"
        )

    def _share_bar(self, url: str, headline: str) -> str:
        quoted = quote(url, safe="")
        quoted_headline = quote(headline, safe="")
        return (
            '<div class="share-bar">'
            f'<a href="https://www.facebook.com/sharer/sharer.php?u={quoted}" class="share-facebook">Share</a> '
            f'<a href="https://twitter.com/intent/tweet?url={quoted}&amp;text={quoted_headline}" '
            'class="share-twitter">Tweet</a> '
            f'<a href="mailto:?subject={quoted_headline}&amp;body={quoted}" class="share-email">Email'
            "</a></div>\n"
        )

    def _most_read(self, story: Story, base: str) -> str:
        """Up to five earlier stories of the same outlet and subject ("More in this section")."""
        siblings = self.by_outlet_subject[(story.outlet.index, story.subject.name)]
        position = self.position_in_outlet_subject[story.sid]
        picks = siblings[max(0, position - 5) : position] or siblings[position + 1 : position + 4]
        items = "".join(
            f'<li><a href="{base}{s.path}">{htmllib.escape(s.headline, quote=False)}</a></li>'
            for s in reversed(picks)
        )
        return (
            f'<aside class="sidebar most-read"><h2>Most read in {story.subject.section_label}</h2>'
            f"<ol>{items}</ol></aside>\n"
        )

    def _footer(self, brand: Brand, base: str) -> str:
        year = self.end.year
        return (
            '<footer class="site-footer"><ul>'
            f'<li><a href="{base}/about">About us</a></li><li><a href="{base}/contact">Contact</a></li>'
            f'<li><a href="{base}/privacy">Privacy policy</a></li>'
            f'<li><a href="{base}/newsletter">Newsletter</a></li></ul>'
            f"<p>\u00a9 {year} {htmllib.escape(brand.name)}. All rights reserved.</p></footer>\n"
        )

    def _render_listings(self) -> None:
        """Home, section, category, tag and author pages, about/contact/privacy, and robots.txt."""
        by_outlet: dict[int, list[Story]] = {}
        for story in sorted(self.stories, key=time_key, reverse=True):
            by_outlet.setdefault(story.outlet.index, []).append(story)
        for outlet in self.outlets:
            stories = by_outlet.get(outlet.index, [])
            brand = Brand(outlet.name, outlet.spec.abbr, outlet.host)
            base = f"http://{outlet.host}"
            self._listing(outlet, brand, "/", "Latest news", stories)
            for label, section in _NAV:
                chosen = [s for s in stories if s.subject.section == section] or stories
                self._listing(outlet, brand, f"/{section}/", label, chosen)
                self._listing(outlet, brand, f"/category/{section}", label, chosen)
            tags: dict[str, list[Story]] = {}
            authors: dict[str, list[Story]] = {}
            for story in stories:
                for tag in story.tags:
                    tags.setdefault(tag, []).append(story)
                authors.setdefault(story.author, []).append(story)
            for tag, tagged in tags.items():
                self._listing(outlet, brand, f"/tag/{slugify(tag)}", f"Topic: {tag}", tagged)
            for author, written in authors.items():
                self._listing(outlet, brand, f"/author/{slugify(author)}", f"Stories by {author}", written)
            for path, heading in (("/about", "About us"), ("/contact", "Contact"), ("/privacy", "Privacy")):
                text = simple_page(
                    f"{heading} - {brand.name}",
                    f"<p>{htmllib.escape(brand.name)} is an independent news organisation.</p>",
                    outlet.spec.charset,
                )
                self.pages[base + path] = self._html_page(outlet, text)
            self.pages[base + "/robots.txt"] = _robots_page()
            if outlet.spec.mobile_host:
                mobile = Brand(outlet.name, outlet.spec.abbr, outlet.spec.mobile_host)
                self._listing(outlet, mobile, "/", "Latest news", stories)
                self.pages[f"http://{outlet.spec.mobile_host}/robots.txt"] = _robots_page()

    def _listing(self, outlet: Outlet, brand: Brand, path: str, heading: str, stories: list[Story]) -> None:
        base = "" if outlet.spec.relative_chrome else f"http://{brand.host}"
        items = "".join(
            f'<li><a href="{base}{s.path}">{htmllib.escape(s.headline, quote=False)}</a></li>'
            for s in stories[:25]
        )
        content = (
            self._header(brand, base) + f'<main><h1>{htmllib.escape(heading)}</h1><ul class="river">'
            f"{items}</ul></main>\n" + self._footer(brand, base)
        )
        text = simple_page(f"{heading} - {brand.name}", content, charset=outlet.spec.charset)
        self.pages[f"http://{brand.host}{path}"] = self._html_page(outlet, text)


def _iso(moment: datetime) -> str:
    text = moment.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def attr(value: str) -> str:
    return htmllib.escape(value, quote=True)


def _paragraph_html(paragraph: list[tuple[str, str | None]]) -> str:
    """One <p>: the sentences escaped at once, then each link's markers turned into its <a> element."""
    escaped = htmllib.escape(" ".join(sentence for sentence, _ in paragraph), quote=False)
    for _, url in paragraph:
        if url is not None:
            escaped = escaped.replace("\x00", f'<a href="{attr(url)}">', 1).replace("\x01", "</a>", 1)
    return f"<p>{escaped}</p>\n"


def _charset_meta(charset: str) -> str:
    if charset.lower() == "utf-8":
        return '<meta charset="utf-8">\n'
    return f'<meta http-equiv="Content-Type" content="text/html; charset={charset}">\n'


def simple_page(title: str, content: str, charset: str = "utf-8") -> str:
    return (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n{_charset_meta(charset)}'
        f"<title>{htmllib.escape(title, quote=False)}</title>\n</head>\n<body>\n{content}\n</body>\n</html>\n"
    )


def _robots_page() -> Page:
    return Page(200, {"Content-Type": "text/plain; charset=utf-8"}, ROBOTS_TXT.encode(), "text/plain")
