"""A snapshot's data dictionary: what every column of every file means, in the forms a researcher's tools read.

* ``describe(schema, table)``: the Arrow schema with each field's ``description`` (and ``unit``) in its field
  metadata, so the Parquet files carry their own column descriptions (``pq.read_schema(path).field(name)
  .metadata``).
* ``write_data_package(root, files)``: ``datapackage.json``, a Frictionless Data Package (the Data Package and
  Table Schema standards of frictionlessdata.io): one resource per data file with its format, its Table Schema
  (types, descriptions, units, primary key) kept once per table under ``schemas/<table>.json``; and
  ``README.md``, the same dictionary for a person.

Nothing here carries a time of writing: the same snapshot gives the same bytes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

#: (description, unit or None) of a column, by name, wherever it appears; TABLE_COLUMNS overrides per table
COLUMNS: dict[str, tuple[str, str | None]] = {
    "focus": ("The focus (subtopic) key, '<focal set>/<focus>'; empty for the whole topic.", None),
    "timespan": ("The timespan key (overall, monthly_YYYY-MM-DD, weekly_YYYY-MM-DD, custom_...).", None),
    "stories_id": ("The story's id in the topic store.", None),
    "source_stories_id": ("The linking story (published in the timespan).", None),
    "ref_stories_id": ("The story linked to.", None),
    "media_id": ("The medium's id (duplicate media merged into their final medium).", None),
    "source_media_id": ("The linking medium.", None),
    "ref_media_id": ("The medium linked to.", None),
    "link_count": ("Distinct story links from the source medium to the ref medium in the timespan.", "links"),
    "inlink_count": (
        "Distinct stories of the timespan linking to this story (or medium's stories).",
        "links",
    ),
    "outlink_count": ("Distinct stories of the topic this story (or medium's stories) links to.", "links"),
    "media_inlink_count": ("Distinct other media whose stories in the timespan link here.", "media"),
    "sum_media_inlink_count": ("Sum of the medium's stories' media_inlink_count.", "media"),
    "facebook_share_count": ("Facebook shares of the story's URL; empty where unknown.", "shares"),
    "bitly_clicks_3d": ("Bit.ly clicks in the 3 days after publication; empty where unknown.", "clicks"),
    "bitly_clicks_30d": ("Bit.ly clicks in the 30 days after publication; empty where unknown.", "clicks"),
    "post_count": (
        "Posts published in the timespan (the overall timespan: all) sharing the story's URL, after the topic's "
        "bot_policy; for a medium the sum over its stories. Empty when no such post shares it.",
        "posts",
    ),
    "author_count": (
        "Distinct authors of those posts; for a medium the sum over its stories. Empty when no post shares it.",
        "authors",
    ),
    "channel_count": (
        "Distinct channels (subreddits; the author for tweets and generic posts without one) of those posts; "
        "for a medium the sum over its stories. Empty when no post shares it.",
        "channels",
    ),
    "publish_date_utc": (
        "The instant of publication in UTC (ISO 8601 with Z); empty when undated.",
        None,
    ),
    "publish_day_local": (
        "The publisher's calendar day: publish_date_utc moved by the page's own UTC offset (an unknown offset "
        "counts as UTC). The day the timespans count; empty when undated.",
        None,
    ),
    "date_method": (
        "How the publication date was found (e.g. 'json-ld datePublished', 'meta article:published_time', "
        "'url', 'url (month)': the day is the 15th, 'htmldate search'); empty when undated or unknown "
        "(stories stored before the method was recorded).",
        None,
    ),
    "time_known": (
        "Did the page give a time of day with its date? false: a day only (publish_date_utc is then empty, "
        "publish_day_local is the day the page gives); empty when unknown (stories stored before this was "
        "recorded, or dated by an archive drop).",
        None,
    ),
    "zone_known": (
        "Did the page give a UTC offset (zone) with its time? false: a time without zone, read as UTC; empty "
        "when unknown.",
        None,
    ),
    "day_basis": (
        "Which day publish_day_local is: 'page offset' (the publisher's day, from the page's own UTC offset), "
        "'utc stated' (the page gave its time in UTC: the UTC day, which can be the publisher's next or "
        "previous day), 'utc assumed' (a time without zone, read as UTC), 'page day' (the page gave a day "
        "without a time: that day), 'unknown' (stored without this knowledge: the day in the page's offset if "
        "it had one, else the UTC day); empty when undated.",
        None,
    ),
    "language": ("The story's language (ISO 639-1) as extraction found it; empty when unknown.", None),
    "in_timespan": (
        "Why the story is in the timespan: 'published' (published in it), 'linked' (published outside it, in "
        "through a link from a story published in it) or 'undated'.",
        None,
    ),
    "title": ("The story's title.", None),
    "url": ("The story's URL.", None),
    "name": ("The medium's name.", None),
    "media_name": ("The story's medium's name.", None),
    "story_count": ("Stories of the medium in the timespan.", "stories"),
    "metric": (
        "The metric ranked: media_inlink_count, inlink_count, facebook_share_count, bitly_clicks_30d.",
        None,
    ),
    "rank": ("Rank, 1 first.", None),
    "value": ("The value of the ranked metric.", None),
    "day": ("The publisher's calendar day (see publish_day_local).", None),
    "word": (
        "A word of the stories' titles and texts, lower-cased (stop words of each story's language out).",
        None,
    ),
}

_MEDIUM_URL = ("The medium's URL (its home page).", None)
_STORY_COUNT = (
    "Media Cloud's timespan story count: the stories published in the timespan PLUS the stories they link to "
    "(published_story_count + linked_story_count + undated_story_count). Not the number published in it.",
    "stories",
)

#: per table: its title, and the columns whose meaning there differs from COLUMNS
TABLES: dict[str, tuple[str, dict[str, tuple[str, str | None]]]] = {
    "story_links": ("Story links of the timespan: links across media whose source was published in it.", {}),
    "story_link_counts": ("Every story of the timespan with its link counts and statistics.", {}),
    "medium_links": ("Links between media in the timespan (directed; media pairs, not stories).", {}),
    "medium_link_counts": ("Every medium of the timespan with its counts.", {"url": _MEDIUM_URL}),
    "stories": (
        "The stories of the timespan: id, URL, title, medium, dates and how sure they are, language, counts.",
        {},
    ),
    "media": ("The media of the timespan, Media Cloud's media list columns.", {"url": _MEDIUM_URL}),
    "timespans": (
        "Every timespan of the topic and of each focus (empty ones included).",
        {
            "key": ("The timespan key.", None),
            "period": ("overall, monthly, weekly or custom.", None),
            "name": ("The timespan's name.", None),
            "start_date": ("First day (inclusive).", None),
            "end_date": ("The day after the last day (EXCLUSIVE, as in Media Cloud); see last_date.", None),
            "last_date": ("Last day (inclusive).", None),
            "partial": (
                "True for a weekly or monthly timespan cut by the topic's first or last day (fewer days than its "
                "calendar week or month: compare its counts per day); false for whole ones, overall and custom.",
                None,
            ),
            "day_count": ("Days the timespan covers (start_date to last_date, both included).", "days"),
            "story_count": _STORY_COUNT,
            "story_link_count": (
                "Distinct story links (across media) whose source was published in it.",
                "links",
            ),
            "medium_count": ("Media with a story in the timespan.", "media"),
            "medium_link_count": (
                "Directed medium links (A->B and B->A count twice); the link map's media pairs count once.",
                "links",
            ),
            "syndicated_repeat_link_count": (
                "Links from a second copy of a syndicated story to the same story.",
                "links",
            ),
            "post_count": (
                "Distinct posts published in the timespan (after the bot_policy) sharing one of its stories.",
                "posts",
            ),
            "published_story_count": (
                "Stories published in the timespan (the publisher's day in it): the sum of stories_per_day.",
                "stories",
            ),
            "linked_story_count": (
                "Stories published outside the timespan, in it only through a link from one published in it.",
                "stories",
            ),
            "undated_story_count": (
                "Undated stories: all of them in the overall timespan, elsewhere only through a link.",
                "stories",
            ),
            "words_sampled": ("Stories whose words were counted for top_words (a sample).", "stories"),
        },
    ),
    "foci": (
        "One row per focus (subtopic).",
        {
            "focal_set": ("The focal set's name.", None),
            "name": ("The focus's name.", None),
            "kind": ("query or media_tags.", None),
            "definition": ("The focus's query or media tags.", None),
            "description": ("The focus's description.", None),
            "story_count": ("Stories of the topic in the focus.", "stories"),
        },
    ),
    "top_words": (
        "The top words of each timespan, ranked by the sampled stories using them.",
        {
            "count": ("Occurrences of the word in the sampled stories.", "occurrences"),
            "stories": ("Sampled stories using the word (the rank's order).", "stories"),
            "share": (
                "stories / words_sampled of the timespan (0-1): the share of the SAMPLE, not of all.",
                "ratio",
            ),
        },
    ),
    "stories_per_day": (
        "Stories published on each day of each timespan (zeros included), by the publisher's day. Together with "
        "timespans.linked_story_count and undated_story_count they account for story_count.",
        {"story_count": ("Stories published that day.", "stories")},
    ),
    "media_stories_per_day": (
        "Stories published per day and medium (days with stories only).",
        {"story_count": ("Stories of the medium published that day.", "stories")},
    ),
    "top_media": (
        "The top 20 media of each timespan by each metric (values above zero only).",
        {"url": _MEDIUM_URL},
    ),
    "top_stories": ("The top 20 stories of each timespan by each metric (values above zero only).", {}),
}

PRIMARY_KEYS: dict[str, list[str]] = {
    "story_links": ["source_stories_id", "ref_stories_id"],
    "story_link_counts": ["stories_id"],
    "medium_links": ["source_media_id", "ref_media_id"],
    "medium_link_counts": ["media_id"],
    "stories": ["stories_id"],
    "media": ["media_id"],
}


def column_entry(table: str, column: str) -> tuple[str, str | None]:
    """(description, unit) of a column of a table; KeyError names an undocumented one."""
    own = TABLES[table][1]
    if column in own:
        return own[column]
    if column in COLUMNS:
        return COLUMNS[column]
    raise KeyError(f"column {column!r} of table {table!r} has no description in the data dictionary")


def describe(schema: pa.Schema, table: str) -> pa.Schema:
    """``schema`` with every field's description (and unit) in its metadata."""
    fields = []
    for field in schema:
        description, unit = column_entry(table, field.name)
        meta = {"description": description, **({"unit": unit} if unit else {})}
        fields.append(field.with_metadata(meta))
    return pa.schema(fields)


