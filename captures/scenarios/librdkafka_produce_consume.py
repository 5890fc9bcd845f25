"""confluent-kafka producer writes 20 records to two topics (keys, null keys, empty and
null values, binary data, headers) in two Produce waves; a classic consumer group reads
them, commits and leaves.

See the scenario's description in ``run()`` and captures/README.md."""

from __future__ import annotations

from pathlib import Path

from harness.messages import EVENT_MESSAGES, ORDER_MESSAGES
from harness.rdkafka import (
    check_flush,
    confluent_version,
    rdkafka_conf,
    rdkafka_consume,
    rdkafka_produce_all,
)
from harness.run import Run
from harness.values import settle

SCENARIO = "librdkafka_produce_consume"


def run(out_dir: Path) -> Run:
    """Run the scenario, writing ``out_dir/NAME.pcap``; return the run (its truth is
    written by ``finish()``)."""
    from confluent_kafka import Consumer, Producer

    run = Run(SCENARIO,
              "confluent-kafka producer (acks=all, no compression) writes 20 records to two "
              "3-partition topics (keys, null keys, empty and null values, binary values, "
              "headers), then a consumer-group member subscribes, reads them all, commits "
              "synchronously and closes.", out_dir=out_dir)
    run.truth["client_library"] = confluent_version()
    run.create_topic("ks-orders", 3)
    run.create_topic("ks-events", 3)
    run.start_capture()

    producer = Producer(rdkafka_conf(run, "ks-producer-1", acks="all",
                                     **{"compression.type": "none", "linger.ms": 5}))
    # first wave: explicit partitions and keys; one explicit timestamp
    rdkafka_produce_all(run, producer, "ks-producer-1", "ks-orders", ORDER_MESSAGES,
                        partition_for=lambda i: i % 3 if i < 3 else None,
                        timestamp_for=lambda i: 1700000000000 if i == 2 else None)
    check_flush(producer)
    # second wave: a separate set of Produce requests
    rdkafka_produce_all(run, producer, "ks-producer-1", "ks-events", EVENT_MESSAGES)
    check_flush(producer)
    settle()

    want = len(run.truth["produced"])
    consumer = Consumer(rdkafka_conf(run, "ks-consumer-1", **{
        "group.id": "ks-group-1", "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "fetch.wait.max.ms": 100,
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000}))
    consumer.subscribe(["ks-orders", "ks-events"])
    rdkafka_consume(run, consumer, "ks-consumer-1", want)
    committed = consumer.commit(asynchronous=False)
    run.truth["committed"] = [{"topic": tp.topic, "partition": tp.partition,
                               "offset": tp.offset} for tp in committed or []]
    consumer.close()
    producer.flush(1)
    producer.poll(0.1)  # serve the last log lines
    del producer
    settle()
    run.stop_capture()
    return run
