"""Many connections open at once: time and peak memory of every process (issue 45, item 4).

Generates (once per size, into ``bench/data/``, never committed) a capture of ``N``
connections to one broker (10.0.0.1:9092) that are all open at the same time: each makes its
TCP handshake and sends one Metadata v0 request; once all are open, three in four get their
response and close (FIN both ways), the fourth never gets one and stays open to the end of
the capture. With ``N`` above the 50,000 connections one decoder keeps, the oldest are
evicted while they wait, and their responses open new (mid-stream) connections that evict
others: the table stays full for the whole second half. A second capture (``-seq``) holds the
same connections one after another, each closed (FIN both ways, answered or not) before the
next opens: the same connections and requests without the crowd.

Commands, each its own process, run ``--rounds`` times in alternation, each between two runs
of the baseline (tshark's ``-T fields`` on the same capture, as ``bench_decode.py`` does)::

    kafkasniff stats --jobs 1 | stats --jobs 2 | read --json --jobs 1
    kafkasniff stats --jobs 1 as plain Python (KAFKASNIFF_PURE_PYTHON=1)
    kafkasniff stats --jobs 1 of the sequential capture

Peak memory is measured for every process: the command's own and each of its children's
(the decoders of ``--jobs 2``) as the last ``VmHWM`` of ``/proc/<pid>/status`` read while it
ran, every 20 ms (``/usr/bin/time`` and ``wait4`` give only the largest process's, which the
JSON output keeps as ``largest_mb``). ``--tree NAME=DIR`` (repeatable) runs every command
once per source tree (``python -m kafkasniff`` with ``PYTHONPATH=DIR``, from ``/tmp`` so that
the working directory does not shadow it): the code before and after a change, measured in
the same run. Timings are measured here, never asserted in tests.

Usage::

    .venv/bin/python bench/bench_connections.py --connections 100000 1000000 --rounds 2
    .venv/bin/python bench/bench_connections.py --connections 100000 \\
        --tree before=/tmp/ks-before --tree after=/tmp/ks-after
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# ------------------------------------------------------------------ the capture

_PCAP_HEADER = struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1)  # ns, Ethernet
_REC = struct.Struct("<IIII")
_ETH = b"\x02\x00\x00\x00\x00\x01\x02\x00\x00\x00\x00\x02\x08\x00"
_IP = struct.Struct(">BBHHHBBH4s4s")
_TCP = struct.Struct(">HHIIBBHHH")
FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10
BROKER = bytes([10, 0, 0, 1])
BROKER_PORT = 9092
CLIENT_ID = b"bench-conn"
#: connections per client address (ports 10000-59999)
PER_IP = 50_000


def _request(corr: int) -> bytes:
    """Metadata v0 request (header v1, no topics)."""
    body = struct.pack(">hhih", 3, 0, corr, len(CLIENT_ID)) + CLIENT_ID + struct.pack(">i", 0)
    return struct.pack(">i", len(body)) + body


def _response(corr: int) -> bytes:
    """Metadata v0 response: one broker, no topics."""
    host = b"broker-1"
    body = struct.pack(">ii", corr, 1) + struct.pack(">ih", 1, len(host)) + host + \
        struct.pack(">ii", BROKER_PORT, 0)
    return struct.pack(">i", len(body)) + body


def _client(i: int) -> tuple[bytes, int]:
    k = i // PER_IP
    return bytes([10, 1 + (k >> 16) % 200, (k >> 8) & 0xFF, k & 0xFF]), 10000 + i % PER_IP


class _Writer:
    def __init__(self, f) -> None:
        self.f = f
        self.buf: list[bytes] = []
        self.packets = 0
        self.ident = 0

    def packet(self, ts_ns: int, sip: bytes, sp: int, dip: bytes, dp: int, seq: int, ack: int,
               flags: int, payload: bytes = b"") -> None:
        self.ident = (self.ident + 1) & 0xFFFF
        ip = _IP.pack(0x45, 0, 40 + len(payload), self.ident, 0x4000, 64, 6, 0, sip, dip)
        tcp = _TCP.pack(sp, dp, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags, 65535, 0, 0)
        n = 14 + 40 + len(payload)
        sec, ns = divmod(ts_ns, 10**9)
        self.buf.append(_REC.pack(sec, ns, n, n) + _ETH + ip + tcp + payload)
        self.packets += 1
        if len(self.buf) >= 4096:
            self.flush()

    def flush(self) -> None:
        self.f.write(b"".join(self.buf))
        self.buf.clear()


def _open(w: _Writer, i: int, ts: int) -> None:
    """Connection i's handshake and request."""
    cip, cp = _client(i)
    cisn, sisn = (i * 2654435761) & 0xFFFFFFFF, (i * 40503 + 12345) & 0xFFFFFFFF
    w.packet(ts, cip, cp, BROKER, BROKER_PORT, cisn, 0, SYN)
    w.packet(ts + 50_000, BROKER, BROKER_PORT, cip, cp, sisn, cisn + 1, SYN | ACK)
    w.packet(ts + 100_000, cip, cp, BROKER, BROKER_PORT, cisn + 1, sisn + 1, PSH | ACK,
             _request(i & 0x7FFFFFFF))


