"""Generate a large capture for benchmarks by replaying the real captures many times.

Every TCP conversation of the seed captures (default: ``captures/*.pcap``, real librdkafka,
kafka-python and aiokafka traffic against librdkafka's mock cluster) is replayed ``N``
times with fresh client endpoints (10.1.x.y:port), the broker endpoints mapped to
10.0.0.1-3 **port 9092** (so tshark's Kafka dissector decodes it without ``-d``), and the
replicas' timestamps staggered so that many connections are open at once (reassembly and
pairing state stay realistic). Frames are Ethernet/IPv4/TCP, written with dpkt as a
nanosecond pcap. Nothing generated here is committed.

Usage::

    .venv/bin/python bench/make_big_capture.py -o bench/data/big.pcap --packets 1000000
"""

from __future__ import annotations

import argparse
import glob
import heapq
import json
import struct
import sys
from pathlib import Path

import dpkt

from kafkasniff.capture.packet import decode_packet
from kafkasniff.capture.pcapfile import open_capture
from kafkasniff.capture.types import TcpSegment

ETH = b"\x00\x00\x00\x00\x00\x02" + b"\x00\x00\x00\x00\x00\x01" + b"\x08\x00"
IP_HDR = struct.Struct(">BBHHHBBH4s4s")
TCP_HDR = struct.Struct(">HHIIBBHHH")


def load_seeds(paths: list[str]) -> list[tuple[str, list[tuple]]]:
    """Each seed capture: (path, [(ts_ns, src, sport, dst, dport, seq, ack, flags, payload)])."""
    seeds = []
    for path in paths:
        segs = []
        with open_capture(path) as src:
            for pkt in src:
                s = decode_packet(pkt)
                if type(s) is TcpSegment:
                    segs.append((s.ts_ns, s.src_ip, s.src_port, s.dst_ip, s.dst_port, s.seq, s.ack,
                                 s.flags, s.payload))
        if segs:
            seeds.append((path, segs))
    return seeds


def broker_ports(pcap: str, segs: list[tuple]) -> set[int]:
    """The broker ports of a seed: from its ``.truth.json`` when present, else SYN targets."""
    truth = Path(pcap).with_suffix(".truth.json")
    if truth.is_file():
        return set(json.loads(truth.read_text())["broker_ports"])
    return {s[4] for s in segs if s[7] & 0x02 and not s[7] & 0x10}


def replica(segs: list[tuple], r: int, t0: int, offset_ns: int, brokers: dict[int, bytes]):
    """Yield (ts_ns, frame bytes) of replica ``r`` of one seed capture.

    Connections the seed leaves open (it was stopped, or started mid-stream) are closed with
    a FIN from each side 1 ms after their last segment, so that a replayed session ends like
    a real client session and the benchmark measures steady state, not a pile of idle flows.
    """
    client_ip = bytes([10, 1, (r >> 8) & 0xFF, r & 0xFF])
    base = segs[0][0]
    nxt: dict[tuple, tuple[int, int, int]] = {}   # (sip, sp, dip, dp) -> (next seq, ack, ts)
    finished: set[tuple] = set()
    for ts, src, sport, dst, dport, seq, ack, flags, payload in segs:
        if sport in brokers:
            sip, sp, dip, dp = brokers[sport], 9092, client_ip, dport
        elif dport in brokers:
            sip, sp, dip, dp = client_ip, sport, brokers[dport], 9092
        else:
            continue
        t = t0 + offset_ns + (ts - base)
        key = (sip, sp, dip, dp)
        nxt[key] = ((seq + len(payload) + (1 if flags & 0x03 else 0)) & 0xFFFFFFFF, ack, t)
        if flags & 0x05:  # FIN or RST
            finished.add(key)
            finished.add((dip, dp, sip, sp))
        yield t, _frame(sip, sp, dip, dp, seq, ack, flags, payload, r)
    for key, (seq, ack, t) in sorted(nxt.items(), key=lambda kv: kv[1][2]):
        if key in finished:
            continue
        back = (key[2], key[3], key[0], key[1])
        finished.update((key, back))
        bseq, back_ack, bt = nxt.get(back, (ack, seq, t))
        last = max(t, bt) + 1_000_000
        yield last, _frame(*key, seq, bseq, 0x11, b"", r)
        yield last + 1000, _frame(*back, bseq, seq + 1, 0x11, b"", r)


def _frame(sip, sp, dip, dp, seq, ack, flags, payload, r) -> bytes:
    total = 20 + 20 + len(payload)
    ip = IP_HDR.pack(0x45, 0, total, r & 0xFFFF, 0x4000, 64, 6, 0, sip, dip)
    tcp = TCP_HDR.pack(sp, dp, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags, 65535, 0, 0)
    return ETH + ip + tcp + payload


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", required=True, type=Path)
    ap.add_argument("--packets", type=int, default=1_000_000, help="at least this many packets")
    ap.add_argument("--seeds", nargs="*", default=None, help="seed captures (default captures/*.pcap)")
    ap.add_argument("--concurrency", type=int, default=200,
                    help="replicas started per second of capture time")
    args = ap.parse_args(argv)
    root = Path(__file__).resolve().parent.parent
    paths = args.seeds or sorted(glob.glob(str(root / "captures" / "*.pcap")))
    seeds = load_seeds(paths)
    if not seeds:
        print("no seed packets found", file=sys.stderr)
        return 2
    per_round = sum(len(s) for _, s in seeds)
    rounds = -(-args.packets // per_round)
    t0 = 1_700_000_000 * 10**9
    step = 10**9 // max(1, args.concurrency)
    streams = []
    r = 0
    for k in range(rounds):
        for path, segs in seeds:
            ports = sorted(broker_ports(path, segs))
            brokers = {p: bytes([10, 0, 0, 1 + i % 3]) for i, p in enumerate(ports)}
            streams.append(replica(segs, r, t0, r * step, brokers))
            r += 1
    args.output.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    size = 0
    with open(args.output, "wb") as f:
        w = dpkt.pcap.Writer(f, nano=True, snaplen=262144)
        for ts, frame in heapq.merge(*streams, key=lambda x: x[0]):
            w.writepkt(frame, ts=ts / 1e9)
            n += 1
            size += len(frame)
    print(f"wrote {n} packets ({size / 1e6:.1f} MB of frames) from {len(seeds)} seed captures "
          f"x {rounds} rounds = {r} replicas to {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
