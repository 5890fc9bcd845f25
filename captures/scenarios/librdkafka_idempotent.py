"""Idempotent producer: producer id, epoch and base sequences in every batch, one batch
retried after NOT_LEADER_OR_FOLLOWER; ``produce_batches`` from librdkafka's debug log.

See the scenario's description in ``run()`` and captures/README.md."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from harness.client_logs import broker_port_of
from harness.rdkafka import (
    check_flush,
    confluent_version,
    rdkafka_conf,
    rdkafka_consume,
    rdkafka_produce_all,
)
from harness.run import Run
from harness.values import settle

SCENARIO = "librdkafka_idempotent"


_RDK_PID = re.compile(r"Acquired PID\{Id:(?P<pid>-?\d+),Epoch:(?P<epoch>-?\d+)\}")
_RDK_PRODUCE_BATCH = re.compile(
    r"\]: (?P<broker>\S+): (?P<topic>\S+) \[(?P<part>\d+)\]: Produce MessageSet with "
    r"(?P<cnt>\d+) message\(s\) \((?P<bytes>\d+) bytes, ApiVersion (?P<ver>\d+), "
    r"MsgVersion (?P<mv>\d+), MsgId (?P<msgid>\d+), BaseSeq (?P<seq>-?\d+), "
    r"PID\{Id:(?P<pid>-?\d+),Epoch:(?P<epoch>-?\d+)\}, (?P<codec>\w+)\)")
_RDK_BATCH_OUTCOME = re.compile(
    r"\]: (?P<broker>\S+): (?P<topic>\S+) \[(?P<part>\d+)\]: MessageSet with (?P<cnt>\d+) "
    r"message\(s\) \(MsgId (?P<msgid>\d+), BaseSeq (?P<seq>-?\d+)\) "
    r"(?P<outcome>delivered|encountered error: .*)$")


def run(out_dir: Path) -> Run:
    """Run the scenario, writing ``out_dir/NAME.pcap``; return the run (its truth is
    written by ``finish()``)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    run = Run(SCENARIO,
              "Idempotent confluent-kafka producer (enable.idempotence=true, acks=all): "
              "InitProducerId, then two waves of Produce to the 3 partitions of ks-idem "
              "(wave 1: 3 records per partition, wave 2: 2 records per partition with "
              "headers); every record batch carries the producer id, epoch 0 and the base "
              "sequence of its first record. The first Produce request is failed with "
              "NOT_LEADER_OR_FOLLOWER (6) and retried: the retry carries the same producer "
              "id, epoch and base sequence. A group-less consumer reads everything back.",
              out_dir=out_dir)
    run.truth["client_library"] = confluent_version()
    run.create_topic("ks-idem", 3)
    idem: dict[str, Any] = {"producer_id": None, "producer_epoch": None, "acquired": []}
    batches: list[dict[str, Any]] = []

    def on_pid(label: str, m: re.Match[str], ts: int) -> None:
        idem["acquired"].append({"client": label, "producer_id": int(m["pid"]),
                                 "producer_epoch": int(m["epoch"]), "logged_ts_ns": ts})
        idem["producer_id"], idem["producer_epoch"] = int(m["pid"]), int(m["epoch"])

    def on_batch(label: str, m: re.Match[str], ts: int) -> None:
        batches.append({"client": label, "connection": m["broker"],
                        "broker_port": broker_port_of(m["broker"]),
                        "topic": m["topic"], "partition": int(m["part"]),
                        "record_count": int(m["cnt"]), "message_set_bytes": int(m["bytes"]),
                        "produce_api_version": int(m["ver"]), "magic": int(m["mv"]),
                        "first_msg_id": int(m["msgid"]), "base_sequence": int(m["seq"]),
                        "producer_id": int(m["pid"]), "producer_epoch": int(m["epoch"]),
                        "compression": m["codec"], "outcome": None, "logged_ts_ns": ts})

    def on_outcome(label: str, m: re.Match[str], ts: int) -> None:
        for b in batches:
            if (b["connection"], b["topic"], b["partition"], b["first_msg_id"],
                    b["base_sequence"]) == (m["broker"], m["topic"], int(m["part"]),
                                            int(m["msgid"]), int(m["seq"])) \
                    and b["outcome"] is None:
                b["outcome"] = m["outcome"]
                break

    run.log.watchers += [(_RDK_PID, on_pid), (_RDK_PRODUCE_BATCH, on_batch),
                         (_RDK_BATCH_OUTCOME, on_outcome)]
    run.start_capture()
    run.inject("request_errors", api_key=0, error_codes=[6], scope="cluster",
               effect="the first Produce request fails with NOT_LEADER_OR_FOLLOWER; the "
                      "idempotent producer retries the same batch (same PID/epoch/BaseSeq)")
    label = "ks-idem-producer"
    producer = Producer(rdkafka_conf(run, label, debug="protocol,eos,msg", **{
        "enable.idempotence": True, "linger.ms": 50, "retry.backoff.ms": 50}))
    seq: Counter[int] = Counter()
    for wave, (n, with_headers) in enumerate([(3, False), (2, True)], start=1):
        msgs = []
        parts = []
        for p in range(3):
            for i in range(n):
                msgs.append((b"idem-w%d-p%d-%d" % (wave, p, i),
                             b"idempotent wave %d partition %d record %d" % (wave, p, i),
                             [("wave", b"%d" % wave), ("seq", b"%d" % seq[p])]
                             if with_headers else []))
                parts.append(p)
                seq[p] += 1
        n0 = len(run.truth["produced"])
        rdkafka_produce_all(run, producer, label, "ks-idem", msgs,
                            partition_for=lambda i, parts=parts: parts[i])
        check_flush(producer)
        for m in run.truth["produced"][n0:]:
            m["wave"] = wave
    producer.poll(0.1)
    del producer
    # sequence numbers: librdkafka numbers each partition's records 0, 1, 2 ... in
    # produce() order (msgid - epoch base msgid): wave 1 records 0-2, wave 2 records 3-4.
    for m in run.truth["produced"]:
        _, wave, _part, i = bytes.fromhex(m["key_hex"]).decode().split("-")
        m["sequence"] = int(i) + (3 if wave == "w2" else 0)
        m["producer_id"] = idem["producer_id"]
        m["producer_epoch"] = idem["producer_epoch"]
    settle()
    consumer = Consumer(rdkafka_conf(run, "ks-idem-reader", **{
        "group.id": "ks-idem-reader", "enable.auto.commit": False, "fetch.wait.max.ms": 100}))
    consumer.assign([TopicPartition("ks-idem", p, 0) for p in range(3)])
    rdkafka_consume(run, consumer, "ks-idem-reader", len(run.truth["produced"]))
    consumer.close()
    settle()
    run.stop_capture()
    run.truth["idempotence"] = idem
    run.truth["produce_batches"] = batches
    run.truth["notes"] += [
        "idempotence and produce_batches come from librdkafka's eos/msg debug logs "
        "(\"Acquired PID{...}\", \"Produce MessageSet with N message(s) (... BaseSeq S, "
        "PID{Id:..,Epoch:..}, ...)\" and the batch outcome line); a batch retried after an "
        "error appears twice with the same base_sequence.",
        "produced[].sequence is the record's sequence number (its batch's base sequence + "
        "its offset delta): librdkafka numbers each partition's records 0, 1, 2 ... in "
        "produce() order; partitions are fresh and written only by this producer, so it "
        "also equals the record's offset.",
    ]
    return run
