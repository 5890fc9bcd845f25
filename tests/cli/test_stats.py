"""kafkasniff stats: tables, JSON, percentiles."""

from __future__ import annotations

import json
import math

from tests.cli.common import ERR, run
from tests.conftest import decode_capture


def test_stats_tables_and_json():
    res = run("stats", ERR)
    assert res.exit_code == 0
    for title in ("Per API", "Per client_id", "Per broker", "Per topic", "Issues and counters"):
        assert title in res.output
    rep = json.loads(run("stats", "--json", ERR).output)
    assert rep["total"]["count"] == len(decode_capture(ERR).exchanges)
    assert "NOT_LEADER_OR_FOLLOWER" in rep["apis"]["Produce"]["errors"]


def test_stats_percentiles_within_documented_accuracy():
    """DDSketch quantiles are within 1 % of the sample's value at the nearest rank (rank
    ceil(p * n), the rule of every output); the sample is the served exchanges, long-polls
    apart."""
    rep = json.loads(run("stats", "--json", ERR).output)
    exchanges = decode_capture(ERR).exchanges
    lat = sorted(ex.latency_ns for ex in exchanges if ex.status == "paired" and not ex.long_poll)
    assert rep["total"]["long_polls"] == sum(1 for ex in exchanges if ex.long_poll) > 0
    for q, key in ((0.5, "latency_p50_ns"), (0.9, "latency_p90_ns"), (0.99, "latency_p99_ns")):
        exact = lat[math.ceil(q * len(lat)) - 1]      # nearest rank
        got = rep["total"][key]
        assert abs(got - exact) <= 0.01 * exact + 1, (q, got, exact)
    assert rep["total"]["latency_max_ns"] == lat[-1]