def _answer(w: _Writer, i: int, ts: int, respond: bool = True) -> None:
    """Connection i's response (``respond``) and the two FINs."""
    cip, cp = _client(i)
    cisn, sisn = (i * 2654435761) & 0xFFFFFFFF, (i * 40503 + 12345) & 0xFFFFFFFF
    req = len(_request(0))
    c, s = cisn + 1 + req, sisn + 1
    if respond:
        resp = _response(i & 0x7FFFFFFF)
        w.packet(ts, BROKER, BROKER_PORT, cip, cp, s, c, PSH | ACK, resp)
        s += len(resp)
    w.packet(ts + 50_000, cip, cp, BROKER, BROKER_PORT, c, s, FIN | ACK)
    w.packet(ts + 100_000, BROKER, BROKER_PORT, cip, cp, s, c + 1, FIN | ACK)


def answered(i: int) -> bool:
    """Whether connection i gets its response (three in four do)."""
    return i % 4 != 3


def make_capture(path: Path, n: int, rate: int, sequential: bool = False) -> int:
    """Write the capture of ``n`` connections (``rate`` opened per second of capture time) to
    ``path``; returns its packet count. ``sequential``: each connection's packets together,
    one connection after another, over the same time span."""
    t0 = 1_700_000_000 * 10**9
    step = 10**9 // rate
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        f.write(_PCAP_HEADER)
        w = _Writer(f)
        if sequential:
            for i in range(n):
                _open(w, i, t0 + 2 * i * step)
                _answer(w, i, t0 + 2 * i * step + 200_000, answered(i))
        else:
            for i in range(n):
                _open(w, i, t0 + i * step)
            t1 = t0 + n * step + 10**9
            for i in range(n):
                if answered(i):
                    _answer(w, i, t1 + i * step)
        w.flush()
    tmp.rename(path)
    return w.packets


def ensure(n: int, rate: int, sequential: bool = False) -> Path:
    """The capture of ``n`` connections in ``bench/data/``, generated when missing."""
    path = HERE / "data" / f"conns-{n}{'-seq' if sequential else ''}.pcap"
    if not path.exists():
        t = time.perf_counter()
        packets = make_capture(path, n, rate, sequential)
        print(f"wrote {path} ({packets:,} packets, {path.stat().st_size / 1e6:.0f} MB) in "
              f"{time.perf_counter() - t:.0f} s", file=sys.stderr)
    return path


# ------------------------------------------------------------------ measuring


def _children(pid: int) -> list[int]:
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out.extend(int(x) for x in f.read().split())
    except OSError:
        pass
    return out


