"""Post dumps, read within bounds: one reader per platform, each yielding ``Post`` or ``RowError`` (with its line).

* ``generic_post``: Media Cloud's generic-post CSV. Required columns ``content``, ``author``, ``publish_date``;
  optional ``channel`` (missing or empty: the author, Media Cloud's default), ``post_id`` and ``url`` (the post's
  own address). A row without ``post_id`` gets an id derived from its author, date and content, so reading the
  file again finds the same post (Media Cloud drew a random one, which made a second import a second copy).
  Read like a CSV drop (``topicmap.archive.drop_csv``): exact lines, invalid UTF-8 rejected, rows bounded.
* ``reddit``: Pushshift NDJSON, one submission or comment per line: ``id``, ``author``, ``created_utc`` (seconds),
  ``subreddit`` (the channel); a submission's content is its ``title`` and ``selftext`` (Media Cloud's), a
  comment's its ``body``, HTML entities decoded (Reddit sends ``&amp;``). A link submission shares its ``url``.
  A comment's id is its fullname ``t1_<id>``, so it never clashes with a submission's.
* ``twitter``: Twitter API v2 tweet objects, one per line, or response pages (``{"data": [...], "includes":
  ...}``) as collectors write them: ``id``, ``text``, ``created_at``, ``author_id`` (the author is the username
  when the line gives it, in twarc's ``author`` or in ``includes.users``). The URLs shared are those of
  ``entities.urls`` (``unwound_url``, else ``expanded_url``, else the t.co ``url``), of its ``note_tweet`` and of
  the tweets it quotes or retweets when the line holds them (Media Cloud took the retweeted and quoted tweets'
  too); without ``entities.urls``, the URLs written in the text.

The URLs found in a generic post's or a Reddit post's text are its clear-text URLs (``topicmap.web.links``).
Links to the platform itself (reddit.com, redd.it; twitter.com, x.com: a thread, an image, a quoted tweet) are
not shared URLs (Media Cloud dropped twitter.com's). Shorteners stay: the spider follows them as any seed's.

Bounds are the archive drops' (``ReadLimits``): a line (a CSV row) over ``max_row_bytes`` is reported and
skipped (in NDJSON without being read whole), and reading stops at ``max_file_bytes``, the lines before it kept
(a CSV file over it is not read: its rows may span lines).
"""

from __future__ import annotations

import hashlib
import html
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from topicmap.archive.drop_csv import read_csv_rows
from topicmap.archive.drop_rows import ArchiveFileError, RowError, parse_publish_date, url_problem
from topicmap.archive.warc import ReadLimits
from topicmap.web.links import text_urls

GENERIC_POST_REQUIRED = ("content", "author", "publish_date")
GENERIC_POST_COLUMNS = (*GENERIC_POST_REQUIRED, "channel", "post_id", "url")
#: what the store keeps of a post's author, channel and id, in characters (longer is a bad row, never cut)
MAX_POST_FIELD_CHARS = 1024  # topic_posts' VARCHAR(1024)
NDJSON_ENDINGS = (".jsonl", ".ndjson", ".json")
#: hosts of each platform (and their subdomains) whose links are the platform's own, not shared URLs
PLATFORM_HOSTS = {"reddit": ("reddit.com", "redd.it"), "twitter": ("twitter.com", "x.com")}
_SKIP_CHUNK = 1 << 20
# a JSON "\ud800" escape decodes to a lone surrogate, which no database encoding can hold
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class Post:
    """One post as read: what ``topic_posts`` keeps, and the URLs it shares."""

    post_id: str
    content: str
    publish_date: datetime
    author: str
    channel: str
    url: str | None
    data: dict
    line: int
    shared_urls: tuple[str, ...] = ()
    #: URLs found that cannot be seeds (not http, longer than the store's URLs)
    refused_urls: int = 0

    @property
    def data_json(self) -> str:
        """The record as read, as JSON (escaped to ASCII: any text it holds can be stored)."""
        return json.dumps(self.data, sort_keys=True)


def _shared(candidates: Iterable[str | None], platform: str) -> tuple[tuple[str, ...], int]:
    """The distinct shared URLs, in order, without the platform's own links; and how many were refused."""
    own = PLATFORM_HOSTS.get(platform, ())
    urls: list[str] = []
    refused = 0
    for url in candidates:
        if not url or url in urls:
            continue
        if url_problem(url):
            refused += 1
            continue
        host = (urlsplit(url).hostname or "").lower()
        if any(host == name or host.endswith("." + name) for name in own):
            continue
        urls.append(url)
    return tuple(urls), refused


def _checked_text(record: dict, name: str, *, required: bool = True, limit: int | None = None) -> str:
    value = record.get(name)
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if value is None or value == "":
        if required:
            raise ValueError(f"{name} is missing or empty")
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{name} is a {type(value).__name__}, not text")
    if "\x00" in value:
        raise ValueError(f"{name} holds a NUL character; the row is rejected rather than stored without it")
    if _SURROGATE.search(value):
        raise ValueError(f"{name} holds an unpaired surrogate (\\ud800-\\udfff), which is not text")
    if limit is not None and len(value) > limit:
        raise ValueError(f"{name} is {len(value):,} characters long, more than the store's {limit:,}")
    return value


