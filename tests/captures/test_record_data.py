"""Record data in the captures equals what the producing clients sent and consumers received.

For every capture whose truth lists ``produced`` records (real clients) or ``records``
(crafted message sets and batches): keys, values, headers and timestamps of the records in
Produce requests, and offsets of the records in Fetch responses, equal the truth; codecs are
the ones the script configured; CRCs are good except where the truth says otherwise.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import CAPTURES, decode_capture

WITH_PRODUCED = [p for p in sorted(CAPTURES.glob("*.pcap"))
                 if json.loads(p.with_suffix(".truth.json").read_text()).get("produced")]


def truth_of(p: Path) -> dict:
    return json.loads(p.with_suffix(".truth.json").read_text())


def wire_records(d, api: str, side: str):
    """(topic, partition, batch, record) of every record of ``api`` exchanges' ``side``."""
    for ex in d.exchanges:
        if ex.api_name != api:
            continue
        for loc in ex.record_fields:
            msg = ex.request if side == "request" else ex.response
            if msg is None or not loc.field_path:
                continue
            for b in loc.records.decoded.batches:
                for r in b.records or ():
                    yield loc.topic, loc.partition, b, r


def _hex(b: bytes | None) -> str | None:
    return None if b is None else b.hex()


def _headers(hs) -> list:
    return [[k, None if v is None else v.hex()] for k, v in hs]


@pytest.mark.parametrize("pcap", WITH_PRODUCED, ids=[p.stem for p in WITH_PRODUCED])
def test_produced_records_are_in_produce_requests(pcap):
    truth = truth_of(pcap)
    d = decode_capture(pcap, with_records=True)
    mid = truth["capture"].get("mid_stream", False)
    lo, hi = truth["capture"]["started_ts_ns"], truth["capture"]["stopped_ts_ns"]
    sent = Counter()
    for r in truth["produced"]:
        if r.get("error") is not None and r.get("partition") is None:
            continue
        if mid and not (lo + 50_000_000 <= r["produce_call_ts_ns"] <= hi - 50_000_000):
            continue
        sent[(r["topic"], r["key_hex"], r.get("value_hex"),
              json.dumps([[k, v] for k, v in r.get("headers") or []]))] += 1
    seen = Counter()
    timestamps = {}
    for topic, part, b, rec in wire_records(d, "Produce", "request"):
        key = (topic, _hex(rec.key), _hex(rec.value), json.dumps(_headers(rec.headers)))
        seen[key] += 1
        timestamps[(topic, _hex(rec.key), _hex(rec.value))] = rec.timestamp_ms
    missing = sent - seen
    assert not missing, f"{len(missing)} produced records not found, e.g. {list(missing)[:2]}"
    ts_checked = 0
    for r in truth["produced"]:
        k = (r["topic"], r["key_hex"], r.get("value_hex"))
        if k in timestamps and r.get("timestamp_ms") and timestamps[k]:
            assert timestamps[k] == r["timestamp_ms"], k
            ts_checked += 1
    assert ts_checked, "no produced record's timestamp was compared"


@pytest.mark.parametrize("pcap", WITH_PRODUCED, ids=[p.stem for p in WITH_PRODUCED])
def test_consumed_records_are_in_fetch_responses_at_their_offsets(pcap):
    truth = truth_of(pcap)
    consumed = truth.get("consumed") or []
    if not consumed:
        pytest.skip("no consumer in this scenario")
    d = decode_capture(pcap, with_records=True)
    fetched = {}
    for api in ("Fetch", "ShareFetch"):
        for t, p, b, r in wire_records(d, api, "response"):
            # topic None: an id the capture never resolved (its Metadata came before it began)
            fetched.setdefault((p, r.offset), []).append((t, _hex(r.key), _hex(r.value)))
    mid = truth["capture"].get("mid_stream", False)
    checked = 0
    for c in consumed:
        seen = fetched.get((c["partition"], c["offset"]), [])
        ok = [x for x in seen if x[0] in (c["topic"], None)
              and x[1:] == (c["key_hex"], c.get("value_hex"))]
        if not ok:
            assert mid and not seen, f"consumed record {c['topic']}[{c['partition']}]@" \
                                     f"{c['offset']} not in any Fetch response ({seen})"
            continue
        checked += 1
    assert checked


