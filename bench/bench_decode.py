"""Offline decode speed and memory: kafkasniff next to tshark on the same large capture.

Generates (once) a capture of at least ``--packets`` packets with ``make_big_capture.py``,
then runs, each as its own process measured by ``/usr/bin/time`` (wall seconds, peak RSS):

- ``kafkasniff stats``          full decode of every frame + aggregation
- ``kafkasniff read --json``    full decode + JSON of every field, to /dev/null
- ``tshark -T fields``          tshark's Kafka dissector, a few fields per frame
- ``tshark -V``                 tshark's full protocol tree, to /dev/null
- ``dpkt``                      merely iterating the packets (the Python floor)

A capture that is not on port 9092 (``make_real_capture.py``'s) names its broker ports in a
``.ports`` file next to it: kafkasniff gets ``--port`` and tshark ``-d tcp.port==P,kafka``
for each.

and prints packets/s, MB/s, exchanges/s, peak memory and the ratio to tshark. Results are
also written as JSON (``--json-out``). Timings are measured here, never asserted in tests.

Usage::

    .venv/bin/python bench/bench_decode.py [--packets 1000000] [--capture bench/data/big.pcap]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import make_big_capture

HERE = Path(__file__).resolve().parent
VENV_BIN = Path(sys.executable).parent


def measure(cmd: list[str], stdout=subprocess.DEVNULL) -> tuple[float, int, str]:
    """(wall seconds, peak RSS in KiB, stdout text if captured) of one command."""
    timed = ["/usr/bin/time", "-f", "%e %M"] + cmd
    t0 = time.perf_counter()
    proc = subprocess.run(timed, stdout=stdout, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    last = proc.stderr.strip().splitlines()[-1].split()
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed ({proc.returncode}): {proc.stderr[-500:]}")
    return wall, int(last[1]), proc.stdout if stdout == subprocess.PIPE else ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--packets", type=int, default=1_000_000)
    ap.add_argument("--capture", type=Path, default=HERE / "data" / "big.pcap")
    ap.add_argument("--json-out", type=Path, default=HERE / "out" / "decode.json")
    ap.add_argument("--skip-verbose-tshark", action="store_true")
    ap.add_argument("--scale", type=int, nargs="*", default=[3],
                    help="also run `stats` on captures this many times larger (peak memory "
                         "must not grow with the capture)")
    args = ap.parse_args(argv)
    make_big_capture.ensure(args.capture, args.packets)
    size = args.capture.stat().st_size
    ks = str(VENV_BIN / "kafkasniff")
    ports_file = args.capture.with_suffix(".ports")
    ports = ports_file.read_text().split() if ports_file.exists() else []
    ks_ports = [a for p in ports for a in ("--port", p)]
    ts_ports = [a for p in ports for a in ("-d", f"tcp.port=={p},kafka")]
    # packets and exchanges, from kafkasniff's own report
    wall, rss, out = measure([ks, "stats", "--json", *ks_ports, str(args.capture)],
                             stdout=subprocess.PIPE)
    report = json.loads(out)
    packets = report["pipeline"]["packets"]
    exchanges = report["total"]["count"]
    rows = [("kafkasniff stats", wall, rss)]
    rows.append(("kafkasniff read --json", *measure([ks, "read", "-q", "--json", *ks_ports,
                                                     str(args.capture)])[:2]))
    tshark = shutil.which("tshark")
    if tshark:
        rows.append(("tshark -T fields (kafka)", *measure(
            [tshark, "-r", str(args.capture), *ts_ports, "-T", "fields", "-e", "kafka.api_key",
             "-e", "kafka.correlation_id", "-e", "kafka.error"])[:2]))
        if not args.skip_verbose_tshark:
            rows.append(("tshark -V (full tree)", *measure([tshark, "-r", str(args.capture),
                                                            *ts_ports, "-V"])[:2]))
    rows.append(("dpkt (iterate packets)", *measure(
        [sys.executable, "-c", "import dpkt, sys\nfor _ in dpkt.pcap.Reader(open(sys.argv[1], "
         "'rb')): pass", str(args.capture)])[:2]))
    base = next((w for name, w, _ in rows if name.startswith("tshark -T")), None)
    print(f"capture: {args.capture} ({size / 1e6:.0f} MB, {packets} packets, "
          f"{exchanges} exchanges); machine: {os.cpu_count()} cores")
    print(f"{'command':28s} {'seconds':>8s} {'packets/s':>10s} {'MB/s':>7s} {'exch/s':>8s} "
          f"{'peak MB':>8s} {'tshark pkts/s ratio':>20s}")
    results = []
    for name, w, kib in rows:
        ratio = base / w if base else None
        print(f"{name:28s} {w:8.1f} {packets / w:10.0f} {size / 1e6 / w:7.1f} "
              f"{exchanges / w:8.0f} {kib / 1024:8.0f} {'' if ratio is None else f'{ratio:20.2f}'}")
        results.append({"command": name, "seconds": round(w, 2), "packets_per_s": round(packets / w),
                        "mb_per_s": round(size / 1e6 / w, 1), "exchanges_per_s": round(exchanges / w),
                        "peak_rss_mb": round(kib / 1024), "ratio_to_tshark_fields": ratio})
    scaling = [{"packets": packets, "seconds": round(rows[0][1], 1),
                "peak_rss_mb": round(rows[0][2] / 1024)}]
    for k in ([] if ports else args.scale):
        big = make_big_capture.ensure(args.capture.with_name(f"{args.capture.stem}-x{k}.pcap"),
                                      k * args.packets)
        w, kib, out = measure([ks, "stats", "--json", str(big)], stdout=subprocess.PIPE)
        n = json.loads(out)["pipeline"]["packets"]
        scaling.append({"packets": n, "seconds": round(w, 1), "peak_rss_mb": round(kib / 1024)})
    print("memory vs capture size (kafkasniff stats):")
    for row in scaling:
        print(f"  {row['packets']:>9} packets  {row['seconds']:7.1f} s  "
              f"{row['packets'] / row['seconds']:8.0f} packets/s  peak {row['peak_rss_mb']} MB")
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps({"capture_bytes": size, "packets": packets,
                                         "exchanges": exchanges, "results": results,
                                         "scaling": scaling}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
