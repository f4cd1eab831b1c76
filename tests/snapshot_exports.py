"""What every snapshot folder must hold for a researcher: counts that reconcile and a data dictionary that
validates. `check_snapshot_folder(folder)` asserts both and returns the folder's timespans table."""

from __future__ import annotations

import calendar
import json
from datetime import date
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
from frictionless import Package, Schema

PARTS = ("published_story_count", "linked_story_count", "undated_story_count")
WHY = {"published": "published_story_count", "linked": "linked_story_count", "undated": "undated_story_count"}


def _month_days(day: date) -> int:
    return calendar.monthrange(day.year, day.month)[1]


def check_snapshot_folder(folder: Path) -> pd.DataFrame:
    """Assert, for every timespan of the topic and of each focus: story_count = published + linked + undated;
    day_count its days, partial only a week or month with fewer days than a whole one;
    stories_per_day sums to the published; the stories table (Parquet and CSV) has story_count rows whose
    in_timespan says the same; a timespan without stories has no folder. Then that datapackage.json validates
    with frictionless and that every Parquet file's field
    descriptions are its Table Schema's."""
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    spans = pd.read_parquet(folder / "timespans.parquet")
    spans["focus"] = spans["focus"].astype(object).where(spans["focus"].notna(), None)
    assert (spans["story_count"] == spans[list(PARTS)].sum(axis=1)).all(), spans
    days = (spans["last_date"] - spans["start_date"]).map(lambda gap: gap.days + 1)
    assert (spans["day_count"] == days).all(), spans
    whole = spans["period"].map({"weekly": 7}).fillna(spans["start_date"].map(_month_days))
    cut = spans["period"].isin(["weekly", "monthly"]) & (spans["day_count"] < whole)
    assert (spans["partial"] == cut).all(), spans
    assert (spans[list(PARTS)] >= 0).all(axis=None)
    per_day_file = folder / "stories_per_day.parquet"
    per_day = pd.read_parquet(per_day_file) if per_day_file.exists() else None
    folders = {(None, t["key"]): t["key"] for t in manifest["timespans"]}
    for found in manifest["foci"]:
        folders.update({(found["key"], t["key"]): t["folder"] for t in found["timespans"]})
    assert len(folders) == len(spans)
    for row in spans.itertuples(index=False):
        where = folder / folders[(row.focus, row.key)]
        if row.story_count == 0:
            assert not where.exists(), where
            continue
        assert per_day is not None
        days = per_day[(per_day["focus"].fillna("") == (row.focus or "")) & (per_day["timespan"] == row.key)]
        assert days["story_count"].sum() == row.published_story_count, (row.focus, row.key)
        for listed in (
            pd.read_parquet(where / "stories.parquet"),
            pd.read_csv(where / "stories.csv", keep_default_na=False),
        ):
            assert len(listed) == row.story_count == listed["stories_id"].nunique()
            found = listed["in_timespan"].value_counts().to_dict()
            assert {WHY[why]: n for why, n in found.items()} == {
                part: getattr(row, part) for part in PARTS if getattr(row, part)
            }, (row.focus, row.key)
    package = json.loads((folder / "datapackage.json").read_text(encoding="utf-8"))
    # the descriptor and every Table Schema against the standard's profiles; then the data of every CSV
    # resource against its schema (frictionless reads Parquet through pandas, where a nullable integer column
    # with a null becomes float: the Parquet files are checked against the same schemas below, with pyarrow)
    assert list(Package.metadata_validate(package)) == []
    for path in sorted((folder / "schemas").iterdir()):
        assert list(Schema.metadata_validate(json.loads(path.read_text(encoding="utf-8")))) == [], path
    csv_only = {**package, "resources": [r for r in package["resources"] if r["format"] == "csv"]}
    report = Package(csv_only, basepath=str(folder)).validate()
    assert report.valid, report.flatten(["type", "note"])[:10]
    data_files = {name for name in manifest["files"] if name.endswith((".csv", ".parquet"))}
    assert {r["path"] for r in package["resources"]} == data_files
    for resource in package["resources"]:
        schema = json.loads((folder / resource["schema"]).read_text(encoding="utf-8"))
        described = {f["name"]: f["description"] for f in schema["fields"]}
        assert all(described.values()), resource["path"]
        if resource["format"] == "parquet":
            fields = pq.read_schema(folder / resource["path"])
            assert fields.names == list(described)
            assert {f.name: f.metadata[b"description"].decode() for f in fields} == described
        else:
            header = (folder / resource["path"]).read_text(encoding="utf-8").split("\n", 1)[0]
            assert header.split(",") == list(described)
    readme = (folder / "README.md").read_text(encoding="utf-8")
    assert "published_story_count" in readme and "end_date" in readme
    return spans
