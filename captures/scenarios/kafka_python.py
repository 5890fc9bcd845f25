"""kafka-python producer, consumer group and admin client (some admin APIs the mock does
not implement: request without response).

See the scenario's description in ``run()`` and captures/README.md."""

from __future__ import annotations

from pathlib import Path

from harness.kafka_python import KAFKA_PYTHON_API_VERSION
from harness.messages import EVENT_MESSAGES, ORDER_MESSAGES
from harness.run import Run
from harness.values import now_ms, now_ns, record_fields, settle

SCENARIO = "kafka_python"


def run(out_dir: Path) -> Run:
    """Run the scenario, writing ``out_dir/NAME.pcap``; return the run (its truth is
    written by ``finish()``)."""
    import kafka
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

    run = Run(SCENARIO,
              "kafka-python producer (acks=all) writes 12 records, a consumer-group member "
              "reads them and commits, then an admin client lists topics/groups, describes "
              "the cluster and topics, and lists group and partition offsets.", out_dir=out_dir)
    run.truth["client_library"] = {"name": "kafka-python", "version": kafka.__version__,
                                   "api_version": list(KAFKA_PYTHON_API_VERSION)}
    run.truth["notes"].append(
        "kafka-python runs with api_version=(2, 3): without it, it opens with ApiVersions "
        "v4, the mock answers UNSUPPORTED_VERSION in a body kafka-python cannot decode, and "
        "bootstrap fails. (2, 3) makes it start with ApiVersions v2.")
    run.create_topic("ks-kp", 3)
    run.cluster.set_controller_id(1)
    common = {"bootstrap_servers": run.cluster.bootstrap_servers,
              "api_version": KAFKA_PYTHON_API_VERSION, "request_timeout_ms": 5000}
    run.start_capture()
    with run.log.kafka_python("kafka-python"):
        producer = KafkaProducer(client_id="ks-kp-producer", acks="all", linger_ms=5,
                                 **common)
        msgs = ORDER_MESSAGES[:6] + EVENT_MESSAGES[:6]
        futures = []
        for i, (key, value, headers) in enumerate(msgs):
            topic_partition = 1 if i == 0 else None
            ts = now_ms()
            # kafka-python refuses null header values: send them as empty values
            headers = [(k, b"" if v is None else v) for k, v in headers]
            fut = producer.send("ks-kp", key=key, value=value, headers=headers or None,
                                partition=topic_partition, timestamp_ms=ts)
            futures.append((fut, key, value, headers, now_ns(), ts))
        producer.flush(10)
        for fut, key, value, headers, t0, ts in futures:
            md = fut.get(timeout=10)
            run.add_produced(client="kafka-python", topic=md.topic, partition=md.partition,
                             offset=md.offset, **record_fields(key, value, headers),
                             timestamp_ms=ts, delivery_report_timestamp=[None, md.timestamp],
                             produce_call_ts_ns=t0, delivery_report_ts_ns=now_ns(),
                             error=None)
        producer.close(5)
        settle()

        consumer = KafkaConsumer("ks-kp", client_id="ks-kp-consumer", group_id="ks-kp-group",
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 fetch_max_wait_ms=100, consumer_timeout_ms=15000, **common)
        got = 0
        for m in consumer:
            run.add_consumed("kafka-python", m.topic, m.partition, m.offset, m.key, m.value,
                             [(k, v) for k, v in m.headers], m.timestamp)
            got += 1
            if got == len(msgs):
                break
        consumer.commit()
        consumer.close()
        settle()

        admin = KafkaAdminClient(client_id="ks-kp-admin", **common)
        results = []
        for name, fn in [
            ("list_topics", admin.list_topics),
            ("describe_cluster", admin.describe_cluster),
            ("describe_topics", lambda: admin.describe_topics(["ks-kp"])),
            ("list_groups", admin.list_groups),
            ("describe_groups", lambda: admin.describe_groups(["ks-kp-group"])),
            ("list_group_offsets", lambda: admin.list_group_offsets("ks-kp-group")),
            ("describe_configs", lambda: admin.describe_configs(
                [kafka.admin.ConfigResource("TOPIC", "ks-kp")])),
        ]:
            t0 = now_ns()
            try:
                res = fn()
                results.append({"operation": name, "ok": True, "result": repr(res)[:2000],
                                "started_ts_ns": t0, "ended_ts_ns": now_ns()})
            except Exception as exc:
                results.append({"operation": name, "ok": False,
                                "error": type(exc).__name__, "error_text": str(exc)[:500],
                                "started_ts_ns": t0, "ended_ts_ns": now_ns()})
        run.truth["admin_results"] = results
        admin.close()
        settle()
    run.stop_capture()
    return run
