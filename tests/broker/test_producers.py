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

import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path

import pytest

from kafkasniff.model import ConnectionSummary, Exchange, ExchangeStatus
from kafkasniff.pipeline import Pipeline, PipelineOptions, analyze
from tests.live.helpers import capture_permission

pytestmark = [pytest.mark.skipif(capture_permission() is not None,
                                 reason=capture_permission() or "")]

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
N = 12
MODES = {"acks0": {"acks": 0}, "acks1": {"acks": 1}, "acksall": {"acks": "all"},
         "idempotent": {"enable.idempotence": True},
         "txn": {"transactional.id": "TXN"}}


def _tcpdump(path: Path, ports: list[int]):
    sys.path.insert(0, str(CAPTURES))
    try:
        from harness.tcpdump import Tcpdump
    finally:
        sys.path.remove(str(CAPTURES))
    return Tcpdump(path, ports)


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
    pcap = tmp_path_factory.mktemp("producers") / "producers.pcap"
    td = _tcpdump(pcap, [broker.port])
    offset = broker.request_log_size()
    td.start()
    try:
        sent = _produce(broker.bootstrap_servers, topic, tag)
    except BaseException:
        td.kill()
        raise
    td.stop()
    time.sleep(0.3)
    exchanges, summaries = [], {}
    pipe = Pipeline(PipelineOptions(ports=frozenset({broker.port}), with_records=True,
                                    meta_records=True))
    for rec in analyze([pcap], pipeline=pipe):
        if type(rec) is Exchange:
            exchanges.append(rec)
        elif type(rec) is ConnectionSummary:
            summaries[rec.client] = rec
    seen = {int(c.rsplit(":", 1)[1]) for c, s in summaries.items() if s.handshake_seen}
    logged = [r for r in broker.requests(offset) if r.local_port == broker.port
              and not r.forwarded and r.client_port in seen]
    return tag, sent, exchanges, logged


def _port(ex: Exchange) -> int:
    return int(ex.client.rsplit(":", 1)[1])


def _produce_batches(exchanges, cid):
    for ex in exchanges:
        if ex.api_name == "Produce" and ex.client_id == cid:
            for loc in ex.record_fields:
                for b in loc.records.decoded.batches:
                    yield ex, b


def test_every_logged_request_is_paired_with_the_brokers_ids(decoded):
    tag, _, exchanges, logged = decoded
    assert logged
    by_key = {(_port(ex), ex.correlation_id): ex for ex in exchanges}
    problems = []
    for r in logged:
        ex = by_key.get((r.client_port, r.correlation_id))
        got = None if ex is None else (ex.api_key, ex.api_version, ex.client_id, ex.status)
        acks0 = ex is not None and ex.api_name == "Produce" and \
            ex.request.body.get("acks") == 0
        want = (r.api_key, r.api_version, r.client_id,
                ExchangeStatus.NO_RESPONSE_EXPECTED if acks0 else ExchangeStatus.PAIRED)
        if got != want:
            problems.append((r.client_port, r.correlation_id, got, want))
    assert not problems, problems


def test_acks0_produce_expects_no_response(decoded):
    tag, sent, exchanges, _ = decoded
    produce = [ex for ex in exchanges if ex.api_name == "Produce"
               and ex.client_id == f"{tag}-acks0"]
    assert produce and {ex.status for ex in produce} == {ExchangeStatus.NO_RESPONSE_EXPECTED}
    assert all(ex.response is None for ex in produce)
    for mode in ("acks1", "acksall"):
        acks = {ex.request.body["acks"] for ex in exchanges
                if ex.api_name == "Produce" and ex.client_id == f"{tag}-{mode}"}
        assert acks == {1 if mode == "acks1" else -1}


def test_every_value_sent_is_decoded_once(decoded):
    tag, sent, exchanges, _ = decoded
    for cid, values in sent.items():
        got = [r.value for ex, b in _produce_batches(exchanges, cid)
               if ex.status != ExchangeStatus.PAIRED or not ex.errors for r in b.records]
        assert sorted(got) == sorted(values), cid
        assert {b.codec for _, b in _produce_batches(exchanges, cid)} == {"zstd"}


def test_idempotent_batches_carry_the_producer_id_and_sequences(decoded):
    tag, _, exchanges, _ = decoded
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
    tag, _, exchanges, _ = decoded
    cid = f"{tag}-txn"
    names = [ex.api_name for ex in exchanges if ex.client_id == cid]
    assert {"FindCoordinator", "InitProducerId", "EndTxn"} <= set(names)
    [end] = [ex for ex in exchanges if ex.api_name == "EndTxn" and ex.client_id == cid]
    assert end.request.body["committed"] is True and end.errors == ()
    assert end.request.body["transactional_id"] == f"{tag}-txn"
    added = [ex for ex in exchanges if ex.api_name == "AddPartitionsToTxn"
             and ex.client_id == cid]
    assert added, "librdkafka added no partition to the transaction"
