"""Kafka traffic for the live benchmark: frames built from real Kafka conversations.

Seeds are real captures of Kafka clients (librdkafka, kafka-python, aiokafka) talking to
librdkafka's mock cluster: ``captures/*.pcap``, and the capture ``bench_live.py`` records
from its own mock-cluster load (producers and consumers moving larger batches). Every TCP
conversation of a seed is replayed many times with fresh client endpoints (10.<net>.x.y), the
brokers mapped to 10.0.0.1-3 port 9092, replicas staggered so that many connections are
open at once, and, like on an Ethernet link, payloads cut into segments of at most ``mss``
bytes (loopback captures carry up to 64 KiB per segment), each data segment acknowledged as
the original was. Frames are Ethernet/IPv4/TCP addressed to a MAC that is not the sending
interface's, so that on ``lo`` the kernel's IP layer discards them (``PACKET_OTHERHOST``)
while packet sockets (kafkasniff, tcpdump) still see them: no TCP stack answers with resets.

Usage from Python::

    frames = build_frames(seed_paths, n_packets=1_000_000, mss=1448)
"""

from __future__ import annotations

import glob
import heapq
import json
import struct
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# destination MAC 02:00:00:00:00:01 (not lo's 00:00:00:00:00:00): PACKET_OTHERHOST on lo
ETH = b"\x02\x00\x00\x00\x00\x01" + b"\x02\x00\x00\x00\x00\x02" + b"\x08\x00"
IP_HDR = struct.Struct(">BBHHHBBH4s4s")
TCP_HDR = struct.Struct(">HHIIBBHHH")
BROKER_PORT = 9092


def load_seeds(paths: list[str]) -> list[tuple[str, list[tuple]]]:
    """Each seed capture: ``(path, [(ts_ns, src, sport, dst, dport, seq, ack, flags,
    payload)])``."""
    from kafkasniff.capture.packet import decode_packet
    from kafkasniff.capture.pcapfile import open_capture
    from kafkasniff.capture.types import TcpSegment

    seeds = []
    for path in paths:
        segs = []
        with open_capture(path) as src:
            for pkt in src:
                s = decode_packet(pkt)
                if type(s) is TcpSegment:
                    segs.append((s.ts_ns, s.src_ip, s.src_port, s.dst_ip, s.dst_port, s.seq,
                                 s.ack, s.flags, s.payload))
        if segs:
            seeds.append((path, segs))
    return seeds


def broker_ports(pcap: str, segs: list[tuple]) -> set[int]:
    """Broker ports of a seed: its ``.truth.json`` when present, else the SYN targets."""
    truth = Path(pcap).with_suffix(".truth.json")
    if truth.is_file():
        try:
            return set(json.loads(truth.read_text())["broker_ports"])
        except (KeyError, ValueError):
            pass
    return {s[4] for s in segs if s[7] & 0x02 and not s[7] & 0x10}


def broker_addresses(pcap: str, segs: list[tuple]) -> dict[int, bytes]:
    """Seed broker port -> the replayed broker's IPv4 address (10.0.0.1-3, in port order)."""
    return {p: bytes([10, 0, 0, 1 + i % 3])
            for i, p in enumerate(sorted(broker_ports(pcap, segs)))}


def _frame(sip, sp, dip, dp, seq, ack, flags, payload, ident) -> bytes:
    total = 40 + len(payload)
    ip = IP_HDR.pack(0x45, 0, total, ident & 0xFFFF, 0x4000, 64, 6, 0, sip, dip)
    tcp = TCP_HDR.pack(sp, dp, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags, 65535, 0, 0)
    return ETH + ip + tcp + payload


def replica(segs: list[tuple], r: int, net: int, offset_ns: int, brokers: dict[int, bytes],
            mss: int):
    """``(ts_ns, frame)`` of replica ``r`` of one seed conversation set, payloads cut at
    ``mss``; connections left open by the seed are closed with FINs."""
    client_ip = bytes([10, net, (r >> 8) & 0xFF, r & 0xFF])
    base = segs[0][0]
    nxt: dict[tuple, tuple[int, int, int]] = {}
    finished: set[tuple] = set()
    for ts, src, sport, dst, dport, seq, ack, flags, payload in segs:
        if sport in brokers:
            sip, sp, dip, dp = brokers[sport], BROKER_PORT, client_ip, dport
        elif dport in brokers:
            sip, sp, dip, dp = client_ip, sport, brokers[dport], BROKER_PORT
        else:
            continue
        t = offset_ns + (ts - base)
        key = (sip, sp, dip, dp)
        nxt[key] = ((seq + len(payload) + (1 if flags & 0x03 else 0)) & 0xFFFFFFFF, ack, t)
        if flags & 0x05:
            finished.add(key)
            finished.add((dip, dp, sip, sp))
        if mss and len(payload) > mss:
            for i in range(0, len(payload), mss):
                last = i + mss >= len(payload)
                f = flags if last else flags & ~0x09     # PSH/FIN on the last piece only
                yield t + i // mss, _frame(sip, sp, dip, dp, seq + i, ack, f,
                                           payload[i:i + mss], r)
        else:
            yield t, _frame(sip, sp, dip, dp, seq, ack, flags, payload, r)
    for key, (seq, ack, t) in sorted(nxt.items(), key=lambda kv: kv[1][2]):
        if key in finished:
            continue
        back = (key[2], key[3], key[0], key[1])
        finished.update((key, back))
        bseq, _back_ack, bt = nxt.get(back, (ack, seq, t))
        last = max(t, bt) + 1_000_000
        yield last, _frame(*key, seq, bseq, 0x11, b"", r)
        yield last + 1000, _frame(*back, bseq, seq + 1, 0x11, b"", r)


def default_seeds() -> list[str]:
    """``captures/*.pcap`` except the TLS one (not Kafka) - real client traffic."""
    return [p for p in sorted(glob.glob(str(ROOT / "captures" / "*.pcap")))
            if not Path(p).name.startswith(("tls", "crafted"))]


def build_frames(paths: list[str], n_packets: int, mss: int = 1448, net: int = 1,
                 concurrency: int = 200, replicas: int = 32) -> list[bytes]:
    """Exactly ``n_packets`` frames replaying the seeds: rounds of ``replicas`` copies of
    every seed running at the same time (each starting ``1/concurrency`` s after the
    previous one), so that traffic is spread over many connections as on a busy broker."""
    seeds = load_seeds(paths)
    if not seeds:
        raise SystemExit("no seed packets")
    brokers = [broker_addresses(path, segs) for path, segs in seeds]
    step = 10**9 // max(1, concurrency)
    out: list[bytes] = []
    r = 0
    while len(out) < n_packets:
        streams = []
        for _ in range(replicas):
            for (_path, segs), seed_brokers in zip(seeds, brokers):
                streams.append(replica(segs, r, net, r * step, seed_brokers, mss))
                r += 1
                if r >= 65536:
                    raise SystemExit("too many replicas for one /16: use fewer packets")
        for _, frame in heapq.merge(*streams, key=lambda x: x[0]):
            out.append(frame)
            if len(out) >= n_packets:
                break
    return out


def write_pcap(frames: list[bytes], path: str, ts0_ns: int = 1_700_000_000 * 10**9,
               gap_ns: int = 10_000) -> None:
    """The frames as a nanosecond pcap (for checks with ``kafkasniff read``)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1))
        for i, fr in enumerate(frames):
            ts = ts0_ns + i * gap_ns
            f.write(struct.pack("<IIII", ts // 10**9, ts % 10**9, len(fr), len(fr)))
            f.write(fr)
