"""Column values: equal to ``read --json`` for the same exchanges, and to the truth of the
captures for records and partitions."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter

import pytest
from click.testing import CliRunner

from kafkasniff.cli import main
from tests.conftest import CAPTURES
from tests.export.conftest import decoded_values, truth_of
from tests.export.test_export_captures import read_parquet

COMPARED = ["librdkafka_errors_latency", "crafted_records", "crafted_sasl", "librdkafka_share",
            "kafka_python_legacy", "crafted_kafka07", "librdkafka_midstream"]


def read_json(pcap) -> list[dict]:
    ports = []
    for p in truth_of(pcap).get("broker_ports") or [9092]:
        ports += ["--port", str(p)]
    res = CliRunner().invoke(main, ["read", "-q", "--json", *ports, str(pcap)],
                             catch_exceptions=False)
    assert res.exit_code == 0
    return [o for o in map(json.loads, res.output.splitlines()) if o["type"] == "exchange"]


EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def micros(d: dt.datetime) -> int:
    return (d - EPOCH) // dt.timedelta(microseconds=1)


def without_records(v):
    """A read --json body without the records of batches (control batches are always decoded
    record by record; the export's JSON columns keep batch headers only)."""
    if isinstance(v, list):
        return [without_records(x) for x in v]
    if isinstance(v, dict):
        if "batches" in v and "size_bytes" in v:
            v = dict(v, batches=[{k: x for k, x in b.items() if k != "records"}
                                 for b in v["batches"]])
        return {k: without_records(x) for k, x in v.items()}
    return v


def _offsets(xid: str) -> tuple[int, int]:
    q, r = xid.rsplit("/", 2)[1:]
    return int(q), int(r)


@pytest.mark.parametrize("name", COMPARED)
def test_exchanges_equal_read_json(name, exported):
    pcap = CAPTURES / f"{name}.pcap"
    objs = read_json(pcap)
    rows = read_parquet(exported(pcap), "exchanges").to_pylist()
    assert len(rows) == len(objs)
    for row, o in zip(rows, objs):  # same pipeline, same order
        q = o["request"]["stream_offset"] if o["request"] else -1
        r = o["response"]["stream_offset"] if o["response"] else -1
        assert _offsets(row["exchange_id"]) == (q, r)
        assert row["client"] == o["connection"]["client"]
        assert row["broker"] == o["connection"]["broker"]
        for col in ("ts_ns", "api_key", "api_name", "api_version", "correlation_id",
                    "client_id", "status", "latency_ns", "request_bytes", "response_bytes",
                    "errors", "throttle_time_ms", "inferred", "assumed_version"):
            assert row[col] == o[col], (col, row["exchange_id"])
        assert row["error_count"] == len(o["errors"])
        assert micros(row["ts"]) == o["ts_ns"] // 1000
        if o["latency_ns"] is not None:
            assert row["latency_ms"] == o["latency_ns"] / 1e6
        if not row["topic_ids"]:
            assert row["topics"] == o["topics"]
        else:  # ids are not resolved in exports: the names carried are a subset
            assert set(row["topics"]) <= set(o["topics"])
        assert row["issue_count"] == len(o["issues"])
        assert row["issue_kinds"] == list(dict.fromkeys(i["kind"] for i in o["issues"]))
        for side in ("request", "response"):
            body = without_records(o[side]["body"]) if o[side] else None
            got = json.loads(row[f"{side}_json"]) if row[f"{side}_json"] is not None else None
            assert got == body, (side, row["exchange_id"])
            if o[side]:
                assert row[f"{side}_first_ts_ns"] == o[side]["first_ts_ns"]
                assert row[f"{side}_last_ts_ns"] == o[side]["last_ts_ns"]
                assert row[f"{side}_complete"] == o[side]["complete"]
        rec = o["records"]
        if rec is None:
            assert row["batches"] is None
        else:
            for col in ("batches", "records", "records_bytes", "compressed_bytes",
                        "uncompressed_bytes", "codecs", "first_offset", "last_offset",
                        "min_timestamp_ms", "max_timestamp_ms", "crc_errors", "transactional",
                        "control", "partial"):
                assert row[col] == rec[col], col


def _truth_record(r: dict) -> tuple:
    return (r["topic"], r["partition"], r["offset"], r["key_hex"], r["value_hex"],
            tuple((h[0], h[1]) for h in r["headers"]))


def _row_record(r: dict) -> tuple:
    hx = lambda b: None if b is None else b.hex()  # noqa: E731
    return (r["topic"], r["partition"], r["offset"], hx(r["key"]), hx(r["value"]),
            tuple((h["key"], hx(h["value"])) for h in r["headers"]))


def test_crafted_records_equal_the_truth(exported):
    pcap = CAPTURES / "crafted_records.pcap"
    truth = truth_of(pcap)
    rows = read_parquet(exported(pcap), "records").to_pylist()
    for side in ("request", "response"):
        # offsets in Produce requests are the producer's (relative), the truth's absolute
        cut = (lambda t: t[:2] + t[3:]) if side == "request" else (lambda t: t)
        want = Counter(cut(_truth_record(r)) for r in truth["records"]
                       if r["carried_in"]["direction"] == side and not r.get("control"))
        got = Counter(cut(_row_record(r)) for r in rows if r["side"] == side
                      and r["control_type"] is None)
        assert got == want, side
    control = [r for r in rows if r["control_type"] is not None]
    want_control = [r for r in truth["records"] if r.get("control")]
    assert sorted(r["control_type"] for r in control) == \
        sorted(r["control"]["type"] for r in want_control)
    assert all(r["control"] for r in control)
    # batch columns of one record
    idem = [r for r in rows if r["producer_id"] == 1001]
    assert idem and all(r["magic"] == 2 for r in idem)
    tx = [r for r in rows if r["producer_id"] == 4000 and r["side"] == "request"]
    assert tx and all(r["transactional"] and r["producer_epoch"] == 2 for r in tx)
    m0 = [r for r in rows if r["magic"] == 0]
    assert m0 and all(r["timestamp"] is None and r["timestamp_ms"] is None for r in m0)
    for r in rows:
        if r["timestamp_ms"] is not None and r["timestamp_ms"] >= 0:
            assert micros(r["timestamp"]) == r["timestamp_ms"] * 1000


@pytest.mark.parametrize("name", ["librdkafka_compression", "kafka_python_codecs",
                                  "librdkafka_produce_consume"])
def test_produced_and_consumed_records_equal_the_truth(name, exported):
    pcap = CAPTURES / f"{name}.pcap"
    truth = truth_of(pcap)
    out = exported(pcap)
    rows = read_parquet(out, "records").to_pylist()
    # rows carry the topic as on the wire; ids are resolved the documented way, by joining
    # the topic_ids table (Fetch v13+ responses carry only ids)
    names = {r["topic_id"]: r["topic_name"] for r in read_parquet(out, "topic_ids").to_pylist()}
    for r in rows:
        if r["topic"] is None and r["topic_id"] in names:
            r["topic"] = names[r["topic_id"]]
    cut = lambda t: t[:2] + t[3:]  # noqa: E731 - Produce request offsets are relative
    produced = Counter(cut(_truth_record(r)) for r in truth["produced"]
                       if r["offset"] is not None)
    consumed = Counter(_truth_record(r) for r in truth["consumed"])
    sent = Counter(cut(_row_record(r)) for r in rows if r["side"] == "request")
    fetched = Counter(_row_record(r) for r in rows if r["side"] == "response")
    # retries and repeated fetches may carry a record more than once
    assert set(sent) >= set(produced)
    assert set(fetched) >= set(consumed)
    if name == "librdkafka_compression":
        assert sent == produced and fetched == consumed
        by_partition = {r["partition"]: r["codec"] for r in rows if r["side"] == "request"}
        assert by_partition == {int(p): c for p, c in truth["compression_by_partition"].items()}


def test_partitions_of_errors_and_fetches(exported):
    pcap = CAPTURES / "librdkafka_errors_latency.pcap"
    rows = read_parquet(exported(pcap), "partitions").to_pylist()
    produce_errors = [r for r in rows if r["api_name"] == "Produce" and r["error_code"] == 6]
    assert produce_errors and all(r["error_name"] == "NOT_LEADER_OR_FOLLOWER" and
                                  r["in_request"] and r["in_response"] and r["batches"] == 1
                                  for r in produce_errors)
    fetches = [r for r in rows if r["api_name"] == "Fetch" and r["in_response"]]
    assert fetches and all(r["fetch_offset"] is not None and r["high_watermark"] is not None
                           and r["topic_id"] for r in fetches)
    assert any(r["error_name"] == "NOT_LEADER_OR_FOLLOWER" for r in fetches)
    commits = [r for r in rows if r["api_name"] == "OffsetCommit"]
    assert commits and all(r["committed_offset"] is not None for r in commits)
    assert any(r["error_name"] == "NOT_COORDINATOR" for r in commits)
    lists = [r for r in rows if r["api_name"] == "ListOffsets"]
    assert lists and {r["requested_timestamp_ms"] for r in lists} <= {-1, -2}
    assert all(r["offset"] is not None for r in lists)


def test_partition_records_add_up(exported):
    for name in ("librdkafka_compression", "crafted_records", "librdkafka_transactions"):
        pcap = CAPTURES / f"{name}.pcap"
        out = exported(pcap)
        ex = {r["exchange_id"]: r for r in read_parquet(out, "exchanges").to_pylist()}
        per: Counter = Counter()
        batches: Counter = Counter()
        for r in read_parquet(out, "partitions").to_pylist():
            if r["records"] is not None:
                per[r["exchange_id"]] += r["records"]
                batches[r["exchange_id"]] += r["batches"]
        for xid, r in ex.items():
            if r["records"] is not None:
                assert per[xid] == r["records"] and batches[xid] == r["batches"], (name, xid)


def test_issues_and_connections(exported):
    pcap = CAPTURES / "crafted_records.pcap"
    issues = read_parquet(exported(pcap), "issues").to_pylist()
    crc = [i for i in issues if i["kind"] == "crc_mismatch"]
    assert crc and crc[0]["exchange_id"] and crc[0]["field_path"].endswith(".records")
    v = decoded_values(pcap)
    assert sorted(i["message"] for i in issues) == sorted(i.message for i in v.all_issues())

    pcap = CAPTURES / "crafted_sasl.pcap"
    conns = read_parquet(exported(pcap), "connections").to_pylist()
    assert {c["sasl_username"] for c in conns} >= {"alice", "bob", "carol"}
    assert {c["sasl_mechanism"] for c in conns} >= {"PLAIN", "SCRAM-SHA-256", "OAUTHBEARER",
                                                    "GSSAPI"}
    assert all(c["kind"] == "kafka" and c["handshake_seen"] for c in conns)
    assert all(c["client_ip"] == "192.0.2.10" and c["broker_port"] == 9092 for c in conns)

    pcap = CAPTURES / "tls_handshake.pcap"
    conns = read_parquet(exported(pcap), "connections").to_pylist()
    assert len(conns) == 3 and all(c["kind"] == "tls" for c in conns)
    assert {c["tls_sni"] for c in conns} == {"broker1.kafka.test"}
    assert {c["tls_version"] for c in conns} == {"TLS 1.2", "TLS 1.3"}
    issues = read_parquet(exported(pcap), "issues").to_pylist()
    assert [i["kind"] for i in issues] == ["tls_connection"] * 3
    assert {i["connection_key"] for i in issues} == {c["connection_key"] for c in conns}


def test_topic_ids_table(exported):
    pcap = CAPTURES / "librdkafka_produce_consume.pcap"
    out = exported(pcap)
    ids = {r["topic_id"]: r["topic_name"] for r in read_parquet(out, "topic_ids").to_pylist()}
    assert set(ids.values()) == set(truth_of(pcap)["topics"])
    parts = read_parquet(out, "partitions").to_pylist()
    fetched = {r["topic_id"] for r in parts if r["api_name"] == "Fetch"}
    assert fetched and fetched <= set(ids)
