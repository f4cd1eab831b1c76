"""What every asset declares about itself (owners, code version), and small helpers that turn domain results into
Dagster metadata (tables, markdown, counts)."""

import base64
import io
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import dagster as dg

from topicmap import settings

#: the owner every asset shows until a deployment names its own (a placeholder team, not a real address)
DEFAULT_OWNER = "team:topicmap"


def asset_owners(environ: Mapping[str, str] | None = None) -> list[str]:
    """Who answers for the assets, shown and filterable in the UI's catalog: ``TOPICMAP_ASSET_OWNERS`` (comma
    separated, each ``team:<name>`` or an email address, as Dagster accepts them), else ``team:topicmap``."""
    setting = settings.ASSET_OWNERS.value(environ)
    owners = [owner.strip() for owner in setting.split(",") if owner.strip()] or [DEFAULT_OWNER]
    for owner in owners:
        if not (owner.startswith("team:") and len(owner) > len("team:")) and "@" not in owner:
            raise ValueError(
                f"{settings.ASSET_OWNERS.name}: {owner!r} is neither 'team:<name>' nor an email address"
            )
    return owners


OWNERS = asset_owners()

#: Each asset's code version, shown on its page. BUMP AN ASSET'S VERSION HERE WHEN ITS LOGIC CHANGES (what it
#: computes or writes, including the topicmap code it calls; not a refactor that gives the same result): Dagster
#: then shows its materializations, and those downstream of it, as stale because the code changed, until they are
#: materialized again. tests/test_asset_checks.py holds every asset of the code location to an entry here.
CODE_VERSIONS: dict[str, str] = {
    "archive_stories": "1",
    "cc_outlet_queue": "1",
    "cc_outlet_stories": "1",
    "ccnews_stories": "1",
    "seeds": "1",
    "fetched_links": "1",
    "relevant_stories": "1",
    "topic_links": "1",
    "deduped_media": "1",
    "deduped_stories": "1",
    "near_duplicates": "1",
    # 2: merged stories' URLs count towards their survivor; a stored figure never goes down
    "click_totals": "2",
    "story_statistics": "1",
    "clusters": "1",
    "cluster_weeks": "1",
    "media_tags": "1",
    # 2: foci, top words, stories per day, top media and stories, attention charts, maps coloured by tags
    # 3: its pictures served by the webserver, the asset page showing them and the top lists without a click
    "snapshots": "3",
    "story_warc_archive": "1",
}


def table(
    records: Sequence[Mapping[str, Any]],
    columns: Sequence[str],
    limit: int = 20,
    descriptions: Mapping[str, str] | None = None,
) -> dg.TableMetadataValue:
    """A preview table with a stable column order; values become strings where Dagster needs them.
    ``descriptions`` says what a column holds (the UI shows them under "Show schema"), so its header can be short:
    the UI never wraps a header, and a table wider than the page is cut off on the right."""
    schema = dg.TableSchema(
        columns=[
            dg.TableColumn(name=c, type="string", description=(descriptions or {}).get(c)) for c in columns
        ]
    )
    rows = [
        dg.TableRecord({c: "" if r.get(c) is None else str(r.get(c)) for c in columns})
        for r in list(records)[:limit]
    ]
    return dg.MetadataValue.table(records=rows, schema=schema)


def counts_markdown(
    counts: Mapping[str, int], key_header: str, value_header: str = "count"
) -> dg.MarkdownMetadataValue:
    lines = [f"| {key_header} | {value_header} |", "|---|---:|"]
    lines += [f"| {key} | {value} |" for key, value in counts.items()]
    return dg.MetadataValue.md("\n".join(lines))


#: A picture larger than this is embedded in the metadata as a smaller copy (the event log keeps it).
EMBED_MAX_BYTES = 400_000
EMBED_WIDTH = 800
#: The UI shows a markdown value inline only when it is shorter than this; a longer one (a picture inlined as a
#: data URL, a long table) waits behind a "[Show Markdown]" button.
MARKDOWN_INLINE_LIMIT = 1000
#: The widest picture an asset page shows without pushing the metadata table's right side out of view: the value
#: column of the table on the asset's Overview page in a 1600 px wide window (a markdown image is shown at its own
#: size, never scaled down to fit).
PAGE_PICTURE_WIDTH = 460
#: The folder of the served copies of pictures in the instance's compute-log folder (whose other folders are runs)
SERVED_FOLDER = "topicmap"


