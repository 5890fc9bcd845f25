"""confluent-kafka AdminClient: the calls the mock serves, and those librdkafka refuses
before sending (results in ``admin_results``).

See the scenario's description in ``run()`` and captures/README.md."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.rdkafka import check_flush, confluent_version, rdkafka_conf
from harness.run import Run
from harness.values import now_ns, settle

SCENARIO = "librdkafka_admin"


def run(out_dir: Path) -> Run:
    """Run the scenario, writing ``out_dir/NAME.pcap``; return the run (its truth is
    written by ``finish()``)."""
    from confluent_kafka import Consumer, Producer, TopicCollection, TopicPartition
    from confluent_kafka.admin import (
        AdminClient,
        ConfigResource,
        NewPartitions,
        NewTopic,
        OffsetSpec,
    )

    run = Run(SCENARIO,
              "confluent-kafka AdminClient calls against the mock: the ones the mock serves "
              "(Metadata-based list/describe, DescribeCluster via Metadata, ListOffsets, "
              "OffsetFetch) and ones librdkafka refuses before sending because the mock does "
              "not advertise the API (CreateTopics, DescribeConfigs, DeleteRecords, ...).",
              out_dir=out_dir)
    run.truth["client_library"] = confluent_version()
    run.create_topic("ks-admin", 3)
    run.cluster.set_controller_id(1)
    run.truth["mock_cluster"]["controller_id"] = 1

    # Before the capture: some records and a committed group offset to describe.
    pre = Producer({"bootstrap.servers": run.cluster.bootstrap_servers, "linger.ms": 0})
    for i in range(3):
        pre.produce("ks-admin", key=b"pre-%d" % i, value=b"preloaded", partition=0)
    check_flush(pre)
    del pre
    c = Consumer({"bootstrap.servers": run.cluster.bootstrap_servers,
                  "group.id": "ks-admin-group", "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("ks-admin", 0, 2)], asynchronous=False)
    c.close()
    run.truth["preloaded"] = {"ks-admin": {"0": 3}, "committed": {
        "ks-admin-group": [{"topic": "ks-admin", "partition": 0, "offset": 2}]},
        "note": "written before the capture started; not in the pcap"}

    run.start_capture()
    admin = AdminClient(rdkafka_conf(run, "ks-admin-1"))
    results: list[dict[str, Any]] = []

    def call(name: str, fn: Callable[[], Any], show: Callable[[Any], Any] = repr) -> None:
        admin.poll(0.05)  # serves librdkafka's log queue (the request records)
        t0 = now_ns()
        try:
            res = fn()
            results.append({"operation": name, "ok": True, "result": show(res),
                            "started_ts_ns": t0, "ended_ts_ns": now_ns()})
        except Exception as exc:  # record real failures
            err = exc.args[0] if exc.args else exc
            code = getattr(err, "name", lambda: None)()
            results.append({"operation": name, "ok": False, "error": code,
                            "error_text": str(err), "started_ts_ns": t0,
                            "ended_ts_ns": now_ns()})

    opts = {"request_timeout": 3}
    call("list_topics", lambda: admin.list_topics(timeout=5),
         lambda md: {"topics": sorted(md.topics), "brokers": sorted(
             [b.id, b.host, b.port] for b in md.brokers.values()),
             "controller_id": md.controller_id, "cluster_id": md.cluster_id})
    call("describe_cluster", lambda: admin.describe_cluster(**opts).result(10),
         lambda r: {"cluster_id": r.cluster_id, "controller": r.controller.id
                    if r.controller else None, "nodes": sorted(n.id for n in r.nodes)})
    call("describe_topics",
         lambda: admin.describe_topics(TopicCollection(["ks-admin"]), **opts)["ks-admin"]
         .result(10),
         lambda r: {"name": r.name, "partitions": [[p.id, p.leader.id if p.leader else None]
                                                   for p in r.partitions]})
    call("list_offsets_latest",
         lambda: admin.list_offsets({TopicPartition("ks-admin", 0): OffsetSpec.latest()},
                                    **opts)[TopicPartition("ks-admin", 0)].result(10),
         lambda r: {"offset": r.offset})
    call("list_offsets_earliest",
         lambda: admin.list_offsets({TopicPartition("ks-admin", 0): OffsetSpec.earliest()},
                                    **opts)[TopicPartition("ks-admin", 0)].result(10),
         lambda r: {"offset": r.offset})
    from confluent_kafka import ConsumerGroupTopicPartitions

    call("list_consumer_group_offsets",
         lambda: admin.list_consumer_group_offsets(
             [ConsumerGroupTopicPartitions("ks-admin-group",
                                           [TopicPartition("ks-admin", 0)])],
             **opts)["ks-admin-group"].result(10),
         lambda r: [[tp.topic, tp.partition, tp.offset] for tp in r.topic_partitions])
    call("list_consumer_groups", lambda: admin.list_consumer_groups(**opts).result(10),
         lambda r: {"valid": sorted(g.group_id for g in r.valid),
                    "errors": [str(e) for e in r.errors]})
    call("describe_consumer_groups",
         lambda: admin.describe_consumer_groups(["ks-admin-group"], **opts)["ks-admin-group"]
         .result(10))
    call("create_topics",
         lambda: admin.create_topics([NewTopic("ks-admin-new", 2, 1)], **opts)
         ["ks-admin-new"].result(10))
    call("create_partitions",
         lambda: admin.create_partitions([NewPartitions("ks-admin", 4)], **opts)["ks-admin"]
         .result(10))
    call("describe_configs",
         lambda: list(admin.describe_configs([ConfigResource("topic", "ks-admin")], **opts)
                      .values())[0].result(10))
    call("delete_records",
         lambda: list(admin.delete_records([TopicPartition("ks-admin", 0, 1)], **opts)
                      .values())[0].result(10))
    call("delete_topics",
         lambda: admin.delete_topics(["ks-admin"], **opts)["ks-admin"].result(10))
    run.truth["admin_results"] = results
    settle()
    admin.poll(0.1)
    del admin
    settle()
    run.stop_capture()
    run.truth["notes"].append(
        "Operations with ok=false and error _UNSUPPORTED_FEATURE were refused by librdkafka "
        "before sending anything: the mock's ApiVersions response does not list that API.")
    return run
