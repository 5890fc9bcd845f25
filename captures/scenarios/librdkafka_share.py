"""Share-group consumer (KIP-932): ShareGroupHeartbeat, ShareFetch, ShareAcknowledge.

See the scenario's description in ``run()`` and captures/README.md."""

from __future__ import annotations

import time
from pathlib import Path

from harness.rdkafka import check_flush, confluent_version, rdkafka_conf, rdkafka_produce_all
from harness.run import Run
from harness.values import settle

SCENARIO = "librdkafka_share"


def run(out_dir: Path) -> Run:
    """Run the scenario, writing ``out_dir/NAME.pcap``; return the run (its truth is
    written by ``finish()``)."""
    from confluent_kafka import Producer, ShareConsumer

    run = Run(SCENARIO,
              "Share-group consumer (KIP-932, librdkafka preview): ShareGroupHeartbeat to "
              "join, then ShareFetch/ShareAcknowledge. The records are produced after the "
              "member joined (a new share group starts at the latest offset).", out_dir=out_dir)
    run.truth["client_library"] = confluent_version()
    run.create_topic("ks-share", 1)
    run.start_capture()
    share = ShareConsumer(rdkafka_conf(run, "ks-share-consumer", **{"group.id": "ks-share-group"}))
    share.subscribe(["ks-share"])
    want = 4
    t_end = time.monotonic() + 15
    produced = False
    got = 0
    t_join = time.monotonic() + 1.5
    while got < want and time.monotonic() < t_end:
        for m in share.poll(0.2):
            if m.error():
                run.truth["notes"].append(f"share poll error: {m.error().name()}")
                continue
            run.rdkafka_consumed("ks-share-consumer", m)
            got += 1
        if not produced and time.monotonic() > t_join:
            producer = Producer(rdkafka_conf(run, "ks-share-producer", acks="all",
                                             **{"linger.ms": 5}))
            msgs = [(b"share-%d" % i, b"queue-style record %d" % i, []) for i in range(want)]
            rdkafka_produce_all(run, producer, "ks-share-producer", "ks-share", msgs,
                                partition_for=lambda _i: 0)
            check_flush(producer)
            producer.poll(0.1)  # serve the last log lines
            del producer
            produced = True
    share.close()
    settle()
    run.stop_capture()
    return run
