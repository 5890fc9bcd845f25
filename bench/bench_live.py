#!/usr/bin/env python3
"""Live capture benchmark: packet rate captured and decoded with zero drops, CPU per packet,
the rate where drops begin, next to ``tcpdump -w /dev/null`` on the same traffic.

Run as root (packet sockets)::

    .venv/bin/python bench/bench_live.py                    # everything (a few minutes)
    .venv/bin/python bench/bench_live.py --quick            # fewer, shorter steps
    .venv/bin/python bench/bench_live.py --rates 50000,100000 --seconds 5 --profiles steady

What it does, all on ``lo`` and in one run:

1. **Real Kafka traffic through librdkafka's mock cluster** (the load generator of the
   project: :mod:`tests.support.mock_cluster`): producers and consumers run for a few
   seconds while ``kafkasniff live`` and ``tcpdump`` capture at the same time. Reported: the
   packets/s and MB/s the clients and the mock reach on this machine and both tools' drops.
   tcpdump's file of that run is also the seed of profile ``steady`` below.
2. **Packet blaster** for higher rates (:mod:`live_traffic`): real Kafka conversations replayed
   with fresh client endpoints, payloads cut at an Ethernet MSS of 1448 bytes, sent with a
   raw ``AF_PACKET`` socket on ``lo`` at a paced rate (to a foreign MAC, so the IP stack
   discards them and only packet sockets see them). Two traffic profiles:

   * ``steady``: the produce/consume load of step 1 (batches of 1 KB records, Fetch long
     polls): what a busy broker mostly carries;
   * ``mix``: the repository's real client captures (``captures/*.pcap``: connection set-up,
     metadata, group protocol, admin, transactions, small records): far more exchanges per
     packet, the expensive case.

   For each rate, one fresh ``tcpdump -Q in -B 65536 -w /dev/null 'tcp port 9092'`` (the
   capture floor) and one fresh ``kafkasniff live -i lo --port 9092 --no-tui`` (lines to
   /dev/null, 2 decoders on this machine) each see the same frames; drops (kernel and
   queue), packets decoded, how long decoding went on after the blast (``drain_s``) and CPU
   seconds (user + system of the tool and all its processes, from the start of the blast to
   the end of decoding) are recorded, with the cores the blaster and other processes used
   meanwhile. A rate is *kept up* when nothing was dropped and decoding ended within 1 s of
   the blast (the 64 MB rings and 64 MB queues absorb a 6 s burst of small packets: that
   must not make a rate pass). Rates rise until kafkasniff falls behind twice in a row or the
   blaster reaches its limit.

Results: a table on stdout and ``bench/out/live.json``. The blaster, the tool and (in step
1) the mock cluster share this machine's cores: every figure is "on this machine, with the
load generator running".
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

import live_traffic  # noqa: E402

PY = sys.executable
LIVE = [PY, "-c", "from kafkasniff.cli.live import live_command; live_command()"]
OUT = HERE / "out"
DATA = HERE / "data"


# --------------------------------------------------------------------------- tools


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _self_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


_TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) used so far by ``pid`` and its live descendants."""
    total = 0.0
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / _TICK
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                for c in f.read().split():
                    total += tree_cpu(int(c))
    except (OSError, IndexError, ValueError):
        pass
    return total


