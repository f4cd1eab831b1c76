"""Duplicate media and duplicate stories: pure planning over plain records (no database).

What is decided here, and what Media Cloud did. Two of its story-dedup rules are followed, named below by
what they compute: its *title key* (``get_normalized_title``, the SQL function behind
``normalized_title_hash``: the longest title part when it is long enough) and its 2018 *title parts*
(``_get_title_parts`` and ``get_medium_dup_stories_by_title``: section words, home pages, recurring titles,
lossy-URL groups); merges follow its ``_merge_dup_story`` and media dedup its ``merge_dup_media_stories``.

- ``resolve_dup_media``: ``media.dup_media_id`` chains are followed to their end. Media Cloud's
  ``_get_deduped_medium`` recursed with no cycle guard; here a cycle is an error naming its media.
- ``normalized_title``: the dedup key of a title (the title key) with the rules of the title parts.
- ``find_duplicate_stories``: stories of one medium that are the same story (same normalized title and
  publish day, or same lossy URL), grouped transitively, each group merged into one survivor.
- ``plan_media_merges``: where each story of a duplicate medium goes (merged into a matching story of
  the final medium, or moved there).
- ``resolve_merge_map``, ``remap_links``, ``merged_iteration``: apply a merge map to links and iterations.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Hashable, Iterable, Mapping
from urllib.parse import urlsplit

import numpy as np
import pandas as pd

REASON_TITLE = "same title and day"
REASON_URL = "same lossy url"
REASON_MEDIUM = "duplicate medium"

NO_TITLE = "(no title)"
MAX_TITLE_CHARS = 1023
MIN_LONGEST_PART_CHARS = 32  # title key: a part shorter than this is too generic to stand for the title
MIN_KEY_WORDS = 3  # a reduced key of 1-2 words ("home", "live updates") is too generic: keep the whole
HOMEPAGE_MAX_TITLE_WORDS = 4  # title parts: a full title of < 5 words is treated as a likely home page
TITLE_GROUP_MAX_STORIES = 26  # title parts: a title shared by >= 26 stories ...
TITLE_GROUP_MAX_SPAN_DAYS = 7  # ... spanning >= 7 days is a recurring title, not one story
URL_GROUP_MAX_STORIES = 5  # title parts: only lossy-URL groups of 2-5 stories count
# The title parts' solo rule: a story whose whole title (site name and section word dropped) is one part
# of at least this many words ("at least 4 words long", Media Cloud's docstring) absorbs the stories of its
# medium and day that carry that part among others ("Washington Post: Nunes Releases FISA Memo", the example
# of Media Cloud's topic-mining documentation).
MIN_SOLO_PART_WORDS = 4
# A title part that opens or closes the titles of at least this many stories of a medium, on at least
# SITE_PART_MIN_DAYS different days, is the medium's name or a section ("Opinion", "Live updates"), not a
# headline: headlines recur within a day, names across days. Counted per medium (the title parts' "big list
# of parts").
SITE_PART_MIN_STORIES = 3
SITE_PART_MIN_DAYS = 2

# Title parts: one leading word of these, followed by a separator, is a section label, not part of the title.
# ("op-ed" appears as "oped": keys are compared after punctuation is removed.)
TITLE_PREFIX_WORDS = frozenset(
    (  # noqa: SIM905 - the word list reads as in Media Cloud's code
        "opinion analysis report perspective poll watch exclusive editorial reports breaking nyt subject "
        "source wapo sources video study photos cartoon cnn today wsj review timeline revealed gallup ap "
        "read experts oped commentary feature letters survey"
    ).split()
)

_TAG_RE = re.compile(r"<[^>]*>")
# Separators of title parts (the title key's "- ", ":" and "|"). Media Cloud knew only the ASCII hyphen; en
# and em dashes followed by a space separate parts just as often ("Title – Site"), so they count too.
_SEPARATOR_RE = re.compile(r"[-\u2013\u2014]\s|[:|]")
_SEPARATOR = "\x00"
_SPACE_RE = re.compile(r"\s+")


class MergeCycleError(ValueError):
    """A merge map (or dup_media_id map) points in a circle; ``ids`` lists the circle in order."""

    kind = "merge map"

    def __init__(self, ids: list[Hashable]) -> None:
        self.ids = ids
        chain = " -> ".join(str(i) for i in [*ids, ids[0]])
        super().__init__(f"{self.kind} has a cycle: {chain}")


class DuplicateMediaCycleError(MergeCycleError):
    """dup_media_id chain that never ends; ``media_ids`` lists the media of the cycle in order."""

    kind = "dup_media_id"

    @property
    def media_ids(self) -> list[Hashable]:
        return self.ids


def _resolve_chains(
    pointers: Mapping[Hashable, Hashable | None], error: type[MergeCycleError]
) -> dict[Hashable, Hashable]:
    """Final target of every key (and every target), following pointers iteratively; a cycle raises."""
    final: dict[Hashable, Hashable] = {}
    nodes = list(pointers)
    nodes += [t for t in pointers.values() if t is not None and not _is_missing(t) and t not in pointers]
    for start in nodes:
        path: list[Hashable] = []
        on_path: set[Hashable] = set()
        node = start
        while node not in final:
            if node in on_path:
                cycle = path[path.index(node) :]
                raise error(cycle)
            path.append(node)
            on_path.add(node)
            target = pointers.get(node)
            if target is None or _is_missing(target):
                final[node] = node
                break
            node = target
        end = final[node]
        for visited in path:
            final[visited] = end
    return final


def _is_missing(value: object) -> bool:
    return (
        value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA or value is pd.NaT
    )


def resolve_dup_media(dup_media_id: Mapping[int, int | None]) -> dict[int, int]:
    """Final medium for every medium in ``dup_media_id`` (media_id -> dup_media_id or None).

    A medium without a dup maps to itself; a target missing from the mapping is taken as final. A cycle
    (including a medium pointing at itself) raises DuplicateMediaCycleError naming the media in it.
    """
    return _resolve_chains(dup_media_id, DuplicateMediaCycleError)  # type: ignore[return-value]


def resolve_merge_map(merge_map: Mapping[int, int]) -> dict[int, int]:
    """Follow merged-story chains (A -> B, B -> C gives A -> C); only merged ids are returned."""
    final = _resolve_chains(merge_map, MergeCycleError)
    return {source: final[source] for source in merge_map}  # type: ignore[misc]


# ---------------------------------------------------------------------------------------------------
# Titles


class _PunctuationTable(dict):
    """str.translate table deleting Unicode punctuation and symbols (categories P* and S*), lazily filled.

    Media Cloud's SQL used POSIX [[:punct:]] (ASCII punctuation and symbols). Its 2018 Python port wrote
    the same class into a Python regex, where ``[[:punct:]]`` is just the characters ``[ : p u n c t``
    followed by "]": it removed almost nothing (a bug its tests did not catch). The Unicode categories
    are the real class, and also cover curly quotes, dashes and CJK punctuation.
    """

    def __missing__(self, codepoint: int) -> int | None:
        value = None if unicodedata.category(chr(codepoint))[0] in "PS" else codepoint
        self[codepoint] = value
        return value


_PUNCTUATION = _PunctuationTable()


def _clean_parts(title: str) -> list[str]:
    """Tags and entities stripped, casefolded, split into parts at separators, punctuation removed."""
    # Tags first, then entities: unescaping first would turn "&lt;b&gt;" text into a fake tag. Media Cloud
    # deleted "&[a-z0-9]*" instead of decoding it, which also ate the letter of "caf&eacute;".
    text = html.unescape(_TAG_RE.sub(" ", title)).casefold()
    text = _SEPARATOR_RE.sub(_SEPARATOR, text)
    text = text[: MAX_TITLE_CHARS * 2]
    parts = []
    for raw_part in text.split(_SEPARATOR):
        part = _SPACE_RE.sub(" ", raw_part.translate(_PUNCTUATION)).strip()
        if part:
            parts.append(part)
    return parts


def _site_name_variants(medium_name: str | None) -> set[str]:
    """Normalized forms a medium's name takes in its titles: full, without "the", initials (NYT)."""
    if not medium_name:
        return set()
    name = " ".join(_clean_parts(medium_name))
    if not name:
        return set()
    variants = {name, name.replace(" ", "")}  # compared squashed too: "washington post" ~ "washingtonpost"
    words = name.split()
    if words[0] == "the" and len(words) > 1:
        words = words[1:]
        variants.add(" ".join(words))
    if len(words) >= 2:
        variants.add("".join(w[0] for w in words))
    # A domain-like name ("nytimes.com" lost its dot to punctuation): also its first label.
    if medium_name and "." in medium_name:
        variants.add(" ".join(_clean_parts(medium_name.split(".")[0])))
    return {v for v in variants if v} | {v.replace(" ", "") for v in variants if v}


def _is_site_part(part: str, sites: set[str]) -> bool:
    return part in sites or part.replace(" ", "") in sites


def _core_parts(parts: list[str], sites: set[str]) -> list[str]:
    """A title's parts without a leading section word (title parts) and leading/trailing site-name parts."""
    core = list(parts)
    if len(core) > 1 and core[0] in TITLE_PREFIX_WORDS:
        core = core[1:]
    while len(core) > 1 and _is_site_part(core[0], sites):
        core = core[1:]
    while len(core) > 1 and _is_site_part(core[-1], sites):
        core = core[:-1]
    return core


def normalized_title(title: str, medium_name: str | None = None) -> str:
    """Dedup key of a story title (Media Cloud's title key with the rules of its title parts).

    1. Tags stripped, entities decoded, casefolded; "- ", "–/— ", ":" and "|" separate title parts;
       Unicode punctuation and symbols removed; whitespace collapsed; at most 1023 characters.
    2. A leading section word ("Opinion |", "Analysis:", the title parts' list) and leading or trailing parts
       that are the medium's name (full, without "The", initials: " - NYT", "Washington Post: ") are dropped,
       unless nothing would remain.
    3. If the longest remaining part has >= 32 characters and is not the medium's name, it is the key
       (the title key); otherwise the remaining parts joined are.
    4. A key of fewer than 3 words ("home", "live updates") is too generic: the whole title is the key.
    """
    if not isinstance(title, str):
        raise TypeError(f"title must be str, got {type(title).__name__}")
    parts = _clean_parts(title)
    if not parts:
        return ""
    whole = " ".join(parts)[:MAX_TITLE_CHARS].strip()
    sites = _site_name_variants(medium_name)
    core = _core_parts(parts, sites)
    longest = max(core, key=len)
    if len(core) > 1 and len(longest) >= MIN_LONGEST_PART_CHARS and not _is_site_part(longest, sites):
        key = longest
    else:
        key = " ".join(core)
    if _is_site_part(key, sites) or len(key.split()) < MIN_KEY_WORDS:
        return whole
    return key[:MAX_TITLE_CHARS].strip()


def _title_word_count(title: str) -> int:
    return sum(len(part.split()) for part in _clean_parts(title))


def _is_titled(title: object) -> bool:
    return isinstance(title, str) and title.strip() != "" and title.strip().casefold() != NO_TITLE


def _title_matchable(title: object, url: object) -> bool:
    """May this story be matched by title? Not without a real title, nor when it looks like a home page
    (title parts: a full title of < 5 words, or a URL with an empty or "/" path)."""
    return (
        _is_titled(title)
        and _title_word_count(title) > HOMEPAGE_MAX_TITLE_WORDS  # type: ignore[arg-type]
        and not _is_homepage(url)
    )


# ---------------------------------------------------------------------------------------------------
# Story dedup


def _lossy(url: object) -> str | None:
    from topicmap.web.urls import normalize_url_lossy

    if not isinstance(url, str) or not url.strip():
        return None
    return normalize_url_lossy(url)


def _is_homepage(url: object) -> bool:
    """The title parts' home-page test: the URL path is empty or "/" (front pages change title and text
    daily)."""
    if not isinstance(url, str) or not url.strip():
        return False
    try:
        return urlsplit(url.strip()).path in ("", "/")
    except ValueError:
        return False


class _UnionFind:
    def __init__(self, n: int) -> None:
        self.parent = np.arange(n)

    def find(self, x: int) -> int:
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return int(root)

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


REQUIRED_STORY_COLUMNS = ("stories_id", "media_id", "url", "title", "publish_date")


def _check_columns(frame: pd.DataFrame, required: Iterable[str], what: str) -> None:
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"{what} must be a pandas DataFrame, got {type(frame).__name__}")
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise ValueError(f"{what} is missing columns: {', '.join(missing)}")


