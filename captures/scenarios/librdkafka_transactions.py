"""Transactional producer (a committed and an aborted transaction, offsets in the
transaction) and a read_committed consumer.

See the scenario's description in ``run()`` and captures/README.md."""

from __future__ import annotations

from pathlib import Path

from harness.rdkafka import (
    check_flush,
    confluent_version,
    rdkafka_conf,
    rdkafka_consume,
    rdkafka_produce_all,
)
from harness.run import Run
from harness.values import settle

SCENARIO = "librdkafka_transactions"


def run(out_dir: Path) -> Run:
    """Run the scenario, writing ``out_dir/NAME.pcap``; return the run (its truth is
    written by ``finish()``)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    run = Run(SCENARIO,
              "Transactional confluent-kafka producer (transactional.id ks-tx-1): "
              "InitProducerId; transaction 1 writes 3 records to ks-tx (one per partition) and "
              "commits the offset of a record read from ks-tx-in (AddPartitionsToTxn, "
              "AddOffsetsToTxn, TxnOffsetCommit, EndTxn commit); transaction 2 writes 2 "
              "records and aborts (EndTxn abort). The mock appends a control batch (commit/"
              "abort marker) to each partition a transaction touched. A read_committed "
              "consumer then reads ks-tx: the mock returns no aborted-transaction list, so "
              "the aborted records are delivered too.", out_dir=out_dir)
    run.truth["client_library"] = confluent_version()
    run.create_topic("ks-tx", 3)
    run.create_topic("ks-tx-in", 1)
    run.cluster.coordinator_set("transaction", "ks-tx-1", 1)
    run.cluster.coordinator_set("group", "ks-tx-src", 2)
    run.truth["coordinators"] = {"transaction ks-tx-1": 1, "group ks-tx-src": 2}
    pre = Producer({"bootstrap.servers": run.cluster.bootstrap_servers, "linger.ms": 0})
    pre.produce("ks-tx-in", key=b"in-0", value=b"input record", partition=0)
    check_flush(pre)
    del pre
    run.truth["preloaded"] = {"ks-tx-in": {"0": 1},
                              "note": "written before the capture started; not in the pcap"}
    run.start_capture()
    src = Consumer(rdkafka_conf(run, "ks-tx-src", **{
        "group.id": "ks-tx-src", "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "fetch.wait.max.ms": 100}))
    src.subscribe(["ks-tx-in"])
    got = rdkafka_consume(run, src, "ks-tx-src", 1)
    producer = Producer(rdkafka_conf(run, "ks-tx-producer", **{
        "transactional.id": "ks-tx-1", "linger.ms": 5}))
    producer.init_transactions(10)
    producer.begin_transaction()
    committed = [(b"tx1-%d" % i, b"committed in transaction 1 (%d)" % i, [("txn", b"1")])
                 for i in range(3)]
    n0 = len(run.truth["produced"])
    rdkafka_produce_all(run, producer, "ks-tx-producer", "ks-tx", committed,
                        partition_for=lambda i: i)
    producer.flush(10)
    if got:
        producer.send_offsets_to_transaction([TopicPartition("ks-tx-in", 0, 1)],
                                             src.consumer_group_metadata(), 10)
    producer.commit_transaction(10)
    for m in run.truth["produced"][n0:]:
        m["transaction"] = "committed"
    run.truth["transactional_offsets"] = [{"group": "ks-tx-src", "topic": "ks-tx-in",
                                           "partition": 0, "offset": 1}] if got else []
    producer.begin_transaction()
    aborted = [(b"tx2-%d" % i, b"aborted in transaction 2 (%d)" % i, [("txn", b"2")])
               for i in range(2)]
    n1 = len(run.truth["produced"])
    rdkafka_produce_all(run, producer, "ks-tx-producer", "ks-tx", aborted,
                        partition_for=lambda i: i)
    producer.flush(10)
    producer.abort_transaction(10)
    for m in run.truth["produced"][n1:]:
        m["transaction"] = "aborted"
    src.close()
    settle()
    consumer = Consumer(rdkafka_conf(run, "ks-tx-reader", **{
        "group.id": "ks-tx-reader", "auto.offset.reset": "earliest",
        "isolation.level": "read_committed", "enable.auto.commit": False,
        "fetch.wait.max.ms": 100}))
    consumer.subscribe(["ks-tx"])
    rdkafka_consume(run, consumer, "ks-tx-reader", 5, timeout_s=10)
    consumer.close()
    producer.poll(0.1)  # serve the last log lines
    del producer
    settle()
    run.stop_capture()
    run.truth["expected_control_records"] = [
        {"topic": "ks-tx", "partition": p, "markers": ["COMMIT", "ABORT"] if p < 2
         else ["COMMIT"]} for p in range(3)]
    run.truth["notes"].append(
        "expected_control_records is what the mock is expected to append (one marker per "
        "partition per transaction, at the offsets the data records skip); it is inferred "
        "from the consumed offsets, not reported by a client.")
    return run
