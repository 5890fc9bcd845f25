"""The Go clients against the real broker: franz-go (kgo and kadm; it speaks the newest
version of every API) and IBM sarama, each producing with every codec, acks 0/1/all,
idempotent and transactional, consuming in a group (franz-go: KIP-848 and classic, and a
share group; sarama: classic) and running admin operations, captured with tcpdump and
decoded with kafkasniff.

Truth: the broker's request log, every request header each client wrote on each connection
(the program wraps the client's dialer: tests/broker/clients/go/wire.go) and what the
program saw (offsets produced, records consumed, offsets committed, admin error codes).
"""

from __future__ import annotations

import uuid

import pytest

from tests.broker.common import (
    admin_mismatches,
    body_differences,
    capture_scenario,
    committed_missing,
    consumed_missing,
    expected_status,
    produced_mismatches,
    unexpected_issues,
    unfound_client_requests,
    unpaired,
)
from tests.broker.scenarios import (
    GO_ADMIN_APIS as ADMIN_APIS,
    GO_ADMIN_ERRORS as ADMIN_ERRORS,
    PRODUCER_SPECS,
    go_scenario,
)

N = 4
SPECS = PRODUCER_SPECS

#: consumer runs: (client, run name) -> (fetch API, the group protocol's membership API; a
#: classic member's Heartbeat only comes after heartbeat.interval, longer than a run)
CONSUMERS = {("franz", "consumer"): ("Fetch", "ConsumerGroupHeartbeat"),
             ("franz", "classic"): ("Fetch", "SyncGroup"),
             ("franz", "share"): ("ShareFetch", "ShareGroupHeartbeat"),
             ("sarama", "classic"): ("Fetch", "SyncGroup")}


@pytest.fixture(scope="module")
def go_capture(kafka_broker, go_clients, tmp_path_factory):
    broker = kafka_broker
    tag = "go-" + uuid.uuid4().hex[:6]
    topic = f"{tag}-topic"
    broker.create_topic(topic, partitions=2)

    def scenario():
        runs = go_scenario(go_clients, broker.bootstrap_servers, topic, tag, N)
        return {tuple(k.split("/")): v for k, v in runs.items()}

    cap, runs = capture_scenario(broker, broker.port,
                                 tmp_path_factory.mktemp("go") / "go.pcap", scenario,
                                 with_records=True)
    return tag, runs, cap


def test_every_logged_request_is_paired_with_the_brokers_ids(go_capture):
    cap = go_capture[2]
    assert len(cap.logged) > 100
    assert not unpaired(cap, expected_status)


def test_decoded_bodies_equal_the_brokers(go_capture):
    """Every request and response body equals what the broker parsed and answered, as its
    request log shows them (every field the log has, at every depth)."""
    diffs, compared = body_differences(go_capture[2])
    assert not diffs, "\n".join(diffs[:30])
    assert compared >= 200


def test_no_issue_at_all(go_capture):
    """The clients and the broker (its requests to itself on the same listener included:
    share-group state, transaction markers) keep to the spec: not one issue, but those of the
    broker's own connections that an earlier test opened (joined mid-stream)."""
    assert not unexpected_issues(go_capture[2])


@pytest.mark.parametrize("client", ["franz", "sarama"])
def test_every_request_the_client_wrote_is_found(go_capture, client):
    """Each request header the client wrote, on the connection (local port) it wrote it on,
    is in the capture with the same api_key, api_version, correlation_id and client_id,
    answered (acks=0 Produce: no response expected)."""
    _, runs, cap = go_capture
    sent = [r for (c, _), run in runs.items() if c == client for r in run.requests]
    assert len(sent) > 50
    assert not unfound_client_requests(cap, sent)


@pytest.mark.parametrize("client", ["franz", "sarama"])
def test_produced_records_decode_with_the_offsets_the_producer_got(go_capture, client):
    _, runs, cap = go_capture
    produced = runs[client, "produce"].events("produced")
    assert len(produced) == N * len(SPECS)
    assert not produced_mismatches(cap, produced)


@pytest.mark.parametrize("client,run", list(CONSUMERS))
def test_consumed_records_are_in_the_fetch_responses(go_capture, client, run):
    _, runs, cap = go_capture
    api, membership = CONSUMERS[client, run]
    consumed = runs[client, run].events("consumed")
    assert len(consumed) >= 2 * N * len(SPECS)
    assert not consumed_missing(cap, consumed, api)
    names = {ex.api_name for ex in cap.exchanges if ex.client_id == consumed[0]["client_id"]}
    assert membership in names
    assert ("JoinGroup" in names) is (membership == "SyncGroup")


def test_committed_offsets_are_in_offset_commit(go_capture):
    _, runs, cap = go_capture
    committed = runs["franz", "consumer"].events("committed") + \
        runs["franz", "classic"].events("committed")
    assert len(committed) == 4
    assert not committed_missing(cap, committed)


@pytest.mark.parametrize("client", ["franz", "sarama"])
def test_admin_operations_decode_with_the_errors_the_client_saw(go_capture, client):
    tag, runs, cap = go_capture
    ops = runs[client, "admin"].events("admin")
    assert [x["op"] for x in ops] == list(ADMIN_APIS[client])
    assert {x["op"]: x["error_code"] for x in ops if x["error_code"]} == ADMIN_ERRORS[client]
    assert not admin_mismatches(cap, f"{tag}-{client}-admin", ops, ADMIN_APIS[client])
