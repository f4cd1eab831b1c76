"""The raw-response store: gzip JSON files, atomic, idempotent, listable (topicmap.social.rawstore)."""

from __future__ import annotations

import gzip
import json

import pytest

from topicmap.social.rawstore import RawResponseStore


def test_put_writes_gzip_json_under_kind_and_get_reads_it_back(tmp_path) -> None:
    store = RawResponseStore(tmp_path / "raw")
    answer = {"status_code": 200, "data": {"link_clicks": [{"clicks": 3, "dt": 1704067200}]}}
    path = store.put("bitly", "GET /v3/link/clicks?link=http%3A%2F%2Fbit.ly%2Fx", answer)
    assert path.is_relative_to(tmp_path / "raw" / "bitly")
    assert path.name.endswith(".json.gz")
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        assert json.load(handle)["payload"] == answer
    assert store.get("bitly", "GET /v3/link/clicks?link=http%3A%2F%2Fbit.ly%2Fx") == answer
    assert store.get("bitly", "another key") is None
    assert store.get("facebook", "GET /v3/link/clicks?link=http%3A%2F%2Fbit.ly%2Fx") is None


def test_raw_bytes_are_stored_as_json_and_non_json_is_refused(tmp_path) -> None:
    store = RawResponseStore(str(tmp_path))
    store.put("bitly", "k", b'{"a": [1, 2]}')
    assert store.get("bitly", "k") == {"a": [1, 2]}
    with pytest.raises(ValueError, match="not valid JSON"):
        store.put("bitly", "bad", b"<html>oops</html>")
    assert store.get("bitly", "bad") is None


def test_put_is_idempotent_and_leaves_no_temporary_files(tmp_path) -> None:
    store = RawResponseStore(tmp_path)
    first = store.put("bitly", "key", {"x": 1}).read_bytes()
    second = store.put("bitly", "key", {"x": 1}).read_bytes()
    assert first == second
    store.put("bitly", "key", {"x": 2})  # a newer answer replaces the old one
    assert store.get("bitly", "key") == {"x": 2}
    assert [p.name for p in tmp_path.rglob("*") if p.name.startswith(".tmp-")] == []
    assert len(store) == 1


def test_keys_items_and_kinds_list_what_was_stored(tmp_path) -> None:
    store = RawResponseStore(tmp_path)
    keys = {f"GET /v3/link/lookup?url=https://example.com/{i}" for i in range(20)}
    for key in keys:
        store.put("bitly", key, {"key": key})
    store.put("facebook", "one", {"id": 1})
    (tmp_path / "bitly" / "00").mkdir(exist_ok=True)
    (tmp_path / "bitly" / "00" / "00").mkdir(exist_ok=True)
    (tmp_path / "bitly" / "00" / "00" / ".tmp-crashed.json.gz").write_bytes(b"half")
    assert set(store.keys("bitly")) == keys
    assert all(payload == {"key": key} for key, payload in store.items("bitly"))
    assert store.kinds() == ["bitly", "facebook"]
    assert ("facebook", "one") in store
    assert list(store.keys("nothing")) == []


def test_bad_kind_or_key_is_refused(tmp_path) -> None:
    store = RawResponseStore(tmp_path)
    for kind in ("", "../escape", ".hidden", "a/b"):
        with pytest.raises(ValueError, match="kind"):
            store.put(kind, "k", {})
    with pytest.raises(ValueError, match="key"):
        store.put("bitly", "", {})
    with pytest.raises(ValueError, match="cannot be written as JSON"):
        store.put("bitly", "k", {"when": object()})
