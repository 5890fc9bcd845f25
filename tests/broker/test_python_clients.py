"""aiokafka (asyncio) against the real broker: producers with every codec, acks 0/1/all,
idempotent and transactional, then a consumer-group member reading everything and committing,
captured with tcpdump and decoded with kafkasniff. (librdkafka and kafka-python run in
test_real_broker.py.)

Truth: the broker's request log, each request aiokafka logged as sent (``aiokafka.conn`` at
DEBUG, via captures/harness/client_logs.py) and what the program saw (offsets, records,
commits).
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter

import pytest

from tests.broker.common import (
    body_differences,
    capture_scenario,
    committed_missing,
    consumed_missing,
    from_harness,
    produced_mismatches,
    status_allowing_resets,
    unexpected_issues,
    unpaired,
)
from tests.broker.scenarios import PRODUCER_SPECS

N = 4


def _request_log():
    """A recorder of client debug logs (captures/harness/client_logs.py)."""
    return from_harness("client_logs", "RequestLog")()


async def _aiokafka(bs: str, topic: str, tag: str, log) -> list[dict]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    lines = []
    for spec in PRODUCER_SPECS:
        codec, acks, mode = spec.split(":")
        cid = f"{tag}-{codec}-{acks}-{mode}"
        with log.aiokafka(cid):
            p = AIOKafkaProducer(
                bootstrap_servers=bs, client_id=cid, linger_ms=20,
                acks={"0": 0, "1": 1, "all": "all"}[acks],
                compression_type=None if codec == "none" else codec,
                enable_idempotence=mode != "plain",
                transactional_id=f"{cid}-txn" if mode == "txn" else None)
            await p.start()
            try:
                if mode == "txn":
                    await p.begin_transaction()
                futures = [await p.send(topic, key=f"k{i}".encode(),
                                        value=f"{cid}-{i}".encode(), partition=i % 2)
                           for i in range(N)]
                if mode == "txn":
                    await p.commit_transaction()
                for i, fut in enumerate(futures):
                    md = await fut      # None for acks=0: aiokafka gets no answer
                    lines.append({"event": "produced", "client_id": cid, "codec": codec,
                                  "topic": topic, "partition": i % 2,
                                  "offset": None if md is None else md.offset,
                                  "key": f"k{i}", "value": f"{cid}-{i}"})
            finally:
                await p.stop()
    cid = f"{tag}-consumer"
    with log.aiokafka(cid):
        c = AIOKafkaConsumer(topic, bootstrap_servers=bs, client_id=cid, group_id=f"{tag}-g",
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             isolation_level="read_committed")
        await c.start()
        try:
            got = 0
            want = N * len(PRODUCER_SPECS)
            deadline = asyncio.get_running_loop().time() + 60
            while got < want and asyncio.get_running_loop().time() < deadline:
                for tp, records in (await c.getmany(timeout_ms=500)).items():
                    for r in records:
                        got += 1
                        lines.append({"event": "consumed", "client_id": cid, "topic": tp.topic,
                                      "partition": tp.partition, "offset": r.offset,
                                      "key": r.key.decode(), "value": r.value.decode()})
            await c.commit()
            for p in (0, 1):
                lines.append({"event": "committed", "client_id": cid, "topic": topic,
                              "partition": p,
                              "offset": await c.committed(TopicPartition(topic, p))})
        finally:
            await c.stop()
    return lines


@pytest.fixture(scope="module")
def aiokafka_capture(kafka_broker, tmp_path_factory):
    broker = kafka_broker
    tag = "aio-" + uuid.uuid4().hex[:6]
    topic = f"{tag}-topic"
    broker.create_topic(topic, partitions=2)
    log = _request_log()
    cap, lines = capture_scenario(
        broker, broker.port, tmp_path_factory.mktemp("aiokafka") / "aiokafka.pcap",
        lambda: asyncio.run(_aiokafka(broker.bootstrap_servers, topic, tag, log)),
        with_records=True)
    return tag, lines, log, cap


def test_every_logged_request_is_paired_and_equal(aiokafka_capture):
    cap = aiokafka_capture[3]
    assert len(cap.logged) > 50
    assert not unpaired(cap, status_allowing_resets(cap))
    diffs, compared = body_differences(cap)
    assert not diffs, "\n".join(diffs[:20])
    assert not unexpected_issues(cap)


def test_every_request_aiokafka_sent_is_found(aiokafka_capture):
    """aiokafka logs each request with its broker address and correlation_id, not its
    connection (each connection counts its own correlation ids): every (client_id, api_key,
    api_version, correlation_id) it logged is decoded at least as often."""
    tag, _, log, cap = aiokafka_capture
    sent = Counter((r["client"], r["api_key"], r["api_version"], r["correlation_id"])
                   for r in log.requests)
    decoded = Counter((ex.client_id, ex.api_key, ex.api_version, ex.correlation_id)
                      for ex in cap.exchanges if ex.request is not None)
    assert sum(sent.values()) > 40
    assert not sent - decoded


def test_records_offsets_and_commits_equal_aiokafkas(aiokafka_capture):
    tag, lines, _, cap = aiokafka_capture
    produced = [x for x in lines if x["event"] == "produced"]
    assert len(produced) == N * len(PRODUCER_SPECS)
    assert not produced_mismatches(cap, produced)
    consumed = [x for x in lines if x["event"] == "consumed"]
    assert len(consumed) == len(produced)
    assert not consumed_missing(cap, consumed, "Fetch")
    committed = [x for x in lines if x["event"] == "committed"]
    assert not committed_missing(cap, committed)
