"""Small helpers that turn domain results into Dagster metadata (tables, markdown, counts)."""

import base64
import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import dagster as dg


def table(
    records: Sequence[Mapping[str, Any]], columns: Sequence[str], limit: int = 20
) -> dg.TableMetadataValue:
    """A preview table with a stable column order; values become strings where Dagster needs them."""
    schema = dg.TableSchema(columns=[dg.TableColumn(name=c, type="string") for c in columns])
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


def png_markdown(path: Path, alt: str) -> dg.MarkdownMetadataValue | None:
    """The picture inline (a data URL): the UI renders markdown images but cannot open local files.

    A picture over EMBED_MAX_BYTES is embedded as a smaller copy (the event log keeps every byte of it);
    None if even a 200 px copy is too large (the path metadata still points at the full picture).
    """
    data = path.read_bytes()
    width = EMBED_WIDTH
    while len(data) > EMBED_MAX_BYTES:
        if width < 200:
            return None
        from PIL import Image  # Pillow comes with matplotlib

        with Image.open(path) as image:
            width = min(width, image.width)
            height = max(round(image.height * width / image.width), 1)
            smaller = image.convert("RGB").resize((width, height), Image.Resampling.LANCZOS)
        buffer = io.BytesIO()
        smaller.save(buffer, format="PNG", optimize=True)
        data = buffer.getvalue()
        width //= 2
    encoded = base64.b64encode(data).decode("ascii")
    return dg.MetadataValue.md(f"![{alt}](data:image/png;base64,{encoded})")
