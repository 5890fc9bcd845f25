"""Injected broker errors and latency: Produce/FindCoordinator/Fetch/OffsetCommit errors,
a slow broker and a Produce answered after the client's timeout.

See the scenario's description in ``run()`` and captures/README.md."""

from __future__ import annotations

import time
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

SCENARIO = "librdkafka_errors_latency"


def run(out_dir: Path) -> Run:
    """Run the scenario, writing ``out_dir/NAME.pcap``; return the run (its truth is
    written by ``finish()``)."""
    from confluent_kafka import Consumer, KafkaException, Producer

    run = Run(SCENARIO,
              "Injected broker errors and latency. Producer: the first two Produce requests "
              "on broker 1 fail with NOT_LEADER_OR_FOLLOWER (6) and are retried, the third "
              "is answered after 150 ms; broker 2 answers everything 40 ms late; the first "
              "Produce on broker 3 is answered after 2500 ms, so the producer's 1000 ms "
              "socket.timeout.ms fires first (request unanswered on that connection, "
              "reconnect, retry; the record is written twice). Consumer: its first "
              "FindCoordinator gets COORDINATOR_NOT_AVAILABLE (15), its first Fetch "
              "NOT_LEADER_OR_FOLLOWER (6) and its first OffsetCommit NOT_COORDINATOR (16).",
              out_dir=out_dir)
    run.truth["client_library"] = confluent_version()
    run.create_topic("ks-errors", 3)  # the mock puts partition p's leader on broker p+1
    run.start_capture()
    run.inject("broker_request_error_rtts", broker_id=1, api_key=0,
               errors_and_rtts=[[6, 0], [6, 0], [0, 150]],
               effect="the next 3 Produce requests on broker 1: error 6, error 6, "
                      "success after 150 ms")
    run.inject("broker_rtt", broker_id=2, rtt_ms=40,
               effect="every response from broker 2 is delayed 40 ms")
    run.inject("broker_request_error_rtts", broker_id=3, api_key=0,
               errors_and_rtts=[[0, 2500]],
               effect="the next Produce on broker 3 is answered after 2500 ms (after the "
                      "client gave up at 1000 ms and closed the connection)")
    debug = "protocol,msg,cgrp"
    producer = Producer(rdkafka_conf(run, "ks-producer-err", acks="all", debug=debug, **{
        "linger.ms": 0, "retry.backoff.ms": 50, "socket.timeout.ms": 1000,
        "message.timeout.ms": 15000}))
    msgs = [(b"err-%02d" % i, b"payload with errors %02d" % i, [("attempt", b"%d" % i)])
            for i in range(6)]
    rdkafka_produce_all(run, producer, "ks-producer-err", "ks-errors", msgs,
                        partition_for=lambda i: i % 3)
    check_flush(producer, 20)
    settle(0.5)

    run.inject("request_errors", api_key=10, error_codes=[15], scope="cluster",
               effect="the next FindCoordinator fails with COORDINATOR_NOT_AVAILABLE")
    run.inject("request_errors", api_key=1, error_codes=[6], scope="cluster",
               effect="the next Fetch fails with NOT_LEADER_OR_FOLLOWER")
    run.inject("request_errors", api_key=8, error_codes=[16], scope="cluster",
               effect="the next OffsetCommit fails with NOT_COORDINATOR")
    consumer = Consumer(rdkafka_conf(run, "ks-consumer-err", debug=debug, **{
        "group.id": "ks-errors-group", "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "fetch.wait.max.ms": 100,
        "session.timeout.ms": 6000, "retry.backoff.ms": 50}))
    consumer.subscribe(["ks-errors"])
    # 6 records, plus the copies written by the timed-out-then-retried Produce
    rdkafka_consume(run, consumer, "ks-consumer-err", len(msgs) + 1, timeout_s=10,
                    drain_s=1.0)
    commits = []
    for attempt in range(3):
        try:
            res = consumer.commit(asynchronous=False)
            commits.append({"attempt": attempt, "ok": True, "offsets": [
                [tp.topic, tp.partition, tp.offset] for tp in res or []]})
            break
        except KafkaException as exc:
            commits.append({"attempt": attempt, "ok": False, "error": exc.args[0].name()})
            time.sleep(0.2)
    run.truth["commit_attempts"] = commits
    consumer.close()
    producer.flush(1)
    producer.poll(0.1)  # serve the last log lines
    del producer
    settle()
    run.stop_capture()
    run.truth["notes"].append(
        "librdkafka retries NOT_COORDINATOR commits internally, so commit_attempts shows "
        "one successful call while the pcap holds two OffsetCommit exchanges.")
    return run
