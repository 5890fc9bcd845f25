"""Long-polls told apart from slowness (kafkasniff.content.waits, issue 15): each rule on
decoded bodies, and on a real broker capture the default Fetch percentiles are those of the
served fetches while the long-polls are counted apart."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from kafkasniff.cli import main
from kafkasniff.content.waits import RULES, long_poll_rule
from kafkasniff.model import Exchange, ExchangeStatus, RecordsSummary
from kafkasniff.pipeline import PipelineOptions, analyze
from kafkasniff.stats.aggregate import Aggregator, Row

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
# a real Kafka 4 cluster (three brokers): idle replica fetchers and consumers long-poll
FAILOVER = CAPTURES / "broker_failover.pcap"
MS = 1_000_000


def records(n_bytes: int) -> RecordsSummary:
    return RecordsSummary(1, 1, ("none",), (2,), n_bytes, n_bytes, None, 0, 0, None, None, (),
                          (), False, False, 0, False)


FETCH_Q = {"max_wait_ms": 500, "min_bytes": 1}


@pytest.mark.parametrize("api_key, rule", [(1, "fetch_max_wait"), (78, "share_fetch_max_wait")])
def test_fetch_that_waited_out_max_wait_with_nothing_is_a_long_poll(api_key, rule):
    assert long_poll_rule(api_key, FETCH_Q, {}, 501 * MS, None) == rule
    assert long_poll_rule(api_key, FETCH_Q, {}, 460 * MS, None) == rule  # timer slack
    assert long_poll_rule(api_key, FETCH_Q, {}, 400 * MS, None) is None  # answered early
    # data came: served, even late (the broker answers as soon as min_bytes are there)
    assert long_poll_rule(api_key, FETCH_Q, {}, 501 * MS, records(2000)) is None
    # up to min_bytes of data after the wait: still the timeout that answered
    big_min = {"max_wait_ms": 500, "min_bytes": 4096}
    assert long_poll_rule(api_key, big_min, {}, 500 * MS, records(2000)) == rule
    # max_wait_ms 0 asks for no wait at all
    assert long_poll_rule(api_key, {"max_wait_ms": 0, "min_bytes": 1}, {}, 5 * MS, None) is None


def test_group_and_produce_rules():
    joined = {"error_code": 0}
    assert long_poll_rule(11, {}, joined, 3000 * MS, None) == "join_group_held"
    # MEMBER_ID_REQUIRED (79) is answered at once
    assert long_poll_rule(11, {}, {"error_code": 79}, 1 * MS, None) is None
    assert long_poll_rule(14, {"assignments": []}, joined, 40 * MS, None) == \
        "sync_group_follower"
    leader = {"assignments": [{"member_id": "m1", "assignment": b""}]}
    assert long_poll_rule(14, leader, joined, 40 * MS, None) is None
    timed_out = {"acks": -1, "timeout_ms": 30000}
    assert long_poll_rule(0, timed_out, {}, 30001 * MS, None) == "produce_timeout"
    assert long_poll_rule(0, timed_out, {}, 12 * MS, None) is None
    assert long_poll_rule(0, {"acks": 1, "timeout_ms": 30000}, {}, 30001 * MS, None) is None
    # heartbeats are answered at once: no rule
    assert long_poll_rule(12, {}, joined, 3000 * MS, None) is None
    assert long_poll_rule(68, {}, joined, 3000 * MS, None) is None


def test_nothing_to_judge_by_is_not_a_long_poll():
    assert long_poll_rule(1, FETCH_Q, {}, None, None) is None       # not paired
    assert long_poll_rule(1, None, {}, 501 * MS, None) is None      # request not decoded
    assert long_poll_rule(1, FETCH_Q, None, 501 * MS, None) is None
    assert long_poll_rule(1, {"min_bytes": 1}, {}, 501 * MS, None) is None
    assert long_poll_rule(1, {"max_wait_ms": "500"}, {}, 501 * MS, None) is None


@pytest.fixture(scope="module")
def failover():
    return [r for r in analyze([FAILOVER], PipelineOptions(ports=(9092,), detect=True))
            if isinstance(r, Exchange)]


def _fetches(exchanges):
    return [e for e in exchanges if e.api_name == "Fetch" and e.status == ExchangeStatus.PAIRED]


def test_real_capture_long_polls_are_fetches_that_waited(failover):
    fetches = _fetches(failover)
    polls = [e for e in fetches if e.long_poll]
    assert len(polls) == 19
    for e in polls:
        q = e.request.body
        assert e.long_poll_rule == "fetch_max_wait"
        assert e.latency_ns >= 0.9 * q["max_wait_ms"] * MS
        assert (e.records.records_bytes if e.records else 0) <= q["min_bytes"]
    # every other exchange of the capture is judged served
    assert all(not e.long_poll for e in failover
               if e.api_name not in ("Fetch", "JoinGroup", "SyncGroup", "Produce"))


def _exact_quantile(values: list[int], q: float) -> int:
    """The value of the nearest rank, ceil(q * n) (the rule of every output)."""
    values = sorted(values)
    return values[max(1, math.ceil(q * len(values))) - 1]


def test_default_fetch_percentiles_are_those_of_served_fetches(failover):
    agg = Aggregator()
    for e in failover:
        agg.add(e)
    row = agg.to_dict()["apis"]["Fetch"]
    fetches = _fetches(failover)
    served = [e.latency_ns for e in fetches if not e.long_poll]
    polls = [e.latency_ns for e in fetches if e.long_poll]
    assert row["latency_count"] == len(served)
    assert row["long_polls"] == len(polls) == 19
    for q, key in ((0.5, "latency_p50_ns"), (0.99, "latency_p99_ns")):
        assert row[key] == pytest.approx(_exact_quantile(served, q), rel=0.02)
    assert row["latency_max_ns"] == max(served)
    assert row["long_poll_max_ns"] == max(polls)
    assert row["long_poll_p50_ns"] == pytest.approx(_exact_quantile(polls, 0.5), rel=0.02)
    # counting the long-polls in would move the median: the test can tell the difference
    everything = served + polls
    assert abs(_exact_quantile(everything, 0.5) - row["latency_p50_ns"]) > 0.05 * row[
        "latency_p50_ns"]
    # the long-polls are still exchanges of the row
    assert row["count"] >= len(fetches)


def test_row_merge_keeps_long_polls_apart(failover):
    a, b, whole = Row(), Row(), Row()
    for i, e in enumerate(_fetches(failover)):
        (a if i % 2 else b).add(e)
        whole.add(e)
    a.merge(b)
    assert a.to_dict() == whole.to_dict()


def test_stats_json_read_json_and_parquet_carry_long_polls(tmp_path, failover):
    runner = CliRunner()
    res = runner.invoke(main, ["stats", "--json", "--jobs", "1", str(FAILOVER)])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["apis"]["Fetch"]["long_polls"] == 19
    res = runner.invoke(main, ["read", "--json", "--jobs", "1", str(FAILOVER)])
    assert res.exit_code == 0
    lines = [json.loads(line) for line in res.stdout.splitlines()]
    marked = [d for d in lines if d.get("type") == "exchange" and d["long_poll"]]
    assert len(marked) == 19 and {d["long_poll_rule"] for d in marked} == {"fetch_max_wait"}
    out = tmp_path / "out"
    res = runner.invoke(main, ["export", "--jobs", "1", "-o", str(out), str(FAILOVER)])
    assert res.exit_code == 0, res.output
    table = pq.read_table(out / "exchanges").to_pylist()
    assert sum(1 for r in table if r["long_poll"]) == 19
    assert {r["long_poll_rule"] for r in table if r["long_poll"]} == {"fetch_max_wait"}
    assert all(r["long_poll"] is False for r in table if not r["long_poll_rule"])


def test_every_rule_is_documented():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "long-polls.md").read_text()
    for rule in RULES:
        assert f"`{rule}`" in doc
