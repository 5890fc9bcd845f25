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

import uuid

import pytest
from click.testing import CliRunner

from kafkasniff.cli import main
from tests.broker.common import capture_scenario, every_output, unpaired
from tests.captures.test_secrets import _leaks
from tests.support.kafka_broker import OAUTHBEARER_PRINCIPAL, SASL_USERS

SECRETS = [password.encode() for _, password in SASL_USERS.values()]



def _authenticate_and_produce(port: int, topic: str, tag: str) -> None:
    from confluent_kafka import Producer

    for mech, (user, password) in SASL_USERS.items():
        p = Producer({"bootstrap.servers": f"127.0.0.1:{port}",
                      "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mech,
                      "sasl.username": user, "sasl.password": password,
                      "client.id": f"{tag}-{mech.lower()}", "linger.ms": 5})
        for i in range(3):
            p.produce(topic, value=f"{mech}-{i}".encode())
        assert p.flush(20) == 0, mech
        del p
    # unsecured OAUTHBEARER: librdkafka makes the unsigned JWT itself
    p = Producer({"bootstrap.servers": f"127.0.0.1:{port}",
                  "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                  "enable.sasl.oauthbearer.unsecure.jwt": True,
                  "sasl.oauthbearer.config": f"principal={OAUTHBEARER_PRINCIPAL}",
                  "client.id": f"{tag}-oauthbearer", "linger.ms": 5})
    for i in range(3):
        p.produce(topic, value=f"OAUTHBEARER-{i}".encode())
    assert p.flush(20) == 0, "OAUTHBEARER"
    del p


@pytest.fixture(scope="module")
def sasl_capture(kafka_broker, tmp_path_factory):
    broker = kafka_broker
    tag = "sasl-" + uuid.uuid4().hex[:6]
    topic = f"{tag}-topic"
    broker.create_topic(topic, partitions=1)
    cap, _ = capture_scenario(
        broker, broker.sasl_port, tmp_path_factory.mktemp("sasl") / "sasl.pcap",
        lambda: _authenticate_and_produce(broker.sasl_port, topic, tag))
    return tag, cap


def test_every_logged_request_is_paired_with_the_brokers_ids(sasl_capture):
    _, cap = sasl_capture
    # the broker's authenticator answers ApiVersions, SaslHandshake and SaslAuthenticate
    # before the request channel: the request log has what follows (Metadata, Produce ...)
    assert {r.api_key for r in cap.logged} >= {0, 3}
    assert not unpaired(cap)


def test_mechanisms_and_principals(sasl_capture):
    tag, cap = sasl_capture
    exchanges, logged = cap.exchanges, cap.logged
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


def test_oauthbearer_principal_shown_token_withheld(sasl_capture, tmp_path):
    """The unsecured OAUTHBEARER token (a JWT without signature) authenticates
    ``OAUTHBEARER_PRINCIPAL``: the broker logs that principal, kafkasniff shows the mechanism
    and the token's subject, and the token itself (its base64url header and claims) is in no
    output."""
    tag, cap = sasl_capture
    cid = f"{tag}-oauthbearer"
    hs = [ex for ex in cap.exchanges if ex.api_name == "SaslHandshake" and ex.client_id == cid]
    assert hs and {ex.request.body["mechanism"] for ex in hs} == {"OAUTHBEARER"}
    auth = [ex for ex in cap.exchanges if ex.api_name == "SaslAuthenticate"
            and ex.client_id == cid]
    assert auth and all(not ex.errors for ex in auth)
    assert {r.fields.get("principal") for r in cap.logged
            if r.client_id == cid and r.api_key == 0} == {f"User:{OAUTHBEARER_PRINCIPAL}"}
    texts = every_output(cap.pcap, tmp_path)
    assert OAUTHBEARER_PRINCIPAL in texts["read --json"]
    token = CliRunner().invoke(main, ["read", "-q", "--json", "--show-secrets",
                                      str(cap.pcap)]).output
    jwt = [w for w in token.replace('"', " ").split() if w.startswith("eyJ")]
    assert jwt, "--show-secrets shows the token"
    leaks = {name: [w for w in jwt if w[:40] in text] for name, text in texts.items()}
    assert not any(leaks.values()), leaks


def test_no_password_or_proof_in_any_output(sasl_capture, tmp_path):
    texts = every_output(sasl_capture[1].pcap, tmp_path)
    leaks = {name: _leaks(text, SECRETS) for name, text in texts.items()}
    assert not any(leaks.values()), leaks
    for _, (user, _) in SASL_USERS.items():
        assert user in texts["read --json"]


def test_show_secrets_shows_the_plain_password(sasl_capture):
    pcap = sasl_capture[1].pcap
    res = CliRunner().invoke(main, ["read", "-q", "--json", "--show-secrets", str(pcap)],
                             catch_exceptions=False)
    assert _leaks(res.output, [SASL_USERS["PLAIN"][1].encode()])
