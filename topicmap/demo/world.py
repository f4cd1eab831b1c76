"""The demo web's world before it is pages: outlets, stories (syndicated copies, retitles, tracking URLs), their
URLs, the split between the archive and what only links reach, and every in-article link."""

from __future__ import annotations

import random
import re
import string
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta

from topicmap.demo import outlets, vocab
from topicmap.demo.model import (
    ANCHOR,
    Brand,
    Link,
    Outlet,
    Page,
    Slots,
    Story,
    add_months,
    capitalized,
    name_mid_sentence,
    slugify,
    time_key,
)
from topicmap.demo.outlets import OutletSpec
from topicmap.demo.vocab import SUBJECTS, SubjectSpec

DEAD_HOST = "closedgazette.test"  # a host linked to but not served: its links all end in 404

_SYNDICATED_SHARE = 0.05  # share of stories that are members of a syndication group
_RETITLED_SHARE = 0.01  # share of stories republished in the same medium with a changed headline
_TRACKING_SHARE = 0.02  # share of stories also reachable under a ?utm_... URL
_ARCHIVED_SHARE = 0.55
_ORPHAN_SHARE = 0.03  # unarchived stories nothing links to: the spider cannot find them
_DEPTH_WEIGHTS = (0.34, 0.24, 0.17, 0.12, 0.08, 0.05)  # hops 1..6 for the unarchived stories
_WORD_RE = re.compile(r"^([^\w]*)([A-Za-z]+)([^\w]*)$")
_SPORTS_WORD = re.compile(r"\bsports\b", re.IGNORECASE)


def _query_word_pattern() -> re.Pattern[str]:
    """Matches a lowercase word that is part of some subject's query (a wildcard term matches its stem)."""
    alternatives: list[str] = []
    for spec in SUBJECTS.values():
        for term in spec.terms + spec.exclude:
            for word in term.strip('"').split():
                stem = re.escape(word.rstrip("*").lower())
                alternatives.append(stem + r"\w*" if word.endswith("*") else stem)
    return re.compile("(?:" + "|".join(alternatives) + ")")


_QUERY_WORD = _query_word_pattern()


def _protected_word(word: str) -> bool:
    """A word that is part of some subject's query: never swapped by a syndicating editor."""
    return _QUERY_WORD.fullmatch(word) is not None