def _publish_dates(values: pd.Series) -> pd.Series:
    """Publish dates as UTC timestamps (naive values are taken as UTC); unparseable -> NaT."""
    return pd.to_datetime(values, errors="coerce", utc=True, format="mixed")


def _publish_days(frame: pd.DataFrame, publish: pd.Series) -> pd.Series:
    """The publisher's calendar day of each story: the UTC time moved by the page's own UTC offset
    (``publish_utc_offset`` minutes, when known), so 23:30+09:00 is that day in Tokyo, not the day before."""
    local = publish
    if "publish_utc_offset" in frame.columns:
        offsets = pd.to_numeric(frame["publish_utc_offset"], errors="coerce").fillna(0).to_numpy()
        local = publish + pd.to_timedelta(offsets, unit="min")
    return local.dt.floor("D")


def _text_amount(stories: pd.DataFrame) -> pd.Series:
    """How much text a story has: sentence_count, else text_length, else length of `text`, else 0."""
    for column in ("sentence_count", "text_length"):
        if column in stories.columns:
            return pd.to_numeric(stories[column], errors="coerce").fillna(0)
    if "text" in stories.columns:
        return stories["text"].map(lambda t: len(t) if isinstance(t, str) else 0)
    return pd.Series(0, index=stories.index)


def survivor_order(stories: pd.DataFrame) -> pd.DataFrame:
    """``stories`` sorted best survivor first: most text, then earliest publish date, then lowest id.

    Why: Media Cloud keeps the story with the most sentences (its text is the most complete); among
    equals the earliest published is the original, and the lowest id the first one collected.
    """
    ranked = stories.assign(
        _text=_text_amount(stories).to_numpy(),
        _date=_publish_dates(stories["publish_date"]).to_numpy(),
    )
    ranked = ranked.sort_values(
        ["_text", "_date", "stories_id"], ascending=[False, True, True], na_position="last"
    )
    return ranked.drop(columns=["_text", "_date"])


