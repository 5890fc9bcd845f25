"""Live capture on ``lo`` under load (real Kafka conversations replayed through a packet
socket): the counters of the ``--write`` statistics blocks and of the stats lines are
current, and stopping with a backlog says what is left and can be cut short."""

from __future__ import annotations

import glob
import json
import signal
import time

import pytest

from .helpers import (Blaster, LiveProcess, capture_permission, isb_counters, kafka_frames,
                      pcapng_blocks)

pytestmark = pytest.mark.skipif(capture_permission() is not None,
                                reason=capture_permission() or "")


def test_pcapng_statistics_blocks_and_stats_lines_are_current(tmp_path):
    """Each rotated file's Interface Statistics Block counts the packets the kernel received
    since the start when the file was closed: at least every packet written so far (they
    once carried counters up to 0.35 s old, fewer than the file held), and the last file's
    equals the final summary (it once carried the counters from before the stop's drain).
    The periodic stats never show more packets than the kernel received."""
    out = tmp_path / "x.pcapng"
    live = LiveProcess(["-i", "lo", "--no-tui", "--json", "--port", "9092", "--workers", "2",
                        "--stats-every", "0.2", "-w", str(out), "--ring-size", "0.4"],
                       tmp_path / "out.jsonl").start()
    blaster = Blaster(kafka_frames(40_000), rate=12_000).start()
    time.sleep(2.5)
    assert blaster.running
    rc = live.stop(signal.SIGINT, timeout=120)      # while packets still arrive
    blaster.stop()
    assert rc == 0, live.stderr
    lines = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines() if x]
    stats = [d for d in lines if d.get("type") == "stats"]
    final = stats[-1]
    assert final["final"] and final["kernel_drops"] == 0
    assert final["kernel_received"] == final["packets"] > 10_000
    periodic = stats[:-1]
    assert len(periodic) >= 5
    for d in periodic:
        assert d["kernel_received"] >= d["packets"], d

    files = sorted(glob.glob(str(tmp_path / "x-*.pcapng")))
    assert len(files) >= 4
    written = 0
    for f in files:
        blocks = pcapng_blocks(f)
        written += sum(1 for t, _ in blocks if t == 6)
        isbs = [isb_counters(b) for t, b in blocks if t == 5]
        assert len(isbs) == 1, f
        assert isbs[0][4] >= written, (f, isbs[0], written)
    assert written == final["written_packets"] == final["packets"]
    assert isbs[0] == {4: final["kernel_received"], 5: final["kernel_drops"]}
