"""acks=0 producer: Produce requests without a response on the wire (the mock's answers
held back), then a group-less reader learns the offsets.

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

SCENARIO = "librdkafka_acks0"


def run(out_dir: Path) -> Run:
    """Run the scenario, writing ``out_dir/NAME.pcap``; return the run (its truth is
    written by ``finish()``)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    n = 8
    run = Run(SCENARIO,
              "confluent-kafka producer with acks=0: eight Produce requests (one record "
              "each) with no response on the wire, as with a real broker. The mock, unlike "
              "Kafka, does answer acks=0 Produce requests, so its Produce responses on broker "
              "1 are held back for 10 minutes (never sent during the capture; the producer "
              "closes first). A group-less consumer then reads the partition to learn the "
              "offsets the mock assigned. See librdkafka_mock_quirks for the mock's acks=0 "
              "answers.", out_dir=out_dir)
    run.truth["client_library"] = confluent_version()
    run.create_topic("ks-fire", 1)  # leader: broker 1
    run.start_capture()
    run.inject("broker_request_error_rtts", broker_id=1, api_key=0,
               errors_and_rtts=[[0, 600_000]] * n,
               effect="the mock's (non-standard) answers to the next 8 Produce requests on "
                      "broker 1 are delayed 10 minutes, i.e. never sent during the capture")
    producer = Producer(rdkafka_conf(run, "ks-producer-acks0", acks=0, **{"linger.ms": 0}))
    producer.list_topics("ks-fire", timeout=5)  # connect first: one record per request
    msgs = [(b"fire-%02d" % i, b"fire and forget %02d" % i, [("acks", b"0")] if i % 2 else [])
            for i in range(n)]
    for m in msgs:
        rdkafka_produce_all(run, producer, "ks-producer-acks0", "ks-fire", [m],
                            partition_for=lambda _i: 0)
        check_flush(producer)
    settle()
    producer.flush(1)
    producer.poll(0.1)  # serve the last log lines
    del producer
    run.truth["notes"].append(
        "acks=0: delivery reports carry no offset (offset null); see 'consumed' for the "
        "offsets the mock assigned.")
    consumer = Consumer(rdkafka_conf(run, "ks-reader-acks0", **{
        "group.id": "ks-acks0-reader", "enable.auto.commit": False,
        "fetch.wait.max.ms": 100}))
    consumer.assign([TopicPartition("ks-fire", 0, 0)])
    rdkafka_consume(run, consumer, "ks-reader-acks0", len(msgs))
    consumer.close()
    settle()
    run.stop_capture()
    return run