def find_duplicate_stories(stories: pd.DataFrame) -> pd.DataFrame:
    """Stories to merge within each medium: rows (stories_id, keep_stories_id, reason).

    Input columns: stories_id, media_id, url, title, publish_date; optional guid, medium_name (for the
    title's site-name rules), sentence_count or text_length (for the survivor). Two stories of the SAME
    medium are one story if either

    - their normalized titles are equal and they were published the same day (the publisher's day when
      ``publish_utc_offset`` minutes are given, else the UTC day). Never for empty or
      "(no title)" titles, undated stories, titles of < 5 words or URLs with an empty or "/" path (title
      parts: likely a home page), nor for a title that the medium used for >= 26 stories over >= 7 days (a
      recurring title like "Letters to the editor", title parts);
    - or, on the same day, one's title is a single part of >= 4 words once the site name and section word
      are dropped, and the other's title has that part among its parts (the title parts' solo rule: "Nunes
      Releases FISA Memo" and "Washington Post: Nunes Releases FISA Memo");
    - or their lossy-normalized URL (or guid) is equal, in a group of at most 5 stories (title parts; a
      larger group means the normalization collapsed different pages).

    Groups are transitive (A~B by title, B~C by URL: one group). The survivor of a group is the story
    with the most text, then the earliest publish date, then the lowest stories_id. Reason is "same lossy
    url" when the merged story has a URL match in its group, else "same title and day".
    """
    _check_columns(stories, REQUIRED_STORY_COLUMNS, "stories")
    empty = pd.DataFrame(
        {
            "stories_id": pd.Series(dtype="int64"),
            "keep_stories_id": pd.Series(dtype="int64"),
            "reason": pd.Series(dtype="object"),
        }
    )
    if stories.empty:
        return empty
    if stories["stories_id"].duplicated().any():
        dup = stories.loc[stories["stories_id"].duplicated(), "stories_id"].tolist()[:5]
        raise ValueError(f"stories has repeated stories_id: {dup}")
    frame = stories.reset_index(drop=True)
    n = len(frame)
    medium_names = frame["medium_name"] if "medium_name" in frame.columns else pd.Series([None] * n)
    publish = _publish_dates(frame["publish_date"])
    union = _UnionFind(n)
    via_url = np.zeros(n, dtype=bool)

    # Same lossy URL (or guid) within a medium.
    url_keys: dict[tuple[Hashable, str], list[int]] = {}
    url_columns = ["url", "guid"] if "guid" in frame.columns else ["url"]
    for row, (media_id, *urls) in enumerate(frame[["media_id", *url_columns]].itertuples(index=False)):
        for key in {k for k in (_lossy(u) for u in urls) if k}:
            url_keys.setdefault((media_id, key), []).append(row)
    for members in url_keys.values():
        if 2 <= len(set(members)) <= URL_GROUP_MAX_STORIES:
            for other in members[1:]:
                union.union(members[0], other)
            via_url[members] = True

    # Same normalized title and publish day within a medium.
    title_rows: dict[tuple[Hashable, str], list[int]] = {}
    for row in range(n):
        title = frame.at[row, "title"]
        if pd.isna(publish.iloc[row]) or not _title_matchable(title, frame.at[row, "url"]):
            continue
        name = medium_names.iloc[row]
        key = normalized_title(title, name if isinstance(name, str) else None)
        if key:
            title_rows.setdefault((frame.at[row, "media_id"], key), []).append(row)
    all_days = _publish_days(frame, publish)
    for members in title_rows.values():
        if len(members) < 2:
            continue
        days = all_days.iloc[members]
        span_days = (days.max() - days.min()).days
        if len(members) >= TITLE_GROUP_MAX_STORIES and span_days >= TITLE_GROUP_MAX_SPAN_DAYS:
            continue  # a recurring title: refused as too broad
        by_day: dict[pd.Timestamp, list[int]] = {}
        for row, day in zip(members, days, strict=True):
            by_day.setdefault(day, []).append(row)
        for same_day in by_day.values():
            if len(same_day) > 1:
                for other in same_day[1:]:
                    union.union(same_day[0], other)

    _union_by_title_parts(frame, medium_names, publish, all_days, union)

    roots = np.array([union.find(i) for i in range(n)])
    sizes = np.bincount(roots, minlength=n)
    grouped = frame.assign(_root=roots)[sizes[roots] > 1]
    if grouped.empty:
        return empty
    ranked = survivor_order(grouped)
    keep = ranked.groupby("_root", sort=False)["stories_id"].first()
    merged = ranked[~ranked["stories_id"].isin(keep.to_numpy())]
    reasons = np.where(via_url[merged.index.to_numpy()], REASON_URL, REASON_TITLE)
    result = pd.DataFrame(
        {
            "stories_id": merged["stories_id"].astype("int64").to_numpy(),
            "keep_stories_id": keep.loc[merged["_root"]].astype("int64").to_numpy(),
            "reason": reasons,
        }
    )
    return result.sort_values(["keep_stories_id", "stories_id"], ignore_index=True)


