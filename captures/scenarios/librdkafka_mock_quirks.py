"""The mock's protocol departures on purpose: acks=0 Produce answered anyway, Produce v5
answered without LogStartOffset.

See the scenario's description in ``run()`` and captures/README.md."""

from __future__ import annotations

from pathlib import Path

from harness.rdkafka import check_flush, confluent_version, rdkafka_conf, rdkafka_produce_all
from harness.run import Run
from harness.values import settle

SCENARIO = "librdkafka_mock_quirks"


def run(out_dir: Path) -> Run:
    """Run the scenario, writing ``out_dir/NAME.pcap``; return the run (its truth is
    written by ``finish()``)."""
    from confluent_kafka import Producer

    run = Run(SCENARIO,
              "Where librdkafka's mock broker departs from the Kafka protocol, captured on "
              "purpose so the decoder can be tested on non-conforming peers. (1) Every "
              "librdkafka connection opens with ApiVersions v3; the mock supports v0-2 and "
              "answers with error 35 in a body that is neither the v0 layout (KIP-511) nor "
              "v3. (2) A producer with acks=0: the mock answers each Produce anyway (a "
              "response the client never expects). (3) The mock limited to Produce v0-5: it "
              "answers Produce v5 without the LogStartOffset field that v5 added (4 bytes "
              "short); librdkafka fails the message with _UNDERFLOW (permanent error, no "
              "retry).", out_dir=out_dir)
    run.truth["client_library"] = confluent_version()
    run.create_topic("ks-quirks", 1)
    run.start_capture()
    p0 = Producer(rdkafka_conf(run, "ks-quirk-acks0", acks=0, **{"linger.ms": 0}))
    p0.list_topics("ks-quirks", timeout=5)
    for i in range(3):
        rdkafka_produce_all(run, p0, "ks-quirk-acks0", "ks-quirks",
                            [(b"acks0-%d" % i, b"answered although acks=0", [])],
                            partition_for=lambda _i: 0)
        check_flush(p0)
    settle()
    p0.flush(1)
    p0.poll(0.1)  # serve the last log lines
    del p0
    run.cluster.set_apiversion(0, 0, 5)
    run.truth["mock_cluster"]["api_versions_set"] = [{"api_key": 0, "api_name": "Produce",
                                                     "min_version": 0, "max_version": 5}]
    p5 = Producer(rdkafka_conf(run, "ks-quirk-produce-v5", acks="all", debug="protocol,msg",
                               **{"linger.ms": 0, "message.timeout.ms": 1500,
                                  "retry.backoff.ms": 200}))
    rdkafka_produce_all(run, p5, "ks-quirk-produce-v5", "ks-quirks",
                        [(b"v5-0", b"answered with a short Produce v5 response", [])],
                        partition_for=lambda _i: 0)
    p5.flush(5)
    settle()
    p5.poll(0.1)  # serve the last log lines
    del p5
    settle()
    run.stop_capture()
    run.truth["notes"].append(
        "The Produce v5 record was appended by the mock (only the response is "
        "malformed): it is in the partition log although its delivery report says "
        "_UNDERFLOW.")
    return run
