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
from collections import Counter, defaultdict

import pytest

from kafkasniff.model import ExchangeStatus
from kafkasniff.protocol import apis
from tests.broker.common import capture_scenario, every_output, unpaired
from tests.captures.test_secrets import _leaks
from tests.live.helpers import capture_permission

pytestmark = [pytest.mark.skipif(capture_permission() is not None,
                                 reason=capture_permission() or "")]

N = 6
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
SPECS = [f"{codec}:all:plain" for codec in CODECS] + \
    ["none:0:plain", "none:1:plain", "lz4:all:idempotent", "zstd:all:txn"]
SENSITIVE = "java-ssl-key-Pa55word"

#: admin operation (KafkaClients.java) -> the API it ends with; None: not checked by API
ADMIN_APIS = {
    "describe_cluster": "DescribeCluster", "create_topics": "CreateTopics",
    "create_topics_again": "CreateTopics", "create_partitions": "CreatePartitions",
    "describe_topics": "DescribeTopicPartitions",
    "alter_topic_config": "IncrementalAlterConfigs", "describe_topic_config": "DescribeConfigs",
    "alter_sensitive_config": "IncrementalAlterConfigs",
    "describe_broker_config": "DescribeConfigs", "create_acls": "CreateAcls",
    "describe_acls": "DescribeAcls", "delete_acls": "DeleteAcls",
    "alter_scram_credentials": "AlterUserScramCredentials",
    "describe_scram_credentials": "DescribeUserScramCredentials",
    "alter_client_quotas": "AlterClientQuotas", "describe_client_quotas": "DescribeClientQuotas",
    "describe_log_dirs": "DescribeLogDirs", "describe_producers": "DescribeProducers",
    "list_transactions": "ListTransactions", "describe_transactions": "DescribeTransactions",
    "list_offsets": "ListOffsets", "delete_records": "DeleteRecords",
    "list_groups": "ListGroups", "describe_features": None, "delete_topics": "DeleteTopics",
}


def _acks0(ex) -> bool:
    return ex.api_name == "Produce" and ex.request is not None and \
        ex.request.body.get("acks") == 0


def _status(ex) -> str:
    return ExchangeStatus.NO_RESPONSE_EXPECTED if _acks0(ex) else ExchangeStatus.PAIRED


@pytest.fixture(scope="module")
def java_capture(kafka_broker, java_clients, tmp_path_factory):
    broker = kafka_broker
    tag = "jv-" + uuid.uuid4().hex[:6]
    topic = f"{tag}-topic"
    broker.create_topic(topic, partitions=2)
    bs = broker.bootstrap_servers
    total = N * len(SPECS)

    def scenario():
        return {
            "produce": java_clients.run("produce", bs, topic, tag, str(N), *SPECS),
            "consumer": java_clients.run("consume", bs, topic, f"{tag}-c848", f"{tag}-g848",
                                         "consumer", str(total)),
            "classic": java_clients.run("consume", bs, topic, f"{tag}-classic",
                                        f"{tag}-gclassic", "classic", str(total)),
            "share": java_clients.run("share", bs, topic, f"{tag}-share", f"{tag}-gshare",
                                      str(total)),
            "admin": java_clients.run("admin", bs, tag, f"{tag}-admin"),
        }

    cap, runs = capture_scenario(broker, broker.port,
                                 tmp_path_factory.mktemp("java") / "java.pcap", scenario,
                                 with_records=True)
    return tag, topic, runs, cap


def _batches(exchanges, client_id, api="Produce"):
    for ex in exchanges:
        if ex.api_name == api and ex.client_id == client_id:
            for loc in ex.record_fields:
                if loc.records.decoded is not None:
                    for b in loc.records.decoded.batches:
                        yield ex, loc, b


def test_every_logged_request_is_paired_with_the_brokers_ids(java_capture):
    cap = java_capture[3]
    assert len(cap.logged) > 100
    assert not unpaired(cap, _status)


def test_no_issue_at_all(java_capture):
    """The Java client and the broker (its inter-broker requests to itself on the same
    listener included: share-group state, transaction markers) keep to the spec: not one
    issue, not even an informational one."""
    assert not [(str(i.kind), i.message) for i in java_capture[3].issues]


def test_every_request_the_java_client_sent_is_found(java_capture):
    """The client's NetworkClient log names each request it sent: the same api_key,
    api_version, client_id and correlation_id are in the capture, answered (acks=0 Produce:
    no response expected)."""
    _, _, runs, cap = java_capture
    by_ids = defaultdict(list)
    for ex in cap.exchanges:
        by_ids[(ex.client_id, ex.correlation_id)].append(ex)
    sent = [r for run in runs.values() for r in run.requests]
    assert len(sent) > 100
    assert {r.client_id for r in sent} >= {f"{java_capture[0]}-c848",
                                          f"{java_capture[0]}-admin"}
    problems = []
    for r in sent:
        found = by_ids.get((r.client_id, r.correlation_id), [])
        got = [(ex.api_key, ex.api_version, ex.status) for ex in found]
        want = (r.api_key, r.api_version,
                ExchangeStatus.NO_RESPONSE_EXPECTED if found and _acks0(found[0])
                else ExchangeStatus.PAIRED)
        if got != [want]:
            problems.append((r, got))
    assert not problems


