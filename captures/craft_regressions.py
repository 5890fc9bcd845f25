#!/usr/bin/env python3
"""Write the regression captures of ``captures/regressions/``: crafted inputs that once broke
one of kafkasniff's promises (bounded memory and CPU, no secret in any output, every captured
byte accounted for).

Usage (no root needed, nothing is sent on a network)::

    .venv/bin/python captures/craft_regressions.py            # every regression capture
    .venv/bin/python captures/craft_regressions.py NAME...    # some of them
    .venv/bin/python captures/craft_regressions.py --list     # names and what each breaks

Each capture is small and deterministic (fixed times, ports, sequence numbers), built with
the encoder and TCP helpers of ``craft_captures.py`` (which imports nothing from kafkasniff);
``tests/captures/test_regressions.py`` says what kafkasniff must do with each, and every
regression capture is also an input of the secret-search, accounting and memory-cap tests.
Captures found by the fuzzer (``bench/bench_fuzz.py``) are committed here too, as
``fuzz-<hash>.pcap``, unchanged.
"""

from __future__ import annotations

import argparse
import struct
import sys
from collections.abc import Callable
from pathlib import Path

import craft_captures as cc

OUT = cc.CAPTURES / "regressions"
BASE_TS_NS = cc.BASE_TS_NS + 86_400 * 1_000_000_000     # 2024-01-02T00:00:00Z

#: name -> (what it broke, builder returning the file's bytes)
REGRESSIONS: dict[str, tuple[str, Callable[[], bytes]]] = {}


def regression(name: str, what: str):
    """Register a builder of ``regressions/<name>`` (the name carries the extension)."""
    def register(fn: Callable[[], bytes]) -> Callable[[], bytes]:
        REGRESSIONS[name] = (what, fn)
        return fn
    return register


class Conversation:
    """Client/broker TCP conversations in one pcap (connections opened with a handshake)."""

    def __init__(self, offset_s: int = 0) -> None:
        self.pcap = cc.Pcap()
        self.clock = cc.Clock(BASE_TS_NS + offset_s * 1_000_000_000)
        self.conns: dict[int, cc.TcpConn] = {}

    def connect(self, client_port: int) -> cc.TcpConn:
        conn = cc.TcpConn(self.pcap, self.clock, client_port, isn=client_port)
        conn.open()
        self.conns[client_port] = conn
        return conn

    def request(self, port: int, api_key: int, version: int, corr: int, body: bytes, *,
                client_id: str | None = "regression", header_version: int = 1) -> None:
        payload = cc.request_header(api_key, version, corr, client_id, header_version) + body
        self.conns[port].send(True, cc.size_prefixed(payload))

    def response(self, port: int, corr: int, body: bytes, *, header_version: int = 0) -> None:
        self.conns[port].send(False, cc.size_prefixed(cc.response_header(corr, header_version)
                                                      + body), gap_ns=700_000)

    def bytes(self) -> bytes:
        for conn in self.conns.values():
            conn.close()
        out = [struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1)]
        for ts, frame in sorted(self.pcap.frames, key=lambda f: f[0]):
            out.append(struct.pack("<IIII", ts // 1_000_000_000, ts % 1_000_000_000,
                                   len(frame), len(frame)))
            out.append(frame)
        return b"".join(out)


# =========================================================================== exchanges lost

@regression("apiversions_future_error.pcap",
            "An ApiVersions request of a version above the definitions (v6), answered with "
            "UNSUPPORTED_VERSION (35) in a body that fits no v0 layout: the KIP-511 fallback "
            "tried the request's own version, which has no layout, and the exchange vanished "
            "behind an internal_error issue.")
def apiversions_future_error() -> bytes:
    c = Conversation()
    c.connect(50401)
    c.request(50401, 18, 6, 1, cc.compact_string("regression") + cc.compact_string("1.0")
              + cc.tagged(), header_version=2)
    # error 35, then an api_keys count of -2 (not v0's int32 count of 3-int16 entries)
    c.response(50401, 1, cc.i16(35) + cc.i32(-2) + b"\x00\x01")
    return c.bytes()


@regression("header_decode_error.pcap",
            "A request whose client_id length runs past its frame: the header_decode_error "
            "issue said nothing of the bytes it stood for (length_bytes 0).")
def header_decode_error() -> bytes:
    c = Conversation()
    conn = c.connect(50402)
    bad = cc.i16(3) + cc.i16(1) + cc.i32(7) + cc.i16(300) + b"short"     # client_id: 300 > 5
    conn.send(True, cc.size_prefixed(bad))
    c.request(50402, 3, 1, 8, cc.i32(0))                                  # Metadata v1, no topics
    c.response(50402, 8, cc.i32(0) + cc.i32(-1) + cc.i32(0))              # brokers, controller, topics
    return c.bytes()


def send_with_loss(conn: cc.TcpConn, data: bytes, lost: tuple[int, int]) -> None:
    """Client ``data`` in segments, the bytes ``data[lost[0]:lost[1]]`` never captured (their
    sequence numbers skipped), then the broker's ACK of everything (so the loss is known)."""
    import dpkt

    a, b = lost
    for start, end in ((0, a), (b, len(data))):
        if start == b:
            conn.seq[True] = (conn.seq[True] + (b - a)) % 2**32
        if end > start:
            conn._emit(True, dpkt.tcp.TH_ACK | dpkt.tcp.TH_PUSH, data[start:end], gap_ns=100_000)
    conn._emit(False, dpkt.tcp.TH_ACK, gap_ns=25_000)


@regression("segment_lost_inside_a_frame.pcap",
            "A 300-byte segment lost inside a 1,000-byte request: the captured bytes after the "
            "gap were discarded and reported as never captured (the request said 617 bytes "
            "missing where 300 were lost).")
def segment_lost_inside_a_frame() -> bytes:
    c = Conversation()
    conn = c.connect(50403)
    topics = [f"topic-{i:03d}-{'x' * 20}" for i in range(33)]
    body = cc.i32(len(topics)) + b"".join(cc.string(t) for t in topics)
    payload = cc.request_header(3, 1, 1, "regression", 1) + body
    frame = cc.size_prefixed(payload)
    assert len(frame) > 700, len(frame)
    send_with_loss(conn, frame, (300, 600))
    c.response(50403, 1, cc.i32(0) + cc.i32(-1) + cc.i32(0))
    return c.bytes()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="regression captures to write (default: all)")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--out", type=Path, default=OUT, help="output directory")
    args = ap.parse_args(argv)
    if args.list:
        for name, (what, _) in REGRESSIONS.items():
            print(f"{name}: {what}")
        return 0
    unknown = [n for n in args.names if n not in REGRESSIONS]
    if unknown:
        ap.error(f"unknown regression capture(s): {', '.join(unknown)}")
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.names or list(REGRESSIONS):
        data = REGRESSIONS[name][1]()
        (args.out / name).write_bytes(data)
        print(f"{name}: {len(data)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
