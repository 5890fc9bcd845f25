"""TLS on the real broker: Python (kafka-python, aiokafka) and Go (franz-go) producers on the
SSL and SASL_SSL listeners, TLS 1.2 with AES-GCM, AES-CBC and ChaCha20-Poly1305 and TLS 1.3,
each client writing an NSS key log (Python's ``SSLContext.keylog_filename``, Go's
``tls.Config.KeyLogWriter``); and TLS sessions beyond a first handshake (KeyUpdate both
ways, TLS 1.3 and TLS 1.2 resumption: ``tls_sessions_scenario``). Checked on fresh captures:

* without keys, kafkasniff finds every connection, names it TLS with its version, and
  decodes nothing inside: no byte counted as Kafka, none lost;
* the key log holds the secrets of every connection's client random;
* Wireshark (tshark) decrypting the same capture with the same key log finds exactly the
  requests the broker logged on those connections, so the key log and the capture match;
* with the key log, kafkasniff decrypts every request the broker logged, pairs it, and
  decodes the bodies the broker parsed and sent.
"""

from __future__ import annotations

import shutil
import uuid

import pytest

from kafkasniff.model import ConnectionKind
from kafkasniff.pipeline import PipelineOptions
from tests.broker.common import (
    body_differences,
    capture_scenario,
    client_port,
    decode,
    tshark_kafka_requests,
    unpaired,
)
from tests.broker.scenarios import TLS_RUNS, TLS_SESSION_RUNS, tls_scenario, tls_sessions_scenario

N = 3


def _capture(broker, go_clients, tmp_path_factory, name: str, ports, scenario, n: int):
    """(broker, key log, client runs, capture) of ``scenario`` on a fresh topic."""
    tag = f"{name}-" + uuid.uuid4().hex[:6]
    topic = f"{tag}-topic"
    broker.create_topic(topic, partitions=2)
    work = tmp_path_factory.mktemp(name)
    keylog = work / "keys.log"
    cap, runs = capture_scenario(broker, ports, work / f"{name}.pcap",
                                 lambda: scenario(go_clients, broker, topic, tag, keylog, n))
    return broker, keylog, runs, cap


@pytest.fixture(scope="module")
def tls_capture(kafka_broker, go_clients, tmp_path_factory):
    return _capture(kafka_broker, go_clients, tmp_path_factory, "tls",
                    [kafka_broker.ssl_port, kafka_broker.sasl_ssl_port], tls_scenario, N)


def _client_randoms(keylog) -> set[str]:
    out = set()
    for line in keylog.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] in ("CLIENT_RANDOM", "CLIENT_TRAFFIC_SECRET_0"):
            out.add(parts[1].lower())
    return out


def test_every_client_produced(tls_capture):
    _, _, runs, _ = tls_capture
    assert set(runs) == set(TLS_RUNS)
    for run in runs.values():
        assert len(run.events("produced")) == N


def test_every_connection_is_tls_and_nothing_is_lost(tls_capture):
    _, _, _, cap = tls_capture
    assert cap.connections
    kinds = {s.kind for s in cap.connections.values()}
    assert kinds == {ConnectionKind.TLS}
    assert not cap.exchanges            # no keys given: nothing decoded inside
    versions = {s.tls["server_hello"]["version"] for s in cap.connections.values()
                if s.tls and s.tls.get("server_hello")}
    assert versions == {"TLS 1.2", "TLS 1.3"}


def test_the_key_log_covers_every_connection(tls_capture):
    """One ClientHello per connection, one client random per ClientHello in the key log
    (TLS 1.2: CLIENT_RANDOM; TLS 1.3: CLIENT_TRAFFIC_SECRET_0 and the others)."""
    _, keylog, _, cap = tls_capture
    randoms = _client_randoms(keylog)
    hellos = [s for s in cap.connections.values() if s.tls and s.tls.get("client_hello")]
    assert hellos and len(randoms) >= len(hellos)


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
def test_tshark_decrypts_exactly_the_requests_the_broker_logged(tls_capture):
    broker, keylog, _, cap = tls_capture
    found = tshark_kafka_requests(cap.pcap, keylog, [broker.ssl_port, broker.sasl_ssl_port])
    logged = {(r.client_port, r.api_key, r.correlation_id) for r in cap.logged}
    assert logged and logged <= found
    # the authenticator's SASL requests and ApiVersions are not in the request log
    extra = {(p, k, c) for p, k, c in found - logged if k not in (17, 18, 36)}
    assert not extra
    assert {client_port(c) for c in cap.connections} >= {p for p, _, _ in found}


@pytest.fixture(scope="module")
def sessions_capture(kafka_broker, go_clients, tmp_path_factory):
    return _capture(kafka_broker, go_clients, tmp_path_factory, "sessions",
                    kafka_broker.ssl_port, tls_sessions_scenario, 16)


@pytest.mark.parametrize("which", ["tls_capture", "sessions_capture"])
def test_with_the_key_log_every_logged_request_is_decrypted_and_equal(which, request):
    broker, keylog, runs, cap = request.getfixturevalue(which)
    assert set(runs) == set(TLS_RUNS if which == "tls_capture" else TLS_SESSION_RUNS)
    dec, pipe = decode(cap.pcap, PipelineOptions(
        ports=frozenset({broker.ssl_port, broker.sasl_ssl_port}), tls_keylog=(str(keylog),)),
        cap.logged)
    assert len(dec.logged) >= 20 and not unpaired(dec)
    diffs, compared = body_differences(dec)
    assert not diffs, "\n".join(diffs[:20])
    assert compared >= 40 and pipe.stats.bytes["tls"] == 0
    if which == "sessions_capture":
        tls = [s.tls["decrypted"] for s in dec.connections.values()]
        assert {t["version"] for t in tls if t["resumed"]} == {"TLS 1.2", "TLS 1.3"}
        assert any(t["key_updates"]["client"] and t["key_updates"]["server"] for t in tls)