def test_produced_records_decode_with_the_offsets_the_producer_got(java_capture):
    tag, topic, runs, cap = java_capture
    produced = defaultdict(dict)    # client id -> value -> truth line
    for line in runs["produce"].lines:
        produced[line["client_id"]][line["value"]] = line
    assert len(produced) == len(SPECS)
    for cid, truth in produced.items():
        got = {}
        codecs = set()
        for ex, loc, b in _batches(cap.exchanges, cid):
            codecs.add(b.codec)
            base = None
            if ex.response is not None:
                for t in ex.response.body["responses"]:
                    for p in t["partition_responses"]:
                        if p["index"] == loc.partition:
                            base = p["base_offset"]
            for r in b.records:
                got[r.value.decode()] = (loc.partition, r.key.decode(),
                                         None if base is None else base + r.offset - b.base_offset)
        want = {v: (t["partition"], t["key"], t["offset"]) for v, t in truth.items()}
        assert got == want, cid
        assert codecs == {next(iter(truth.values()))["codec"]}, cid


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
    assert all(b.transactional for _, _, b in _batches(exchanges, cid))
    [end] = [ex for ex in exchanges if ex.api_name == "EndTxn"]
    assert end.api_version >= 5 and end.request.body["committed"] is True and not end.errors
    epoch = {b.producer_epoch for _, _, b in _batches(exchanges, cid)}
    assert len(epoch) == 1 and end.response.body["producer_epoch"] == epoch.pop() + 1


@pytest.mark.parametrize("run,api,heartbeat", [
    ("consumer", "Fetch", "ConsumerGroupHeartbeat"),
    ("classic", "Fetch", "Heartbeat"),
    ("share", "ShareFetch", "ShareGroupHeartbeat"),
])
def test_consumed_records_are_in_the_fetch_responses(java_capture, run, api, heartbeat):
    """Every record a consumer received is in a decoded Fetch (ShareFetch) response to that
    consumer, at its partition and offset; the group protocol is the one configured."""
    tag, _, runs, cap = java_capture
    consumed = runs[run].lines
    consumed = [x for x in consumed if x["event"] == "consumed"]
    assert len(consumed) >= N * len(SPECS), run
    cid = consumed[0]["client_id"]
    decoded = set()
    for ex, loc, b in _batches(cap.exchanges, cid, api):
        if not b.control and b.records:
            decoded |= {(loc.partition, r.offset, r.key.decode(), r.value.decode())
                        for r in b.records}
    want = {(x["partition"], x["offset"], x["key"], x["value"]) for x in consumed}
    assert want <= decoded
    names = {ex.api_name for ex in cap.exchanges if ex.client_id == cid}
    if heartbeat == "Heartbeat":
        assert {"JoinGroup", "SyncGroup"} <= names and "ConsumerGroupHeartbeat" not in names
    else:
        assert heartbeat in names and "JoinGroup" not in names


def test_committed_offsets_are_in_offset_commit(java_capture):
    tag, _, runs, cap = java_capture
    for run in ("consumer", "classic"):
        committed = {(x["partition"], x["offset"]) for x in runs[run].lines
                     if x["event"] == "committed"}
        cid = runs[run].lines[0]["client_id"]
        got = set()
        for ex in cap.exchanges:
            if ex.api_name == "OffsetCommit" and ex.client_id == cid and not ex.errors:
                for t in ex.request.body["topics"]:
                    for p in t["partitions"]:
                        got.add((p["partition_index"], p["committed_offset"]))
        assert committed and committed <= got, run


def test_admin_operations_decode_with_the_errors_the_client_saw(java_capture):
    tag, _, runs, cap = java_capture
    cid = f"{tag}-admin"
    queue = defaultdict(list)
    for ex in sorted((ex for ex in cap.exchanges if ex.client_id == cid),
                     key=lambda ex: ex.correlation_id):
        queue[ex.api_name].append(ex)
    ops = [x for x in runs["admin"].lines if x["event"] == "admin"]
    assert [x["op"] for x in ops] == list(ADMIN_APIS)
    for op in ops:
        api = ADMIN_APIS[op["op"]]
        if api is None:
            continue
        assert queue[api], op
        ex = queue[api].pop(0)
        assert ex.status == ExchangeStatus.PAIRED, op
        errors = set(ex.errors)
        assert errors == ({op["error"]} if op["error"] else set()), (op, errors)


def test_no_sensitive_config_or_scram_credential_in_any_output(java_capture, tmp_path):
    """The password config the admin set and the SCRAM credential it upserted (salt and
    salted password) are redacted in every output; the config's name stays."""
    tag, _, _, cap = java_capture
    texts = every_output(cap.pcap, tmp_path)
    leaks = {name: _leaks(text, [SENSITIVE.encode()]) for name, text in texts.items()}
    assert not any(leaks.values()), leaks
    assert "listener.name.plaintext.ssl.key.password" in texts["read --json"]
    [scram] = [ex for ex in cap.exchanges if ex.api_key == apis.ALTER_USER_SCRAM_CREDENTIALS]
    [up] = scram.request.body["upsertions"]
    assert up["name"] == "dave"
    assert str(up["salted_password"]).startswith("<redacted") or \
        type(up["salted_password"]).__name__ == "Redacted"