def machine_busy() -> float:
    """CPU seconds all cores have been busy since boot (from /proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return (sum(v[:8]) - idle) / _TICK


def others_busy(seconds: float = 1.0) -> float:
    """Cores used by other processes over ``seconds`` (this process is idle meanwhile)."""
    b0, s0 = machine_busy(), _self_cpu()
    time.sleep(seconds)
    return max(0.0, (machine_busy() - b0 - (_self_cpu() - s0)) / seconds)


def wait_quiet(limit_s: float, threshold: float = 0.25) -> float:
    """Wait (at most ``limit_s``) until other processes use less than ``threshold`` cores;
    returns the last measurement."""
    deadline = time.monotonic() + limit_s
    load = others_busy()
    while load > threshold and time.monotonic() < deadline:
        load = others_busy(2.0)
    return load


class Tool:
    """A capture tool run as a subprocess: started, waited for ready, stopped with SIGINT."""

    def __init__(self, argv: list[str], ready: str, name: str, env: dict | None = None) -> None:
        self.argv = argv
        self.ready = ready
        self.name = name
        self.env = env
        self.stderr: list[str] = []

    def start(self) -> None:
        self.cpu0 = _children_cpu()
        env = dict(os.environ, **self.env) if self.env else None
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True, env=env)
        deadline = time.monotonic() + 30
        while True:
            line = self.proc.stderr.readline()
            if not line:
                raise SystemExit(f"{self.name} did not start: {' '.join(self.stderr)}")
            self.stderr.append(line.rstrip())
            if self.ready in line:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"{self.name} did not start in time")
        self._t = threading.Thread(target=self._drain, daemon=True)
        self._t.start()
        time.sleep(0.3)

    def _drain(self) -> None:
        for line in self.proc.stderr:
            self.stderr.append(line.rstrip())

    def stop(self) -> float:
        """SIGINT, wait; returns CPU seconds used (the tool and its waited-for children)."""
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._t.join(5)
        return _children_cpu() - self.cpu0


def tcpdump_tool(filter_expr: str, buffer_mb: int = 64) -> Tool:
    return Tool(["tcpdump", "-i", "lo", "-Q", "in", "-n", "-s", "0", "-B", str(buffer_mb * 1024),
                 "-w", "/dev/null", filter_expr], "listening on", "tcpdump")


def tcpdump_counts(lines: list[str]) -> dict:
    out = {}
    for line in lines:
        m = re.match(r"(\d+) packets? (captured|received by filter|dropped by kernel)", line)
        if m:
            out[m.group(2).replace(" ", "_")] = int(m.group(1))
    return {"captured": out.get("captured"), "kernel_received": out.get("received_by_filter"),
            "kernel_drops": out.get("dropped_by_kernel"), "queue_drops": 0,
            "decoded": None}


def kafkasniff_tool(ports: list[int], workers: int | None, buffer_mb: int = 64,
                    extra: list[str] | None = None, pure: bool = False) -> Tool:
    argv = LIVE + ["-i", "lo", "--no-tui", "-B", str(buffer_mb), "--stats-every", "0.2"]
    for p in ports:
        argv += ["--port", str(p)]
    if workers:
        argv += ["--workers", str(workers)]
    # KAFKASNIFF_PROFILE=times: each process prints its CPU time when it ends
    # pure: the decoders run the plain Python sources, not the compiled modules
    env = {"KAFKASNIFF_PROFILE": "times"}
    if pure:
        env["KAFKASNIFF_PURE_PYTHON"] = "1"
    return Tool(argv + (extra or []), "kafkasniff: capturing on", "kafkasniff", env=env)


_SUMMARY = re.compile(r"(?P<ex>\d+) exchanges.*?; (?P<dec>\d+) packets decoded.*?captured "
                      r"(?P<cap>\d+) packets.*?kernel: (?P<rec>\d+) received, (?P<kd>\d+) "
                      r"dropped.*?queue drops (?P<qd>\d+)")


_TIMES = re.compile(r"^(kafkasniff-\S+): wall \S+ user ([\d.]+)s sys ([\d.]+)s")


def kafkasniff_counts(lines: list[str]) -> dict:
    procs: dict = {}
    for line in lines:
        t = _TIMES.match(line)
        if t:
            procs[t[1]] = round(float(t[2]) + float(t[3]), 2)
    for line in lines:
        m = _SUMMARY.search(line)
        if m:
            return {"captured": int(m["cap"]), "kernel_received": int(m["rec"]),
                    "kernel_drops": int(m["kd"]), "queue_drops": int(m["qd"]),
                    "decoded": int(m["dec"]), "exchanges": int(m["ex"]),
                    "process_cpu_s_with_startup": procs}
    raise SystemExit("no kafkasniff summary:\n" + "\n".join(lines[-20:]))


# --------------------------------------------------------------------------- blaster


def blast(frames: list[bytes], rate: float) -> tuple[int, float]:
    """Send ``frames`` on ``lo`` at ``rate`` packets/s (paced every millisecond). Returns
    (frames sent, seconds)."""
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    s.bind(("lo", 0))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 << 20)
    send = s.send
    n = len(frames)
    i = 0
    clock = time.perf_counter
    t0 = clock()
    while i < n:
        target = min(n, int((clock() - t0) * rate) + 1)
        if target <= i:
            time.sleep(0.0002)
            continue
        while i < target:
            try:
                send(frames[i])
            except BlockingIOError:
                time.sleep(0.0001)
                continue
            i += 1
    dt = clock() - t0
    s.close()
    return n, dt


_STATS = re.compile(r"stats: .*?packets (\d+) .*?kernel drops (\d+|n/a)  queue drops (\d+)  "
                    r"backlog (\d+)")


def drain(tool: Tool, sent: int, timeout: float = 120.0) -> float:
    """After the blast: seconds until kafkasniff has read every packet the kernel took and
    decoded all of it (its stats lines: ``backlog 0``). 0 for tcpdump."""
    if tool.name != "kafkasniff":
        time.sleep(0.5)
        return 0.0
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        time.sleep(0.1)
        for line in reversed(tool.stderr):
            m = _STATS.search(line)
            if m:
                got, kd, backlog = int(m[1]), m[2], int(m[4])
                kd = 0 if kd == "n/a" else int(kd)
                if backlog == 0 and got + kd >= sent:
                    return time.monotonic() - t0
                break
    return time.monotonic() - t0


def trial(tool: Tool, frames: list[bytes], rate: float, counts, quiet_s: float = 0) -> dict:
    """One tool, one rate. CPU is measured from the start of the blast until the tool has
    decoded everything it captured (start-up and shutdown left out), with the cores the
    blaster and other processes used meanwhile; ``drain_s`` is how long decoding went on
    after the blast (large when the decoders only keep up thanks to the buffers)."""
    others_before = wait_quiet(quiet_s) if quiet_s else None
    tool.start()
    pid = tool.proc.pid
    c0, b0, s0 = tree_cpu(pid), machine_busy(), _self_cpu()
    t0 = time.monotonic()
    sent, dt = blast(frames, rate)
    drain_s = drain(tool, sent)
    window = time.monotonic() - t0
    cpu = tree_cpu(pid) - c0
    blaster = _self_cpu() - s0
    others = max(0.0, machine_busy() - b0 - cpu - blaster)
    total_cpu = tool.stop()
    c = counts(tool.stderr)
    got = c["captured"] or 0
    # tcpdump loses the tail of its ring at SIGINT (not a drop: it never read it); its own
    # kernel counter is the drop figure
    drops = (c["kernel_drops"] or 0) + (c["queue_drops"] or 0)
    complete = got >= sent if tool.name == "kafkasniff" else True
    # kept up: no drop, and decoding finished within a second of the blast (the ring and
    # queue buffers absorb bursts; they must not be what makes a rate "pass")
    kept_up = drops == 0 and complete and drain_s <= 1.0
    return {"tool": tool.name, "target_pps": rate, "sent": sent, "seconds": round(dt, 3),
            "sent_pps": round(sent / dt), "drain_s": round(drain_s, 2),
            "decode_pps": round((c.get("decoded") or got) / (dt + drain_s)),
            "cpu_s": round(cpu, 3),
            "cpu_us_per_packet": round(cpu / sent * 1e6, 2) if sent else None,
            "cpu_cores": round(cpu / window, 2), "cpu_s_with_startup": round(total_cpu, 2),
            "blaster_cores": round(blaster / window, 2),
            "other_cores": round(others / window, 2),
            "others_before": None if others_before is None else round(others_before, 2),
            **c, "zero_drops": drops == 0 and complete, "kept_up": kept_up}


# --------------------------------------------------------------------------- mock load


def mock_load(seconds: float, workers: int | None, seed_path: Path) -> dict:
    """Real Kafka traffic through librdkafka's mock cluster, captured by kafkasniff and
    tcpdump at the same time (tcpdump's file becomes the ``steady`` seed)."""
    from confluent_kafka import Consumer, Producer

    from tests.support.mock_cluster import MockCluster

    with MockCluster(num_brokers=3) as c:
        c.create_topic("load", 6)
        ports = c.broker_ports
        bpf = "tcp and (" + " or ".join(f"port {p}" for p in ports) + ")"
        td = Tool(["tcpdump", "-i", "lo", "-n", "-s", "0", "-B", "65536",
                   "--time-stamp-precision=nano", "-w", str(seed_path), bpf],
                  "listening on", "tcpdump")
        ks = kafkasniff_tool(ports, workers)
        td.start()
        ks.start()
        t0 = time.monotonic()
        stop = t0 + seconds
        consumed = [0, 0]

        def consume(i: int) -> None:
            from confluent_kafka import TopicPartition

            cons = Consumer({"bootstrap.servers": c.bootstrap_servers, "group.id": "bench",
                             "fetch.wait.max.ms": 50, "client.id": f"bench-consumer-{i}"})
            # three partitions each, from the start (no group join: it can take seconds)
            cons.assign([TopicPartition("load", p, -2) for p in range(i * 3, i * 3 + 3)])
            while time.monotonic() < stop + 1:
                m = cons.poll(0.2)
                if m is not None and not m.error():
                    consumed[i] += 1
            cons.close()

        threads = [threading.Thread(target=consume, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        p = Producer({"bootstrap.servers": c.bootstrap_servers, "linger.ms": 5,
                      "client.id": "bench-producer", "compression.type": "none",
                      "acks": "all"})
        value = os.urandom(500).hex().encode()
        produced = 0
        while time.monotonic() < stop:
            for _ in range(200):
                try:
                    p.produce("load", key=str(produced).encode(), value=value)
                    produced += 1
                except BufferError:
                    p.poll(0.01)
            p.poll(0)
            time.sleep(0.005)
        p.flush(15)
        for t in threads:
            t.join()
        dt = time.monotonic() - t0
        del p
        time.sleep(0.3)
        ks_cpu = ks.stop()
        td.stop()
    kc = kafkasniff_counts(ks.stderr)
    tc = tcpdump_counts(td.stderr)
    size = seed_path.stat().st_size
    return {"seconds": round(dt, 2), "produced": produced, "consumed": sum(consumed),
            "packets": kc["captured"], "pps": round(kc["captured"] / dt),
            "mb_per_s": round(size / dt / 1e6, 1), "exchanges": kc.get("exchanges"),
            "kafkasniff": {**kc, "cpu_s": round(ks_cpu, 2)}, "tcpdump": tc}


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default="25000,50000,75000,100000,125000,150000,175000,200000",
                    help="packet rates to try (comma-separated)")
    ap.add_argument("--seconds", type=float, default=6.0, help="blast duration per step")
    ap.add_argument("--profiles", default="steady,mix")
    ap.add_argument("--workers", type=int, default=None, help="kafkasniff decoders")
    ap.add_argument("--mock-seconds", type=float, default=6.0)
    ap.add_argument("--quick", action="store_true", help="3 s steps, fewer rates")
    ap.add_argument("--no-tcpdump", action="store_true")
    ap.add_argument("--pure", action="store_true",
                    help="also run kafkasniff as plain Python at each rate "
                         "(KAFKASNIFF_PURE_PYTHON=1: the fallback without compiled modules)")
    ap.add_argument("--wait-quiet", type=float, default=120.0, metavar="S",
                    help="before each step, wait up to S s for other processes to go quiet "
                         "(the machine is shared); their load is recorded either way")
    ap.add_argument("-o", "--output", type=Path, default=OUT / "live.json")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("bench_live needs root (packet sockets)", file=sys.stderr)
        return 2
    rates = [int(r) for r in args.rates.split(",")]
    seconds = args.seconds
    if args.quick:
        seconds = 3.0
        rates = [r for r in rates if r in (50000, 100000, 150000, 200000)] or rates
    DATA.mkdir(exist_ok=True)
    OUT.mkdir(exist_ok=True)
    results: dict = {"machine": {"cores": os.cpu_count(), "python": sys.version.split()[0],
                                 "kernel": os.uname().release},
                     "seconds_per_step": seconds}

    seed = DATA / "mock_load.pcap"
    print(f"mock cluster load for {args.mock_seconds:.0f} s ...", flush=True)
    results["mock"] = mock_load(args.mock_seconds, args.workers, seed)
    m = results["mock"]
    print(f"  {m['packets']} packets in {m['seconds']} s = {m['pps']} packets/s, "
          f"{m['mb_per_s']} MB/s "
          f"(produced {m['produced']}, consumed {m['consumed']}); kafkasniff drops "
          f"{m['kafkasniff']['kernel_drops']}+{m['kafkasniff']['queue_drops']}, "
          f"tcpdump drops {m['tcpdump']['kernel_drops']}", flush=True)

    profiles = {"steady": [str(seed)], "mix": live_traffic.default_seeds()}
    results["profiles"] = {}
    for name in args.profiles.split(","):
        n = int(max(rates) * seconds)
        print(f"profile {name}: building {n} frames ...", flush=True)
        frames = live_traffic.build_frames(profiles[name], n)
        avg = sum(map(len, frames)) / len(frames)
        steps = []
        fails = 0
        for rate in rates:
            part = frames[:int(rate * seconds)]
            row = {"rate": rate}
            if not args.no_tcpdump:
                row["tcpdump"] = trial(tcpdump_tool("tcp port 9092"), part, rate,
                                       tcpdump_counts, args.wait_quiet)
            row["kafkasniff"] = trial(kafkasniff_tool([9092], args.workers), part, rate,
                                      kafkasniff_counts, args.wait_quiet)
            if args.pure:
                row["pure"] = trial(kafkasniff_tool([9092], args.workers, pure=True), part,
                                    rate, kafkasniff_counts, args.wait_quiet)
                p = row["pure"]
                print(f"  {rate:>7} pps: plain Python kafkasniff drops "
                      f"{p['kernel_drops']}+{p['queue_drops']} decoded {p['decoded']}/"
                      f"{p['sent']} kept up {p['kept_up']}", flush=True)
            steps.append(row)
            k = row["kafkasniff"]
            t = row.get("tcpdump", {})
            print(f"  {rate:>7} pps: sent {k['sent_pps']:>7}/s  kafkasniff drops "
                  f"{k['kernel_drops']}+{k['queue_drops']} decoded {k['decoded']}/{k['sent']} "
                  f"drain {k['drain_s']} s "
                  f"cpu {k['cpu_us_per_packet']} us/pkt ({k['cpu_cores']} cores; blaster "
                  f"{k['blaster_cores']}, others {k['other_cores']})  |  tcpdump drops "
                  f"{t.get('kernel_drops')} cpu {t.get('cpu_us_per_packet')} us/pkt",
                  flush=True)
            fails = 0 if k["kept_up"] or row.get("pure", {}).get("kept_up") else fails + 1
            if fails >= 2 or k["sent_pps"] < 0.9 * rate:
                break                   # twice behind, or the blaster is at its limit
        ok = [r["rate"] for r in steps if r["kafkasniff"]["kept_up"]]
        pure_ok = [r["rate"] for r in steps if r.get("pure", {}).get("kept_up")]
        first_drop = next((r["rate"] for r in steps if not r["kafkasniff"]["zero_drops"]), None)
        td_ok = [r["rate"] for r in steps if r.get("tcpdump", {}).get("zero_drops")]
        results["profiles"][name] = {
            "frames": len(frames), "avg_frame_bytes": round(avg, 1), "steps": steps,
            "max_zero_drop_pps": max(ok) if ok else 0, "drops_begin_pps": first_drop,
            "pure_max_zero_drop_pps": (max(pure_ok) if pure_ok else 0) if args.pure else None,
            "max_decode_pps": max(r["kafkasniff"]["decode_pps"] for r in steps),
            "tcpdump_max_zero_drop_pps": max(td_ok) if td_ok else 0}
        del frames
    args.output.write_text(json.dumps(results, indent=1))
    print(f"wrote {args.output}")
    for name, p in results["profiles"].items():
        print(f"{name}: kept up with zero drops up to {p['max_zero_drop_pps']} pps, drops "
              f"from {p['drops_begin_pps']} pps, decoded at most {p['max_decode_pps']} pps; "
              f"tcpdump zero drops up to {p['tcpdump_max_zero_drop_pps']} pps"
              + (f"; plain Python kept up to {p['pure_max_zero_drop_pps']} pps"
                 if p.get("pure_max_zero_drop_pps") is not None else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
