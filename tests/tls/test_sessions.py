"""TLS sessions beyond a first handshake, on the committed capture of real clients and a real
Kafka 4.3.1 broker (captures/broker_tls_sessions.pcap, made by make_broker_captures.py):
KeyUpdate both ways (the broker's key limit is 32 KiB; a kafka-python producer and consumer
move 64 KiB), TLS 1.3 resumption with a PSK and TLS 1.2 resumption with a session ticket
(franz-go with a session cache; Go writes no key log line for a resumed TLS 1.2 session, so
its master secret comes from the handshake that made the session). Also: the same traffic
with the original handshake or a connection's start cut out, and tshark decrypting both TLS
captures with the same key logs.

Truth: the broker's request log (broker_tls_sessions.truth.json), never read from the pcap.
"""

from __future__ import annotations

import json
import shutil

import pytest

from kafkasniff.issues import IssueKind
from kafkasniff.pipeline import PipelineOptions
from tests.broker.common import (
    body_differences,
    client_port,
    decode,
    logged_from_truth,
    tshark_kafka_requests,
    unpaired,
)
from tests.conftest import CAPTURES

PCAP = CAPTURES / "broker_tls_sessions.pcap"
KEYLOG = CAPTURES / "broker_tls_sessions.keylog"
TRUTH = json.loads(PCAP.with_suffix(".truth.json").read_text())


def _decode(pcap=PCAP, keylog=KEYLOG):
    return decode(pcap, PipelineOptions(ports=frozenset(TRUTH["broker_ports"]),
                                        tls_keylog=(str(keylog),), with_records=True),
                  logged_from_truth(TRUTH["broker_requests"]))


@pytest.fixture(scope="module")
def sessions():
    return _decode()


def _tls(cap) -> dict:
    return {client: s.tls["decrypted"] for client, s in cap.connections.items()}


def test_every_logged_request_is_decrypted_paired_and_equal(sessions):
    cap, pipe = sessions
    assert len(cap.logged) >= 40 and not unpaired(cap)
    diffs, compared = body_differences(cap)
    assert not diffs, "\n".join(diffs[:20])
    assert compared >= 80
    assert not [i for i in cap.issues if i.kind == IssueKind.TLS_UNDECRYPTED]
    assert pipe.stats.bytes["tls"] == 0
    assert sum(pipe.stats.bytes.values()) == PCAP.stat().st_size


def test_key_updates_of_both_sides_are_followed(sessions):
    cap, _ = sessions
    updates = [t["key_updates"] for t in _tls(cap).values()]
    assert any(u["client"] and u["server"] for u in updates)      # the producer's
    assert sum(u["server"] for u in updates) >= 4
    produced = {e["offset"] for e in TRUTH["client_events"] if e["event"] == "produced"
                and e["run"] == "kafka-python/key-update"}
    fetched = {r.offset for ex in cap.exchanges if ex.api_name == "Fetch"
               for loc in ex.record_fields if loc.records.decoded
               for b in loc.records.decoded.batches for r in b.records or ()}
    assert len(produced) == 16 and produced <= fetched       # read back after the updates


def test_resumed_sessions_decrypt_without_a_key_log_line_for_tls12(sessions):
    cap, _ = sessions
    resumed = {t["version"] for t in _tls(cap).values() if t["resumed"]}
    assert resumed == {"TLS 1.2", "TLS 1.3"}
    randoms = {line.split()[1] for line in KEYLOG.read_text().splitlines()
               if line and not line.startswith("#")}
    tls12 = [c for c, t in _tls(cap).items() if t["version"] == "TLS 1.2"]
    assert len(tls12) == 2 and len(randoms) == len(cap.connections) - 1
    assert all(t["undecrypted_bytes"] == 0 for t in _tls(cap).values())


def _without(tmp_path, name: str, drop) -> object:
    """broker_tls_sessions.pcap without the packets ``drop(n, client_port)`` selects."""
    import dpkt

    out = tmp_path / name
    ports = set(TRUTH["broker_ports"])
    with open(PCAP, "rb") as f, open(out, "wb") as g:
        reader = dpkt.pcap.Reader(f)
        writer = dpkt.pcap.Writer(g, snaplen=reader.snaplen, linktype=reader.datalink(),
                                  nano=True)
        for n, (ts, buf) in enumerate(reader):
            tcp = dpkt.ethernet.Ethernet(buf).data.data
            client = tcp.dport if tcp.sport in ports else tcp.sport
            if not drop(n, client):
                writer.writepkt(buf, ts)
    return out


