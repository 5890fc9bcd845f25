"""Capture real Kafka traffic for the benchmarks: Apache Kafka's own producer and consumer
performance tools (``org.apache.kafka.tools.ProducerPerformance`` and
``ConsumerPerformance`` from the broker's jars) against a real 3-node Kafka cluster, with
large compressed batches, replicated three ways (the brokers' replica fetches are in the
capture too), captured by tcpdump on the brokers' ports. Nothing generated here is
committed.

Loopback carries segments of up to 64 KiB; an Ethernet link carries at most 1500-byte
packets. The capture runs with the loopback MTU and GSO size at 1500 (as root, with
iproute2; restored afterwards) so that packet counts and sizes are those of a real network,
not of loopback.

Usage (as root, after ``.ci/setup``: Java and the jars of ``tests/broker/fetch.sh``)::

    .venv/bin/python bench/make_real_capture.py -o bench/data/real.pcap   # about 1M packets

Records are text lines (``--payload-file``) so that lz4 and zstd compress them as they would
compress log lines or JSON; producers use ``batch.size`` 256 KiB and ``linger.ms`` 20.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tests.broker.common import tcpdump_class  # noqa: E402
from tests.support.kafka_broker import LIB_DIR, KafkaCluster  # noqa: E402

CODECS = ("lz4", "zstd", "snappy", "gzip")


def _payloads(path: Path, n: int = 5000) -> None:
    """Log-like text records (compress 3-6x, like real application logs)."""
    rng = random.Random(7)
    words = ["order", "user", "payment", "shipped", "created", "eu-west-1", "INFO", "WARN",
             "checkout", "cart", "session", "latency_ms", "status", "200", "404", "retry"]
    with open(path, "w") as f:
        for i in range(n):
            fields = " ".join(f"{rng.choice(words)}={rng.randrange(10**6)}"
                              for _ in range(rng.randrange(8, 40)))
            f.write(f"2026-11-27T06:{i % 60:02d}:00Z {rng.choice(words)} {fields}\n")


def _java(*args: str) -> list[str]:
    return ["java", "-Xmx512m", "-cp", str(LIB_DIR / "*"), *args]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", type=Path, default=HERE / "data" / "real.pcap")
    ap.add_argument("--mb", type=int, default=1400, help="stop once the capture is this "
                    "large (MB); 1400 MB holds about 1M packets of at most 1500 bytes")
    ap.add_argument("--rate", type=int, default=12_000, help="records/s per producer")
    ap.add_argument("--consumer-rate", type=int, default=4,
                    help="MB/s each consumer may fetch from each broker (a client quota)")
    ap.add_argument("--mtu", type=int, default=1500, help="loopback MTU while capturing "
                    "(0: leave it)")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="kafkasniff-real-"))
    payload = work / "payload.txt"
    _payloads(payload)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    before = _lo_settings()
    if args.mtu:
        # before the brokers start: every connection's MSS follows the MTU, and GSO no
        # longer hands the capture 64 KiB super-segments
        _set_lo(args.mtu, args.mtu)
    try:
        _run(args, work, payload)
    finally:
        if args.mtu:
            _set_lo(*before)
    return 0


def _lo_settings() -> tuple[int, int]:
    """The loopback interface's MTU and GSO size."""
    out = subprocess.run(["ip", "-d", "link", "show", "lo"], capture_output=True, text=True,
                         check=True).stdout
    words = out.split()
    return int(words[words.index("mtu") + 1]), int(words[words.index("gso_max_size") + 1])


def _set_lo(mtu: int, gso: int) -> None:
    subprocess.run(["ip", "link", "set", "lo", "mtu", str(mtu), "gso_max_size", str(gso)],
                   check=True)


def _run(args, work: Path, payload: Path) -> None:
    with KafkaCluster(LIB_DIR, work / "cluster") as cluster:
        topic = "bench-real"
        cluster.create_topic(topic, 6)
        bs = cluster.bootstrap_servers
        # consumers are held to a byte rate per broker (a Kafka client quota, which also
        # puts throttle_time_ms into their Fetch responses): unthrottled, they read faster
        # than tcpdump writes on two cores and the kernel drops packets
        subprocess.run(_java("kafka.admin.ConfigCommand", "--bootstrap-server", bs, "--alter",
                             "--add-config", f"consumer_byte_rate={args.consumer_rate << 20}",
                             "--entity-type", "clients", "--entity-default"),
                       check=True, stdout=subprocess.DEVNULL)
        td = tcpdump_class()(args.output, cluster.ports, late_packets=10_000)
        try:
            td.start()
            # tcpdump first when both cores are busy with the brokers and clients: a starved
            # tcpdump lets the kernel's ring overflow (drops are gaps in the capture)
            os.setpriority(os.PRIO_PROCESS, td.proc.pid, -15)
            produced = 0
            round_ = 0
            while args.output.stat().st_size < args.mb * 10**6 * 0.55:
                codec = CODECS[round_ % len(CODECS)]
                n = 200_000
                subprocess.run(_java(
                    "org.apache.kafka.tools.ProducerPerformance", "--topic", topic,
                    "--num-records", str(n), "--payload-file", str(payload),
                    # records/s: what tcpdump keeps up with on two cores (drops are gaps)
                    "--throughput", str(args.rate), "--bootstrap-server", bs,
                    "--command-property",
                    f"compression.type={codec}", "batch.size=262144", "linger.ms=20",
                    "acks=all", f"client.id=perf-producer-{codec}"),
                    check=True, stdout=subprocess.DEVNULL)
                produced += n
                round_ += 1
            # consumers read everything back (Fetch responses with the compressed batches)
            while args.output.stat().st_size < args.mb * 10**6:
                subprocess.run(_java(
                    "org.apache.kafka.tools.ConsumerPerformance", "--topic", topic,
                    "--num-records", str(produced), "--bootstrap-server", bs,
                    "--timeout", "60000", "--group", f"perf-group-{round_}",
                    "--command-property", f"client.id=perf-consumer-{round_}"),
                    check=True, stdout=subprocess.DEVNULL)
                round_ += 1
            time.sleep(1)
            try:
                td.stop()
            except SystemExit as exc:      # drops or a lost packet: say so, keep the capture
                print(f"warning: {exc}", file=sys.stderr)
        except BaseException:
            td.kill()
            raise
        print(f"wrote {args.output} ({args.output.stat().st_size / 1e6:.0f} MB); broker ports "
              f"{' '.join(map(str, cluster.ports))}; {produced} records produced")
        (args.output.with_suffix(".ports")).write_text(" ".join(map(str, cluster.ports)))


if __name__ == "__main__":
    raise SystemExit(main())