def _union_by_title_parts(
    frame: pd.DataFrame,
    medium_names: pd.Series,
    publish: pd.Series,
    days: pd.Series,
    union: _UnionFind,
) -> None:
    """The title parts' solo rule, per medium and day: a story whose title, site name and section word
    dropped, is a single part of >= 4 words ("Nunes Releases FISA Memo") absorbs the stories of its medium
    and day that carry that part among others ("Washington Post: Nunes Releases FISA Memo", "Nunes Releases
    FISA Memo - The Washington Post"). Site parts are the medium's name and the parts its titles repeat at an
    edge on several days. Media Cloud compared the parts across the whole topic; here within a day, as Media
    Cloud's later title key does, so a recurring headline is not one story."""
    parts_of: dict[int, list[str]] = {}
    edge_stories: dict[tuple[Hashable, str], set[int]] = {}
    for row in range(len(frame)):
        title, url = frame.at[row, "title"], frame.at[row, "url"]
        if pd.isna(publish.iloc[row]) or not _is_titled(title) or _is_homepage(url) or _is_twitter(url):
            continue
        parts = _clean_parts(title)  # type: ignore[arg-type]
        if not parts:
            continue
        parts_of[row] = parts
        if len(parts) > 1:
            media_id = frame.at[row, "media_id"]
            for part in {parts[0], parts[-1]}:
                edge_stories.setdefault((media_id, part), set()).add(row)
    counted_sites: dict[Hashable, set[str]] = {}
    for (media_id, part), rows in edge_stories.items():
        if len(rows) >= SITE_PART_MIN_STORIES and len({days.iloc[r] for r in rows}) >= SITE_PART_MIN_DAYS:
            counted_sites.setdefault(media_id, set()).update({part, part.replace(" ", "")})

    solo: dict[tuple[Hashable, pd.Timestamp, str], list[int]] = {}
    carriers: dict[tuple[Hashable, pd.Timestamp, str], list[int]] = {}
    for row, parts in parts_of.items():
        media_id = frame.at[row, "media_id"]
        name = medium_names.iloc[row]
        sites = _site_name_variants(name if isinstance(name, str) else None) | counted_sites.get(
            media_id, set()
        )
        core = _core_parts(parts, sites)
        day = days.iloc[row]
        if len(core) == 1 and len(core[0].split()) >= MIN_SOLO_PART_WORDS:
            solo.setdefault((media_id, day, core[0]), []).append(row)
        for part in set(core):
            carriers.setdefault((media_id, day, part), []).append(row)
    # The title parts' guard against recurring titles ("Letters to the editor"): a part carried by >= 26
    # stories of a medium spanning >= 7 days is refused, even where two of them share a day.
    across_days: dict[tuple[Hashable, str], set[int]] = {}
    for (media_id, _day, part), rows in carriers.items():
        across_days.setdefault((media_id, part), set()).update(rows)
    for key, solo_rows in solo.items():
        members = set(solo_rows) | set(carriers.get(key, ()))
        if len(members) < 2:
            continue
        everywhere = across_days[(key[0], key[2])]
        if len(everywhere) >= TITLE_GROUP_MAX_STORIES:
            span = max(days.iloc[r] for r in everywhere) - min(days.iloc[r] for r in everywhere)
            if span.days >= TITLE_GROUP_MAX_SPAN_DAYS:
                continue
        first, *others = sorted(members)
        for other in others:
            union.union(first, other)