class WorldBuilder:
    """The first steps of building a demo web: outlets, stories, URLs, the archive split, links. One instance per
    generation, one Random for every choice (the later steps, subclasses, draw from the same one in turn)."""

    def __init__(self, seed: int, n_media: int, n_stories: int, start: date, months: int):
        self.rng = random.Random(seed)
        self.seed = seed
        self.n_media = n_media
        self.n_stories = n_stories
        self.start = start
        self.months = months
        self.end = add_months(start, months) - timedelta(days=1)
        self.days = (self.end - start).days + 1
        self.outlets: list[Outlet] = []
        self.stories: list[Story] = []
        self.pages: dict[str, Page] = {}
        self.used_paths: set[str] = set()  # membership only, never iterated
        self.truth_dead: list[str] = []
        self.truth_binary: list[str] = []
        self.truth_private: list[str] = []
        self.redirects: dict[str, str] = {}
        self.groups: list[tuple[Story, list[Story]]] = []
        self.retitled: list[tuple[Story, Story]] = []
        self.parent_links: list[tuple[Story, Story]] = []

    # -- media ------------------------------------------------------------------------------------------

    def build_outlets(self) -> None:
        specs = list(outlets.OUTLETS)
        taken = {spec.host for spec in specs} | {spec.name for spec in specs}
        specs += [
            spec for spec in self._extra_outlet_specs() if spec.host not in taken and spec.name not in taken
        ]
        total = 0
        for spec in specs:
            dups = int(spec.mobile_host is not None) + int(spec.bare_dup) + int(spec.renamed_from is not None)
            if total + 1 + dups > self.n_media:
                if total + 1 > self.n_media:
                    break
                spec = replace(spec, mobile_host=None, bare_dup=False, renamed_from=None)
                dups = 0
            self.outlets.append(self._make_outlet(spec, len(self.outlets)))
            total += 1 + dups
            if total == self.n_media:
                break
        if total < self.n_media:
            raise ValueError(f"n_media={self.n_media} is more than the demo web can name ({total})")

    def _extra_outlet_specs(self) -> Iterator[OutletSpec]:
        styles = tuple(outlets.URL_STYLES)
        forms = ("og", "itemprop", "time", "jsonld", "dateline")
        index = 0
        for masthead in outlets.EXTRA_MASTHEADS:
            for place in vocab.PLACES:
                name = f"{place} {masthead}"
                yield OutletSpec(
                    name=name,
                    host=f"{slugify(place).replace('-', '')}{masthead.lower()}.test",
                    abbr="".join(w[0] for w in name.split()),
                    size=0.5,
                    title_style=index % len(outlets.TITLE_STYLES),
                    url_style=styles[index % len(styles)],
                    date_forms=(forms[index % len(forms)], forms[(index + 2) % len(forms)]),
                    layout=index % 3,
                    relative_chrome=index % 2 == 0,
                )
                index += 1

    def _make_outlet(self, spec: OutletSpec, index: int) -> Outlet:
        rng = self.rng
        if spec.focus is None:
            weights = tuple(s.share for s in SUBJECTS.values())
        else:
            rest = sum(s.share for s in SUBJECTS.values() if s.name != spec.focus)
            weights = tuple(
                0.75 if s.name == spec.focus else 0.25 * s.share / rest for s in SUBJECTS.values()
            )
        authors = tuple(
            f"{rng.choice(vocab.FIRST_NAMES)} {rng.choice(vocab.LAST_NAMES)}"
            for _ in range(rng.randrange(4, 8))
        )
        rename_date = None
        if spec.renamed_from is not None:
            rename_date = self.start + timedelta(days=int(self.days * spec.rename_at))
        return Outlet(spec, index, weights, authors, rename_date)

    # -- stories ----------------------------------------------------------------------------------------

    def build_stories(self) -> None:
        rng = self.rng
        n = self.n_stories
        group_sizes: list[int] = []
        members = max(2, round(n * _SYNDICATED_SHARE)) if len(self.outlets) > 1 else 0
        while sum(group_sizes) < members:
            size = rng.choice((2, 2, 3, 3, 4))
            group_sizes.append(min(size, max(2, members - sum(group_sizes)), len(self.outlets)))
        n_copies = sum(group_sizes) - len(group_sizes)
        n_retitled = max(1, round(n * _RETITLED_SHARE))
        n_base = n - n_copies - n_retitled
        cum_weights = []
        acc = 0.0
        for outlet in self.outlets:
            acc += outlet.spec.size
            cum_weights.append(acc)
        subjects = list(SUBJECTS.values())
        for _ in range(n_base):
            outlet = rng.choices(self.outlets, cum_weights=cum_weights)[0]
            subject = rng.choices(subjects, weights=outlet.subject_weights)[0]
            day = self.start + timedelta(days=rng.randrange(self.days))
            published = datetime(day.year, day.month, day.day, 6, 0, tzinfo=UTC) + timedelta(
                minutes=rng.randrange(15 * 60)
            )
            self.stories.append(self._new_story(outlet, subject, published))
        self._syndicate(group_sizes, cum_weights)
        self._retitle(n_retitled)

    def _new_story(self, outlet: Outlet, subject: SubjectSpec, published: datetime) -> Story:
        rng = self.rng
        cast = self._cast(outlet, subject, published)
        headline = self._headline(subject, cast)
        paragraphs = self._compose(subject, cast, outlet)
        return Story(
            sid=len(self.stories),
            outlet=outlet,
            subject=subject,
            published=published,
            headline=headline,
            paragraphs=paragraphs,
            cast=cast,
            date_form=self._date_form(outlet),
            author=rng.choice(outlet.authors),
            tags=tuple(rng.sample(subject.tags, rng.randrange(1, 4))),
        )

    def _cast(self, outlet: Outlet, subject: SubjectSpec, published: datetime) -> dict[str, str]:
        rng = self.rng
        first = rng.sample(vocab.FIRST_NAMES, 2)
        last = rng.sample(vocab.LAST_NAMES, 2)
        org, org2 = rng.sample(subject.orgs, 2)
        role = rng.choice(subject.roles)
        return {
            "person": f"{first[0]} {last[0]}",
            "person2": f"{first[1]} {last[1]}",
            "place": rng.choice(vocab.PLACES),
            "org": org,
            "org_cap": capitalized(org),
            "org2": org2,
            "team": capitalized(org),
            "team2": capitalized(org2),
            "role": role,
            "a_role": f"an {role}" if role[0] in "aeiou" else f"a {role}",
            "artist": rng.choice(vocab.ARTISTS),
            "play": rng.choice(vocab.PLAYS),
            "outlet": self._brand(outlet, published).name,
            "the_outlet": name_mid_sentence(self._brand(outlet, published).name),
            "a": ANCHOR,
        }

    def _brand(self, outlet: Outlet, when: datetime | date) -> Brand:
        """The outlet's name and host at a given time (a renamed outlet had its old ones before)."""
        day = when.date() if isinstance(when, datetime) else when
        if outlet.spec.renamed_from is not None and outlet.rename_date and day < outlet.rename_date:
            old_name, old_host, old_abbr = outlet.spec.renamed_from
            return Brand(old_name, old_abbr, old_host)
        return Brand(outlet.name, outlet.spec.abbr, outlet.host)

    def _headline(self, subject: SubjectSpec, cast: dict[str, str], avoid: str = "") -> str:
        rng = self.rng
        headline = ""
        for _ in range(20):
            headline = capitalized(rng.choice(subject.headlines).format_map(Slots(rng, cast)))
            if len(headline) >= 32 and headline != avoid:
                break
        return headline

    def _date_form(self, outlet: Outlet) -> str:
        rng = self.rng
        forms = outlet.spec.date_forms
        has_date_in_url = outlets.URL_STYLES[outlet.spec.url_style][0]
        if not has_date_in_url and rng.random() < 0.12:
            return "none"
        return forms[0] if rng.random() < 0.8 else rng.choice(forms)

    def _compose(self, subject: SubjectSpec, cast: dict[str, str], outlet: Outlet) -> list[list[str]]:
        """Sentences drawn from the subject's and the shared templates until the target length is reached."""
        rng = self.rng
        slots = Slots(rng, cast)  # numbers are drawn afresh at each use, so one mapping serves every sentence
        target = int(rng.triangular(150, 450, 280))
        lead = capitalized(rng.choice(subject.leads).format_map(slots))
        if outlet.spec.name == "Atlas Wire Service":
            lead = f"{cast['place'].upper()} (Atlas) \u2014 {lead}"
        elif rng.random() < 0.2:
            lead = f"{cast['place'].upper()} \u2014 {lead}"
        pool = list(subject.sentences + subject.quotes + vocab.GENERIC_SENTENCES)
        sentences: list[str] = []
        words = len(lead.split())
        drawn = 0
        while words < target:
            if drawn < len(pool):  # without replacement, shuffling only as far as needed
                pick = rng.randrange(drawn, len(pool))
                pool[drawn], pool[pick] = pool[pick], pool[drawn]
                template = pool[drawn]
                drawn += 1
            else:
                template = rng.choice(pool)
            sentence = capitalized(template.format_map(slots))
            sentences.append(sentence)
            words += len(sentence.split())
        if subject.name == "sports":
            if rng.random() < 0.3:
                bleed = rng.choice(vocab.SPORTS_BLEED).format_map(slots)
                sentences.insert(rng.randrange(len(sentences) + 1), bleed)
            if not any(_SPORTS_WORD.search(s) for s in sentences + [lead]):
                marker = rng.choice(vocab.SPORTS_MARKERS).format_map(slots)
                sentences.insert(rng.randrange(len(sentences) + 1), marker)
        paragraphs = [[lead]]
        while sentences:
            take = rng.choice((1, 2, 2, 3))
            paragraphs.append(sentences[:take])
            sentences = sentences[take:]
        return paragraphs

    def _syndicate(self, group_sizes: list[int], cum_weights: list[float]) -> None:
        """Near-copies of originals in other outlets: a few words changed, maybe a sentence added."""
        rng = self.rng
        wire = [s for s in self.stories if s.outlet.name == "Atlas Wire Service"]
        others = list(self.stories)
        taken: set[int] = set()  # membership only
        for size in group_sizes:
            pool = wire if wire and rng.random() < 0.6 else others
            original = rng.choice(pool)
            for _ in range(50):
                if original.sid not in taken:
                    break
                original = rng.choice(others)
            else:  # a story heads one group at most
                original = next(s for s in others if s.sid not in taken)
            taken.add(original.sid)
            copy_outlets: list[Outlet] = []
            while len(copy_outlets) < size - 1:
                outlet = rng.choices(self.outlets, cum_weights=cum_weights)[0]
                if outlet is not original.outlet and outlet not in copy_outlets:
                    copy_outlets.append(outlet)
            copies = [self._copy_of(original, outlet) for outlet in copy_outlets]
            self.groups.append((original, copies))

    def _copy_of(self, original: Story, outlet: Outlet) -> Story:
        rng = self.rng
        published = min(
            original.published + timedelta(minutes=rng.randrange(10, 240)),
            original.published.replace(hour=21, minute=59),
        )
        paragraphs, substituted = self._edit_words(original.paragraphs, rng.uniform(0.01, 0.03))
        story = Story(
            sid=len(self.stories),
            outlet=outlet,
            subject=original.subject,
            published=published,
            headline=original.headline,
            paragraphs=paragraphs,
            cast=dict(
                original.cast,
                outlet=self._brand(outlet, published).name,
                the_outlet=name_mid_sentence(self._brand(outlet, published).name),
            ),
            date_form=self._date_form(outlet),
            author=rng.choice(outlet.authors),
            tags=original.tags,
            kind="syndicated_copy",
            source=original,
            substituted_words=substituted,
        )
        roll = rng.random()
        if roll < 0.25:
            story.credit = True  # the credit line (with its link) is rendered after the links are known
        elif roll < 0.5:
            sentence = capitalized(rng.choice(vocab.GENERIC_SENTENCES).format_map(Slots(rng, story.cast)))
            story.added_sentence = sentence
            target = story.paragraphs[rng.randrange(len(story.paragraphs))]
            target.append(sentence)
        self.stories.append(story)
        return story

    def _edit_words(self, paragraphs: list[list[str]], rate: float) -> tuple[list[list[str]], int]:
        """Swap about `rate` of the words for synonyms (or a filler word): a syndicating editor's touch."""
        rng = self.rng
        edited = [[s.split(" ") for s in paragraph] for paragraph in paragraphs]
        synonym_spots: list[tuple[int, int, int]] = []
        filler_spots: list[tuple[int, int, int]] = []
        total = 0
        for p, paragraph in enumerate(edited):
            for s, words in enumerate(paragraph):
                total += len(words)
                if p == 0 and s == 0:
                    continue  # the lead keeps its query term intact
                for w, token in enumerate(words):
                    match = _WORD_RE.match(token)
                    if not match:
                        continue
                    core = match.group(2).lower()
                    if _protected_word(core):
                        continue
                    if core in vocab.SYNONYMS:
                        synonym_spots.append((p, s, w))
                    elif len(core) >= 5 and match.group(2).islower():
                        filler_spots.append((p, s, w))
        wanted = max(1, round(rate * total))
        rng.shuffle(synonym_spots)
        rng.shuffle(filler_spots)
        spots = (synonym_spots + filler_spots)[:wanted]
        for p, s, w in spots:
            token = edited[p][s][w]
            match = _WORD_RE.match(token)
            assert match is not None
            core = match.group(2)
            replacement = vocab.SYNONYMS.get(core.lower()) or rng.choice(
                [w for w in vocab.FILLER_WORDS if w != core.lower()]  # a swap always changes the word
            )
            if core[0].isupper():
                replacement = capitalized(replacement)
            edited[p][s][w] = f"{match.group(1)}{replacement}{match.group(3)}"
        return [[" ".join(words) for words in paragraph] for paragraph in edited], len(spots)

    def _retitle(self, count: int) -> None:
        """The same story published again in the same medium on the same day under a changed headline."""
        rng = self.rng
        originals = [s for s in self.stories if s.kind == "original" and s.date_form != "none"]
        in_groups = {g[0].sid for g in self.groups}
        candidates = [s for s in originals if s.sid not in in_groups]
        for original in rng.sample(candidates, min(count, len(candidates))):
            change = rng.choice(("prefix", "case", "reworded"))
            if change == "prefix":
                headline = rng.choice(("UPDATE: ", "Updated: ", "Breaking: ")) + original.headline
            elif change == "case":
                headline = string.capwords(original.headline.rstrip(".!?"))
                headline = headline + "!" if headline == original.headline else headline
            else:
                headline = self._headline(original.subject, original.cast, avoid=original.headline)
            update = "Update: " + rng.choice(original.subject.leads).format_map(Slots(rng, original.cast))
            published = min(
                original.published + timedelta(minutes=rng.randrange(30, 180)),
                original.published.replace(hour=21, minute=59),
            )
            story = Story(
                sid=len(self.stories),
                outlet=original.outlet,
                subject=original.subject,
                published=published,
                headline=headline,
                paragraphs=[[update]] + [list(p) for p in original.paragraphs],
                cast=original.cast,
                date_form=original.date_form,
                author=original.author,
                tags=original.tags,
                kind="retitled",
                source=original,
                headline_change=change,
            )
            self.stories.append(story)
            self.retitled.append((original, story))

    # -- URLs -------------------------------------------------------------------------------------------

    def assign_urls(self) -> None:
        rng = self.rng
        for story in self.stories:
            outlet = story.outlet
            path = self._path(story)
            story.path = path
            story.url = f"http://{outlet.host}{path}"
            brand = self._brand(outlet, story.published)
            story.origin_url = f"http://{brand.host}{path}"
        tracked = rng.sample(self.stories, round(len(self.stories) * _TRACKING_SHARE))
        for story in tracked:
            source = rng.choice(("twitter", "newsletter", "facebook", "rss"))
            tail = f"utm_source={source}&utm_medium=social&utm_campaign={story.sid}"
            story.tracking_url = story.url + ("&" if "?" in story.url else "?") + tail

    def _path(self, story: Story) -> str:
        outlet = story.outlet
        day = story.published
        slug = slugify(story.headline)
        article_id = 480_000 + story.sid * 7 + outlet.index % 7
        section = story.subject.section
        style = outlet.spec.url_style
        if style == "dated_slug":
            path = f"/{day:%Y/%m/%d}/{slug}"
        elif style == "section_dated":
            path = f"/{section}/{day:%Y/%m/%d}/{slug}.html"
        elif style == "compact_date":
            path = f"/news/{day:%Y%m%d}-{slug}"
        elif style == "section_id":
            path = f"/{section}/{slug}-{article_id}"
        elif style == "article_id":
            path = f"/article/{article_id}/{slug}"
        else:
            path = f"/story.php?id={article_id}"
        key = outlet.host + path
        suffix = 2
        while key in self.used_paths:
            path = f"{path}-{suffix}" if "?" not in path else f"{path}{suffix}"
            key = outlet.host + path
            suffix += 1
        self.used_paths.add(key)
        return path

    # -- archive split and hop depths -------------------------------------------------------------------

    def split_archive(self) -> None:
        """Archive about half of each subject; give the rest a hop depth and a parent one hop closer."""
        rng = self.rng
        for story in self.stories:
            story.archived = rng.random() < _ARCHIVED_SHARE
            story.depth = 0 if story.archived else None
        for subject in SUBJECTS.values():
            members = [s for s in self.stories if s.subject is subject]
            wanted: dict[int, list[Story]] = {d: [] for d in range(1, len(_DEPTH_WEIGHTS) + 1)}
            for story in members:
                if story.archived or rng.random() < _ORPHAN_SHARE:
                    continue
                depth = rng.choices(range(1, len(_DEPTH_WEIGHTS) + 1), weights=_DEPTH_WEIGHTS)[0]
                wanted[depth].append(story)
            # Parents are originals only: copies and retitled stories repeat their original's links.
            by_depth: dict[int, list[Story]] = {
                0: sorted((s for s in members if s.archived and s.kind == "original"), key=time_key)
            }
            deepest = 0
            for depth in range(1, len(_DEPTH_WEIGHTS) + 1):
                if not wanted[depth]:
                    continue
                parent_depth = min(depth - 1, deepest)
                parents = by_depth.get(parent_depth, [])
                if not parents:
                    continue  # no archived original of this subject at all: these stay unreachable
                parent_times = [time_key(p) for p in parents]
                reached = []
                for child in wanted[depth]:
                    parent = self._later_parent(parents, parent_times, child)
                    child.depth = parent_depth + 1
                    self.parent_links.append((parent, child))
                    if child.kind == "original":
                        reached.append(child)
                if reached:
                    by_depth[parent_depth + 1] = sorted(reached, key=time_key)
                    deepest = parent_depth + 1

    def _later_parent(self, parents: list[Story], times: list[tuple], child: Story) -> Story:
        """A parent published after the child, when there is one: stories cite earlier reporting."""
        rng = self.rng
        start = bisect_left(times, time_key(child))
        if start < len(parents):
            return parents[rng.randrange(start, min(len(parents), start + 60))]
        return parents[rng.randrange(max(0, len(parents) - 60), len(parents))]

    # -- links ------------------------------------------------------------------------------------------

    def build_links(self) -> None:
        rng = self.rng
        by_subject: dict[str, list[Story]] = {
            name: sorted((s for s in self.stories if s.subject.name == name), key=time_key)
            for name in SUBJECTS
        }
        subject_times = {name: [time_key(s) for s in stories] for name, stories in by_subject.items()}
        everything = sorted(self.stories, key=time_key)
        all_times = [time_key(s) for s in everything]
        for parent, child in self.parent_links:
            self._add_story_link(parent, child)
        for story in sorted((s for s in self.stories if s.kind == "original"), key=time_key):
            same = by_subject[story.subject.name]
            position = bisect_left(subject_times[story.subject.name], time_key(story))
            for _ in range(rng.choice((1, 1, 2, 2, 3))):
                target = self._earlier_target(story, same, position)
                if target is not None:
                    self._add_story_link(story, target)
            if rng.random() < 0.35:
                position_all = bisect_left(all_times, time_key(story))
                for _ in range(8):
                    if position_all == 0:
                        break
                    other = everything[rng.randrange(max(0, position_all - 300), position_all)]
                    if other.subject is not story.subject:
                        self._add_story_link(story, other, vocab.OTHER_SUBJECT_LINKS)
                        break
            if rng.random() < 0.10:
                self._add_binary_link(story, "pdf")
            if rng.random() < 0.08:
                self._add_binary_link(story, "image")
            if rng.random() < 0.12:
                self._add_dead_link(story)
            if rng.random() < 0.05:
                self._add_private_link(story)
        for original, copies in self.groups:
            for copy in copies:
                copy.links = [replace(link) for link in original.links]
                if copy.credit:
                    brand = self._brand(original.outlet, original.published)
                    credit = Link(
                        "credit",
                        self._link_url(original, copy),
                        vocab.CREDIT_LINE,
                        len(copy.paragraphs) - 1,
                        original,
                        brand.name,
                        copy.cast,
                    )
                    copy.links.append(credit)
        for original, story in self.retitled:
            story.links = [replace(link, paragraph=link.paragraph + 1) for link in original.links]

    def _earlier_target(self, story: Story, same: list[Story], position: int) -> Story | None:
        """An earlier same-subject story, mostly in another outlet, that keeps the planted hop depths."""
        rng = self.rng
        if position == 0:
            return None
        want_other_outlet = rng.random() < 0.75
        for _ in range(10):
            target = same[rng.randrange(max(0, position - 200), position)]
            if target is story or (want_other_outlet and target.outlet is story.outlet):
                continue
            if story.depth is None:
                return target if target.depth is None or target.archived else None
            if target.archived or (target.depth is not None and target.depth <= story.depth + 1):
                return target
        return None

    def _link_url(self, target: Story, linker: Story) -> str:
        """The URL a linking story uses: old host, m. mirror, bare host or tracking tail now and then."""
        rng = self.rng
        outlet = target.outlet
        if target.old_branded:
            if outlet.rename_date and linker.published.date() < outlet.rename_date:
                return target.origin_url
            return target.origin_url if rng.random() < 0.3 else target.url
        roll = rng.random()
        if outlet.spec.mobile_host and roll < 0.2:
            return f"http://{outlet.spec.mobile_host}{target.path}"
        if outlet.bare_host and roll < 0.1:
            return f"http://{outlet.bare_host}{target.path}"
        if target.tracking_url and roll < 0.5:
            return target.tracking_url
        return target.url

    def _add_story_link(self, story: Story, target: Story, templates: tuple[str, ...] | None = None) -> None:
        rng = self.rng
        url = self._link_url(target, story)
        target_brand = self._brand(target.outlet, story.published)
        if templates is None:
            templates = vocab.SELF_LINKS if target.outlet is story.outlet else vocab.CROSS_MEDIA_LINKS
        story.links.append(
            Link(
                "story",
                url,
                rng.choice(templates),
                self._link_paragraph(story),
                target,
                target_brand.name,
                story.cast,
            )
        )

    def _link_paragraph(self, story: Story) -> int:
        count = len(story.paragraphs)
        return self.rng.randrange(1, count) if count > 1 else 0

    def _add_binary_link(self, story: Story, kind: str) -> None:
        rng = self.rng
        host = self._brand(story.outlet, story.published).host
        day = story.published
        if kind == "pdf":
            url = f"http://{host}/files/{day:%Y/%m}/{slugify(story.headline, 5)}-{story.sid}.pdf"
            templates = vocab.PDF_LINKS
        else:
            url = f"http://{host}/images/{day:%Y/%m}/photo-{story.sid}-{rng.randrange(1, 30)}.jpg"
            templates = vocab.IMAGE_LINKS
        story.links.append(
            Link(kind, url, rng.choice(templates), self._link_paragraph(story), cast=story.cast)
        )
        self.truth_binary.append(url)

    def _add_dead_link(self, story: Story) -> None:
        rng = self.rng
        host = DEAD_HOST if rng.random() < 0.25 else rng.choice(self.outlets).host
        last_year = self.start.year - 1
        slug = slugify(self._headline(story.subject, story.cast), 6)
        url = f"http://{host}/{last_year}/{rng.randrange(1, 13):02d}/{rng.randrange(1, 29):02d}/{slug}"
        story.links.append(
            Link("dead", url, rng.choice(vocab.DEAD_LINKS), self._link_paragraph(story), cast=story.cast)
        )
        self.truth_dead.append(url)

    def _add_private_link(self, story: Story) -> None:
        rng = self.rng
        host = self._brand(story.outlet, story.published).host
        url = f"http://{host}/private/interviews/{story.sid}"
        story.links.append(
            Link(
                "private", url, rng.choice(vocab.PRIVATE_LINKS), self._link_paragraph(story), cast=story.cast
            )
        )
        self.truth_private.append(url)
