"""Record batch decoding speed per codec, next to the raw decompression of the same payloads.

For each codec (none, gzip, snappy, lz4, zstd) builds record batches of ``--records``
realistic JSON-ish records (~200-byte values, keys, one or two headers), then measures in
the same run:

- ``decode``: ``decode_records(data, with_records=True)`` (CRC, decompression, every record);
- ``stats``: ``decode_records(data)`` (headers, CRC, decompression: what stats mode does);
- ``raw``: the compression library alone decompressing the same records section (the
  physical limit of that step; 0 for ``none``).

Prints records/s and MB/s of uncompressed records data, and the ratio of ``decode`` to
``raw`` time. Timings are measured here, never asserted in tests.

Usage::

    .venv/bin/python bench/bench_codecs.py [--records 1000] [--batches 20] [--seconds 1.0]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import zlib
from pathlib import Path

import cramjam
import lz4.frame
import zstandard

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kafkasniff.protocol.records import decode_records  # noqa: E402
from tests.protocol import batch_encoder as enc  # noqa: E402

RAW = {
    "none": lambda b: b,
    "gzip": lambda b: zlib.decompress(b, 16 + zlib.MAX_WBITS),
    "snappy": lambda b: cramjam.snappy.decompress_raw(b),
    "lz4": lambda b: lz4.frame.decompress(b),
    "zstd": lambda b: zstandard.ZstdDecompressor().decompress(b),
}


def make_records(n: int, rng: random.Random) -> list[enc.Rec]:
    events = ["page_view", "click", "add_to_cart", "purchase", "logout"]
    out = []
    for i in range(n):
        user = rng.randrange(1_000_000)
        value = json.dumps({
            "event_id": f"{rng.getrandbits(64):016x}", "user_id": user,
            "event": rng.choice(events), "ts": 1_700_000_000_000 + i * 13,
            "page": f"/products/{rng.randrange(5000)}", "session": f"s-{rng.getrandbits(32):08x}",
            "amount": round(rng.random() * 300, 2), "ua": "Mozilla/5.0 (X11; Linux x86_64)",
        }).encode()
        headers = [("trace-id", f"{rng.getrandbits(64):016x}".encode())]
        if i % 3 == 0:
            headers.append(("source", b"web"))
        out.append(enc.Rec(key=f"user-{user}".encode(), value=value, headers=headers,
                           offset_delta=i, timestamp_delta=i * 13))
    return out


def timed(fn, seconds: float) -> float:
    """Seconds per call: best of 5 runs, each repeating ``fn`` for about seconds/5."""
    fn()
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    reps = max(1, int(seconds / 5 / one))
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        best = min(best, (time.perf_counter() - t0) / reps)
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1000, help="records per batch")
    ap.add_argument("--batches", type=int, default=20, help="batches per records field")
    ap.add_argument("--seconds", type=float, default=1.0, help="time per measurement")
    args = ap.parse_args(argv)
    rng = random.Random(42)
    batches = [make_records(args.records, rng) for _ in range(args.batches)]
    raw_size = sum(len(enc.encode_record(r)) for b in batches for r in b)
    n_records = args.records * args.batches
    print(f"{args.batches} batches x {args.records} records, "
          f"{raw_size / n_records:.0f} B/record uncompressed ({raw_size / 1e6:.2f} MB)")
    header = (f"{'codec':7} {'ratio':>5} | {'decode rec/s':>12} {'MB/s':>7} | "
              f"{'stats MB/s':>10} | {'raw MB/s':>9} | {'decode/raw':>10}")
    print(header)
    print("-" * len(header))
    for codec in RAW:
        fields = []
        sections = []
        for i, recs in enumerate(batches):
            wire = enc.record_batch(recs, base_offset=i * args.records, codec=codec,
                                    base_timestamp=1_700_000_000_000)
            fields.append(wire)
            sections.append(wire[61:])
        data = b"".join(fields)
        rs = decode_records(data, with_records=True)
        assert not rs.issues and sum(len(b.records) for b in rs.batches) == n_records
        t_dec = timed(lambda: decode_records(data, with_records=True), args.seconds)
        t_stats = timed(lambda: decode_records(data), args.seconds)
        raw_fn = RAW[codec]
        t_raw = timed(lambda: [raw_fn(s) for s in sections], args.seconds)
        ratio = raw_size / sum(len(s) for s in sections)
        raw_mbs = f"{raw_size / t_raw / 1e6:9.0f}" if codec != "none" else f"{'-':>9}"
        dec_ratio = f"{t_dec / t_raw:10.1f}" if codec != "none" else f"{'-':>10}"
        dec = f"{n_records / t_dec:12,.0f} {raw_size / t_dec / 1e6:7.1f}"
        print(f"{codec:7} {ratio:5.1f} | {dec} | "
              f"{raw_size / t_stats / 1e6:10.0f} | {raw_mbs} | {dec_ratio}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