def _is_twitter(url: object) -> bool:
    """Title parts: a tweet's title is its text; retweets must stay separate stories."""
    return (
        isinstance(url, str) and re.match(r"^https?://(?:www\.|mobile\.)?twitter\.com", url, re.I) is not None
    )


# ---------------------------------------------------------------------------------------------------
# Media dedup


def plan_media_merges(stories: pd.DataFrame, dup_media_id: Mapping[int, int | None]) -> pd.DataFrame:
    """Where each story of a duplicate medium goes (Media Cloud's ``merge_dup_media_stories``).

    ``stories``: the topic's stories in duplicate media AND the candidate stories of their final media
    (columns stories_id, media_id, url, title, publish_date; optional guid, medium_name, sentence_count /
    text_length). Each story whose medium has a dup_media_id is matched, in its final medium, to a story
    with the same URL or guid (either way round, also after lossy normalization) or else the same
    normalized title and publish day (with the same title guards as ``find_duplicate_stories``: no
    "(no title)", no likely home pages); the best match (survivor rule of
    ``survivor_order``) is kept. Without a match the story is moved to the final medium.

    Returns rows: stories_id, media_id, final_media_id, action ("merge" or "move"), keep_stories_id
    (the matched story for "merge", else <NA>), match ("url", "title and day" or "").
    """
    _check_columns(stories, REQUIRED_STORY_COLUMNS, "stories")
    final = resolve_dup_media(dup_media_id)
    frame = stories.reset_index(drop=True)
    media = frame["media_id"].tolist()
    final_of = [final.get(m, m) for m in media]
    in_dup = [f != m for m, f in zip(media, final_of, strict=True)]
    url_columns = ["url", "guid"] if "guid" in frame.columns else ["url"]
    names = frame["medium_name"] if "medium_name" in frame.columns else pd.Series([None] * len(frame))
    publish = _publish_dates(frame["publish_date"])
    days = _publish_days(frame, publish)

    def url_keys(row: int) -> set[str]:
        keys: set[str] = set()
        for column in url_columns:
            value = frame.at[row, column]
            if isinstance(value, str) and value.strip():
                keys.add(value.strip())
                lossy = _lossy(value)
                if lossy:
                    keys.add(lossy)
        return keys

    def title_key(row: int) -> tuple[str, pd.Timestamp] | None:
        title = frame.at[row, "title"]
        if pd.isna(publish.iloc[row]) or not _title_matchable(title, frame.at[row, "url"]):
            return None
        name = names.iloc[row]
        return normalized_title(title, name if isinstance(name, str) else None), days.iloc[row]

    # Index the stories that live in final media (not themselves in a duplicate medium).
    by_url: dict[tuple[Hashable, str], list[int]] = {}
    by_title: dict[tuple[Hashable, str, pd.Timestamp], list[int]] = {}
    for row in range(len(frame)):
        if in_dup[row]:
            continue
        for key in url_keys(row):
            by_url.setdefault((media[row], key), []).append(row)
        tkey = title_key(row)
        if tkey and tkey[0]:
            by_title.setdefault((media[row], *tkey), []).append(row)

    rank = {row: position for position, row in enumerate(survivor_order(frame).index)}
    records = []
    for row in range(len(frame)):
        if not in_dup[row]:
            continue
        target_medium = final_of[row]
        matches = sorted(
            {r for key in url_keys(row) for r in by_url.get((target_medium, key), [])}, key=rank.get
        )
        match = "url"
        if not matches:
            tkey = title_key(row)
            matches = (
                sorted(by_title.get((target_medium, *tkey), []), key=rank.get) if tkey and tkey[0] else []
            )
            match = "title and day"
        records.append(
            {
                "stories_id": int(frame.at[row, "stories_id"]),
                "media_id": media[row],
                "final_media_id": target_medium,
                "action": "merge" if matches else "move",
                "keep_stories_id": int(frame.at[matches[0], "stories_id"]) if matches else pd.NA,
                "match": match if matches else "",
            }
        )
    columns = ["stories_id", "media_id", "final_media_id", "action", "keep_stories_id", "match"]
    result = pd.DataFrame.from_records(records, columns=columns)
    result["keep_stories_id"] = result["keep_stories_id"].astype("Int64")
    return result