def _post(platform: str, line: int, data: dict, candidates: Iterable[str | None], **fields: Any) -> Post:
    for name in ("post_id", "author", "channel"):
        _checked_text(fields, name, limit=MAX_POST_FIELD_CHARS)
    shared, refused = _shared(candidates, platform)
    return Post(line=line, data=data, shared_urls=shared, refused_urls=refused, **fields)


# ---------------------------------------------------------------------------------------------- generic posts


def _iso_date(value: str) -> datetime:
    try:
        parsed = parse_publish_date(value)
    except ValueError:
        parsed = None
    if parsed is None:
        raise ValueError(f"publish_date {value[:80]!r} is not a date like 2026-01-31 or 2026-01-31T12:00:00Z")
    return parsed


def generic_posts(path: Path, limits: ReadLimits) -> Iterator[Post | RowError]:
    size = path.stat().st_size
    if size > limits.max_file_bytes:
        raise ArchiveFileError(
            f"{path}: {size:,} bytes, more than the max_file_bytes read limit ({limits.max_file_bytes:,}): not read"
        )
    rows = read_csv_rows(
        path,
        required=GENERIC_POST_REQUIRED,
        expected=GENERIC_POST_COLUMNS,
        max_row_chars=limits.max_row_bytes,
    )
    for row in rows:
        if isinstance(row, RowError):
            yield row
            continue
        values = row.values
        try:
            content = _checked_text(values, "content", required=False)
            author = _checked_text(values, "author").strip()
            published = _checked_text(values, "publish_date")
            post_id = _checked_text(values, "post_id", required=False).strip()
            if not post_id:  # derived from the row, so that the same row is the same post at every reading
                key = "\n".join((author, published, content)).encode()
                post_id = "sha256:" + hashlib.sha256(key).hexdigest()[:32]
            yield _post(
                "generic_post",
                row.line,
                values,
                text_urls(content),
                post_id=post_id,
                content=content,
                publish_date=_iso_date(published),
                author=author,
                channel=_checked_text(values, "channel", required=False).strip() or author,
                url=_checked_text(values, "url", required=False).strip() or None,
            )
        except ValueError as exc:
            yield RowError(str(path), row.line, str(exc), row.end_line)


# ---------------------------------------------------------------------------------------------- NDJSON


def json_lines(path: Path, limits: ReadLimits) -> Iterator[tuple[int, dict] | RowError]:
    """(line number, object) for each line of an NDJSON file, or a RowError for a line that is not one (blank
    lines are skipped). A line over ``max_row_bytes`` is skipped without being read whole; past
    ``max_file_bytes`` an ArchiveFileError stops the file."""
    total = 0
    with path.open("rb") as handle:
        number = 0
        while True:
            raw = handle.readline(limits.max_row_bytes + 1)
            if not raw:
                return
            number += 1
            total += len(raw)
            if len(raw) > limits.max_row_bytes and not raw.endswith(b"\n"):
                while raw and not raw.endswith(b"\n") and total <= limits.max_file_bytes:
                    raw = handle.readline(_SKIP_CHUNK)
                    total += len(raw)
                if total <= limits.max_file_bytes:
                    yield RowError(
                        str(path),
                        number,
                        f"the line is longer than {limits.max_row_bytes:,} bytes (the "
                        "max_row_bytes read limit): skipped unread",
                    )
                    continue
            if total > limits.max_file_bytes:
                raise ArchiveFileError(
                    f"{path}:{number}: the file is longer than {limits.max_file_bytes:,} bytes (the "
                    "max_file_bytes read limit); reading stopped here: the lines before it were read"
                )
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                yield RowError(str(path), number, f"invalid UTF-8 at byte {exc.start + 1} of the line")
                continue
            except json.JSONDecodeError as exc:
                yield RowError(str(path), number, f"not JSON: {exc.msg} at column {exc.colno}")
                continue
            except RecursionError:
                yield RowError(str(path), number, "the JSON is nested too deep to read")
                continue
            if not isinstance(record, dict):
                yield RowError(str(path), number, f"expected a JSON object, got a {type(record).__name__}")
                continue
            yield number, record


def _records(
    path: Path, limits: ReadLimits, parse: Callable[[dict, int], Iterator[Post | RowError]]
) -> Iterator[Post | RowError]:
    for item in json_lines(path, limits):
        if isinstance(item, RowError):
            yield item
            continue
        number, record = item
        try:
            yield from parse(record, number)
        except ValueError as exc:
            yield RowError(str(path), number, str(exc))


def _epoch(value: Any) -> datetime:
    if isinstance(value, str) and value.strip().replace(".", "", 1).isdigit():
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"created_utc {value!r} is not a time in seconds since 1970")
    try:
        return datetime.fromtimestamp(value, UTC)
    except (OverflowError, OSError, ValueError):
        raise ValueError(f"created_utc {value!r} is out of range") from None


def _reddit_text(record: dict, name: str, required: bool = False) -> str:
    return html.unescape(_checked_text(record, name, required=required))