def _hwm_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def measure(cmd: list[str], env: dict | None = None, cwd: str | None = None) -> dict:
    """Run ``cmd`` (stdout to /dev/null): wall seconds, peak RSS in MB of the command's own
    process and of each descendant (the last ``VmHWM`` of each read while it ran, every 20
    ms) and of the largest process (``wait4``'s ``ru_maxrss``: the command's or any of its
    descendants', what ``/usr/bin/time`` reports)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                         cwd=cwd)
    peaks: dict[int, int] = {}
    own = 0
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        own = max(own, _hwm_kb(p.pid))
        stack = _children(p.pid)
        while stack:
            c = stack.pop()
            peaks[c] = max(peaks.get(c, 0), _hwm_kb(c))
            stack.extend(_children(c))
        time.sleep(0.02)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    if p.returncode != 0:
        raise SystemExit(f"{cmd} failed ({p.returncode}): {err[-500:]}")
    return {"s": wall, "main_mb": own / 1024, "largest_mb": ru.ru_maxrss / 1024,
            "children_mb": sorted((v / 1024 for v in peaks.values() if v), reverse=True)}


# ------------------------------------------------------------------ the run


def commands_for(trees: list[list[str]], cap: str, seq: str, only) -> list[tuple]:
    """``(name, argv, env)`` of every command measured, per source tree."""
    out = []
    for name, tree in trees:
        if tree:
            base = [sys.executable, "-m", "kafkasniff"]
            env = {**os.environ, "PYTHONPATH": tree}
        else:
            base = [str(Path(sys.executable).parent / "kafkasniff")]
            env = dict(os.environ)
        pure = {**env, "KAFKASNIFF_PURE_PYTHON": "1"}
        for label, extra, e, c in (
                ("stats -j 1", ["stats", "-j", "1"], env, cap),
                ("stats -j 2", ["stats", "-j", "2"], env, cap),
                ("read --json -j 1", ["read", "-q", "--json", "-j", "1"], env, cap),
                ("stats -j 1, plain Python", ["stats", "-j", "1"], pure, cap),
                ("stats -j 1, sequential capture", ["stats", "-j", "1"], env, seq)):
            full = f"{label} [{name}]" if len(trees) > 1 else label
            if only is None or any(o in full for o in only):
                out.append((full, base + extra + [c], e))
    return out


def report(n: int, rows: dict[str, list[dict]], base_runs: list[dict]) -> None:
    """The table of one capture: median seconds, the median per-round ratio to the tshark
    runs beside each command (tshark's time / the command's: above 1, faster than tshark)
    and its [range], seconds per 100,000 connections, the largest peak of the command's own
    process and of each of its children (the decoders of ``--jobs 2``) over the rounds."""
    print(f"\n{n:,} connections:")
    print("| command | s | x tshark `-T fields` [rounds] | s per 100k connections | "
          "peak MB: process | peak MB: decoders |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, ms in rows.items():
        if not ms:
            continue
        ratios = []
        for m in ms:
            i = m.get("base_i", -1)
            if i >= 0 and i + 1 < len(base_runs):
                ratios.append((base_runs[i]["s"] + base_runs[i + 1]["s"]) / 2 / m["s"])
        s = statistics.median(m["s"] for m in ms)
        ratio = (f"{statistics.median(ratios):.2f}" +
                 (f" [{min(ratios):.2f}-{max(ratios):.2f}]" if len(ratios) > 1 else "")
                 if ratios else "")
        kids = [max((m["children_mb"][k] for m in ms if len(m["children_mb"]) > k),
                    default=0) for k in range(max(len(m["children_mb"]) for m in ms))]
        print(f"| {name} | {s:.1f} | {ratio} | {s * 100_000 / n:.1f} | "
              f"{max(m['main_mb'] for m in ms):.0f} | "
              f"{', '.join(f'{k:.0f}' for k in kids)} |")
    if base_runs:
        print(f"| tshark -T fields | {statistics.median(b['s'] for b in base_runs):.1f} | "
              f"1.00 | {statistics.median(b['s'] for b in base_runs) * 100_000 / n:.1f} | "
              f"{max(b['main_mb'] for b in base_runs):.0f} | |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--connections", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--rate", type=int, default=10_000,
                    help="connections opened per second of capture time")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--tree", action="append", default=[],
                    help="NAME=DIR: run the commands with PYTHONPATH=DIR (repeatable); "
                         "default: this environment's kafkasniff")
    ap.add_argument("--only", nargs="*", default=None,
                    help="run only the commands whose name contains one of these")
    ap.add_argument("--no-tshark", action="store_true")
    ap.add_argument("--json-out", type=Path, default=HERE / "out" / "connections.json")
    args = ap.parse_args(argv)
    trees = [t.split("=", 1) for t in args.tree] or [["installed", ""]]
    tshark = None if args.no_tshark else shutil.which("tshark")
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    results = []
    for n in args.connections:
        cap = str(ensure(n, args.rate))
        seq = str(ensure(n, args.rate, sequential=True))
        commands = commands_for(trees, cap, seq, args.only)
        base_cmd = [tshark, "-r", cap, "-T", "fields", "-e", "kafka.api_key", "-e",
                    "kafka.correlation_id", "-e", "kafka.error"] if tshark else None
        rows: dict[str, list[dict]] = {name: [] for name, _, _ in commands}
        base_runs: list[dict] = []
        results.append({"connections": n, "capture": cap, "commands": rows,
                        "baseline": base_runs})
        for r in range(args.rounds):
            if base_cmd:
                base_runs.append(measure(base_cmd, None, "/tmp"))
            for name, cmd, env in commands:
                m = measure(cmd, env, "/tmp")
                m["base_i"] = len(base_runs) - 1
                rows[name].append(m)
                if base_cmd:
                    base_runs.append(measure(base_cmd, None, "/tmp"))
                print(f"  {n:,} round {r + 1} {name}: {m['s']:.1f} s, {m['main_mb']:.0f} MB"
                      + (f", decoders {[round(x) for x in m['children_mb']]} MB"
                         if m["children_mb"] else "")
                      + (f" (tshark {base_runs[-2]['s']:.1f} s, {base_runs[-1]['s']:.1f} s)"
                         if base_cmd else ""), file=sys.stderr, flush=True)
                args.json_out.write_text(json.dumps(results, indent=1))
        report(n, rows, base_runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
