"""Resync speed: MB/s of a framer hunting for a frame boundary through garbage, with the
regular-expression prefilter (today) and checking every offset in Python (before issue 11),
in the same run, alternating.

Inputs (``--mb`` MiB each, fed in 1448-byte segments like a TCP stream): zeros, random bytes,
and near-misses (a plausible size prefix every 16 bytes whose header fails one check), on the
request side (the request validator) and the response side (20 pending correlation ids).
Then ``kafkasniff stats`` in-process on ``captures/regressions/resync_zeros.pcap.gz`` both
ways. Timings are measured here, never asserted in tests.

Usage::

    .venv/bin/python bench/bench_resync.py [--mb 16] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import random
import struct
import time
from pathlib import Path

from kafkasniff.protocol.detect import request_validator, response_validator
from kafkasniff.protocol.framing import Framer
from kafkasniff.protocol.schema import load_definitions

ROOT = Path(__file__).resolve().parent.parent
SEGMENT = 1448


class EveryOffset(Framer):
    """The framer without its prefilter: the validator is asked at every offset."""

    __slots__ = ()

    def _prefilter(self):
        return None


def garbage(kind: str, n: int) -> bytes:
    if kind == "zeros":
        return bytes(n)
    if kind == "random":
        return random.Random(1).randbytes(n)
    near = struct.pack(">ihhi", 100, 3, 1, -7) + b"\x01\x02\x03\x04"   # negative corr id
    return (near * (n // len(near) + 1))[:n]


def hunt_seconds(cls, side: str, data: bytes) -> float:
    defs = load_definitions()
    validator = (request_validator(defs) if side == "request"
                 else response_validator(set(range(1000, 1020))))
    fr = cls(validator, min_frame_bytes=0)
    fr.feed(struct.pack(">i", -1), 0, 0)            # lose sync
    off = 4
    t0 = time.perf_counter()
    for i in range(0, len(data), SEGMENT):
        seg = data[i:i + SEGMENT]
        fr.feed(seg, off, 0)
        off += len(seg)
    fr.close(0)
    elapsed = time.perf_counter() - t0
    assert fr.resync_bytes == len(data) + 4, fr.resync_bytes
    return elapsed


def stats_seconds(prefilter: bool) -> float:
    from kafkasniff.pipeline import Pipeline, PipelineOptions, analyze

    saved = Framer._prefilter
    if not prefilter:
        Framer._prefilter = EveryOffset._prefilter
    try:
        t0 = time.perf_counter()
        pipe = Pipeline(PipelineOptions())
        for _ in analyze([ROOT / "captures/regressions/resync_zeros.pcap.gz"], pipeline=pipe):
            pass
        return time.perf_counter() - t0
    finally:
        Framer._prefilter = saved


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=16, help="MiB of garbage per input")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    n = args.mb * 1024 * 1024
    print(f"{os.cpu_count()} cores; {args.mb} MiB per input; best of {args.rounds} rounds")
    print(f"{'side':9} {'input':11} {'every offset MB/s':>18} {'prefilter MB/s':>15} {'speed-up':>9}")
    for side in ("request", "response"):
        for kind in ("zeros", "random", "near-miss"):
            data = garbage(kind, n)
            old = new = float("inf")
            for _ in range(args.rounds):
                old = min(old, hunt_seconds(EveryOffset, side, data))
                new = min(new, hunt_seconds(Framer, side, data))
            mb = n / 1e6
            print(f"{side:9} {kind:11} {mb / old:18.1f} {mb / new:15.1f} {old / new:8.1f}x")
    old = min(stats_seconds(False) for _ in range(args.rounds))
    new = min(stats_seconds(True) for _ in range(args.rounds))
    print(f"stats on regressions/resync_zeros.pcap.gz (8 MiB of zeros): every offset "
          f"{old:.2f} s, prefilter {new:.2f} s ({old / new:.1f}x)")


if __name__ == "__main__":
    main()
