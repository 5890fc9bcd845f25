"""Group membership changes on the real broker, with the Java client: in a classic, a
KIP-848 (consumer) and a share group (KIP-932), member a joins, member b joins, a leaves, b
leaves, on a 4-partition topic.

What it proves: the rebalances are visible in the decoded exchanges as the members saw
them. Classic: each generation's JoinGroup and SyncGroup, with the assignment the leader
computed (the decoded consumer protocol) equal to what each member's rebalance listener
got, and the generations 1-2-3 of a, a+b, b. KIP-848: the ConsumerGroupHeartbeat responses
carry each member's assignment, equal to its listener's, with rising member epochs and a
leave heartbeat (member_epoch -1). Share: ShareGroupHeartbeat assignments split the
partitions between a and b while both are members, and each leaves with member_epoch -1.
"""

from __future__ import annotations

import uuid

import pytest

from tests.broker.common import (
    body_differences,
    capture_scenario,
    status_allowing_resets,
    unexpected_issues,
    unpaired,
)

PARTITIONS = 4
STEP_MS = "2500"


@pytest.fixture(scope="module")
def rebalances(kafka_broker, java_clients, tmp_path_factory):
    broker = kafka_broker
    tag = "rb-" + uuid.uuid4().hex[:6]
    topic = f"{tag}-topic"
    broker.create_topic(topic, PARTITIONS)
    bs = broker.bootstrap_servers

    def scenario():
        return {protocol: java_clients.run("members", bs, topic, f"{tag}-{protocol}",
                                           protocol, f"{tag}-{protocol}", STEP_MS)
                for protocol in ("classic", "consumer", "share")}

    cap, runs = capture_scenario(broker, broker.port,
                                 tmp_path_factory.mktemp("rebalances") / "rebalances.pcap",
                                 scenario)
    return tag, runs, cap


def test_every_logged_request_is_paired_and_equal(rebalances):
    cap = rebalances[2]
    assert not unpaired(cap, status_allowing_resets(cap))
    diffs, _ = body_differences(cap)
    assert not diffs, "\n".join(diffs[:20])
    assert not unexpected_issues(cap)


def _exchanges(cap, client_id, api):
    return sorted((ex for ex in cap.exchanges if ex.client_id == client_id
                   and ex.api_name == api and ex.response is not None and not ex.errors),
                  key=lambda ex: ex.ts_ns)


def _partitions(assignment) -> list[int]:
    """The partitions of a decoded assignment (one topic): the consumer protocol's
    ``assigned_partitions`` or the KIP-848 / KIP-932 ``topic_partitions``."""
    parts = assignment.get("assigned_partitions", assignment.get("topic_partitions")) or []
    return sorted(p for t in parts for p in t["partitions"])


def _listener_assignments(run, client_id) -> list[list[int]]:
    return [x["assignment"] for x in run.events("assigned") if x["client_id"] == client_id]


def test_classic_generations_and_assignments(rebalances):
    """Generation 1: a alone; 2: a and b (the range assignor splits 0-1 / 2-3); 3: b alone.
    The assignment each member's SyncGroup answer carries is what its listener got."""
    tag, runs, cap = rebalances
    group = f"{tag}-classic"
    generations = {ex.response.body["generation_id"] for ex in cap.exchanges
                   if ex.api_name == "JoinGroup" and ex.request.body["group_id"] == group
                   and ex.response is not None and not ex.errors}
    assert generations == {1, 2, 3}
    for member in ("a", "b"):
        cid = f"{group}-{member}"
        decoded = [_partitions(ex.response.body["assignment"])
                   for ex in _exchanges(cap, cid, "SyncGroup")]
        assert decoded == _listener_assignments(runs["classic"], cid), member
        assert _exchanges(cap, cid, "LeaveGroup"), member
    assert _listener_assignments(runs["classic"], f"{group}-a") == [[0, 1, 2, 3], [0, 1]]


def test_kip848_heartbeats_carry_each_members_assignments(rebalances):
    """The ConsumerGroupHeartbeat answers that carry an assignment are, in order, the
    assignments each member's listener reconciled to (a: all, then 0-1 after revoking 2-3
    for b; b: none, 2-3, then all after a left); member epochs never go back; each member
    leaves with member_epoch -1."""
    tag, runs, cap = rebalances
    group = f"{tag}-consumer"
    for member in ("a", "b"):
        cid = f"{group}-{member}"
        beats = _exchanges(cap, cid, "ConsumerGroupHeartbeat")
        decoded = [_partitions(ex.response.body["assignment"]) for ex in beats
                   if ex.response.body["assignment"] is not None]
        assert decoded == _listener_assignments(runs["consumer"], cid), member
        epochs = [ex.response.body["member_epoch"] for ex in beats]
        assert epochs[-1] == -1 and epochs[:-1] == sorted(epochs[:-1]), epochs
        assert beats[-1].request.body["member_epoch"] == -1
    assert len(_listener_assignments(runs["consumer"], f"{group}-b")) == 3


def test_share_group_splits_and_hands_over_partitions(rebalances):
    """The share group's coordinator splits the 4 partitions between a and b while both are
    members, gives b all of them after a leaves; both leave with member_epoch -1."""
    tag, _, cap = rebalances
    group = f"{tag}-share"
    latest = {}
    for member in ("a", "b"):
        beats = _exchanges(cap, f"{group}-{member}", "ShareGroupHeartbeat")
        assigned = [_partitions(ex.response.body["assignment"]) for ex in beats
                    if ex.response.body["assignment"] is not None]
        latest[member] = assigned
        assert beats[-1].request.body["member_epoch"] == -1
    split = [p for p in latest["a"] if p][-1]
    both = [p for p in latest["b"] if p]
    assert sorted(split + both[0]) == [0, 1, 2, 3]
    assert both[-1] == [0, 1, 2, 3]