#: columns written as text in CSV but typed in the standard's terms ("2019-11-19T00:05:00Z", "2019-11-18")
_NAMED_TYPES = {"publish_date_utc": "datetime", "publish_day_local": "date"}


def _field_type(name: str, arrow: pa.DataType) -> str:
    if name in _NAMED_TYPES:
        return _NAMED_TYPES[name]
    if pa.types.is_integer(arrow):
        return "integer"
    if pa.types.is_floating(arrow):
        return "number"
    if pa.types.is_boolean(arrow):
        return "boolean"
    if pa.types.is_date(arrow):
        return "date"
    if pa.types.is_timestamp(arrow):
        return "datetime"
    return "string"


def table_schema(schema: pa.Schema, table: str) -> dict[str, Any]:
    """The Table Schema of a table (fields with types, descriptions, units; the primary key)."""
    fields = []
    for field in schema:
        description, unit = column_entry(table, field.name)
        entry: dict[str, Any] = {
            "name": field.name,
            "type": _field_type(field.name, field.type),
            "description": description,
        }
        if unit:
            entry["unit"] = unit
        fields.append(entry)
    out: dict[str, Any] = {"fields": fields, "missingValues": [""]}
    if table in PRIMARY_KEYS:
        out["primaryKey"] = PRIMARY_KEYS[table]
    return out


