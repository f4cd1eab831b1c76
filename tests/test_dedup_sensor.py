"""The duplicate-media list is watched: a change of its content re-runs media and story dedup for every topic."""

from __future__ import annotations

import dagster as dg

from assets.partitions import topics_partitions
from resources.dedup import MediaDupsResource
from sensors.dedup import media_dups_changed
from topicmap.store.curated_files import curated_file_digest


def evaluate(instance: dg.DagsterInstance, path: str, cursor: str | None) -> dg.SensorResult:
    context = dg.build_sensor_context(
        instance=instance, cursor=cursor, resources={"media_dups": MediaDupsResource(path=path)}
    )
    return media_dups_changed(context)


def test_a_changed_list_reruns_dedup_for_every_topic_once(tmp_path) -> None:
    dups = tmp_path / "media_dups.csv"
    dups.write_text("medium_url,dup_of_medium_url\nhttps://old.test,https://new.test\n", encoding="utf-8")
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(topics_partitions.name, ["climate", "elections"])
        first = evaluate(instance, str(dups), None)
        assert not first.run_requests and first.cursor == curated_file_digest(dups)  # the first look records
        same = evaluate(instance, str(dups), first.cursor)
        assert not same.run_requests
        dups.write_text(dups.read_text() + "https://older.test,https://new.test\n", encoding="utf-8")
        changed = evaluate(instance, str(dups), first.cursor)
        assert sorted(request.partition_key for request in changed.run_requests) == ["climate", "elections"]
        assert changed.cursor == curated_file_digest(dups) != first.cursor
        # run keys name the list's content: the same change never runs twice
        assert len({request.run_key for request in changed.run_requests}) == 2
        assert all(changed.cursor[:16] in request.run_key for request in changed.run_requests)
        dups.unlink()
        removed = evaluate(instance, str(dups), changed.cursor)
        assert len(removed.run_requests) == 2 and removed.cursor == "none"
