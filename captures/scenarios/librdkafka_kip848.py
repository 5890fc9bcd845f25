"""Consumer group with the KIP-848 protocol (ConsumerGroupHeartbeat).

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

SCENARIO = "librdkafka_kip848"


def run(out_dir: Path) -> Run:
    """Run the scenario, writing ``out_dir/NAME.pcap``; return the run (its truth is
    written by ``finish()``)."""
    from confluent_kafka import Consumer, Producer

    run = Run(SCENARIO,
              "Consumer group with the KIP-848 protocol (group.protocol=consumer): the "
              "member joins and gets its assignment through ConsumerGroupHeartbeat instead "
              "of JoinGroup/SyncGroup, reads 6 records, commits and leaves.", out_dir=out_dir)
    run.truth["client_library"] = confluent_version()
    run.create_topic("ks-848", 3)
    run.start_capture()
    producer = Producer(rdkafka_conf(run, "ks-848-producer", acks="all", **{"linger.ms": 5}))
    msgs = [(b"k848-%d" % i, b"new consumer protocol %d" % i, []) for i in range(6)]
    rdkafka_produce_all(run, producer, "ks-848-producer", "ks-848", msgs)
    check_flush(producer)
    producer.poll(0.1)  # serve the last log lines
    del producer
    consumer = Consumer(rdkafka_conf(run, "ks-848-consumer", **{
        "group.id": "ks-848-group", "group.protocol": "consumer",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "fetch.wait.max.ms": 100}))
    consumer.subscribe(["ks-848"])
    rdkafka_consume(run, consumer, "ks-848-consumer", len(msgs))
    consumer.commit(asynchronous=False)
    consumer.close()
    settle()
    run.stop_capture()
    return run
