"""kafkasniff.stats.aggregate: bounded per-API/client/broker/topic rows (statuses, errors,
latency quantiles clamped to the observed range, throttling, bytes) and their caps."""

from __future__ import annotations

import pytest

from kafkasniff.issues import IssueKind, Severity
from kafkasniff.model import DecodeIssue, Exchange, ExchangeStatus, Message
from kafkasniff.stats.aggregate import (
    OTHER,
    RELATIVE_ACCURACY,
    Aggregator,
    Row,
    Table,
    api_row_key,
    nearest_rank,
)

PAIRED = ExchangeStatus.PAIRED


def msg(frame_bytes: int) -> Message:
    return Message(frame_bytes, 0, 0, 0, {}, {})


def ex(latency_ns: int | None = 1_000_000, *, status=PAIRED, errors=(), throttle=None,
       req_bytes=100, resp_bytes=50, api_key=0, api_name="Produce", client_id="c1",
       broker="10.0.0.2:9092", topics=("orders",), issues=()) -> Exchange:
    return Exchange(1, "10.0.0.1:40000", broker, status, api_key, api_name, 9, 1, client_id,
                    msg(req_bytes) if req_bytes else None, msg(resp_bytes) if resp_bytes else None,
                    latency_ns, errors=errors, throttle_time_ms=throttle, topics=topics,
                    issues=issues)


# --------------------------------------------------------------------------- Row

def test_row_counts_statuses_errors_throttle_bytes():
    r = Row()
    r.add(ex(errors=("NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT"), throttle=20))
    r.add(ex(errors=("NOT_LEADER_OR_FOLLOWER",), throttle=0))
    r.add(ex(None, status=ExchangeStatus.UNANSWERED, resp_bytes=0, throttle=None))
    r.add(ex(None, status=ExchangeStatus.ORPHAN_RESPONSE, req_bytes=0, throttle=50))
    d = r.to_dict()
    assert d["count"] == 4
    assert d["statuses"] == {"paired": 2, "unanswered": 1, "orphan_response": 1}
    assert d["error_exchanges"] == 2
    assert d["errors"] == {"NOT_LEADER_OR_FOLLOWER": 2, "REQUEST_TIMED_OUT": 1}
    assert list(d["errors"]) == ["NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT"]  # most first
    assert (d["throttled"], d["throttle_total_ms"], d["throttle_max_ms"]) == (2, 70, 50)
    assert (d["request_bytes"], d["response_bytes"]) == (300, 150)
    assert d["latency_count"] == 2


def test_latency_only_from_paired_exchanges():
    """Latency is counted for paired exchanges only (an orphan with a latency is not)."""
    r = Row()
    r.add(ex(5_000, status=ExchangeStatus.ORPHAN_RESPONSE))
    r.add(ex(None))
    assert r.quantile_ns(0.5) is None
    d = r.to_dict()
    assert d["latency_count"] == 0 and d["latency_max_ns"] is None
    assert d["latency_p50_ns"] is None and d["latency_p99_ns"] is None
    assert r.min_ns == -1


def test_single_latency_quantiles_are_exact():
    """Quantiles are clamped to the observed min and max: with one value every quantile is
    that value (the raw sketch answer is ~0.4 % off)."""
    r = Row()
    r.add(ex(1_234_567))
    raw = r.latency.get_quantile_value(0.5)
    assert raw != 1_234_567  # what the clamp corrects
    assert r.quantile_ns(0.5) == r.quantile_ns(0.9) == r.quantile_ns(0.99) == 1_234_567
    d = r.to_dict()
    assert (d["latency_p50_ns"], d["latency_max_ns"], r.min_ns) == (1_234_567, 1_234_567,
                                                                    1_234_567)


def test_quantiles_within_accuracy_and_range():
    values = [1_000 * (i * i + 1) for i in range(1, 200)]
    r = Row()
    for v in values:
        r.add(ex(v))
    exact = sorted(values)
    for q in (0.0, 0.5, 0.9, 0.99, 1.0):
        got = r.quantile_ns(q)
        want = exact[nearest_rank(q, len(exact)) - 1]
        assert abs(got - want) <= RELATIVE_ACCURACY * want + 1, (q, got, want)
        assert exact[0] <= got <= exact[-1]
    assert r.quantile_ns(1.0) <= r.max_ns == exact[-1] and r.min_ns == exact[0]


@pytest.mark.parametrize("n", [1, 2, 3, 7, 10, 15, 19, 126, 200])
def test_quantiles_are_nearest_rank(n):
    """The p-th percentile is the value of rank ceil(p * n) (1-based) of the n sorted
    latencies: nearest rank, the rule of ``spark report`` (``percentile_approx``) and of the
    groups tables, estimated within the sketch's 1 %. Neighbouring values here are 5 %
    apart, so a rank off by one is outside the accuracy (DDSketch's own rule, rank
    floor(p * (n - 1)), gave Produce p90 541.92 ms where spark report gave 653.39 ms on
    broker_failover.pcap). The raw sketch (the TUI's timeline reads it) follows the same
    rule."""
    import math

    values = [int(1_000_000 * 1.05 ** i) for i in range(n)]
    r = Row()
    for v in reversed(values):
        r.add(ex(v))
    for q in (0.0, 0.5, 0.9, 0.99, 1.0):
        want = values[max(1, math.ceil(q * n)) - 1]
        for got in (r.quantile_ns(q), r.latency.get_quantile_value(q)):
            assert abs(got - want) <= RELATIVE_ACCURACY * want + 1, (n, q, got, want)
    d = r.to_dict()
    assert d["latency_p90_ns"] == r.quantile_ns(0.9)