def _resource_name(path: str) -> str:
    return re.sub(r"[^a-z0-9._/-]", "-", path.lower())


def write_data_package(
    root: Path,
    files: Iterable[tuple[str, str, pa.Schema]],
    title: str,
    notes: Iterable[str],
    write_text: Callable[[Path, str], Path],
) -> list[Path]:
    """``datapackage.json``, ``schemas/<table>.json`` and ``README.md`` in ``root`` for the data ``files``
    ((path relative to root, table, Arrow schema as written)); ``write_text(path, text)`` writes one file.
    Returns the paths written."""
    schemas: dict[str, dict[str, Any]] = {}
    resources = []
    for path, table, schema in sorted(files, key=lambda item: item[0]):
        described = table_schema(schema, table)
        known = schemas.setdefault(table, described)
        if known != described:
            # the same table with other columns (a CSV list beside its Parquet): its own schema file
            table = f"{table}.{path.rsplit('.', 1)[-1]}"
            known = schemas.setdefault(table, described)
        fmt = path.rsplit(".", 1)[-1]
        resources.append(
            {
                "name": _resource_name(path),
                "path": path,
                "format": fmt,
                "profile": "tabular-data-resource",
                "description": TABLES[table.split(".")[0]][0],
                "schema": f"schemas/{table}.json",
                **({"mediatype": "text/csv", "encoding": "utf-8"} if fmt == "csv" else {}),
            }
        )
    package = {
        "profile": "tabular-data-package",
        "name": _resource_name(title.replace(" ", "-")),
        "title": title,
        "description": " ".join(notes),
        "resources": resources,
    }
    written = [
        write_text(root / "schemas" / f"{table}.json", json.dumps(schema, indent=2, sort_keys=True) + "\n")
        for table, schema in sorted(schemas.items())
    ]
    written.append(
        write_text(root / "datapackage.json", json.dumps(package, indent=2, sort_keys=True) + "\n")
    )
    written.append(write_text(root / "README.md", readme(title, notes, schemas)))
    return written


def readme(title: str, notes: Iterable[str], schemas: Mapping[str, dict[str, Any]]) -> str:
    """The folder's README: what to read first, then every table's columns."""
    lines = [f"# {title}", ""]
    lines += [f"- {note}" for note in notes]
    lines += [
        "",
        "Every file is described in `datapackage.json` (a Frictionless Data Package: one resource per file,",
        "its Table Schema under `schemas/`); the Parquet files carry the same descriptions in their field",
        "metadata. `manifest.json` lists every file with its sha256.",
        "",
    ]
    for table, schema in sorted(schemas.items()):
        base = table.split(".")[0]
        lines += [
            f"## {table}",
            "",
            TABLES[base][0],
            "",
            "| column | type | unit | meaning |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| `{f['name']}` | {f['type']} | {f.get('unit', '')} | {f['description']} |"
            for f in schema["fields"]
        ]
        lines.append("")
    return "\n".join(lines)