def reddit_posts(path: Path, limits: ReadLimits) -> Iterator[Post | RowError]:
    def parse(record: dict, line: int) -> Iterator[Post]:
        post_id = _checked_text(record, "id")
        permalink = record.get("permalink")
        own_url = (
            f"https://www.reddit.com{permalink}"
            if isinstance(permalink, str) and permalink[:1] == "/"
            else None
        )
        candidates: list[str | None] = []
        if "title" in record:  # a submission
            title, selftext = _reddit_text(record, "title", True), _reddit_text(record, "selftext")
            content = f"{title} {selftext}" if selftext else title
            if not record.get("is_self"):
                candidates.append(_reddit_text(record, "url") or None)
        elif "body" in record:  # a comment
            content = _reddit_text(record, "body")
            post_id = f"t1_{post_id}"
        else:
            raise ValueError("neither a submission (title) nor a comment (body)")
        candidates += text_urls(content)
        yield _post(
            "reddit",
            line,
            record,
            candidates,
            post_id=post_id,
            content=content,
            publish_date=_epoch(record.get("created_utc")),
            author=_checked_text(record, "author"),
            channel=_checked_text(record, "subreddit"),
            url=own_url,
        )

    return _records(path, limits, parse)


# ---------------------------------------------------------------------------------------------- tweets


def _entity_urls(tweet: dict) -> list[str | None] | None:
    """The URLs of a tweet's ``entities.urls`` (and its note_tweet's), or None when it has none listed."""
    found: list[str | None] | None = None
    for holder in (tweet, tweet.get("note_tweet")):
        entities = holder.get("entities") if isinstance(holder, dict) else None
        urls = entities.get("urls") if isinstance(entities, dict) else None
        if isinstance(urls, list):
            found = found or []
            for entry in urls:
                if isinstance(entry, dict):
                    best = entry.get("unwound_url") or entry.get("expanded_url") or entry.get("url")
                    found.append(best if isinstance(best, str) else None)
    return found


def _tweet(item: Any, line: int, users: dict[str, str], included: dict[str, dict]) -> Post:
    if not isinstance(item, dict):
        raise ValueError(f"a tweet is a JSON object, got a {type(item).__name__}")
    tweet_id = _checked_text(item, "id")
    text = _checked_text(item, "text", required=False)
    note = item.get("note_tweet")
    if isinstance(note, dict) and isinstance(note.get("text"), str):
        text = _checked_text(note, "text", required=False)  # the whole of a long tweet
    created = _checked_text(item, "created_at")
    author_id = _checked_text(item, "author_id")
    embedded_author = item.get("author")
    username = embedded_author.get("username") if isinstance(embedded_author, dict) else None
    username = username if isinstance(username, str) and username else users.get(author_id)
    urls = _entity_urls(item)
    candidates = list(text_urls(text) if urls is None else urls)
    for ref in item.get("referenced_tweets") or []:  # retweeted and quoted tweets, when the line holds them
        if isinstance(ref, dict):
            referenced = ref if "text" in ref else included.get(str(ref.get("id")), {})
            candidates += _entity_urls(referenced) or []
    author = username or author_id
    return _post(
        "twitter",
        line,
        item,
        candidates,
        post_id=tweet_id,
        content=text,
        publish_date=_iso_date(created),
        author=author,
        channel=author,  # tweets have no channel: Media Cloud's author
        url=f"https://twitter.com/{username or 'i/web'}/status/{tweet_id}",
    )


def tweets(path: Path, limits: ReadLimits) -> Iterator[Post | RowError]:
    def parse(record: dict, line: int) -> Iterator[Post | RowError]:
        data = record.get("data")
        if "id" in record or not isinstance(data, list | dict):
            yield _tweet(record, line, {}, {})
            return
        includes = record.get("includes") if isinstance(record.get("includes"), dict) else {}
        users = {
            str(user.get("id")): user["username"]
            for user in includes.get("users") or []
            if isinstance(user, dict) and isinstance(user.get("username"), str)
        }
        included = {str(t.get("id")): t for t in includes.get("tweets") or [] if isinstance(t, dict)}
        for index, item in enumerate(data if isinstance(data, list) else [data]):
            try:
                yield _tweet(item, line, users, included)
            except ValueError as exc:
                yield RowError(str(path), line, f"tweet {index + 1} of the line's data: {exc}")

    return _records(path, limits, parse)


@dataclass(frozen=True)
class PostFormat:
    """How one platform's dumps are read: the file endings of a folder's files, Media Cloud's ``source`` name
    for them (``topic_seed_queries.source``) and the reader."""

    source: str
    endings: tuple[str, ...]
    read: Callable[[Path, ReadLimits], Iterator[Post | RowError]]


POST_FORMATS: dict[str, PostFormat] = {
    "generic_post": PostFormat("csv", (".csv",), generic_posts),
    "reddit": PostFormat("pushshift", NDJSON_ENDINGS, reddit_posts),
    "twitter": PostFormat("twitter_api_v2", NDJSON_ENDINGS, tweets),
}
