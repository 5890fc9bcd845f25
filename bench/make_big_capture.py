"""Generate a large capture for benchmarks by replaying the real captures many times.

Every TCP conversation of the seed captures (default: ``captures/*.pcap``, real librdkafka,
kafka-python and aiokafka traffic against librdkafka's mock cluster) is replayed ``N``
times with fresh client endpoints (10.1.x.y:port), the broker endpoints mapped to
10.0.0.1-3 **port 9092** (so tshark's Kafka dissector decodes it without ``-d``), and the
replicas' timestamps staggered so that many connections are open at once (reassembly and
pairing state stay realistic); connections a seed leaves open are closed with FINs. The
replay is :mod:`live_traffic`'s (the live benchmark's traffic), here without cutting payloads
at an MSS. Frames are Ethernet/IPv4/TCP, written with dpkt as a nanosecond pcap. Nothing
generated here is committed.

Usage::

    .venv/bin/python bench/make_big_capture.py -o bench/data/big.pcap --packets 1000000
"""

from __future__ import annotations

import argparse
import glob
import heapq
import subprocess
import sys
from pathlib import Path

import dpkt
from live_traffic import ROOT, broker_addresses, load_seeds, replica


def broker_ports(capture: Path) -> list[str]:
    """The broker ports of a capture not on port 9092, from the ``.ports`` file beside it
    (``make_real_capture.py`` writes it: port numbers separated by spaces); ``[]`` without
    one."""
    ports_file = Path(capture).with_suffix(".ports")
    return ports_file.read_text().split() if ports_file.exists() else []


def ensure(path: Path, packets: int) -> Path:
    """``path``, generated first (by this script, in its own process) when it is missing."""
    if not path.exists():
        subprocess.run([sys.executable, __file__, "-o", str(path), "--packets", str(packets)],
                       check=True)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", required=True, type=Path)
    ap.add_argument("--packets", type=int, default=1_000_000, help="at least this many packets")
    ap.add_argument("--seeds", nargs="*", default=None, help="seed captures (default captures/*.pcap)")
    ap.add_argument("--concurrency", type=int, default=200,
                    help="replicas started per second of capture time")
    args = ap.parse_args(argv)
    paths = args.seeds or sorted(glob.glob(str(ROOT / "captures" / "*.pcap")))
    seeds = load_seeds(paths)
    if not seeds:
        print("no seed packets found", file=sys.stderr)
        return 2
    per_round = sum(len(s) for _, s in seeds)
    rounds = -(-args.packets // per_round)
    brokers = [broker_addresses(path, segs) for path, segs in seeds]
    args.output.parent.mkdir(parents=True, exist_ok=True)
    n, size = write_replays(seeds, brokers, args.output, rounds, args.concurrency)
    print(f"wrote {n} packets ({size / 1e6:.1f} MB of frames) from {len(seeds)} seed captures "
          f"x {rounds} rounds = {rounds * len(seeds)} replicas to {args.output}")
    return 0


def write_replays(seeds: list[tuple[str, list[tuple]]], brokers: list[dict], output: Path,
                  rounds: int, concurrency: int) -> tuple[int, int]:
    """Replay every seed ``rounds`` times into the pcap ``output`` (``brokers``: each seed's
    broker addresses), ``concurrency`` replicas starting per second of capture time:
    (packets, bytes of frames) written."""
    t0 = 1_700_000_000 * 10**9
    step = 10**9 // max(1, concurrency)
    streams = []
    r = 0
    for _ in range(rounds):
        for (_path, segs), seed_brokers in zip(seeds, brokers):
            streams.append(replica(segs, r, 1, t0 + r * step, seed_brokers, mss=0))
            r += 1
    n = size = 0
    with open(output, "wb") as f:
        w = dpkt.pcap.Writer(f, nano=True, snaplen=262144)
        for ts, frame in heapq.merge(*streams, key=lambda x: x[0]):
            w.writepkt(frame, ts=ts / 1e9)
            n += 1
            size += len(frame)
    return n, size


if __name__ == "__main__":
    raise SystemExit(main())