def test_a_resumed_session_whose_handshake_is_not_captured_names_its_client_random(
        sessions, tmp_path):
    """The capture starts after the TLS 1.2 session was made: its resumption has no key
    (none in the key log, no handshake to take the master secret from). One issue names the
    connection's client random and says it was resumed; everything else decodes."""
    cap, _ = sessions
    first, resumed = sorted((client_port(c) for c, t in _tls(cap).items()
                             if t["version"] == "TLS 1.2"),
                            key=lambda p: _tls(cap)[f"127.0.0.1:{p}"]["resumed"])
    cut, pipe = _decode(_without(tmp_path, "late.pcap", lambda n, port: port == first))
    notes = [i for i in cut.issues if i.kind == IssueKind.TLS_UNDECRYPTED]
    assert len(notes) == 1 and "resumed session" in notes[0].message
    assert client_port(notes[0].client) == resumed
    named = [w for w in notes[0].message.split() if len(w) == 64]
    assert named and bytes.fromhex(named[0])
    assert len(cut.exchanges) == len(cap.exchanges) - sum(
        1 for ex in cap.exchanges if client_port(ex.client) in (first, resumed))
    assert sum(pipe.stats.bytes.values()) == cut.pcap.stat().st_size


def test_a_connection_joined_mid_stream_is_reported_and_the_rest_decodes(sessions, tmp_path):
    """The capture starts inside the key-update producer's connection (its first 12
    packets, the handshake, are not in it): that connection reports no handshake; the other
    connections decode as before."""
    cap, _ = sessions
    busiest = max(_tls(cap), key=lambda c: _tls(cap)[c]["decrypted_bytes"])
    seen: list[int] = []

    def drop(n, port):
        if port == client_port(busiest):
            seen.append(n)
            return len(seen) <= 12
        return False

    cut, pipe = _decode(_without(tmp_path, "mid.pcap", drop))
    notes = [i for i in cut.issues if i.kind == IssueKind.TLS_UNDECRYPTED]
    assert notes and all("mid-stream" in i.message for i in notes)
    assert {i.client for i in notes} == {busiest}
    others = [ex for ex in cap.exchanges if ex.client != busiest]
    assert [(ex.client, ex.correlation_id) for ex in cut.exchanges] == \
        [(ex.client, ex.correlation_id) for ex in others]
    assert sum(pipe.stats.bytes.values()) == cut.pcap.stat().st_size


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
@pytest.mark.parametrize("name", ["broker_tls", "broker_tls_sessions"])
def test_tshark_finds_the_same_kafka_requests_with_the_same_key_log(name):
    """Wireshark's dissector decrypting the capture with the same key log finds the same
    requests (client port, api_key, correlation_id) as kafkasniff, except on the resumed TLS
    1.2 connection, which tshark 4.0 does not decrypt and kafkasniff does (those requests are
    in the broker's log)."""
    pcap = CAPTURES / f"{name}.pcap"
    truth = json.loads(pcap.with_suffix(".truth.json").read_text())
    ports = truth["broker_ports"]
    theirs = tshark_kafka_requests(pcap, CAPTURES / truth["keylog"], ports)
    cap, _ = decode(pcap, PipelineOptions(ports=frozenset(ports),
                                          tls_keylog=(str(CAPTURES / truth["keylog"]),)),
                    logged_from_truth(truth["broker_requests"]))
    ours = {(client_port(ex.client), ex.api_key, ex.correlation_id) for ex in cap.exchanges}
    assert len(ours) >= 40 and theirs <= ours
    logged = {(r.client_port, r.api_key, r.correlation_id) for r in cap.logged}
    resumed12 = {client_port(c) for c, s in cap.connections.items()
                 if s.tls["decrypted"]["resumed"] and s.tls["decrypted"]["version"] == "TLS 1.2"}
    extra = ours - theirs
    assert extra <= logged and {port for port, _, _ in extra} <= resumed12
