"""Export speed: ``kafkasniff export`` next to ``kafkasniff stats`` on the same large capture.

Generates (once) ``bench/data/big.pcap`` with ``make_big_capture.py``, then runs, each as its
own process measured by ``/usr/bin/time`` (wall seconds, peak RSS):

- ``kafkasniff stats``                    the baseline: full decode + aggregation
- ``kafkasniff export`` (Parquet)         full decode + exchanges, partitions, issues,
                                          connections, topic_ids tables
- ``kafkasniff export --records``         + one row per record
- ``kafkasniff export --format jsonl``    the same tables as JSON Lines
- ``kafkasniff export --partition-by date,hour``
- with ``--sink``, two exports whose sink is cut short, to split an export's time
  (docs/benchmarks.md, "Where an export's time goes"): the rows built and dropped
  (``ExportSink.add_rows`` converts and writes nothing), and decoding only
  (``ExportSink.add`` takes nothing). Their row counts are 0.

and prints rows/s, capture MB/s, output size, peak memory and the ratio of each export's
time to ``stats`` (measured in the same run). Results are also written as JSON
(``--json-out``). Timings are measured here, never asserted in tests.

Usage::

    .venv/bin/python bench/bench_export.py [--capture bench/data/big.pcap] [--packets 1000000]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import make_big_capture

HERE = Path(__file__).resolve().parent
VENV_BIN = Path(sys.executable).parent
EXPORT = ("import sys; from kafkasniff.cli.export import export_command; "
          "export_command(sys.argv[1:], prog_name='kafkasniff export')")
#: the export with its sink's rows built, then dropped: never converted to Arrow or written
EXPORT_ROWS_DROPPED = ("from kafkasniff.export.writer import ExportSink\n"
                       "def add_rows(self, table, rows):\n"
                       "    for _ in rows: pass\n"
                       "ExportSink.add_rows = add_rows\n" + EXPORT)
#: the export with a sink that takes nothing: decoding only
EXPORT_DECODE_ONLY = ("from kafkasniff.export.writer import ExportSink\n"
                      "ExportSink.add = lambda self, rec, **kw: None\n" + EXPORT)


def measure(cmd: list[str]) -> tuple[float, int, str]:
    """(wall seconds, peak RSS in KiB, stderr without the time line) of one command."""
    timed = ["/usr/bin/time", "-f", "%e %M"] + cmd
    t0 = time.perf_counter()
    proc = subprocess.run(timed, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    lines = proc.stderr.strip().splitlines()
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[:4]} failed ({proc.returncode}): {proc.stderr[-800:]}")
    return wall, int(lines[-1].split()[1]), "\n".join(lines[:-1])


def dir_bytes(d: Path) -> int:
    return sum(p.stat().st_size for p in d.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--packets", type=int, default=1_000_000)
    ap.add_argument("--capture", type=Path, default=HERE / "data" / "big.pcap")
    ap.add_argument("--json-out", type=Path, default=HERE / "out" / "export.json")
    ap.add_argument("--scale", type=int, nargs="*", default=[],
                    help="also export captures this many times larger (made with "
                         "make_big_capture.py): peak memory must not grow with the capture")
    ap.add_argument("--sink", action="store_true",
                    help="also export with the rows dropped, and with decoding only")
    ap.add_argument("--keep", type=Path, default=None,
                    help="keep the exports under this directory (default: a temporary one)")
    args = ap.parse_args(argv)
    make_big_capture.ensure(args.capture, args.packets)
    size = args.capture.stat().st_size
    work = args.keep or Path(tempfile.mkdtemp(prefix="kafkasniff-bench-export-"))
    work.mkdir(parents=True, exist_ok=True)
    ks = str(VENV_BIN / "kafkasniff")
    cap = str(args.capture)

    wall, rss, _ = measure([ks, "stats", cap])
    results = [{"command": "kafkasniff stats", "seconds": wall, "peak_kib": rss, "rows": None,
                "out_bytes": None}]
    variants = [
        ("kafkasniff export (parquet)", "parquet", [], EXPORT),
        ("kafkasniff export --records", "records", ["--records"], EXPORT),
        ("kafkasniff export --format jsonl", "jsonl", ["--format", "jsonl"], EXPORT),
        ("kafkasniff export --partition-by date,hour", "hive", ["--partition-by", "date,hour"],
         EXPORT),
    ]
    if args.sink:
        variants += [("export, rows built and dropped", "dropped", [], EXPORT_ROWS_DROPPED),
                     ("export, decoding only", "decode", [], EXPORT_DECODE_ONLY)]
    for name, sub, extra, program in variants:
        out = work / sub
        shutil.rmtree(out, ignore_errors=True)
        wall, rss, err = measure([sys.executable, "-c", program, cap, "-o", str(out), *extra])
        m = re.search(r"export: (.*) rows ->", err)
        counts = {k: int(v) for k, v in (p.rsplit(" ", 1) for p in m.group(1).split(", "))}
        results.append({"command": name, "seconds": wall, "peak_kib": rss,
                        "rows": sum(counts.values()), "counts": counts,
                        "out_bytes": dir_bytes(out)})
        if args.keep is None:
            shutil.rmtree(out, ignore_errors=True)
    scaling = []
    for k in args.scale:
        big = make_big_capture.ensure(args.capture.with_name(f"{args.capture.stem}-x{k}.pcap"),
                                      k * args.packets)
        out = work / f"x{k}"
        wall, rss, err = measure([sys.executable, "-c", EXPORT, str(big), "-o", str(out)])
        rows = sum(int(p.rsplit(" ", 1)[1]) for p in
                   re.search(r"export: (.*) rows ->", err).group(1).split(", "))
        scaling.append({"capture": str(big), "capture_bytes": big.stat().st_size,
                        "seconds": wall, "peak_kib": rss, "rows": rows})
        shutil.rmtree(out, ignore_errors=True)
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)

    base = results[0]["seconds"]
    print(f"capture: {args.capture} ({size / 1e6:.0f} MB); machine: {os.cpu_count()} cores")
    print(f"{'command':44s} {'seconds':>8s} {'rows':>9s} {'rows/s':>8s} {'MB/s':>6s} "
          f"{'out MB':>7s} {'peak MB':>8s} {'time vs stats':>13s}")
    for r in results:
        w = r["seconds"]
        rows = "" if r["rows"] is None else f"{r['rows']:9d}"
        rps = "" if r["rows"] is None else f"{r['rows'] / w:8.0f}"
        outmb = "" if r["out_bytes"] is None else f"{r['out_bytes'] / 1e6:7.1f}"
        print(f"{r['command']:44s} {w:8.1f} {rows:>9s} {rps:>8s} {size / 1e6 / w:6.1f} "
              f"{outmb:>7s} {r['peak_kib'] / 1024:8.0f} {w / base:13.2f}")
        r["capture_mb_per_s"] = round(size / 1e6 / w, 2)
        r["rows_per_s"] = None if r["rows"] is None else round(r["rows"] / w)
        r["ratio_to_stats"] = round(w / base, 2)
    for r in results[1:]:
        print(f"  {r['command']}: " + ", ".join(f"{k} {v}" for k, v in r["counts"].items()))
    if scaling:
        print("memory vs capture size (kafkasniff export, Parquet):")
        first = results[1]
        for r in [{"capture_bytes": size, **first}] + scaling:
            print(f"  {r['capture_bytes'] / 1e6:6.0f} MB capture  {r['seconds']:7.1f} s  "
                  f"{r['rows'] / r['seconds']:8.0f} rows/s  peak {r['peak_kib'] / 1024:.0f} MB")
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps({"capture": str(args.capture), "capture_bytes": size,
                                         "results": results, "scaling": scaling}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
