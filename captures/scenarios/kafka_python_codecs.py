"""One kafka-python producer per codec (xerial snappy inside magic-2 batches), then a
group consumer reads them back.

See the scenario's description in ``run()`` and captures/README.md."""

from __future__ import annotations

from pathlib import Path

from harness.kafka_python import (
    KAFKA_PYTHON_API_VERSION,
    kafka_python_codec_shims,
    kp_consume,
    kp_send_all,
)
from harness.run import Run
from harness.values import settle

SCENARIO = "kafka_python_codecs"


def run(out_dir: Path) -> Run:
    """Run the scenario, writing ``out_dir/NAME.pcap``; return the run (its truth is
    written by ``finish()``)."""
    import kafka
    from kafka import KafkaConsumer, KafkaProducer

    codecs = ["gzip", "snappy", "lz4", "zstd"]
    run = Run(SCENARIO,
              "Four kafka-python producers, one per compression codec (gzip, snappy, lz4, "
              "zstd), each write 5 compressible records (headers, one null key) as one "
              "record batch to its own partition of ks-kp-codecs (partition i = codecs[i]); "
              "a consumer-group member reads all 20 back (Fetch responses carry the "
              "kafka-python batches the mock stored, unchanged apart from base offset and "
              "leader epoch).", out_dir=out_dir)
    run.truth["client_library"] = {"name": "kafka-python", "version": kafka.__version__,
                                   "api_version": list(KAFKA_PYTHON_API_VERSION)}
    kafka_python_codec_shims(run)
    run.truth["notes"] += [
        "kafka-python runs with api_version=(2, 3) as in the kafka_python capture (the mock's "
        "ApiVersions v4 answer breaks its bootstrap otherwise): Produce v7, record batches "
        "magic 2 (DefaultRecordBatchBuilder).",
        "snappy framing: kafka-python writes snappy with the xerial framing (Java's "
        "SnappyOutputStream layout) also inside magic-2 batches: kafka.codec.snappy_encode() "
        "defaults to xerial_compatible=True, 32 KiB blocks; the compressed records of the "
        "snappy batch therefore start with 82 53 4e 41 50 50 59 00 (\\x82SNAPPY\\0), then "
        "int32 version 1, int32 compatible 1, then int32-length-prefixed raw snappy blocks. "
        "librdkafka writes raw snappy (see librdkafka_compression).",
        "lz4: LZ4 frame from python-lz4 (block_linked=False, content size present); zstd: "
        "zstandard frame with content size; gzip: level 9 gzip member.",
        "kafka-python 3 is idempotent by default with acks=all: each producer starts with "
        "InitProducerId and its batch carries that producer id, epoch 0, base sequence 0.",
    ]
    run.create_topic("ks-kp-codecs", len(codecs))
    run.truth["compression_by_partition"] = dict(enumerate(codecs))
    common = {"bootstrap_servers": run.cluster.bootstrap_servers,
              "api_version": KAFKA_PYTHON_API_VERSION, "request_timeout_ms": 5000}
    run.start_capture()
    with run.log.kafka_python("kafka-python"):
        for part, codec in enumerate(codecs):
            label = f"ks-kp-{codec}"
            producer = KafkaProducer(client_id=label, acks="all", compression_type=codec,
                                     linger_ms=200, **common)
            msgs = [(None if i == 3 else f"kp-{codec}-{i}".encode(),
                     (f"kafka-python {codec} record {i}: "
                      + "pack my box with five dozen liquor jugs " * 8).encode(),
                     [("codec", codec.encode()), ("i", b"%d" % i)]) for i in range(5)]
            kp_send_all(run, producer, label, "ks-kp-codecs", msgs, partition=part,
                        compression=codec, magic=2)
            producer.close(5)
        settle()
        consumer = KafkaConsumer("ks-kp-codecs", client_id="ks-kp-codecs-consumer",
                                 group_id="ks-kp-codecs-group", auto_offset_reset="earliest",
                                 enable_auto_commit=False, fetch_max_wait_ms=100,
                                 consumer_timeout_ms=15000, **common)
        kp_consume(run, consumer, "ks-kp-codecs-consumer", len(codecs) * 5)
        consumer.commit()
        consumer.close()
        settle()
    run.stop_capture()
    return run
