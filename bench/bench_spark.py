"""``spark decode`` with 1 and 2 local cores next to the single-process ``export``.

On the same large capture (``bench/data/big.pcap``, generated with ``make_big_capture.py``
when missing), in the same run, each command as its own process:

- ``kafkasniff export --jobs 1 FILE -o DIR``                         (baseline: one process)
- ``kafkasniff export --jobs 2 FILE -o DIR``                         (two decoder processes)
- ``kafkasniff spark decode FILE -o DIR --master local[1]``           (split + 1 task at a time)
- ``kafkasniff spark decode FILE -o DIR --master local[2]``           (split + 2 tasks at a time)

and prints wall seconds (Spark: JVM start-up included, and the time ``spark decode`` itself
reports), rows written (every table), rows/s, MB/s of capture and the speed ratio to
``export``. The capture is split by connection like any capture of 64 MiB or more (``--shards``
to force another count). Outputs go to a temporary directory, removed at the end. Timings
are measured here, never asserted in tests.

Usage::

    .venv/bin/python bench/bench_spark.py [--capture bench/data/big.pcap] [--shards N]
        [--repeat 2] [--wait-quiet 120]
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


def wait_quiet(max_wait: float, threshold: float = 1.0) -> None:
    """Wait (at most ``max_wait`` seconds) until the 1-minute load average drops below
    ``threshold``: other processes on a 2-core machine distort every figure."""
    deadline = time.monotonic() + max_wait
    while time.monotonic() < deadline and os.getloadavg()[0] >= threshold:
        time.sleep(5)


def run(cmd: list[str]) -> tuple[float, str]:
    """(wall seconds, stderr) of one command; exits on failure."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return wall, proc.stderr


def rows_of(summary: str) -> dict[str, int]:
    """``{table: rows}`` from the summary line of export / spark decode."""
    line = [x for x in summary.splitlines() if " rows -> " in x][-1]
    counts = line.split(": ", 1)[1].split(" rows -> ")[0]
    return {t: int(n) for t, n in (c.rsplit(" ", 1) for c in counts.split(", "))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--capture", type=Path, default=HERE / "data" / "big.pcap")
    ap.add_argument("--packets", type=int, default=1_000_000,
                    help="packets of the generated capture when it is missing")
    ap.add_argument("--shards", type=int, default=None,
                    help="force this many shards (default: one per 64 MiB)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run every command this many times and keep the fastest run")
    ap.add_argument("--wait-quiet", type=float, default=0, metavar="SECONDS",
                    help="before each run wait up to this long for a load average below 1")
    ap.add_argument("--json-out", type=Path, default=HERE / "out" / "spark.json")
    args = ap.parse_args(argv)
    make_big_capture.ensure(args.capture, args.packets)
    size = args.capture.stat().st_size
    ks = str(VENV_BIN / "kafkasniff")
    env_cmd = [ks] if os.path.exists(ks) else [sys.executable, "-m", "kafkasniff.cli"]
    work = Path(tempfile.mkdtemp(prefix="kafkasniff-bench-spark-"))
    # a capture not on port 9092 names its broker ports in a .ports file (bench_decode.py)
    ports = [a for p in make_big_capture.broker_ports(args.capture) for a in ("--port", p)]
    # --jobs 1 is the single-process baseline (export's default is one decoder per core)
    commands = [("export --jobs 1", env_cmd + ["export", "--jobs", "1", *ports,
                                               str(args.capture), "-o"]),
                ("export --jobs 2", env_cmd + ["export", "--jobs", "2", *ports,
                                               str(args.capture), "-o"])]
    for cores in (1, 2):
        extra = ["--shards", str(args.shards)] if args.shards else []
        commands.append((f"spark decode local[{cores}]",
                         env_cmd + ["spark", "decode", *ports, str(args.capture), "--master",
                                    f"local[{cores}]", *extra, "-o"]))
    best: dict[str, dict] = {}
    try:
        for _ in range(args.repeat):
            for name, cmd in commands:
                out = work / "out"
                shutil.rmtree(out, ignore_errors=True)
                if args.wait_quiet:
                    wait_quiet(args.wait_quiet)
                load = os.getloadavg()[0]
                wall, err = run(cmd + [str(out)])
                m = re.search(r"(\d+) task\(s\), ([\d.]+) s", err)
                r = {"command": name, "seconds": wall, "load_before": load,
                     "inner": float(m.group(2)) if m else None,
                     "tasks": int(m.group(1)) if m else None, "rows": rows_of(err)}
                if name not in best or wall < best[name]["seconds"]:
                    best[name] = r
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results = [best[name] for name, _ in commands]

    base = results[0]["seconds"]
    print(f"capture: {args.capture} ({size / 1e6:.0f} MB); machine: {os.cpu_count()} cores; "
          f"fastest of {args.repeat} run(s)")
    print(f"{'command':26s} {'seconds':>8s} {'(in Spark)':>10s} {'rows':>9s} {'rows/s':>8s} "
          f"{'MB/s':>6s} {'vs export':>9s} {'load':>5s}")
    for r in results:
        rows = sum(r["rows"].values())
        inner = f"{r['inner']:.1f}" if r.get("inner") is not None else "-"
        print(f"{r['command']:26s} {r['seconds']:8.1f} {inner:>10s} {rows:9d} "
              f"{rows / r['seconds']:8.0f} {size / 1e6 / r['seconds']:6.1f} "
              f"{base / r['seconds']:8.2f}x {r['load_before']:5.1f}")
    same = {t: n for t, n in results[0]["rows"].items() if t != "topic_ids"}
    for r in results[1:]:
        if {t: n for t, n in r["rows"].items() if t != "topic_ids"} != same:
            print(f"warning: {r['command']} wrote {r['rows']}, export {results[0]['rows']}")
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps({"capture": str(args.capture), "bytes": size,
                                         "cores": os.cpu_count(), "results": results},
                                        indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
