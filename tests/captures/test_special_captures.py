"""Captures that are not plain client traffic: TLS, crafted SASL, crafted Kafka 0.7, crafted
throttling."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

from tests.conftest import CAPTURES, decode_capture


def truth(name: str) -> dict:
    return json.loads((CAPTURES / f"{name}.truth.json").read_text())


def test_tls_connections_are_reported_not_decoded():
    t = truth("tls_handshake")
    d = decode_capture(CAPTURES / "tls_handshake.pcap", ports=frozenset({9093}))
    assert d.exchanges == []
    tls = [i for i in d.issues if i.kind == "tls_connection"]
    assert len(tls) == len(t["tls_connections"]) == d.pipeline.stats.tls_connections
    assert all(i.severity == "info" for i in d.issues)
    by_port = {int(i.client.rsplit(":", 1)[1]): i.message for i in tls}
    names = {"TLSv1.2": "TLS 1.2", "TLSv1.3": "TLS 1.3"}
    for c in t["tls_connections"]:
        msg = by_port[c["client_port"]]
        assert f"SNI {c['client_hello']['sni']}" in msg
        assert f"client offers {names[c['client_hello']['versions_offered'][0]]}" in msg
        assert f"server selected {names[c['negotiated_version']]}" in msg


def test_tls_on_no_broker_port_is_counted_only():
    d = decode_capture(CAPTURES / "tls_handshake.pcap")
    assert d.exchanges == [] and d.issues == []
    st = d.pipeline.stats
    assert st.tls_connections == 3 and st.other_connections == 3 and st.kafka_connections == 0


def test_crafted_sasl_requests_and_raw_tokens():
    t = truth("crafted_sasl")
    d = decode_capture(CAPTURES / "crafted_sasl.pcap")
    got = Counter((int(ex.client.rsplit(":", 1)[1]), ex.api_key, ex.api_version, ex.correlation_id)
                  for ex in d.exchanges if ex.api_key >= 0)
    want = Counter((r["client_port"], r["api_key"], r["api_version"], r["correlation_id"])
                   for r in t["requests"])
    assert got == want
    raw = [ex for ex in d.exchanges if ex.api_name == "SaslToken"]
    frames = t["raw_sasl_frames"]
    assert len(raw) == 1 and raw[0].status == "paired"
    assert raw[0].request.frame_bytes == frames[0]["frame_bytes"]
    assert raw[0].response.frame_bytes == frames[1]["frame_bytes"]
    assert not d.issues and all(not ex.issues for ex in d.exchanges)
    failed = [ex for ex in d.exchanges if ex.errors]
    assert [ex.errors for ex in failed] == [("SASL_AUTHENTICATION_FAILED",)]


def test_raw_sasl_token_latency():
    """A raw SASL token exchange (KIP-43) has a latency like any exchange: the broker's
    token's first byte minus the client's token's last byte. Each token is one segment here;
    the script records each token's time after the peer's ACK (the same 25 us later for
    both), so the difference of the recorded times is the latency."""
    frames = truth("crafted_sasl")["raw_sasl_frames"]
    [raw] = [ex for ex in decode_capture(CAPTURES / "crafted_sasl.pcap").exchanges
             if ex.api_name == "SaslToken"]
    assert raw.status == "paired"
    assert raw.request.last_ts_ns == frames[0]["ts_ns"] - 25_000
    assert raw.response.first_ts_ns == frames[1]["ts_ns"] - 25_000
    assert raw.latency_ns == frames[1]["ts_ns"] - frames[0]["ts_ns"] == 625_000


def test_crafted_kafka07():
    t = truth("crafted_kafka07")
    d = decode_capture(CAPTURES / "crafted_kafka07.pcap")
    assert d.pipeline.stats.kafka07_connections == 2
    assert [(ex.api_name, ex.status) for ex in d.exchanges] == [
        (f"{r['request_name']} (0.7)", "paired" if r["expects_response"] else "no_response_expected")
        for r in t["requests_07"]]
    for ex, r in zip(d.exchanges, t["requests_07"]):
        assert ex.request.frame_bytes == r["request_frame_bytes"]
        if r.get("topic"):
            assert r["topic"] in ex.topics
        if r["response"]:
            assert ex.response.frame_bytes == r["response"]["response_frame_bytes"]
    assert [ex.errors for ex in d.exchanges if ex.errors] == [("OffsetOutOfRange",)]
    # every message payload the script wrote is in a decoded request or response
    payloads = set()

    def walk(v):
        if isinstance(v, dict):
            if "payload" in v and isinstance(v["payload"], bytes):
                payloads.add(v["payload"].hex())
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    for ex in d.exchanges:
        walk(ex.request.body)
        if ex.response is not None:
            walk(ex.response.body)
    want = {m["payload_hex"] for m in t["messages"] if m.get("payload_hex")}
    assert want <= payloads
    assert not [i for _, i in d.all_issues()]


def _kafkasniff(*args: str) -> str:
    """stdout of the installed ``kafkasniff`` command run as a subprocess (exit code 0)."""
    exe = Path(sys.executable).with_name("kafkasniff")
    argv = [str(exe)] if exe.exists() else [sys.executable, "-m", "kafkasniff.cli"]
    res = subprocess.run(argv + list(args), capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout


THROTTLE_KEYS = ("count", "throttled", "throttle_total_ms", "throttle_max_ms")


def _throttle_from_truth(requests: list[dict]) -> dict[str | None, dict[str, int]]:
    """Per API name (``None``: all APIs): exchanges, throttled exchanges (throttle_time_ms
    > 0), total and max throttle_time_ms (ms), from the truth's responses."""
    out: dict[str | None, dict[str, int]] = {}
    for r in requests:
        ms = r["response"]["throttle_time_ms"]
        for key in (r["api_name"], None):
            w = out.setdefault(key, dict.fromkeys(THROTTLE_KEYS, 0))
            w["count"] += 1
            w["throttled"] += ms > 0
            w["throttle_total_ms"] += ms
            w["throttle_max_ms"] = max(w["throttle_max_ms"], ms)
    return out


def test_crafted_throttle_stats_and_read_json():
    """Throttle times flow from the responses through ``stats --json`` (per API and in
    total) and ``read --json`` (per exchange): every value equals what the truth put in."""
    t = truth("crafted_throttle")
    pcap = str(CAPTURES / "crafted_throttle.pcap")
    assert all(r["response"] is not None for r in t["requests"])
    want = _throttle_from_truth(t["requests"])
    # the capture holds throttled and unthrottled Produce and Fetch exchanges
    assert want["Produce"]["throttled"] >= 2 and want["Fetch"]["throttled"] >= 2
    assert 0 < want[None]["throttled"] < want[None]["count"]

    rep = json.loads(_kafkasniff("stats", "--json", pcap))
    got = {api: {k: row[k] for k in THROTTLE_KEYS} for api, row in rep["apis"].items()}
    got[None] = {k: rep["total"][k] for k in THROTTLE_KEYS}
    assert got == want

    lines = [json.loads(line) for line in _kafkasniff("read", "--json", pcap).splitlines()]
    exchanges = [d for d in lines if d["type"] == "exchange"]
    assert len(exchanges) == len(lines) == len(t["requests"])
    got_ex = {(int(d["connection"]["client"].rsplit(":", 1)[1]), d["api_key"], d["api_version"],
               d["correlation_id"]): (d["status"], d["throttle_time_ms"]) for d in exchanges}
    want_ex = {(r["client_port"], r["api_key"], r["api_version"], r["correlation_id"]):
               ("paired", r["response"]["throttle_time_ms"]) for r in t["requests"]}
    assert got_ex == want_ex
