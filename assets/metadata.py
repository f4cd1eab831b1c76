"""Small helpers that turn domain results into Dagster metadata (tables, markdown, counts)."""

from collections.abc import Mapping, Sequence
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
