"""SASL on a real Kafka 4.3.1 broker: librdkafka producers authenticate with PLAIN,
SCRAM-SHA-256 and SCRAM-SHA-512 on the SASL_PLAINTEXT listener while tcpdump captures it.

What it proves: the broker's request log and kafkasniff agree on every request it logged on
these connections (api_key, api_version, correlation_id, client_id, paired; the broker does
not log the SASL exchanges its authenticator answers, kafkasniff pairs them without an
error); the mechanism and user are shown; no password or SCRAM
proof appears in any output (text, JSON, stats, Parquet values, JSON Lines), as text, hex,
base64 at any alignment or JSON-escaped; with ``--show-secrets`` the PLAIN password is found,
so the search can fail; the principal the broker logged is the user who authenticated.
"""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafkasniff.cli import main
from kafkasniff.model import ConnectionSummary, Exchange, ExchangeStatus
from kafkasniff.pipeline import Pipeline, PipelineOptions, analyze
from tests.captures.test_secrets import TEXT_OUTPUTS, _leaks, _parquet_text
from tests.live.helpers import capture_permission
from tests.support.kafka_broker import SASL_USERS

pytestmark = [pytest.mark.skipif(capture_permission() is not None,
                                 reason=capture_permission() or "")]

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
SECRETS = [password.encode() for _, password in SASL_USERS.values()]


def _tcpdump(path: Path, ports: list[int]):
    sys.path.insert(0, str(CAPTURES))
    try:
        from harness.tcpdump import Tcpdump
    finally:
        sys.path.remove(str(CAPTURES))
    return Tcpdump(path, ports)


@pytest.fixture(scope="module")
def sasl_capture(kafka_broker, tmp_path_factory):
    from confluent_kafka import Producer

    broker = kafka_broker
    tag = "sasl-" + uuid.uuid4().hex[:6]
    topic = f"{tag}-topic"
    broker.create_topic(topic, partitions=1)
    pcap = tmp_path_factory.mktemp("sasl") / "sasl.pcap"
    td = _tcpdump(pcap, [broker.sasl_port])
    offset = broker.request_log_size()
    td.start()
    try:
        for mech, (user, password) in SASL_USERS.items():
            p = Producer({"bootstrap.servers": f"127.0.0.1:{broker.sasl_port}",
                          "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mech,
                          "sasl.username": user, "sasl.password": password,
                          "client.id": f"{tag}-{mech.lower()}", "linger.ms": 5})
            for i in range(3):
                p.produce(topic, value=f"{mech}-{i}".encode())
            assert p.flush(20) == 0, mech
            del p
    except BaseException:
        td.kill()
        raise
    td.stop()
    time.sleep(0.3)
    exchanges, summaries = [], {}
    pipe = Pipeline(PipelineOptions(ports=frozenset({broker.sasl_port}), meta_records=True))
    for rec in analyze([pcap], pipeline=pipe):
        if type(rec) is Exchange:
            exchanges.append(rec)
        elif type(rec) is ConnectionSummary:
            summaries[rec.client] = rec
    seen = {int(c.rsplit(":", 1)[1]) for c, s in summaries.items() if s.handshake_seen}
    logged = [r for r in broker.requests(offset)
              if r.local_port == broker.sasl_port and r.client_port in seen]
    return tag, pcap, exchanges, logged


def test_every_logged_request_is_paired_with_the_brokers_ids(sasl_capture):
    tag, _, exchanges, logged = sasl_capture
    # the broker's authenticator answers ApiVersions, SaslHandshake and SaslAuthenticate
    # before the request channel: the request log has what follows (Metadata, Produce ...)
    assert {r.api_key for r in logged} >= {0, 3}
    by_key = {(int(ex.client.rsplit(":", 1)[1]), ex.correlation_id): ex for ex in exchanges}
    problems = []
    for r in logged:
        ex = by_key.get((r.client_port, r.correlation_id))
        got = None if ex is None else (ex.api_key, ex.api_version, ex.client_id, ex.status)
        want = (r.api_key, r.api_version, r.client_id, ExchangeStatus.PAIRED)
        if got != want:
            problems.append((r.client_port, r.correlation_id, got, want))
    assert not problems, problems


def test_mechanisms_and_principals(sasl_capture):
    tag, _, exchanges, logged = sasl_capture
    for mech, (user, _) in SASL_USERS.items():
        cid = f"{tag}-{mech.lower()}"
        hs = [ex for ex in exchanges if ex.api_name == "SaslHandshake" and ex.client_id == cid]
        assert hs and {ex.request.body["mechanism"] for ex in hs} == {mech}
        auth = [ex for ex in exchanges if ex.api_name == "SaslAuthenticate"
                and ex.client_id == cid]
        assert auth and all(not ex.errors for ex in auth), mech
        principals = {r.fields.get("principal") for r in logged
                      if r.client_id == cid and r.api_key == 0}
        assert principals == {f"User:{user}"}, (mech, principals)


def test_no_password_or_proof_in_any_output(sasl_capture, tmp_path):
    _, pcap, _, _ = sasl_capture
    runner = CliRunner()
    texts = {}
    for name, args in TEXT_OUTPUTS.items():
        res = runner.invoke(main, args + [str(pcap)], catch_exceptions=False)
        assert res.exit_code == 0, res.output
        texts[name] = res.output
    for fmt in ("parquet", "jsonl"):
        out = tmp_path / fmt
        res = runner.invoke(main, ["export", "-q", "--records", "--format", fmt, "-o", str(out),
                                   str(pcap)], catch_exceptions=False)
        assert res.exit_code == 0, res.output
        texts[f"export {fmt}"] = _parquet_text(out) if fmt == "parquet" else "\n".join(
            f.read_text() for f in sorted(out.rglob("*.jsonl")))
    leaks = {name: _leaks(text, SECRETS) for name, text in texts.items()}
    assert not any(leaks.values()), leaks
    for _, (user, _) in SASL_USERS.items():
        assert user in texts["read --json"]


def test_show_secrets_shows_the_plain_password(sasl_capture):
    _, pcap, _, _ = sasl_capture
    res = CliRunner().invoke(main, ["read", "-q", "--json", "--show-secrets", str(pcap)],
                             catch_exceptions=False)
    assert _leaks(res.output, [SASL_USERS["PLAIN"][1].encode()])
