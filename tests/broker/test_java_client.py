"""The Java client (kafka-clients 4.3.1, the broker's release) against the real broker:
producers with every codec, acks 0/1/all, idempotent and transactional (transaction protocol
v2: the producer adds its partitions implicitly, KIP-890), a KIP-848 and a classic consumer
group, a share-group consumer (KIP-932) and an admin client running the operators' admin
operations (topics, partitions, configs with a sensitive one, ACLs, SCRAM credentials, client
quotas, log dirs, producers, transactions, offsets, records, groups, features), captured with
tcpdump and decoded with kafkasniff.

Truth from three sides: the broker's request log, the Java client's own request log
(NetworkClient at DEBUG: every request with its header) and what the program saw (offsets
the producer got back, records the consumers received, each admin operation's error).
"""

from __future__ import annotations

import uuid
from collections import Counter

import pytest

from kafkasniff.protocol import apis
from tests.broker.common import (
    admin_mismatches,
    body_differences,
    capture_scenario,
    committed_missing,
    consumed_missing,
    every_output,
    expected_status,
    produced_mismatches,
    record_batches,
    unexpected_issues,
    unfound_client_requests,
    unpaired,
)
from tests.broker.scenarios import (
    JAVA_ADMIN_APIS as ADMIN_APIS,
    JAVA_ADMIN_ERRORS,
    PRODUCER_SPECS,
    java_scenario,
)
from tests.captures.test_secrets import _leaks

N = 6
SPECS = PRODUCER_SPECS
SENSITIVE = "java-ssl-key-Pa55word"



@pytest.fixture(scope="module")
def java_capture(kafka_broker, java_clients, tmp_path_factory):
    broker = kafka_broker
    tag = "jv-" + uuid.uuid4().hex[:6]
    topic = f"{tag}-topic"
    broker.create_topic(topic, partitions=2)

    def scenario():
        return java_scenario(java_clients, broker.bootstrap_servers, topic, tag, N)

    cap, runs = capture_scenario(broker, broker.port,
                                 tmp_path_factory.mktemp("java") / "java.pcap", scenario,
                                 with_records=True)
    return tag, topic, runs, cap


def test_every_logged_request_is_paired_with_the_brokers_ids(java_capture):
    cap = java_capture[3]
    assert len(cap.logged) > 100
    assert not unpaired(cap, expected_status)


def test_decoded_bodies_equal_the_brokers(java_capture):
    """Every request and response body equals what the broker parsed and answered, as its
    request log shows them (every field the log has, at every depth)."""
    diffs, compared = body_differences(java_capture[3])
    assert not diffs, "\n".join(diffs[:30])
    assert compared >= 200


def test_no_issue_at_all(java_capture):
    """The clients and the broker (its requests to itself on the same listener included:
    share-group state, transaction markers) keep to the spec: not one issue, but those of the
    broker's own connections that an earlier test opened (joined mid-stream)."""
    assert not unexpected_issues(java_capture[3])


def test_every_request_the_java_client_sent_is_found(java_capture):
    """The client's NetworkClient log names each request it sent: the same api_key,
    api_version, client_id and correlation_id are in the capture, answered (acks=0 Produce:
    no response expected)."""
    tag, _, runs, cap = java_capture
    sent = [r for run in runs.values() for r in run.requests]
    assert len(sent) > 100
    assert {r.client_id for r in sent} >= {f"{tag}-c848", f"{tag}-admin"}
    assert not unfound_client_requests(cap, sent)


def test_produced_records_decode_with_the_offsets_the_producer_got(java_capture):
    _, _, runs, cap = java_capture
    produced = runs["produce"].events("produced")
    assert len({x["client_id"] for x in produced}) == len(SPECS)
    assert not produced_mismatches(cap, produced)


def test_transaction_v2_adds_partitions_implicitly_and_commits(java_capture):
    """Kafka 4.x clients use transaction protocol v2 (KIP-890) on a broker that finalized
    transaction.version 2: Produce v12+ adds the partition itself (no AddPartitionsToTxn from
    the producer) and EndTxn v5+ commits, bumping the epoch."""
    tag, _, _, cap = java_capture
    cid = f"{tag}-zstd-all-txn"
    exchanges = [ex for ex in cap.exchanges if ex.client_id == cid]
    names = Counter(ex.api_name for ex in exchanges)
    assert names["InitProducerId"] >= 1 and names["EndTxn"] == 1, names
    assert "AddPartitionsToTxn" not in names
    produce = [ex for ex in exchanges if ex.api_name == "Produce"]
    assert produce and all(ex.api_version >= 12 for ex in produce)
    assert all(b.transactional for _, _, b in record_batches(exchanges, cid))
    [end] = [ex for ex in exchanges if ex.api_name == "EndTxn"]
    assert end.api_version >= 5 and end.request.body["committed"] is True and not end.errors
    epoch = {b.producer_epoch for _, _, b in record_batches(exchanges, cid)}
    assert len(epoch) == 1 and end.response.body["producer_epoch"] == epoch.pop() + 1


@pytest.mark.parametrize("run,api,heartbeat", [
    ("consumer", "Fetch", "ConsumerGroupHeartbeat"),
    ("classic", "Fetch", "Heartbeat"),
    ("share", "ShareFetch", "ShareGroupHeartbeat"),
])
def test_consumed_records_are_in_the_fetch_responses(java_capture, run, api, heartbeat):
    """Every record a consumer received is in a decoded Fetch (ShareFetch) response to that
    consumer, at its partition and offset; the group protocol is the one configured."""
    _, _, runs, cap = java_capture
    consumed = runs[run].events("consumed")
    assert len(consumed) >= N * len(SPECS), run
    assert not consumed_missing(cap, consumed, api)
    cid = consumed[0]["client_id"]
    names = {ex.api_name for ex in cap.exchanges if ex.client_id == cid}
    if heartbeat == "Heartbeat":
        assert {"JoinGroup", "SyncGroup"} <= names and "ConsumerGroupHeartbeat" not in names
    else:
        assert heartbeat in names and "JoinGroup" not in names


def test_committed_offsets_are_in_offset_commit(java_capture):
    _, _, runs, cap = java_capture
    committed = runs["consumer"].events("committed") + runs["classic"].events("committed")
    assert len(committed) == 4
    assert not committed_missing(cap, committed)


def test_admin_operations_decode_with_the_errors_the_client_saw(java_capture):
    tag, _, runs, cap = java_capture
    ops = runs["admin"].events("admin")
    assert [x["op"] for x in ops] == list(ADMIN_APIS)
    assert {x["op"]: x["error"] for x in ops if x["error"]} == JAVA_ADMIN_ERRORS
    assert not admin_mismatches(cap, f"{tag}-admin", ops, ADMIN_APIS)


def test_no_sensitive_config_or_scram_credential_in_any_output(java_capture, tmp_path):
    """The password config the admin set and the SCRAM credential it upserted (salt and
    salted password) are redacted in every output; the config's name stays."""
    cap = java_capture[3]
    texts = every_output(cap.pcap, tmp_path)
    leaks = {name: _leaks(text, [SENSITIVE.encode()]) for name, text in texts.items()}
    assert not any(leaks.values()), leaks
    assert "listener.name.plaintext.ssl.key.password" in texts["read --json"]
    [scram] = [ex for ex in cap.exchanges if ex.api_key == apis.ALTER_USER_SCRAM_CREDENTIALS]
    [up] = scram.request.body["upsertions"]
    assert up["name"] == "dave"
    assert {type(up[k]).__name__ for k in ("salt", "salted_password")} == {"Redacted"}