@pytest.mark.parametrize("name,codec_key", [("librdkafka_compression", "compression_by_partition"),
                                            ("kafka_python_codecs", "compression_by_partition")])
def test_codecs_per_partition(name, codec_key):
    pcap = CAPTURES / f"{name}.pcap"
    truth = truth_of(pcap)
    want = {int(p): c for p, c in truth[codec_key].items()}
    d = decode_capture(pcap, with_records=True)
    got = {}
    for ex in d.exchanges:
        if ex.api_name == "Produce":
            for loc in ex.record_fields:
                for b in loc.records.decoded.batches:
                    got.setdefault(loc.partition, set()).add(b.codec)
                    assert b.crc_ok and b.uncompressed_bytes > 0
    assert got == {p: {c} for p, c in want.items()}  # one codec per partition


def test_kafka_python_legacy_formats():
    """kafka-python with api_version (0,10) and (0,9): magic 1 and 0 message sets, gzip,
    xerial snappy and the pre-0.10 lz4 framing with the wrong header checksum."""
    d = decode_capture(CAPTURES / "kafka_python_legacy.pcap", with_records=True)
    kinds = {(b.magic, b.codec) for _, _, b, _ in wire_records(d, "Produce", "request")}
    assert {(0, "gzip"), (0, "snappy"), (0, "lz4"), (1, "gzip"), (1, "snappy"), (1, "lz4"),
            (0, "none"), (1, "none")} <= kinds
    assert all(b.crc_ok for _, _, b, _ in wire_records(d, "Produce", "request"))


def test_crafted_records_match_truth():
    pcap = CAPTURES / "crafted_records.pcap"
    truth = truth_of(pcap)
    d = decode_capture(pcap, with_records=True)
    got = []
    for ex in d.exchanges:
        for loc in ex.record_fields:
            for b in loc.records.decoded.batches:
                for r in b.records or ():
                    got.append(((ex.api_name, ex.api_version, ex.correlation_id, loc.topic,
                                 loc.partition), b, r))
    checked = 0
    for t in truth["records"]:
        c = t["carried_in"]
        where = (c["api_name"], c["api_version"], c["correlation_id"], t["topic"], t["partition"])
        # the offset on the wire: Fetch responses carry the final offsets; Produce requests
        # carry what the producer wrote (``wire_offset`` when the truth knows it)
        wire = t["offset"] if c["api_name"] != "Produce" else t.get("wire_offset")
        match = [(b, r) for w, b, r in got if w == where and _hex(r.key) == t["key_hex"]
                 and _hex(r.value) == t["value_hex"] and (wire is None or r.offset == wire)]
        assert match, (where, t["offset"], t["key_text"])
        b, r = match[0]
        assert _headers(r.headers) == [[k, v] for k, v in t["headers"]], where
        if t.get("timestamp_ms") is not None:
            assert r.timestamp_ms == t["timestamp_ms"], where
        assert b.magic == t["magic"] and b.codec == t["compression"], where
        checked += 1
    assert checked == len(truth["records"]) > 30
    kinds = Counter(i.kind for _, i in d.all_issues())
    assert kinds == Counter({"crc_mismatch": 1})  # the deliberate one; the cut Fetch tail is normal


def test_control_batches_and_transactions():
    d = decode_capture(CAPTURES / "librdkafka_transactions.pcap", with_records=True)
    markers = Counter()
    for ex in d.exchanges:
        for loc in ex.record_fields:
            for b in loc.records.decoded.batches:
                if b.control:
                    assert b.transactional
                    for r in b.records:
                        markers[r.control["type_name"]] += 1
    assert markers["COMMIT"] >= 1 and markers["ABORT"] >= 1
