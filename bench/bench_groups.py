"""Consumer groups at scale: ``kafkasniff groups`` time and peak memory beside ``stats``.

Generates, into a temporary directory (never committed), classic consumer-group captures:

- ``members-N``: one group of N members (default 5 000, 20 000 and 100 000), each joining
  (the leader's JoinGroup answer lists all N), syncing (the leader's SyncGroup request
  plans all N; each answer assigns one partition), heartbeating once and leaving with its
  own LeaveGroup; the members share N/50 connections to the coordinator;
- ``partitions-P``: one member whose SyncGroup answer assigns P partitions of one topic
  (default 10 000 000: a 40 MB answer).

Then runs, each as its own process measured by ``/usr/bin/time`` (wall seconds, peak RSS):
``kafkasniff stats`` (the baseline: the same decode, no group analysis), ``groups``,
``groups --json`` and ``export`` (Parquet, group tables included). A command taking longer
than ``--timeout`` seconds is stopped and shown as ``>T``. Timings are measured here, never
asserted in tests.

Usage::

    .venv/bin/python bench/bench_groups.py [--members 5000 20000 100000]
        [--partitions 10000000] [--commands stats groups groups-json export] [--timeout 600]
        [--budget group_members=0]

To measure another tree (the code before a change), run it with ``PYTHONPATH`` set to a
``git worktree`` of that commit holding the same compiled modules.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
BROKER = bytes([10, 0, 0, 1])
GROUP = "bench-group"
TOPIC = "bench-topic"
MEMBERS_PER_CONNECTION = 50
SEGMENT = 65_000                 # TCP payload bytes per packet (an IPv4 packet's limit)


# ---------------------------------------------------------------- the Kafka wire, by hand

def _s(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    b = text.encode()
    return struct.pack(">h", len(b)) + b


def _b(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def _arr(items: list[bytes]) -> bytes:
    return struct.pack(">i", len(items)) + b"".join(items)


def request(api_key: int, version: int, corr: int, client_id: str, body: bytes) -> bytes:
    head = struct.pack(">hhi", api_key, version, corr) + _s(client_id)
    return struct.pack(">i", len(head) + len(body)) + head + body


def response(corr: int, body: bytes) -> bytes:
    return struct.pack(">ii", 4 + len(body), corr) + body


SUBSCRIPTION = struct.pack(">h", 0) + _arr([_s(TOPIC)]) + _b(b"")


def assignment(partitions) -> bytes:
    """ConsumerProtocolAssignment v0: one topic and these partitions, no user data."""
    parts = partitions if isinstance(partitions, bytes) else \
        b"".join(struct.pack(">i", p) for p in partitions)
    count = len(parts) // 4
    return struct.pack(">h", 0) + struct.pack(">i", 1) + _s(TOPIC) + \
        struct.pack(">i", count) + parts + _b(b"")


def join_request(mid: str) -> bytes:          # JoinGroup v5
    return _s(GROUP) + struct.pack(">ii", 45_000, 300_000) + _s(mid) + _s(None) + \
        _s("consumer") + _arr([_s("range") + _b(SUBSCRIPTION)])


def join_response(mid: str, leader: str, members: list[str]) -> bytes:
    return struct.pack(">ihi", 0, 0, 1) + _s("range") + _s(leader) + _s(mid) + \
        _arr([_s(m) + _s(None) + _b(SUBSCRIPTION) for m in members])


def sync_request(mid: str, plans: list[tuple[str, bytes]]) -> bytes:     # SyncGroup v3
    return _s(GROUP) + struct.pack(">i", 1) + _s(mid) + _s(None) + \
        _arr([_s(m) + _b(a) for m, a in plans])


def sync_response(asg: bytes) -> bytes:
    return struct.pack(">ih", 0, 0) + _b(asg)


def heartbeat_request(mid: str) -> bytes:     # Heartbeat v3
    return _s(GROUP) + struct.pack(">i", 1) + _s(mid) + _s(None)


def leave_request(mid: str) -> bytes:         # LeaveGroup v3
    return _s(GROUP) + _arr([_s(mid) + _s(None)])


def leave_response(mid: str) -> bytes:
    return struct.pack(">ih", 0, 0) + _arr([_s(mid) + _s(None) + struct.pack(">h", 0)])


# ---------------------------------------------------------------- pcap writing

class Pcap:
    """A nanosecond pcap of Ethernet/IPv4/TCP packets, connections to 10.0.0.1:9092."""

    def __init__(self, path: Path) -> None:
        self.f = open(path, "wb")
        self.f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262_144, 1))
        self.seq: dict[tuple[int, bool], int] = {}

    def send(self, ts_ns: int, conn: int, to_broker: bool, payload: bytes) -> None:
        client = bytes([10, 1, (conn >> 8) & 0xFF, conn & 0xFF])
        cport = 30_000 + (conn >> 16)
        for i in range(0, len(payload), SEGMENT):
            chunk = payload[i:i + SEGMENT]
            seq = self.seq.get((conn, to_broker), 1000)
            self.seq[(conn, to_broker)] = seq + len(chunk)
            ack = self.seq.get((conn, not to_broker), 1000)
            src, dst = (client, BROKER) if to_broker else (BROKER, client)
            sport, dport = (cport, 9092) if to_broker else (9092, cport)
            tcp = struct.pack(">HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF,
                              ack & 0xFFFFFFFF, 5 << 4, 0x18, 65535, 0, 0)
            ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(chunk), 0, 0x4000,
                             64, 6, 0, src, dst)
            frame = b"\x02\0\0\0\0\x01\x02\0\0\0\0\x02\x08\x00" + ip + tcp + chunk
            t = ts_ns + i // SEGMENT
            self.f.write(struct.pack("<IIII", t // 1_000_000_000, t % 1_000_000_000,
                                     len(frame), len(frame)))
            self.f.write(frame)

    def close(self) -> None:
        self.f.close()


T0 = 1_767_225_600_000_000_000      # 2026-01-01 UTC
US = 1000


def members_capture(path: Path, n: int) -> None:
    """One group of ``n`` members: join, sync, heartbeat, leave (see the module docstring)."""
    conns = max(1, n // MEMBERS_PER_CONNECTION)
    mids = [f"consumer-{i}-{i:08x}-0000-4000-8000-{i:012x}" for i in range(n)]
    leader = mids[0]
    pc = Pcap(path)
    corr = [0] * conns
    t = T0

    def phase(build) -> None:
        nonlocal t
        # requests of every member (pipelined per connection), then the answers in order
        asked = []
        for i in list(range(1, n)) + [0]:
            c = i % conns
            corr[c] += 1
            api, ver, req, rsp = build(i)
            pc.send(t, c, True, request(api, ver, corr[c], f"consumer-{i}", req))
            asked.append((c, corr[c], rsp))
            t += US
        t += 1_000 * US
        for c, k, rsp in asked:
            pc.send(t, c, False, response(k, rsp))
            t += US
        t += 1_000 * US

    phase(lambda i: (11, 5, join_request(mids[i]),
                     join_response(mids[i], leader, mids if i == 0 else [])))
    plans = [(m, assignment([j])) for j, m in enumerate(mids)]
    phase(lambda i: (14, 3, sync_request(mids[i], plans if i == 0 else []),
                     sync_response(plans[i][1])))
    phase(lambda i: (12, 3, heartbeat_request(mids[i]), struct.pack(">ih", 0, 0)))
    phase(lambda i: (13, 3, leave_request(mids[i]), leave_response(mids[i])))
    pc.close()


def partitions_capture(path: Path, p: int) -> None:
    """One member whose SyncGroup answer assigns ``p`` partitions of one topic."""
    mid = "consumer-1-00000000-0000-4000-8000-000000000000"
    pc = Pcap(path)
    t = T0
    pc.send(t, 0, True, request(11, 5, 1, "consumer-1", join_request(mid)))
    pc.send(t + US, 0, False, response(1, join_response(mid, mid, [mid])))
    pc.send(t + 2 * US, 0, True, request(14, 3, 2, "consumer-1", sync_request(mid, [])))
    parts = struct.pack(f">{p}i", *range(p)) if p <= 20_000_000 else None
    pc.send(t + 3 * US, 0, False, response(2, sync_response(assignment(parts))))
    pc.close()


# ---------------------------------------------------------------- measuring

def measure(cmd: list[str], timeout: float) -> tuple[float | None, int | None, str]:
    """(wall seconds, peak RSS in MiB, the end of stderr) of one command; (None, None, ...)
    when it ran longer than ``timeout``."""
    timed = ["/usr/bin/time", "-f", "%e %M"] + cmd
    t0 = time.perf_counter()
    # its own process group: a command stopped at the timeout takes its children with it
    proc = subprocess.Popen(timed, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None, None, "timeout"
    wall = time.perf_counter() - t0
    lines = err.strip().splitlines()
    rss = int(lines[-1].split()[1]) // 1024 if lines and lines[-1][:1].isdigit() else None
    note = "" if proc.returncode in (0, 1) else \
        f"exit {proc.returncode}: " + " | ".join(lines[-3:-1])[-200:]
    return wall, rss, note


def commands(capture: Path, out: Path, budgets: list[str]) -> dict[str, list[str]]:
    """The commands measured; ``budgets``: ``--budget`` values of the group commands."""
    ks = str(VENV_BIN / "kafkasniff")
    b = [x for v in budgets for x in ("--budget", v)]
    return {"stats": [ks, "stats", str(capture)],
            "groups": [ks, "groups", *b, str(capture)],
            "groups-json": [ks, "groups", "--json", *b, str(capture)],
            "export": [ks, "export", *b, str(capture), "-o", str(out)]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--members", type=int, nargs="*", default=[5_000, 20_000, 100_000])
    ap.add_argument("--partitions", type=int, nargs="*", default=[10_000_000])
    ap.add_argument("--commands", nargs="*",
                    default=["stats", "groups", "groups-json", "export"])
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--budget", action="append", default=[], metavar="NAME=VALUE",
                    help="pass --budget NAME=VALUE to groups and export (repeatable; e.g. "
                         "group_members=0 to analyse every member of 100 000)")
    ap.add_argument("--keep", type=Path, default=None,
                    help="write the captures here and keep them (default: a temporary "
                         "directory, removed)")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="kafkasniff-bench-groups-"))
    where = args.keep or tmp
    where.mkdir(parents=True, exist_ok=True)
    print(f"{'capture':<22} {'MB':>6}  " + "  ".join(f"{c:>18}" for c in args.commands))
    try:
        cases = [(f"members-{n}", members_capture, n) for n in args.members] + \
                [(f"partitions-{p}", partitions_capture, p) for p in args.partitions]
        for name, make, n in cases:
            cap = where / f"{name}.pcap"
            if not cap.exists():
                make(cap, n)
            cells = []
            base = None
            for c in args.commands:
                out = tmp / f"export-{name}"
                shutil.rmtree(out, ignore_errors=True)
                wall, rss, note = measure(commands(cap, out, args.budget)[c], args.timeout)
                shutil.rmtree(out, ignore_errors=True)
                if c == "stats":
                    base = wall
                if wall is None:
                    cell = f">{args.timeout:.0f} s"
                else:
                    ratio = f" ({wall / base:.1f}x)" if base and c != "stats" else ""
                    cell = f"{wall:.1f} s{ratio} {rss} MB"
                if note:
                    cell += " !"
                    print(f"  {name} {c}: {note}", file=sys.stderr)
                cells.append(cell)
            print(f"{name:<22} {cap.stat().st_size / 1e6:>6.1f}  " +
                  "  ".join(f"{x:>18}" for x in cells), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
