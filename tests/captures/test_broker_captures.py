"""The committed captures of real clients and a real Kafka 4.3.1 broker (captures/broker_*.pcap,
made by captures/make_broker_captures.py) decoded against their truth: the broker's request
log (headers, timings, the bodies it parsed and sent) and what the clients recorded.

The same checks as tests/broker (which run them on fresh captures of a live broker), here on
fixed files that need no Java, Go or broker: every request the broker logged is found and
paired with its ids, every body equals the broker's, every request a client says it sent is
found, records and offsets and admin errors equal the clients', latency is at least the
broker's own time, nothing else is reported.
"""

from __future__ import annotations

import functools
import json

import pytest

from kafkasniff.pipeline import PipelineOptions
from tests.broker.common import (
    BrokerCapture,
    admin_mismatches,
    body_differences,
    client_port,
    committed_missing,
    consumed_missing,
    decode,
    every_output,
    logged_from_truth,
    produced_mismatches,
    status_allowing_resets,
    unexpected_issues,
    unfound_client_requests,
    unpaired,
)
from tests.broker.scenarios import GO_ADMIN_APIS, JAVA_ADMIN_APIS
from tests.captures.test_secrets import _leaks
from tests.conftest import CAPTURES
from tests.support.client_truth import ClientRequest, ClientRun

#: the plaintext ones (broker_tls and broker_tls_sessions are encrypted: their own tests below)
PCAPS = sorted(p for p in CAPTURES.glob("broker_*.pcap") if not p.stem.startswith("broker_tls"))
NAMES = [p.stem for p in PCAPS]


@functools.lru_cache(maxsize=None)
def loaded(name: str) -> tuple[dict, BrokerCapture, dict[str, ClientRun]]:
    """The truth, the decoded capture (with records) and the clients' runs of ``name``."""
    pcap = CAPTURES / f"{name}.pcap"
    truth = json.loads(pcap.with_suffix(".truth.json").read_text())
    cap, _ = decode(pcap, PipelineOptions(ports=frozenset(truth["broker_ports"]),
                                          with_records=True),
                    logged_from_truth(truth["broker_requests"]))
    runs: dict[str, ClientRun] = {}
    for q in truth["client_requests"]:
        runs.setdefault(q["run"], ClientRun([], [], pcap)).requests.append(ClientRequest(
            q["api_key"], q["api_version"], q["correlation_id"], q["client_id"],
            client_port=q["client_port"]))
    for e in truth["client_events"]:
        runs.setdefault(e["run"], ClientRun([], [], pcap)).lines.append(
            {k: v for k, v in e.items() if k != "run"})
    return truth, cap, runs


@pytest.fixture(params=NAMES)
def name(request) -> str:
    return request.param


def test_the_broker_captures_are_committed():
    assert {"broker_java", "broker_go", "broker_failover"} <= set(NAMES)


def test_every_logged_request_is_paired_with_the_brokers_ids(name):
    """Paired with the broker's api_key, api_version, correlation_id and client_id; at the
    end of a reset connection (the failover's crash, a client giving up) a request the broker
    logged may have lost its answer in the socket."""
    _, cap, _ = loaded(name)
    assert len(cap.logged) >= 100
    assert not unpaired(cap, status_allowing_resets(cap))


def test_decoded_bodies_equal_the_brokers(name):
    _, cap, _ = loaded(name)
    diffs, compared = body_differences(cap)
    assert not diffs, "\n".join(diffs[:30])
    assert compared >= 150


def test_every_request_a_client_sent_is_found(name):
    _, cap, runs = loaded(name)
    sent = [q for r in runs.values() for q in r.requests]
    assert len(sent) >= 40
    assert not unfound_client_requests(cap, sent)


def test_nothing_unexpected_is_reported(name):
    truth, cap, _ = loaded(name)
    victim = truth["events"].get("victim_port")
    broker = {ex.client: ex.broker for ex in cap.exchanges}
    assert not unexpected_issues(
        cap, lambda ex, i: victim is not None and
        client_port(broker.get(i.client, "?:0")) == victim)


def test_latency_is_at_least_the_brokers_own_time(name):
    """The broker's totalTimeMs runs from reading the request to the end of sending the
    response; the sniffer sees the first request byte before the broker reads it and the
    first response byte before the send ends: its latency is at least totalTimeMs minus
    sendTimeMs (1 ms of rounding aside)."""
    _, cap, _ = loaded(name)
    by_ids = {(client_port(ex.broker), client_port(ex.client), ex.correlation_id): ex
              for ex in cap.exchanges}
    short = []
    for r in cap.logged:
        ex = by_ids.get((r.local_port, r.client_port, r.correlation_id))
        if ex is None or ex.latency_ns is None:
            continue
        bound = r.total_time_ms - (r.fields.get("sendTimeMs") or 0)
        if ex.latency_ns / 1e6 < bound - 1.0:
            short.append((ex.client_id, ex.api_name, ex.correlation_id, ex.latency_ns / 1e6,
                          r.total_time_ms))
        if ex.throttle_time_ms is not None:
            assert ex.throttle_time_ms == r.throttle_time_ms
    assert not short


