"""A 3-node KRaft cluster under a producer while its nodes fail: the leader of a partition
crashes mid-traffic (SIGKILL: connections reset, requests in flight never answered), the
cluster moves its leaderships, the node comes back and a preferred leader election moves
them back. The Java producer retries through all of it; kafkasniff decodes the capture of
all three nodes' ports.

What it proves: every request any node logged is found and paired, and its bodies equal the
node's; the requests left unanswered are exactly those on connections to the crashed node;
the leaders the producer learnt from Metadata change as the cluster says they did; every
record the producer had acknowledged is in a Produce request answered without error, at the
offset the producer got; errors the nodes answered (NOT_LEADER_OR_FOLLOWER ...) are decoded
by name.
"""

from __future__ import annotations

import uuid

import pytest

from kafkasniff.model import ExchangeStatus
from tests.broker.common import (
    body_differences,
    capture_scenario,
    client_port,
    cut_by_close,
    produced_mismatches,
    status_allowing_resets,
    unexpected_issues,
    unpaired,
)
from tests.broker.scenarios import failover_scenario

PARTITIONS = 3


@pytest.fixture(scope="module")
def failover(kafka_cluster, java_clients, tmp_path_factory):
    cluster = kafka_cluster
    tag = "cl-" + uuid.uuid4().hex[:6]
    topic = f"{tag}-topic"
    cluster.create_topic(topic, PARTITIONS)
    work = tmp_path_factory.mktemp("cluster")
    events: dict = {}
    cap, runs = capture_scenario(
        cluster, cluster.ports, work / "failover.pcap",
        lambda: failover_scenario(cluster, java_clients, topic, tag, work, events),
        with_records=True)
    return events, runs["producer"], cap


def test_the_leadership_moved_and_came_back(failover):
    events, _, _ = failover
    assert events["during"][0] != events["victim"]
    assert events["after"][0] == events["victim"]


def test_every_logged_request_is_paired_with_the_nodes_ids(failover):
    """Paired, but at the end of a connection that was reset (the crash, or a client that
    gave up on a request): a node logs a request as completed once it wrote the answer,
    which a reset socket drops."""
    cap = failover[2]
    assert len({r.local_port for r in cap.logged}) == 3
    assert not unpaired(cap, status_allowing_resets(cap))


def test_decoded_bodies_equal_the_nodes(failover):
    diffs, compared = body_differences(failover[2])
    assert not diffs, "\n".join(diffs[:30])
    assert compared >= 100


def test_only_requests_to_the_crashed_node_are_unanswered(failover):
    """Unanswered: requests on connections to the crashed node, and a request still
    waiting when the capture stopped (a replica's long-polling Fetch, the last request of a
    connection still open), or at the end of a connection the client reset (giving up after
    request.timeout.ms); orphans: answers to requests sent before the capture began on the
    replicas' connections."""
    events, _, cap = failover
    last = {}
    for ex in cap.exchanges:
        last[ex.client] = max(last.get(ex.client, -1), ex.correlation_id)
    cut = cut_by_close(cap)
    unanswered = [ex for ex in cap.exchanges if ex.status != ExchangeStatus.PAIRED
                  and client_port(ex.broker) != events["victim_port"]
                  and (ex.client, ex.correlation_id) not in cut
                  and not (ex.status == ExchangeStatus.ORPHAN_RESPONSE
                           and not cap.connections[ex.client].handshake_seen)
                  and not (ex.correlation_id == last[ex.client]
                           and cap.connections[ex.client].closed == "end_of_capture")]
    assert not [(ex.client, ex.client_id, ex.api_name, ex.status) for ex in unanswered]


def test_issues_are_only_the_crash(failover):
    """The crash cuts the victim's connections: what kafkasniff reports beyond what every
    real capture has (tests/broker/common.unexpected_issues) is about those connections (a
    frame cut by the reset, a request never answered) and nothing else."""
    events, _, cap = failover
    victim = events["victim_port"]
    broker = {ex.client: ex.broker for ex in cap.exchanges}
    assert not unexpected_issues(
        cap, lambda ex, i: client_port(broker.get(i.client, "?:0")) == victim)


def test_the_producer_learnt_the_new_leaders_from_metadata(failover):
    events, _, cap = failover
    seen = set()
    for ex in cap.exchanges:
        if ex.api_name == "Metadata" and ex.response is not None and \
                ex.client_id.endswith("-producer"):
            for t in ex.response.body["topics"]:
                for p in t["partitions"]:
                    if p["partition_index"] == 0 and p["error_code"] == 0:
                        seen.add(p["leader_id"])
    assert {events["victim"], events["during"][0]} <= seen


def test_acknowledged_records_are_written_where_the_producer_says(failover):
    _, run, cap = failover
    produced = run.events("produced")
    assert len(produced) > 50 and not run.events("produce_failed")
    assert not produced_mismatches(cap, produced)
    errors = {e for ex in cap.exchanges if ex.api_name == "Produce" for e in ex.errors}
    assert errors <= {"NOT_LEADER_OR_FOLLOWER", "NOT_ENOUGH_REPLICAS",
                      "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "REQUEST_TIMED_OUT"}, errors
