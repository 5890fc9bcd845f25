"""One confluent-kafka producer per codec (gzip, snappy, lz4, zstd), partition i = codec
i; a consumer reads the compressed batches back.

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

SCENARIO = "librdkafka_compression"


def run(out_dir: Path) -> Run:
    """Run the scenario, writing ``out_dir/NAME.pcap``; return the run (its truth is
    written by ``finish()``)."""
    from confluent_kafka import Consumer, Producer

    codecs = ["gzip", "snappy", "lz4", "zstd"]
    run = Run(SCENARIO,
              "Four confluent-kafka producers, one per compression codec (gzip, snappy, lz4, "
              "zstd), each write 5 compressible records as one record batch to its own "
              "partition of ks-compressed (partition i = codecs[i]); a consumer-group member "
              "reads all 20 (Fetch responses carry the compressed batches the mock stored).",
              out_dir=out_dir)
    run.truth["client_library"] = confluent_version()
    run.create_topic("ks-compressed", 4)
    run.truth["compression_by_partition"] = dict(enumerate(codecs))
    run.start_capture()
    for part, codec in enumerate(codecs):
        label = f"ks-producer-{codec}"
        producer = Producer(rdkafka_conf(run, label, acks="all", **{
            "compression.type": codec, "linger.ms": 50}))
        producer.list_topics("ks-compressed", timeout=5)
        msgs = [(f"{codec}-{i}".encode(),
                 (f"{codec} record {i}: " + "the quick brown fox jumps over the lazy dog " * 8)
                 .encode(), [("codec", codec.encode())]) for i in range(5)]
        rdkafka_produce_all(run, producer, label, "ks-compressed", msgs,
                            partition_for=lambda _i, p=part: p)
        check_flush(producer)
        producer.poll(0.1)  # serve the last log lines
        del producer
    for m in run.truth["produced"]:
        m["compression"] = codecs[m["partition"]]
    settle()
    consumer = Consumer(rdkafka_conf(run, "ks-consumer-compressed", **{
        "group.id": "ks-compressed-group", "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "fetch.wait.max.ms": 100}))
    consumer.subscribe(["ks-compressed"])
    rdkafka_consume(run, consumer, "ks-consumer-compressed", len(run.truth["produced"]))
    consumer.commit(asynchronous=False)
    consumer.close()
    settle()
    run.stop_capture()
    return run
