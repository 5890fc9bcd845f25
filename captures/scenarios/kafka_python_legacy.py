"""Old message formats from kafka-python: magic 1 (Produce v2) and magic 0 (Produce v1),
every codec, then Fetch v2 / v1 readers.

See the scenario's description in ``run()`` and captures/README.md."""

from __future__ import annotations

from pathlib import Path

from harness.kafka_python import kafka_python_codec_shims, kp_consume, kp_send_all
from harness.run import Run
from harness.values import settle

SCENARIO = "kafka_python_legacy"


def run(out_dir: Path) -> Run:
    """Run the scenario, writing ``out_dir/NAME.pcap``; return the run (its truth is
    written by ``finish()``)."""
    import kafka
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    sections = [((0, 10), 1, 0), ((0, 9), 0, 1)]  # api_version, magic, partition
    codecs: list[str | None] = [None, "gzip", "snappy", "lz4"]
    run = Run(SCENARIO,
              "Old message formats from kafka-python: with api_version=(0, 10) (Produce v2, "
              "message format magic 1, KIP-32 timestamps) and with api_version=(0, 9) (Produce "
              "v1, magic 0), one producer per codec (none, gzip, snappy, lz4), 3 records each "
              "(ks-legacy partition 0 = magic 1, partition 1 = magic 0). The mock stores "
              "uncompressed magic 0/1 message sets but rejects every compressed one with "
              "UNSUPPORTED_VERSION (35): the compressed wrapper messages are on the wire in the "
              "Produce requests only. Then a (0, 10) consumer reads partition 0 (Fetch v2) and "
              "a (0, 9) consumer reads partition 1 (Fetch v1), without a group.",
              num_brokers=1, out_dir=out_dir)
    run.truth["client_library"] = {"name": "kafka-python", "version": kafka.__version__,
                                   "api_version": [[0, 10], [0, 9]]}
    kafka_python_codec_shims(run)
    run.truth["notes"] += [
        "Mock (librdkafka 2.16): magic 0/1 message sets are accepted only uncompressed "
        "(offsets assigned, records served back by Fetch); a Produce whose message set is a "
        "compressed magic 0/1 wrapper is answered with error 35 UNSUPPORTED_VERSION and not "
        "stored. kafka-python does not retry it (retries=0): one Produce per codec and "
        "section, records with error UnsupportedVersionError and offset null.",
        "Wire formats written by kafka-python (kafka.record.legacy_records): inner "
        "messages carry offsets 0..n-1 (relative for magic 1, KIP-31); the wrapper message "
        "has offset 0, null key and, for magic 1, timestamp 0 (CreateTime), not the last "
        "inner offset / max timestamp Java writes; gzip is level 9; snappy is "
        "xerial-framed (\\x82SNAPPY\\0, version 1, compatible 1, int32-length blocks); lz4 for "
        "magic 1 is a correct LZ4 frame, for magic 0 the pre-0.10 framing "
        "(kafka.codec.lz4_encode_old_kafka: content-size flag cleared, header checksum "
        "computed over magic + descriptor, KAFKA-3160).",
        "Magic 0 records have no timestamp: timestamp_ms is null for them; the magic 1 "
        "records carry CreateTime timestamp_ms.",
        "api_version=(0, 10) starts every connection with ApiVersions v0; (0, 9) sends no "
        "ApiVersions (Metadata v0 first).",
    ]
    run.create_topic("ks-legacy", 2)
    run.truth["magic_by_partition"] = {"0": 1, "1": 0}
    bs = run.cluster.bootstrap_servers
    run.start_capture()
    with run.log.kafka_python("kafka-python"):
        for api_version, magic, part in sections:
            for codec in codecs:
                name = codec or "none"
                label = f"ks-legacy-m{magic}-{name}"
                producer = KafkaProducer(client_id=label, bootstrap_servers=bs,
                                         api_version=api_version, acks=1, retries=0,
                                         linger_ms=200, compression_type=codec,
                                         request_timeout_ms=5000, max_block_ms=5000)
                msgs = [(None if i == 1 else f"m{magic}-{name}-{i}".encode(),
                         (f"magic {magic} {name} record {i}: "
                          + "sphinx of black quartz, judge my vow " * 4).encode(), [])
                        for i in range(3)]
                kp_send_all(run, producer, label, "ks-legacy", msgs, partition=part,
                            with_timestamps=magic == 1, compression=name, magic=magic,
                            api_version=list(api_version))
                producer.close(5)
        settle()
        for api_version, magic, part in sections:
            label = f"ks-legacy-reader-m{magic}"
            consumer = KafkaConsumer(client_id=label, bootstrap_servers=bs,
                                     api_version=api_version, auto_offset_reset="earliest",
                                     enable_auto_commit=False, group_id=None,
                                     fetch_max_wait_ms=100, consumer_timeout_ms=8000,
                                     request_timeout_ms=5000)
            consumer.assign([TopicPartition("ks-legacy", part)])
            want = sum(1 for m in run.truth["produced"]
                       if m["partition"] == part and m["error"] is None)
            kp_consume(run, consumer, label, want)
            consumer.close()
        settle()
    run.stop_capture()
    return run
