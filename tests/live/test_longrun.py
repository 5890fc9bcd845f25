"""A long run: a generated stream of Kafka traffic (real conversations replayed with fresh
endpoints, connections opening and closing all the time) through the whole live engine,
with memory sampled; it must stay flat once the pipeline's time-bounded tables are full."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import threading
import time

import pytest

from .helpers import LIVE, ROOT

RATE_PPS = 12_000
PACKETS = 192_000           # a fixed amount of traffic (16 s at RATE_PPS), whatever the speed
WARM_PACKETS = 96_000       # past this, the pipeline's time-bounded tables are full
TS_STEP_NS = 1_000_000      # 1 ms of capture time per packet: 60 s of capture in 60k packets


def _rss_kb(pid: int) -> int:
    """Private resident memory (``RssAnon``): the shared-memory packet queues (a fixed
    ``--queue-mb``, touched page by page as they fill the first time) are left out."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _tree(pid: int) -> list[int]:
    out = [pid]
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                for c in f.read().split():
                    out += _tree(int(c))
    except OSError:
        pass
    return out


def _generate(stdin, stop: threading.Event, counts: list) -> None:
    """Write a pcap stream of ``PACKETS`` packets paced at ``RATE_PPS`` (slower if the
    machine is); ``counts[0]`` is the packets written so far."""
    sys.path.insert(0, str(ROOT / "bench"))
    import live_traffic

    seeds = live_traffic.default_seeds()
    stdin.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1))
    ts = 1_700_000_000 * 10**9
    net = 1
    t0 = time.monotonic()
    sent = 0
    counts.append(0)
    try:
        while not stop.is_set() and sent < PACKETS:
            # one replica at a time: whole conversations, every connection ends (connections
            # left open are bounded by the pipeline's connection table and idle timeout, not
            # by this test's few seconds)
            frames = live_traffic.build_frames(seeds, 30_000, net=net, replicas=1)
            net = net % 250 + 1
            frames = frames[:PACKETS - sent]
            for i in range(0, len(frames), 500):
                chunk = []
                for fr in frames[i:i + 500]:
                    ts += TS_STEP_NS
                    chunk.append(struct.pack("<IIII", ts // 10**9, ts % 10**9, len(fr),
                                             len(fr)))
                    chunk.append(fr)
                stdin.write(b"".join(chunk))
                sent += len(frames[i:i + 500])
                counts[0] = sent
                ahead = sent / RATE_PPS - (time.monotonic() - t0)
                if ahead > 0:
                    time.sleep(ahead)
                if stop.is_set():
                    break
    except BrokenPipeError:
        pass


@pytest.mark.slow
def test_memory_stays_flat_over_a_long_stream():
    p = subprocess.Popen(LIVE + ["-r", "-", "--no-tui", "--port", "9092", "--workers", "2",
                                 "--stats-every", "2"],
                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=False)
    stop = threading.Event()
    counts: list = []
    gen = threading.Thread(target=_generate, args=(p.stdin, stop, counts), daemon=True)
    gen.start()
    samples = []
    while gen.is_alive():
        gen.join(1.0)
        assert p.poll() is None, p.stderr.read().decode()
        samples.append((counts[0] if counts else 0,
                        sum(_rss_kb(x) for x in _tree(p.pid))))
    stop.set()
    p.stdin.close()
    assert p.wait(timeout=60) == 0
    err = p.stderr.read().decode()
    summary = [line for line in err.splitlines() if line.startswith("summary:")][0]
    decoded = int(summary.split(" packets decoded")[0].rsplit(" ", 1)[1])
    captured = int(summary.split("captured ")[1].split(" ")[0])
    queue_drops = int(summary.split("queue drops ")[1].split(";")[0])
    # every packet accounted for: decoded or counted as dropped, none lost silently
    assert counts[0] == PACKETS and captured == PACKETS, summary
    assert decoded + queue_drops == captured, summary
    assert decoded > 150_000, summary      # enough went through for memory to mean something
    # once WARM_PACKETS were sent the pipeline's time-bounded tables (60 s of capture time of
    # closed-flow tombstones, here 60k packets) are full: from then on memory must not grow
    warm = [kb for sent, kb in samples if sent >= WARM_PACKETS]
    growth_mb = (max(warm[len(warm) // 2:]) - warm[0]) / 1024
    assert growth_mb < 6, (growth_mb, samples)