@pytest.mark.parametrize("family,runs", [
    ("broker_java", ["produce"]), ("broker_go", ["franz/produce", "sarama/produce"]),
    ("broker_failover", ["producer"])])
def test_produced_records_are_where_the_producers_say(family, runs):
    _, cap, client_runs = loaded(family)
    for run in runs:
        produced = client_runs[run].events("produced")
        assert produced, run
        assert not produced_mismatches(cap, produced), run


@pytest.mark.parametrize("family,run,api", [
    ("broker_java", "consumer", "Fetch"), ("broker_java", "classic", "Fetch"),
    ("broker_java", "share", "ShareFetch"), ("broker_go", "franz/consumer", "Fetch"),
    ("broker_go", "franz/classic", "Fetch"), ("broker_go", "franz/share", "ShareFetch"),
    ("broker_go", "sarama/classic", "Fetch")])
def test_consumed_records_are_in_the_fetch_responses(family, run, api):
    _, cap, runs = loaded(family)
    consumed = runs[run].events("consumed")
    assert consumed
    assert not consumed_missing(cap, consumed, api)
    committed = runs[run].events("committed")
    assert not committed_missing(cap, committed)


@pytest.mark.parametrize("family,run,apis", [
    ("broker_java", "admin", JAVA_ADMIN_APIS),
    ("broker_go", "franz/admin", GO_ADMIN_APIS["franz"]),
    ("broker_go", "sarama/admin", GO_ADMIN_APIS["sarama"])])
def test_admin_operations_decode_with_the_errors_the_client_saw(family, run, apis):
    truth, cap, runs = loaded(family)
    ops = runs[run].events("admin")
    client_id = {e["client_id"] for e in truth["client_requests"] if e["run"] == run} - {None}
    assert [x["op"] for x in ops] == list(apis)
    assert len(client_id) == 1
    assert not admin_mismatches(cap, client_id.pop(), ops, apis)


def test_the_failover_moves_the_leader_and_back():
    truth, cap, _ = loaded("broker_failover")
    ev = truth["events"]
    assert ev["during"]["0"] != ev["victim"] == ev["after"]["0"]
    seen = set()
    for ex in cap.exchanges:
        if ex.api_name == "Metadata" and ex.response is not None and \
                (ex.client_id or "").endswith("-producer"):
            for t in ex.response.body["topics"]:
                for p in t["partitions"]:
                    if p["partition_index"] == 0 and p["error_code"] == 0:
                        seen.add(p["leader_id"])
    assert {ev["victim"], ev["during"]["0"]} <= seen


def test_no_sensitive_value_in_any_output(tmp_path):
    texts = every_output(CAPTURES / "broker_java.pcap", tmp_path)
    leaks = {n: _leaks(t, [b"java-ssl-key-Pa55word"]) for n, t in texts.items()}
    assert not any(leaks.values()), leaks


def test_default_decode_finds_every_broker_connection(name):
    """Without --port (the failover's nodes are not on 9092): every connection is found and
    read in the right direction, including those joined mid-stream."""
    truth, cap, _ = loaded(name)
    default, _ = decode(cap.pcap, PipelineOptions())
    ids = {(ex.broker, ex.client, ex.correlation_id, ex.api_key) for ex in default.exchanges}
    want = {(ex.broker, ex.client, ex.correlation_id, ex.api_key) for ex in cap.exchanges}
    assert ids == want


# --------------------------------------------------------------------------- broker_tls

@pytest.mark.parametrize("name", ["broker_tls", "broker_tls_sessions"])
def test_tls_capture_is_tls_and_its_key_log_matches(name):
    """broker_tls*: without keys kafkasniff names every connection TLS (1.2 and 1.3) and
    counts every byte; the committed key log holds a client random for most connections
    (the material the TLS decryption works from; Go logs no line for a resumed TLS 1.2
    session)."""
    pcap = CAPTURES / f"{name}.pcap"
    truth = json.loads(pcap.with_suffix(".truth.json").read_text())
    cap, pipe = decode(pcap, PipelineOptions(ports=frozenset(truth["broker_ports"])))
    connections = list(cap.connections.values())
    assert sum(pipe.stats.bytes.values()) == pcap.stat().st_size
    assert connections and {c.kind for c in connections} == {"tls"}
    assert {c.tls["server_hello"]["version"] for c in connections} == {"TLS 1.2", "TLS 1.3"}
    randoms = {line.split()[1] for line in (CAPTURES / truth["keylog"]).read_text().splitlines()
               if line.split()[:1] in (["CLIENT_RANDOM"], ["CLIENT_TRAFFIC_SECRET_0"])}
    assert len(randoms) >= len(connections) - 1
    assert len(truth["broker_requests"]) >= 20
