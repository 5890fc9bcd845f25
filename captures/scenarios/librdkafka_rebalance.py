"""Classic consumer-group rebalances with two members: a join, a second join, an error,
a session timeout and a leave, each logged by the clients' rebalance callbacks.

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

SCENARIO = "librdkafka_rebalance"
TOPIC = "ks-rebal"
GROUP = "ks-rebal-group"


def _callbacks(run: Run, label: str, state: dict) -> dict[str, Any]:
    """on_assign / on_revoke recording ``rebalance_events`` in the truth (the client's own
    word on every rebalance it took part in)."""

    def record(event: str, parts) -> None:
        tps = sorted([tp.topic, tp.partition] for tp in parts)
        run.truth.setdefault("rebalance_events", []).append(
            {"client": label, "event": event, "partitions": tps, "ts_ns": now_ns()})
        state[label] = tps if event == "assign" else []
        state.setdefault("events", []).append((label, event))

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
              "Classic consumer group (range assignor) with two librdkafka members: "
              "ks-rebal-a joins alone (4 partitions); ks-rebal-b, a static member "
              "(group.instance.id), joins and the partitions are split; one Heartbeat is "
              "answered REBALANCE_IN_PROGRESS (injected) and both rejoin; ks-rebal-b closes "
              "without LeaveGroup (static members do not leave) and its session (3 s) times "
              "out, so ks-rebal-a gets all 4 again; ks-rebal-a commits and leaves. The "
              "truth's rebalance_events are the clients' on_assign/on_revoke callbacks.",
              out_dir=out_dir)
    run.truth["client_library"] = confluent_version()
    run.create_topic(TOPIC, 4)
    run.start_capture()
    producer = Producer(rdkafka_conf(run, "ks-rebal-producer", acks="all",
                                     **{"linger.ms": 5}))
    msgs = [(b"r-%d" % i, b"rebalance %d" % i, []) for i in range(8)]
    rdkafka_produce_all(run, producer, "ks-rebal-producer", TOPIC, msgs,
                        partition_for=lambda i: i % 4)
    check_flush(producer)
    producer.poll(0.1)
    del producer

    state: dict = {}
    common = {"group.id": GROUP, "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "partition.assignment.strategy": "range",
              "heartbeat.interval.ms": 300, "fetch.wait.max.ms": 100}
    a = Consumer(rdkafka_conf(run, "ks-rebal-a", **common, **{"session.timeout.ms": 6000}))
    a.subscribe([TOPIC], **_callbacks(run, "ks-rebal-a", state))
    _poll_until(run, [("ks-rebal-a", a)], lambda: len(state.get("ks-rebal-a") or ()) == 4)

    b = Consumer(rdkafka_conf(run, "ks-rebal-b", **common, **{
        "session.timeout.ms": 3000, "group.instance.id": "ks-rebal-b-static"}))
    b.subscribe([TOPIC], **_callbacks(run, "ks-rebal-b", state))
    both = [("ks-rebal-a", a), ("ks-rebal-b", b)]
    _poll_until(run, both, lambda: len(state.get("ks-rebal-a") or ()) == 2 and
                len(state.get("ks-rebal-b") or ()) == 2)
    settle()

    before = len(state["events"])
    run.inject("request_errors", api_key=12, error_codes=[27], scope="cluster")
    _poll_until(run, both, lambda: sum(1 for x in state["events"][before:]
                                    if x[1] == "assign") >= 2 and
                len(state.get("ks-rebal-a") or ()) == 2 and
                len(state.get("ks-rebal-b") or ()) == 2)
    settle()

    b.close()                   # a static member: no LeaveGroup, its session times out
    _poll_until(run, [("ks-rebal-a", a)], lambda: len(state.get("ks-rebal-a") or ()) == 4)
    _poll_until(run, [("ks-rebal-a", a)], lambda: False, timeout_s=1.0)   # read the rest
    run.truth["notes"].pop()
    try:
        committed = a.commit(asynchronous=False)
        run.truth["committed"] = [{"topic": tp.topic, "partition": tp.partition,
                                   "offset": tp.offset} for tp in committed or ()]
    except Exception as exc:  # noqa: BLE001 - recorded, the capture goes on
        run.truth["notes"].append(f"ks-rebal-a commit failed: {exc}")
    a.close()
    settle()
    run.stop_capture()
    return run