# ---------------------------------------------------------------------------------------------------
# Applying merges


def remap_links(
    links: pd.DataFrame, merge_map: Mapping[int, int], key_columns: Iterable[str] | None = None
) -> pd.DataFrame:
    """Topic links with merged story ids re-pointed to their survivors (Media Cloud's ``_merge_dup_story``).

    Both ``stories_id`` (source) and ``ref_stories_id`` (target, may be missing for unresolved links) go
    through the merge map (chains followed). Links that became self-loops only because of a merge (a story
    linking to its own duplicate) are dropped, as are rows that became duplicates of another on
    ``key_columns`` (default: stories_id and url when there is a url column, as in the topic_links unique
    key; else stories_id and ref_stories_id). The first row of each duplicate set is kept, so every
    distinct (source, target) link survives: nothing between different stories is lost.
    """
    _check_columns(links, ("stories_id", "ref_stories_id"), "links")
    final = resolve_merge_map(merge_map)
    out = links.copy()
    source_before, ref_before = out["stories_id"], out["ref_stories_id"]
    source_after = source_before.map(lambda s: final.get(s, s))
    ref_after = ref_before.map(lambda r: r if _is_missing(r) else final.get(r, r))
    was_loop = ref_before.notna() & (source_before == ref_before)
    is_loop = ref_after.notna() & (source_after == ref_after)
    out["stories_id"] = source_after.astype(links["stories_id"].dtype)
    out["ref_stories_id"] = ref_after.astype(links["ref_stories_id"].dtype)
    out = out[~(is_loop & ~was_loop)]
    if key_columns is None:
        key_columns = ["stories_id", "url"] if "url" in out.columns else ["stories_id", "ref_stories_id"]
    out = out.drop_duplicates(subset=list(key_columns), keep="first")
    return out.reset_index(drop=True)


def merged_iteration(iterations: Mapping[int, int], merge_map: Mapping[int, int]) -> dict[int, int]:
    """Iteration of every surviving story: the smallest among itself and the stories merged into it.

    ``iterations`` maps topic stories_id -> iteration; merged stories are absent from the result, and a
    survivor that was not yet a topic story gets the smallest iteration of the stories merged into it.
    """
    final = resolve_merge_map(merge_map)
    result: dict[int, int] = {}
    for story, iteration in iterations.items():
        target = final.get(story, story)
        result[target] = min(iteration, result.get(target, iteration))
    return result
