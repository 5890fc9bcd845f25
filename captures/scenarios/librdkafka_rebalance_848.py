"""KIP-848 consumer-group rebalances with two members: joins, a fenced member, a leave,
each logged by the clients' rebalance callbacks.

See the scenario's description in ``run()`` and captures/README.md."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from harness.rdkafka import (
    check_flush,
    confluent_version,
    rdkafka_conf,
    rdkafka_produce_all,
)
from harness.run import Run
from harness.values import now_ns, settle

SCENARIO = "librdkafka_rebalance_848"
TOPIC = "ks-rebal-848"
GROUP = "ks-rebal-848-group"


def _callbacks(run: Run, label: str, state: dict) -> dict[str, Any]:
    """on_assign / on_revoke recording ``rebalance_events`` (incremental with KIP-848: the
    partitions added or taken away) and each client's current assignment."""

    def record(event: str, parts) -> None:
        tps = sorted([tp.topic, tp.partition] for tp in parts)
        run.truth.setdefault("rebalance_events", []).append(
            {"client": label, "event": event, "partitions": tps, "ts_ns": now_ns()})
        cur = state.setdefault(label, set())
        if event == "assign":
            cur.update(map(tuple, tps))
        else:
            cur.difference_update(map(tuple, tps))

    return {"on_assign": lambda c, parts: record("assign", parts),
            "on_revoke": lambda c, parts: record("revoke", parts)}


def _poll_until(run: Run, consumers: list, done, timeout_s: float = 30.0) -> None:
    """Poll ``(label, consumer)`` pairs until ``done()``; records what they consume."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not done():
        for label, c in consumers:
            msg = c.poll(0.05)
            if msg is not None and not msg.error():
                run.rdkafka_consumed(label, msg)
    if not done():
        run.truth["notes"].append(f"{[x[0] for x in consumers]}: a rebalance did not "
                                  f"complete in {timeout_s} s")


def run(out_dir: Path) -> Run:
    """Run the scenario, writing ``out_dir/NAME.pcap``; return the run (its truth is
    written by ``finish()``)."""
    from confluent_kafka import Consumer, Producer

    run = Run(SCENARIO,
              "KIP-848 consumer group (group.protocol=consumer) with two librdkafka "
              "members: ks-848-a joins alone (4 partitions); ks-848-b joins and the "
              "coordinator moves 2 partitions to it (ks-848-a revokes them first); one "
              "ConsumerGroupHeartbeat is answered FENCED_MEMBER_EPOCH (injected) and that "
              "member rejoins; ks-848-b leaves (epoch -1) and ks-848-a gets all 4 again, "
              "commits and leaves. The truth's rebalance_events are the clients' "
              "incremental on_assign/on_revoke callbacks.", out_dir=out_dir)
    run.truth["client_library"] = confluent_version()
    run.create_topic(TOPIC, 4)
    run.start_capture()
    producer = Producer(rdkafka_conf(run, "ks-848-producer", acks="all", **{"linger.ms": 5}))
    msgs = [(b"r-%d" % i, b"rebalance %d" % i, []) for i in range(8)]
    rdkafka_produce_all(run, producer, "ks-848-producer", TOPIC, msgs,
                        partition_for=lambda i: i % 4)
    check_flush(producer)
    producer.poll(0.1)
    del producer

    state: dict = {}
    common = {"group.id": GROUP, "group.protocol": "consumer",
              "auto.offset.reset": "earliest", "enable.auto.commit": False,
              "fetch.wait.max.ms": 100}
    a = Consumer(rdkafka_conf(run, "ks-848-a", **common))
    a.subscribe([TOPIC], **_callbacks(run, "ks-848-a", state))
    _poll_until(run, [("ks-848-a", a)], lambda: len(state.get("ks-848-a", ())) == 4)

    b = Consumer(rdkafka_conf(run, "ks-848-b", **common))
    b.subscribe([TOPIC], **_callbacks(run, "ks-848-b", state))
    both = [("ks-848-a", a), ("ks-848-b", b)]
    _poll_until(run, both, lambda: len(state.get("ks-848-a", ())) == 2 and
                len(state.get("ks-848-b", ())) == 2)
    settle()

    n = len(run.truth["rebalance_events"])
    run.inject("request_errors", api_key=68, error_codes=[110], scope="cluster")
    _poll_until(run, both, lambda: len(run.truth["rebalance_events"]) > n and
                len(state.get("ks-848-a", ())) == 2 and len(state.get("ks-848-b", ())) == 2,
                timeout_s=20)
    settle()

    b.close()
    _poll_until(run, [("ks-848-a", a)], lambda: len(state.get("ks-848-a", ())) == 4)
    try:
        committed = a.commit(asynchronous=False)
        run.truth["committed"] = [{"topic": tp.topic, "partition": tp.partition,
                                   "offset": tp.offset} for tp in committed or ()]
    except Exception as exc:  # noqa: BLE001 - recorded, the capture goes on
        run.truth["notes"].append(f"ks-848-a commit failed: {exc}")
    a.close()
    settle()
    run.stop_capture()
    return run
