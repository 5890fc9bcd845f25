"""Producers only a real broker answers as Kafka does: acks 0, 1 and all, idempotent and
transactional (librdkafka through confluent-kafka), captured with tcpdump and decoded with
kafkasniff, compared with the broker's request log and with what the producers sent.

What it proves: every request the broker logged is found and paired with the broker's
api_key, api_version, correlation_id and client_id; an acks=0 Produce is
``no_response_expected`` (Kafka sends no response, unlike librdkafka's mock); the idempotent
producer's batches carry the producer id InitProducerId returned and consecutive sequences;
the transactional producer's batches are transactional, its partitions are added to the
transaction and EndTxn commits it; the values decoded are the values sent.
"""

from __future__ import annotations

import uuid
from collections import defaultdict

import pytest

from kafkasniff.model import ExchangeStatus
from tests.broker.common import capture_scenario, unpaired

N = 12
MODES = {"acks0": {"acks": 0}, "acks1": {"acks": 1}, "acksall": {"acks": "all"},
         "idempotent": {"enable.idempotence": True},
         "txn": {"transactional.id": "TXN"}}



def _produce(bootstrap: str, topic: str, tag: str) -> dict[str, list[bytes]]:
    from confluent_kafka import Producer

    sent = {}
    for mode, conf in MODES.items():
        cid = f"{tag}-{mode}"
        conf = {k: (f"{tag}-txn" if v == "TXN" else v) for k, v in conf.items()}
        p = Producer({"bootstrap.servers": bootstrap, "client.id": cid, "linger.ms": 5,
                      "compression.type": "zstd", **conf})
        values = [f"{cid}-{i}".encode() for i in range(N)]
        if mode == "txn":
            p.init_transactions(20)
            p.begin_transaction()
        for i, v in enumerate(values):
            p.produce(topic, key=f"k{i}".encode(), value=v, partition=i % 2)
        if mode == "txn":
            p.commit_transaction(20)
        assert p.flush(20) == 0
        del p
        sent[cid] = values
    return sent


@pytest.fixture(scope="module")
def decoded(kafka_broker, tmp_path_factory):
    broker = kafka_broker
    tag = "pr-" + uuid.uuid4().hex[:6]
    topic = f"{tag}-topic"
    broker.create_topic(topic, partitions=2)
    cap, sent = capture_scenario(
        broker, broker.port, tmp_path_factory.mktemp("producers") / "producers.pcap",
        lambda: _produce(broker.bootstrap_servers, topic, tag), with_records=True)
    return tag, sent, cap


def _produce_batches(exchanges, cid):
    for ex in exchanges:
        if ex.api_name == "Produce" and ex.client_id == cid:
            for loc in ex.record_fields:
                for b in loc.records.decoded.batches:
                    yield ex, b


def test_every_logged_request_is_paired_with_the_brokers_ids(decoded):
    _, _, cap = decoded
    assert cap.logged

    def status(ex):
        acks0 = ex.api_name == "Produce" and ex.request.body.get("acks") == 0
        return ExchangeStatus.NO_RESPONSE_EXPECTED if acks0 else ExchangeStatus.PAIRED

    assert not unpaired(cap, status)


def test_acks0_produce_expects_no_response(decoded):
    tag, sent, cap = decoded
    exchanges = cap.exchanges
    produce = [ex for ex in exchanges if ex.api_name == "Produce"
               and ex.client_id == f"{tag}-acks0"]
    assert produce and {ex.status for ex in produce} == {ExchangeStatus.NO_RESPONSE_EXPECTED}
    assert all(ex.response is None for ex in produce)
    for mode in ("acks1", "acksall"):
        acks = {ex.request.body["acks"] for ex in exchanges
                if ex.api_name == "Produce" and ex.client_id == f"{tag}-{mode}"}
        assert acks == {1 if mode == "acks1" else -1}


def test_every_value_sent_is_decoded_once(decoded):
    tag, sent, cap = decoded
    exchanges = cap.exchanges
    for cid, values in sent.items():
        got = [r.value for ex, b in _produce_batches(exchanges, cid)
               if ex.status != ExchangeStatus.PAIRED or not ex.errors for r in b.records]
        assert sorted(got) == sorted(values), cid
        assert {b.codec for _, b in _produce_batches(exchanges, cid)} == {"zstd"}


def test_idempotent_batches_carry_the_producer_id_and_sequences(decoded):
    tag, _, cap = decoded
    exchanges = cap.exchanges
    for mode in ("idempotent", "txn"):
        cid = f"{tag}-{mode}"
        # retried while the coordinator loads (COORDINATOR_LOAD_IN_PROGRESS ...): the last
        # answer without an error gives the producer id
        inits = [ex for ex in exchanges if ex.api_name == "InitProducerId"
                 and ex.client_id == cid]
        assert inits and all(ex.status == ExchangeStatus.PAIRED for ex in inits)
        ok = [ex for ex in inits if not ex.errors]
        assert len(ok) == 1 and ok[0] is inits[-1], \
            [(ex.correlation_id, ex.errors) for ex in inits]
        pid = ok[-1].response.body["producer_id"]
        assert pid >= 0
        per_partition = defaultdict(list)
        for ex, b in _produce_batches(exchanges, cid):
            assert b.producer_id == pid and b.transactional is (mode == "txn")
            per_partition[ex.request.body["topic_data"][0]["partition_data"][0]["index"]] \
                .append((b.base_sequence, b.record_count))
        assert per_partition
        for batches in per_partition.values():
            seq = 0
            for base, count in sorted(batches):
                assert base == seq
                seq += count


def test_the_transaction_adds_its_partitions_and_commits(decoded):
    tag, _, cap = decoded
    exchanges = cap.exchanges
    cid = f"{tag}-txn"
    names = [ex.api_name for ex in exchanges if ex.client_id == cid]
    assert {"FindCoordinator", "InitProducerId", "EndTxn"} <= set(names)
    [end] = [ex for ex in exchanges if ex.api_name == "EndTxn" and ex.client_id == cid]
    assert end.request.body["committed"] is True and end.errors == ()
    assert end.request.body["transactional_id"] == f"{tag}-txn"
    added = [ex for ex in exchanges if ex.api_name == "AddPartitionsToTxn"
             and ex.client_id == cid]
    assert added, "librdkafka added no partition to the transaction"