def test_negative_latency_counts_as_zero():
    """A response seen before the request ended (clock skew) counts as 0 ns."""
    r = Row()
    r.add(ex(-500))
    r.add(ex(2_000))
    assert (r.min_ns, r.max_ns) == (0, 2_000)
    assert r.quantile_ns(0.0) == 0 and r.to_dict()["latency_count"] == 2


# --------------------------------------------------------------------------- Table

def test_table_key_cap_goes_to_other():
    """At most max_keys rows by key; later keys share the "(other)" row; known keys keep
    their rows."""
    t = Table(2)
    t.row("a").add(ex())
    t.row("b").add(ex())
    t.row("c").add(ex())
    t.row("d").add(ex())
    t.row("a").add(ex())
    assert list(t.rows) == ["a", "b", OTHER]
    assert t.rows["a"].count == 2 and t.rows[OTHER].count == 2
    assert t.row("zzz") is t.rows[OTHER]
    assert OTHER == "(other)"


# --------------------------------------------------------------------------- api_row_key

@pytest.mark.parametrize("api_key, api_name, key", [
    (0, "Produce", "Produce"),
    (18, "ApiVersions", "ApiVersions"),
    (1, "FETCH (0.7)", "FETCH (0.7)"),       # Kafka 0.7: the request type
    (-1, "Unknown", "Unknown"),              # orphan not inferred
    (-2, "SaslToken", "Unknown"),            # raw SASL tokens
])
def test_api_row_key(api_key, api_name, key):
    assert api_row_key(ex(api_key=api_key, api_name=api_name)) == key


# --------------------------------------------------------------------------- Aggregator

def test_aggregator_tables():
    issue = DecodeIssue(IssueKind.TRAILING_BYTES, Severity.WARNING, "t")
    agg = Aggregator()
    agg.add(ex(2_000, topics=("orders", "payments"), issues=(issue,)))
    agg.add(ex(4_000, api_key=1, api_name="Fetch", client_id=None, broker="10.0.0.3:9092",
               topics=("orders",)))
    agg.add(ex(None, status=ExchangeStatus.ORPHAN_RESPONSE, api_key=-1, api_name="Unknown",
               topics=()))
    agg.add_issue(DecodeIssue(IssueKind.TCP_GAP, Severity.INFO, "gap"))
    rep = agg.to_dict()
    assert rep["latency_relative_accuracy"] == RELATIVE_ACCURACY
    assert rep["total"]["count"] == 3
    assert {k: v["count"] for k, v in rep["apis"].items()} == {
        "Produce": 1, "Fetch": 1, "Unknown": 1}
    assert {k: v["count"] for k, v in rep["clients"].items()} == {"c1": 2, "(none)": 1}
    assert list(rep["clients"]) == ["c1", "(none)"]           # most exchanges first
    assert {k: v["count"] for k, v in rep["brokers"].items()} == {
        "10.0.0.2:9092": 2, "10.0.0.3:9092": 1}
    assert {k: v["count"] for k, v in rep["topics"].items()} == {"orders": 2, "payments": 1}
    assert rep["topics"]["orders"]["latency_max_ns"] == 4_000
    assert rep["issues"] == {"trailing_bytes": 1, "tcp_gap": 1}
    assert rep["issue_severity"] == {"warning": 1, "info": 1}


def test_aggregator_max_keys_per_table():
    agg = Aggregator(max_keys=1)
    for name, client in (("Produce", "a"), ("Fetch", "b"), ("Metadata", "c")):
        agg.add(ex(api_name=name, client_id=client))
    rep = agg.to_dict()
    assert rep["apis"]["Produce"]["count"] == 1 and rep["apis"][OTHER]["count"] == 2
    assert rep["clients"][OTHER]["count"] == 2
    assert rep["total"]["count"] == 3


# ------------------------------------------------------------ deferred combination rows

@pytest.mark.parametrize("max_keys", [10_000, 3, 1])
def test_folded_combinations_equal_counting_each_exchange(monkeypatch, max_keys):
    """Aggregator.add counts an exchange once in the row of its (api, client_id, broker,
    topics) combination and folds the combinations into the tables later; the report is the
    one of adding every exchange to every row at once (folding after every exchange), also
    when the row cap sends later keys to ``(other)``, and when pending combinations overflow
    the bound mid-stream."""
    from kafkasniff.stats import aggregate
    from tests.conftest import CAPTURES, decode_capture

    exchanges = [ex for name in ("librdkafka_errors_latency.pcap", "kafka_python.pcap",
                                 "aiokafka.pcap")
                 for ex in decode_capture(CAPTURES / name).exchanges]
    assert len({(ex.api_name, ex.client_id, ex.broker, ex.topics) for ex in exchanges}) > 8

    def report(bound: int) -> dict:
        monkeypatch.setattr(aggregate, "MAX_PENDING_COMBINATIONS", bound)
        agg = aggregate.Aggregator(max_keys=max_keys)
        for ex in exchanges:
            agg.add(ex)
        if bound == 1:
            assert len(agg._pending) == 1
        return agg.to_dict()

    one_at_a_time = report(1)
    assert report(4) == one_at_a_time
    assert report(4096) == one_at_a_time
    if max_keys == 3:
        assert "(other)" in one_at_a_time["topics"] or "(other)" in one_at_a_time["apis"]


def test_reading_a_table_folds_pending_rows():
    import pickle

    from tests.conftest import CAPTURES, decode_capture

    agg = Aggregator()
    exchanges = decode_capture(CAPTURES / "kafka_python.pcap").exchanges
    for ex in exchanges:
        agg.add(ex)
    assert agg._pending
    copy = pickle.loads(pickle.dumps(agg))          # the --jobs decoders send it pickled
    assert not agg._pending and copy.total.count == len(exchanges)
    assert sum(r.count for r in copy.apis.rows.values()) == len(exchanges)
