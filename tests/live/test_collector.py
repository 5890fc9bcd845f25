"""The collector: merging decoder statistics."""

from __future__ import annotations

from kafkasniff.live.collector import merge_stats


def test_merge_stats():
    a = {"packets": 3, "exchanges": {"paired": 2}, "issues": {"x": 1}, "first_ts_ns": 5,
         "last_ts_ns": 9, "skipped": {}}
    c = {"packets": 4, "exchanges": {"paired": 1, "unanswered": 1}, "issues": {},
         "first_ts_ns": 2, "last_ts_ns": 7, "skipped": {"non_tcp": 1}}
    m = merge_stats([a, {}, c])
    assert m["packets"] == 7 and m["exchanges"] == {"paired": 3, "unanswered": 1}
    assert m["first_ts_ns"] == 2 and m["last_ts_ns"] == 9 and m["skipped"] == {"non_tcp": 1}
