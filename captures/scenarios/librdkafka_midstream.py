"""A producer and a consumer running before tcpdump starts: the capture begins in the
middle of established connections.

See the scenario's description in ``run()`` and captures/README.md."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from harness.rdkafka import confluent_version, rdkafka_conf
from harness.run import Run
from harness.values import now_ms, now_ns

SCENARIO = "librdkafka_midstream"


def run(out_dir: Path) -> Run:
    """Run the scenario, writing ``out_dir/NAME.pcap``; return the run (its truth is
    written by ``finish()``)."""
    from confluent_kafka import Consumer, Producer

    run = Run(SCENARIO,
              "A producer (one record every 20 ms) and a consumer-group member run "
              "continuously; tcpdump starts about 1 s after they connected and captures about "
              "1.5 s, so the capture begins in the middle of established connections (no "
              "SYN/handshake, no ApiVersions, possibly mid-frame). The truth covers the whole "
              "run with timestamps; what the decoder sees must be a subset.", out_dir=out_dir)
    run.truth["client_library"] = confluent_version()
    run.truth["capture"]["mid_stream"] = True
    run.create_topic("ks-stream", 3)
    run.cluster.start_request_tracking()
    run.truth["run_started_ts_ns"] = now_ns()

    producer = Producer(rdkafka_conf(run, "ks-stream-producer", acks="all",
                                     **{"linger.ms": 10}))
    consumer = Consumer(rdkafka_conf(run, "ks-stream-consumer", **{
        "group.id": "ks-stream-group", "auto.offset.reset": "earliest",
        "enable.auto.commit": True, "auto.commit.interval.ms": 500,
        "fetch.wait.max.ms": 100}))
    consumer.subscribe(["ks-stream"])
    stop = threading.Event()

    def produce_loop() -> None:
        i = 0
        while not stop.is_set():
            key = b"stream-%05d" % i
            value = b"tick %05d " % i + b"." * (i % 50)
            headers = [("seq", b"%d" % i)]
            ts = now_ms()
            producer.produce("ks-stream", key=key, value=value, headers=headers, timestamp=ts,
                             on_delivery=run.rdkafka_delivery("ks-stream-producer", key, value,
                                                              headers, now_ns(), ts))
            producer.poll(0)
            i += 1
            time.sleep(0.02)
        producer.flush(10)

    def consume_loop() -> None:
        while not stop.is_set():
            msg = consumer.poll(0.1)
            if msg is not None and not msg.error():
                run.rdkafka_consumed("ks-stream-consumer", msg)

    threads = [threading.Thread(target=produce_loop, name="producer"),
               threading.Thread(target=consume_loop, name="consumer")]
    for th in threads:
        th.start()
    deadline = time.monotonic() + 15
    while not run.truth["consumed"] and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)
    # The mock's request tracking is already running; do not restart it.
    run.start_capture(track_requests=False)
    time.sleep(1.5)
    run.stop_capture()
    stop.set()
    for th in threads:
        th.join(20)
    consumer.close()
    producer.poll(0.1)  # serve the last log lines
    del producer
    run.truth["run_stopped_ts_ns"] = now_ns()
    run.truth["notes"].append(
        "Clients were running before tcpdump started and were closed after it stopped: "
        "'produced', 'consumed', 'requests' and 'mock_requests' cover the whole run. Use "
        "capture.started_ts_ns / stopped_ts_ns (and record timestamps, timestamp_ms = the "
        "records' CreateTime) to pick what can be in the pcap.")
    return run