def _narrower_png(path: Path, width: int) -> bytes | None:
    """A copy of the PNG at ``path`` ``width`` px wide (same proportions); None if it is not wider."""
    from PIL import Image  # Pillow comes with matplotlib

    with Image.open(path) as image:
        if image.width <= width:
            return None
        height = max(round(image.height * width / image.width), 1)
        smaller = image.convert("RGB").resize((width, height), Image.Resampling.LANCZOS)
    buffer = io.BytesIO()
    smaller.save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


def png_markdown(path: Path, alt: str) -> dg.MarkdownMetadataValue | None:
    """The picture inline (a data URL): the UI renders markdown images but cannot open local files. Longer than
    MARKDOWN_INLINE_LIMIT, so the UI shows it behind "[Show Markdown]"; page_picture shows it on the page.

    A picture over EMBED_MAX_BYTES is embedded as a smaller copy (the event log keeps every byte of it);
    None if even a 200 px copy is too large (the path metadata still points at the full picture).
    """
    data = path.read_bytes()
    width = EMBED_WIDTH
    while len(data) > EMBED_MAX_BYTES:
        if width < 200:
            return None
        data = _narrower_png(path, width) or data
        width //= 2
    encoded = base64.b64encode(data).decode("ascii")
    return dg.MetadataValue.md(f"![{alt}](data:image/png;base64,{encoded})")


def _served(local_path: Callable[[list[str], str], str], served_as: Sequence[str], data: bytes) -> str:
    """``data`` written where the webserver's compute-log download serves it (``local_path``: the compute-log
    manager's file of a log key and extension); its URL path. Written only when missing or different: the same
    picture keeps its file."""
    *folders, name = [SERVED_FOLDER, *served_as]
    stem, extension = name.rsplit(".", 1)
    target = Path(local_path([*folders, stem], extension))
    if not (target.is_file() and target.read_bytes() == data):
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
        partial.write_bytes(data)
        os.replace(partial, target)
    return "/logs/" + "/".join(quote(part, safe="") for part in [*folders, stem, extension])


def page_picture(
    instance: dg.DagsterInstance, path: Path, served_as: Sequence[str], alt: str
) -> dg.MarkdownMetadataValue | None:
    """The PNG at ``path`` as the asset page shows it without a click: a copy at most PAGE_PICTURE_WIDTH px wide,
    linked to the full picture (a click downloads it). ``served_as`` names it among the served pictures
    (folders, then the file name), the same picture always the same name.

    The UI shows only short markdown inline, so the markdown names the pictures by URL, and the one URL the
    webserver answers with a file is its download of a step's log, ``/logs/<folders>/<name>/<extension>``: it
    serves any file of the instance's local compute-log folder (Dagster's default, in DAGSTER_HOME, shared by the
    runs and the webserver). The copies go to ``<that folder>/topicmap/<served_as>``. An instance that keeps its
    logs elsewhere gets the picture inlined (png_markdown), shown behind "[Show Markdown]".
    """
    from assets.dagster_internals import LocalComputeLogManager

    manager = instance.compute_log_manager
    if not isinstance(manager, LocalComputeLogManager):
        return png_markdown(path, alt)
    alt = alt.replace("[", "(").replace("]", ")")
    full = _served(manager.get_captured_local_path, served_as, path.read_bytes())
    narrower = _narrower_png(path, PAGE_PICTURE_WIDTH)
    if narrower is None:
        return dg.MetadataValue.md(f"![{alt}]({full})")
    *folders, name = served_as
    shown_as = [*folders, f"{name.rsplit('.', 1)[0]}.{PAGE_PICTURE_WIDTH}px.png"]
    shown = _served(manager.get_captured_local_path, shown_as, narrower)
    return dg.MetadataValue.md(f"[![{alt}]({shown})]({full})")
