"""The out-of-core engine's results in Python: DuckDB's Arrow results as the in-memory path's pandas frames
(``topicmap.snapshots.engine``), so that its summaries and post counts run the very code ``compute``'s do."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from topicmap.snapshots.results import STAT_COLUMNS


def arrow_frame(table: pa.Table) -> pd.DataFrame:
    """An Arrow result as the in-memory path's frame: int64 columns, the statistics nullable (Int64)."""
    columns: dict[str, Any] = {}
    for name in table.column_names:
        column = table.column(name)
        if name in STAT_COLUMNS:
            mask = column.is_null().to_numpy(zero_copy_only=False)
            columns[name] = pd.arrays.IntegerArray(column.fill_null(0).to_numpy().astype(np.int64), mask)
        elif pa.types.is_integer(column.type):
            columns[name] = column.to_numpy().astype(np.int64)
        else:
            columns[name] = column.to_numpy(zero_copy_only=False)
    return pd.DataFrame(columns, copy=False)  # not copied again into one block


def counted_stories(batches: Iterable[pa.RecordBatch], rows: int) -> tuple[np.ndarray, pd.DataFrame]:
    """A timespan's ``rows`` counted stories from the record batches of ``engine_sql.COUNTS_SELECT`` (integer
    columns, ``pos`` among them): their positions and the in-memory path's story_link_counts frame, each column
    filled a batch at a time into an array of its final size: the whole Arrow result held beside its numpy copy
    (0.8 GB more at ten million stories) made the run's peak."""
    values: dict[str, np.ndarray] = {}
    nulls: dict[str, np.ndarray] = {}
    at = 0
    for batch in batches:
        end = at + batch.num_rows
        if end > rows:
            raise RuntimeError(f"counted stories: more than {rows} rows")
        for name, column in zip(batch.schema.names, batch.columns, strict=True):
            if name not in values:
                values[name] = np.empty(rows, dtype=np.int64)
                if name in STAT_COLUMNS:
                    nulls[name] = np.empty(rows, dtype=bool)
            if name in nulls:
                nulls[name][at:end] = column.is_null().to_numpy(zero_copy_only=False)
                column = column.fill_null(0)
            values[name][at:end] = column.to_numpy()
        at = end
    if at != rows:
        raise RuntimeError(f"counted stories: {at} rows, {rows} expected")
    positions = values.pop("pos")
    frame = pd.DataFrame(
        {
            name: pd.arrays.IntegerArray(column, nulls[name]) if name in nulls else column
            for name, column in values.items()
        },
        copy=False,
    )
    return positions, frame
