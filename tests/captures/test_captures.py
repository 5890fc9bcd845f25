"""Decoding the committed captures (captures/*.pcap) against their ground truth.

The truth files were recorded from the clients (delivery reports, librdkafka/kafka-python
debug logs) and from the mock cluster's request tracking, never from the pcap.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import CAPTURES, decode_capture, update_golden

ALL_PCAPS = sorted(CAPTURES.glob("*.pcap"))
# captures of real clients against the mock cluster (the others: TLS, crafted, have their
# own tests in test_special_captures.py; every capture has a golden file)
PCAPS = [p for p in ALL_PCAPS
         if "mock_requests" in json.loads(p.with_suffix(".truth.json").read_text())]
GOLDEN = CAPTURES / "golden"

# APIs the mock cluster does not implement: it closes the connection instead of answering.
MOCK_UNIMPLEMENTED = {"ListGroups", "DescribeGroups", "DescribeConfigs"}


def truth_of(pcap: Path) -> dict:
    return json.loads(pcap.with_suffix(".truth.json").read_text())


def explain(scenario: str, ex, issue) -> str | None:
    """Why an issue is expected in this capture (the capture really contains it), or None."""
    kind = issue.kind
    api = ex.api_name if ex is not None else None
    version = ex.api_version if ex is not None else None
    direction = issue.direction
    if kind == "unanswered_request":
        if issue.severity == "info":
            return "request in flight when the capture stopped (long-poll Fetch, last Metadata)"
        if api in MOCK_UNIMPLEMENTED:
            return "the mock closes the connection on APIs it does not implement"
    if kind in ("orphan_response", "mid_stream_start") and scenario == "librdkafka_midstream":
        return "the capture started while the connections were open"
    if api == "ApiVersions" and version >= 3 and direction == "response" and \
            kind == "body_decode_error" and "fits neither the v0 layout" in issue.message:
        return "librdkafka's mock answers unsupported ApiVersions v3 with a hand-built hybrid " \
               "body (raw i8 count, no tag buffers) that is neither v0 nor v3"
    if api == "Metadata" and version == 13 and kind == "trailing_bytes":
        if direction == "response" and issue.length_bytes == 1:
            return "the mock writes one byte more than Metadata v13 has"
        if direction == "request" and issue.length_bytes == 3:
            return "librdkafka writes an int32 topic count (4 bytes) where v13 has a compact array"
    if api == "FindCoordinator" and kind == "spec_departure" and issue.field_path == "host":
        return "the mock writes a null host (non-nullable) in its error answer"
    if api == "OffsetFetch" and kind == "spec_departure" and issue.field_path == "topics":
        return "the mock writes a null topics array (non-nullable) for kafka-python's request"
    if api == "Produce" and version == 5 and kind == "body_decode_error" and \
            scenario == "librdkafka_mock_quirks" and issue.field_path.endswith("log_start_offset"):
        return "the mock's Produce v5 answer lacks LogStartOffset (the client fails too)"
    if api == "Produce" and kind == "spec_departure" and "acks=0" in issue.message and \
            scenario == "librdkafka_mock_quirks":
        return "the mock answers Produce requests sent with acks=0"
    if kind == "crc_mismatch" and "stored CRC is 0x00000000" in issue.message and \
            scenario == "librdkafka_transactions" and _control_batch_with_zero_crc(ex, issue):
        return "the mock appends control batches (transaction markers) without computing a CRC"
    if api == "ShareGroupHeartbeat" and kind == "trailing_bytes" and issue.length_bytes == 1:
        return "the mock writes one byte more than ShareGroupHeartbeat v1 has"
    return None


def _control_batch_with_zero_crc(ex, issue) -> bool:
    return any(b.control and b.crc == 0 for loc in ex.record_fields if loc.field_path ==
               issue.field_path for b in loc.records.decoded.batches)


@pytest.fixture(params=PCAPS, ids=[p.stem for p in PCAPS])
def pcap(request) -> Path:
    return request.param


def test_captures_exist():
    assert len(PCAPS) >= 8, "the capture script's scenarios must be committed"


def test_every_issue_is_explained_by_the_capture(pcap):
    d = decode_capture(pcap)
    unexplained = [f"{ex.api_name if ex else '-'} v{ex.api_version if ex else '-'} "
                   f"{i.direction} {i.kind} {i.field_path}: {i.message}"
                   for ex, i in d.all_issues() if explain(pcap.stem, ex, i) is None]
    assert not unexplained, "\n".join(unexplained[:20])


def test_no_packet_skipped_and_all_connections_kafka(pcap):
    d = decode_capture(pcap)
    st = d.pipeline.stats
    assert not st.skipped, st.skipped
    assert st.other_connections == 0
    assert st.kafka_connections >= 1


def _window(truth: dict) -> tuple[int, int]:
    cap = truth["capture"]
    margin = 50_000_000  # 50 ms around the capture start/stop for a capture started mid-stream
    return cap["started_ts_ns"] + margin, cap["stopped_ts_ns"] - margin


def test_every_logged_request_is_decoded(pcap):
    """Each request a client logged (api, version, correlation_id, broker) is an exchange."""
    truth = truth_of(pcap)
    d = decode_capture(pcap)
    decoded = Counter((int(ex.broker.rsplit(":", 1)[1]), ex.api_key, ex.api_version,
                       ex.correlation_id) for ex in d.exchanges if ex.request is not None)
    lo, hi = _window(truth)
    mid = truth["capture"].get("mid_stream", False)
    expected = Counter()
    for r in truth["requests"]:
        if r.get("correlation_id") is None or r.get("broker_port") is None:
            continue
        if mid and not (lo <= r["logged_sent_ts_ns"] <= hi):
            continue
        expected[(r["broker_port"], r["api_key"], r["api_version"], r["correlation_id"])] += 1
    assert expected, "the truth file lists requests"
    missing = expected - decoded
    assert not missing, f"logged requests not decoded: {sorted(missing)[:10]}"


def test_request_counts_match_the_mock_and_the_clients(pcap):
    truth = truth_of(pcap)
    d = decode_capture(pcap)
    decoded = Counter(ex.api_name for ex in d.exchanges if ex.request is not None)
    mock = Counter(truth["mock_requests"]["count_by_api"])
    logged = Counter(truth["request_summary"]["count_by_api"])
    expected = mock | logged  # the larger of the two per API
    if truth["capture"].get("mid_stream"):
        assert all(decoded[api] <= n for api, n in expected.items())
        assert sum(decoded.values()) > 0.5 * sum(expected.values())
    else:
        assert decoded == expected


def test_produced_partitions_appear_in_produce_requests(pcap):
    truth = truth_of(pcap)
    d = decode_capture(pcap)
    seen = set()
    for ex in d.exchanges:
        if ex.api_key == 0 and ex.request is not None and ex.request.body:
            for t in ex.request.body.get("topic_data", []):
                for p in t["partition_data"]:
                    seen.add((t.get("name"), p["index"]))
    lo, hi = _window(truth)
    mid = truth["capture"].get("mid_stream", False)
    wanted = {(r["topic"], r["partition"]) for r in truth["produced"]
              if r.get("error") is None and r.get("partition") is not None
              and (not mid or lo <= r["produce_call_ts_ns"] <= hi)}
    assert wanted <= seen, sorted(wanted - seen)


def test_throttle_and_latency_fields(pcap):
    """Paired exchanges have a non-negative latency; the mock never throttles."""
    d = decode_capture(pcap)
    assert any(ex.status == "paired" for ex in d.exchanges)
    for ex in d.exchanges:
        if ex.status == "paired":
            assert ex.latency_ns is not None and ex.latency_ns >= 0
        if ex.throttle_time_ms is not None:
            assert ex.throttle_time_ms == 0


def _digest(value) -> str:
    from kafkasniff.output.render import jsonable
    text = json.dumps(jsonable(value), sort_keys=True, separators=(",", ":"))
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def golden_lines(d) -> list[str]:
    """One compact JSON line per exchange and per standalone issue."""
    out = []
    for ex in d.exchanges:
        # the long-poll rule only where one matched: the lines of other exchanges stay as
        # they were before long-polls were told apart
        lp = {"long_poll": ex.long_poll_rule} if ex.long_poll else {}
        out.append(json.dumps({
            "ts_ns": ex.ts_ns, "client": ex.client, "broker": ex.broker, "api": ex.api_name,
            "v": ex.api_version, "corr": ex.correlation_id, "client_id": ex.client_id,
            "status": ex.status, "latency_ns": ex.latency_ns, "bytes": [ex.request_bytes,
                                                                       ex.response_bytes],
            "errors": list(ex.errors), "throttle_ms": ex.throttle_time_ms,
            "topics": list(ex.topics), "issues": [i.kind for i in ex.issues],
            "request": _digest(ex.request.body) if ex.request else None,
            "response": _digest(ex.response.body) if ex.response else None, **lp,
        }, sort_keys=False))
    for i in d.issues:
        out.append(json.dumps({"issue": i.kind, "ts_ns": i.ts_ns, "message": i.message}))
    return out


@pytest.mark.parametrize("any_pcap", ALL_PCAPS, ids=[p.stem for p in ALL_PCAPS])
def test_golden_output(any_pcap):
    """The decode of each capture equals its reviewed golden file (captures/golden/)."""
    pcap = any_pcap
    d = decode_capture(pcap)
    lines = golden_lines(d)
    golden = GOLDEN / f"{pcap.stem}.jsonl"
    if update_golden():
        GOLDEN.mkdir(exist_ok=True)
        golden.write_text("".join(line + "\n" for line in lines))
    assert golden.is_file(), f"no golden file: run with KAFKASNIFF_UPDATE_GOLDEN=1 to create {golden}"
    expected = golden.read_text().splitlines()
    assert lines == expected


def test_injected_errors_and_latency_are_seen():
    """Errors and RTTs injected into the mock show up as decoded error names and latencies."""
    pcap = CAPTURES / "librdkafka_errors_latency.pcap"
    truth = truth_of(pcap)
    d = decode_capture(pcap)
    from kafkasniff.protocol.schema import load_definitions
    names = load_definitions().errors
    for inj in truth["injected"]:
        if inj["kind"] == "broker_request_error_rtts":
            port = inj["broker_port"]
            want = Counter(names[c].name for c, _ in inj["errors_and_rtts"] if c)
            got = Counter(e for ex in d.exchanges if ex.api_name == inj["api_name"]
                          and ex.broker.endswith(f":{port}") for e in ex.errors)
            assert not want - got, (inj["effect"], got)
            on_broker = [ex for ex in d.exchanges if ex.api_name == inj["api_name"]
                         and ex.broker.endswith(f":{port}")]
            for rtt in (rtt for c, rtt in inj["errors_and_rtts"] if rtt):
                if "gave up" in inj["effect"]:  # the client closed before the late answer
                    assert any(ex.status == "unanswered" for ex in on_broker), inj["effect"]
                else:
                    assert any(ex.latency_ns and ex.latency_ns >= rtt * 1_000_000
                               for ex in on_broker), inj["effect"]
        elif inj["kind"] == "request_errors":
            assert any(set(inj["error_names"]) <= set(ex.errors) for ex in d.exchanges
                       if ex.api_name == inj["api_name"]), inj["effect"]
        elif inj["kind"] == "broker_rtt":
            lat = [ex.latency_ns for ex in d.exchanges if ex.status == "paired"
                   and ex.broker.endswith(f":{inj['broker_port']}")]
            assert lat and min(lat) >= inj["rtt_ms"] * 1_000_000 * 0.95, inj["effect"]
