"""Offline decode speed and memory: kafkasniff next to tshark on the same large capture.

Generates (once) a capture of at least ``--packets`` packets with ``make_big_capture.py``
(or takes ``--capture``, e.g. ``make_real_capture.py``'s), then runs each of these as its own
process measured by ``/usr/bin/time`` (wall seconds, peak RSS of the largest process),
alternating: every command once per round, ``--rounds`` rounds, the median kept:

- ``kafkasniff stats``, ``read --json`` and ``export`` with ``--jobs 1`` and ``--jobs 2``
- ``kafkasniff stats --jobs 1`` as plain Python (``KAFKASNIFF_PURE_PYTHON=1``: the
  fallback when no C compiler built the compiled modules)
- ``tshark -T fields``          tshark's Kafka dissector, a few fields per frame
- ``tshark -T json``            tshark's full decode of every frame, to /dev/null
- ``dpkt``                      merely iterating the packets (the Python floor)
- two ``kafkasniff stats --jobs 1`` at once (``--no-ceiling`` leaves it out): what this
  machine's two cores give two independent processes. ``--jobs 2`` splits one decode in
  two halves run at once, so its best possible time is half of the pair's; the *ceiling*
  is ``2 x stats --jobs 1 / pair`` within each round (2.0 on two cores that do not slow
  each other down), and ``--jobs 2`` is also given as a share of it

A capture that is not on port 9092 (``make_real_capture.py``'s) names its broker ports in a
``.ports`` file next to it: kafkasniff gets ``--port`` and tshark ``-d tcp.port==P,kafka``
for each.

Prints packets/s, MB/s, exchanges/s, peak memory and the ratio to tshark (``stats`` and
``export`` to ``-T fields``, ``read --json`` to ``-T json``). This machine's speed drifts by
up to 1.6x within minutes, so each command compared with ``-T fields`` runs between two
runs of it (``B C1 B C2 ... B`` in every round) and is compared with the mean of those
two: the ratio printed is the median of these per-round ratios, their range in brackets
(``[min-max]``). ``read --json`` gets the ratio of the medians to ``-T json`` (one run of it
per round: it takes minutes). Results are
also written as JSON (``--json-out``), each command's round times and ratios included.
Timings are measured here, never asserted in tests.

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
import tempfile
import time
from pathlib import Path

import make_big_capture

HERE = Path(__file__).resolve().parent
VENV_BIN = Path(sys.executable).parent
#: the two ``stats --jobs 1`` run at once
PAIR = "two stats --jobs 1 at once"


def stats_name(jobs: int) -> str:
    """The name ``kafkasniff stats --jobs N`` is measured and printed under."""
    return f"kafkasniff stats --jobs {jobs}"


def median(xs: list[float]) -> float:
    """The median (the mean of the middle two of an even count)."""
    xs = sorted(xs)
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def spread(ratios: list[float]) -> str:
    """`` [min-max]`` of several per-round ratios; nothing for one."""
    return f" [{min(ratios):.2f}-{max(ratios):.2f}]" if len(ratios) > 1 else ""


def measure(cmd: list[str], stdout=subprocess.DEVNULL, env=None) -> tuple[float, int, str]:
    """(wall seconds, peak RSS in KiB of the largest process, stdout text if captured) of
    one command."""
    timed = ["/usr/bin/time", "-f", "%e %M"] + cmd
    t0 = time.perf_counter()
    proc = subprocess.run(timed, stdout=stdout, stderr=subprocess.PIPE, text=True, env=env)
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
    ap.add_argument("--skip-verbose-tshark", action="store_true",
                    help="leave out tshark -T json (slow, and several GB of memory)")
    ap.add_argument("--jobs", type=int, nargs="*", default=[1, 2],
                    help="the --jobs values measured")
    ap.add_argument("--rounds", type=int, default=1,
                    help="alternating rounds (the median is kept)")
    ap.add_argument("--no-ceiling", action="store_true",
                    help="leave out the two `stats --jobs 1` run at once (the machine's "
                         "two-process ceiling)")
    ap.add_argument("--scale", type=int, nargs="*", default=[3],
                    help="also run `stats` on captures this many times larger (peak memory "
                         "must not grow with the capture)")
    args = ap.parse_args(argv)
    make_big_capture.ensure(args.capture, args.packets)
    size = args.capture.stat().st_size
    ks = str(VENV_BIN / "kafkasniff")
    ports = make_big_capture.broker_ports(args.capture)
    ks_ports = [a for p in ports for a in ("--port", p)]
    ts_ports = [a for p in ports for a in ("-d", f"tcp.port=={p},kafka")]
    # packets and exchanges, from kafkasniff's own report
    wall, rss, out = measure([ks, "stats", "--json", *ks_ports, str(args.capture)],
                             stdout=subprocess.PIPE)
    report = json.loads(out)
    packets = report["pipeline"]["packets"]
    exchanges = report["total"]["count"]
    cap = str(args.capture)
    export_dir = Path(tempfile.mkdtemp(prefix="kafkasniff-bench-"))
    commands: list[tuple[str, list[str], dict | None, str]] = []
    stats_cmd = [ks, "stats", "--jobs", "1", *ks_ports, cap]
    for jobs in args.jobs:
        j = ["--jobs", str(jobs)]
        commands += [
            (stats_name(jobs), [ks, "stats", *j, *ks_ports, cap], None, "fields"),
            (f"kafkasniff read --json --jobs {jobs}", [ks, "read", "-q", "--json", *j,
                                                      *ks_ports, cap], None, "json"),
            (f"kafkasniff export --jobs {jobs}", [ks, "export", "-q", "-o",
                                                  str(export_dir / f"j{jobs}"), *j, *ks_ports,
                                                  cap], None, "fields"),
        ]
    commands.append(("stats --jobs 1, plain Python", stats_cmd,
                     {**os.environ, "KAFKASNIFF_PURE_PYTHON": "1"}, "fields"))
    if not args.no_ceiling:
        # both at once; the pair's time is the later one's end, and a failure of either fails
        commands.append((PAIR, ["sh", "-c", '"$0" "$@" & p=$!; "$0" "$@" || exit 1; wait $p',
                                *stats_cmd], None, "pair"))
    tshark = shutil.which("tshark")
    if tshark:
        commands.append(("tshark -T fields (kafka)", [
            tshark, "-r", cap, *ts_ports, "-T", "fields", "-e", "kafka.api_key",
            "-e", "kafka.correlation_id", "-e", "kafka.error"], None, ""))
        if not args.skip_verbose_tshark:
            commands.append(("tshark -T json (full)", [tshark, "-r", cap, *ts_ports, "-T",
                                                       "json"], None, ""))
    commands.append(("dpkt (iterate packets)", [
        sys.executable, "-c", "import dpkt, sys\nfor _ in dpkt.pcap.Reader(open(sys.argv[1], "
        "'rb')): pass", cap], None, ""))
    runs: dict[str, list[tuple[float, int]]] = {name: [] for name, *_ in commands}
    # the commands measured against tshark -T fields run between two runs of it, in each
    # round: B C1 B C2 ... Ck B. This machine's speed drifts by up to 1.6x within minutes
    # (docs/benchmarks.md), so a command is compared with the baseline right beside it
    fields = next((c for c in commands if c[0].startswith("tshark -T fields")), None)
    sandwiched = [c for c in commands if c[3] in ("fields", "pair")] if fields else []
    rest = [c for c in commands if c not in sandwiched and c is not fields]
    # per command, per round: the mean of the baseline runs before and after it
    beside: dict[str, list[float]] = {name: [] for name, *_ in commands}

    def run(name, cmd, env) -> float:
        shutil.rmtree(export_dir, ignore_errors=True)
        got = measure(cmd, env=env)[:2]
        runs[name].append(got)
        return got[0]

    for _ in range(args.rounds):
        if sandwiched:
            before = run(*fields[:3])
            for name, cmd, env, _base in sandwiched:
                run(name, cmd, env)
                after = run(*fields[:3])
                beside[name].append((before + after) / 2)
                before = after
        for name, cmd, env, _base in rest:
            run(name, cmd, env)
    shutil.rmtree(export_dir, ignore_errors=True)
    rows = [(name, median([w for w, _ in runs[name]]), max(k for _, k in runs[name]), basis)
            for name, _cmd, _env, basis in commands]
    # read --json against the -T json run of the same round (one a round: it takes minutes)
    json_runs = next((runs[n] for n, *_ in commands if n.startswith("tshark -T json")), None)

    def relative(name: str) -> list[float]:
        """The command's time in each round over the mean of the baseline runs beside it
        (its plain time when none ran beside it, without tshark): the drift cancels."""
        near = beside[name]
        return [w / (near[i] if near else 1) for i, (w, _) in enumerate(runs[name])]
    print(f"capture: {args.capture} ({size / 1e6:.0f} MB, {packets} packets, "
          f"{exchanges} exchanges); machine: {os.cpu_count()} cores; median of "
          f"{args.rounds} alternating round(s); x tshark -T fields: against the tshark "
          f"runs just before and after, per round")
    print(f"{'command':34s} {'seconds':>8s} {'packets/s':>10s} {'MB/s':>7s} {'exch/s':>8s} "
          f"{'peak MB':>8s} {'x tshark':>9s}")
    results = []
    for name, w, kib, basis in rows:
        ratio = None
        per_round: list[float] = []
        if basis == "fields" and beside[name]:   # the median of the ratios to the runs beside
            per_round = [round(1 / r, 2) for r in relative(name)]
            ratio = median(per_round)
        elif basis == "json" and json_runs:      # the ratio of the medians
            ratio = median([b for b, _ in json_runs]) / w
            per_round = [round(b / r, 2) for (b, _), (r, _) in zip(json_runs, runs[name])]
        n = 2 if name == PAIR else 1     # the pair decodes the capture twice
        print(f"{name:34s} {w:8.1f} {n * packets / w:10.0f} {n * size / 1e6 / w:7.1f} "
              f"{n * exchanges / w:8.0f} {kib / 1024:8.0f} "
              f"{'' if ratio is None else f'{ratio:6.2f} ({basis}){spread(per_round)}'}")
        results.append({"command": name, "seconds": round(w, 2),
                        "packets_per_s": round(n * packets / w),
                        "mb_per_s": round(n * size / 1e6 / w, 1),
                        "exchanges_per_s": round(n * exchanges / w),
                        "peak_rss_mb": round(kib / 1024), "baseline": basis or None,
                        "ratio_to_tshark": None if ratio is None else round(ratio, 2),
                        "round_seconds": [round(r, 2) for r, _ in runs[name]],
                        "round_ratios_to_tshark": per_round or None})
    ceiling = None
    if PAIR in runs and stats_name(1) in runs:
        # per round: two processes' work in the pair's time, against one alone
        one = relative(stats_name(1))
        per_round = [round(2 * a / b, 2) for a, b in zip(one, relative(PAIR))]
        ceiling = {"per_round": per_round, "median": median(per_round)}
        print(f"two-process ceiling of this machine (2 x stats --jobs 1 / two at once): "
              f"{ceiling['median']:.2f}x{spread(per_round)}")
        for jobs in args.jobs:
            if jobs == 1:
                continue
            share = [round(a / b / c, 2)
                     for a, b, c in zip(one, relative(stats_name(jobs)), per_round)]
            ceiling[f"stats_jobs_{jobs}_share"] = share
            print(f"  stats --jobs {jobs}: {median(share):.2f} of the "
                  f"ceiling (speed-up over --jobs 1 / ceiling, per round: {share})")
    rows = [(n, w, k) for n, w, k, _ in rows]
    scaling = [{"packets": packets, "jobs": args.jobs[0], "seconds": round(rows[0][1], 1),
                "peak_rss_mb": round(rows[0][2] / 1024)}]
    for k in ([] if ports else args.scale):
        big = make_big_capture.ensure(args.capture.with_name(f"{args.capture.stem}-x{k}.pcap"),
                                      k * args.packets)
        for jobs in args.jobs:
            w, kib, out = measure([ks, "stats", "--json", "--jobs", str(jobs), str(big)],
                                  stdout=subprocess.PIPE)
            n = json.loads(out)["pipeline"]["packets"]
            scaling.append({"packets": n, "jobs": jobs, "seconds": round(w, 1),
                            "peak_rss_mb": round(kib / 1024)})
    print("memory vs capture size (kafkasniff stats):")
    for row in scaling:
        print(f"  {row['packets']:>9} packets  --jobs {row['jobs']}  {row['seconds']:7.1f} s  "
              f"{row['packets'] / row['seconds']:8.0f} packets/s  peak {row['peak_rss_mb']} MB")
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps({"capture_bytes": size, "packets": packets,
                                         "exchanges": exchanges, "results": results,
                                         "scaling": scaling, "ceiling": ceiling},
                                        indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
