"""Live capture on ``lo`` under load (real Kafka conversations replayed through a packet
socket): the counters of the ``--write`` statistics blocks and of the stats lines are
current, and stopping with a backlog says what is left and can be cut short."""

from __future__ import annotations

import glob
import json
import os
import re
import signal
import time

import pytest

from .helpers import (
    Blaster,
    LiveProcess,
    capture_permission,
    isb_counters,
    kafka_frames,
    pcapng_blocks,
)

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


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/children") as f:
            out += [int(c) for c in f.read().split()]
    return sorted(out)


def _with_backlog(tmp_path, *extra: str) -> tuple[LiveProcess, int]:
    """``live`` with one decoder, stopped (SIGSTOP) while 20,000 packets arrive: they wait
    in the ring and the queue, a backlog that stays until the decoder continues. Then
    SIGINT (unless ``--duration`` in ``extra`` stops it)."""
    live = LiveProcess(["-i", "lo", "--no-tui", "--port", "9092", "--workers", "1"]
                       + list(extra), tmp_path / "out.txt").start()
    kids = _children(live.proc.pid)
    assert len(kids) == 2, kids            # the decoder (forked first), the capture process
    decoder = kids[0]
    os.kill(decoder, signal.SIGSTOP)
    blaster = Blaster(kafka_frames(20_000), rate=50_000).start()
    blaster._t.join(60)
    assert blaster.sent == 20_000
    time.sleep(0.5)                         # the last blocks retire (10 ms)
    if "--duration" not in extra:
        live.proc.send_signal(signal.SIGINT)
    return live, decoder


def _wait_line(live: LiveProcess, start: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in list(live.stderr_lines):
            if line.startswith(start):
                return line
        time.sleep(0.05)
    raise AssertionError(f"no {start!r} line: {live.stderr}")


def test_stop_with_a_backlog_says_what_is_left(tmp_path):
    """After Ctrl-C the decoders finish what was captured before the stop; that once went on
    without a word (up to 30 s): now a line on stderr says what is left, periodically."""
    live, decoder = _with_backlog(tmp_path)
    try:
        line = _wait_line(live, "kafkasniff: stopping (SIGINT)")
        left = int(re.search(r"([\d,]+) left", line).group(1).replace(",", ""))
        assert 0 < left <= 20_000, line
        assert "Ctrl-C again to stop at once" in line
        _wait_line(live, "kafkasniff: stopping (SIGINT), 2.")   # periodically
    finally:
        os.kill(decoder, signal.SIGCONT)
    assert live.proc.wait(timeout=120) == 0, live.stderr
    live._t.join(5)
    live._out.close()
    summary = [x for x in live.stderr_lines if x.startswith("summary:")][0]
    assert "captured 20000 packets" in summary and "queue drops 0" in summary


def _ctrl_c_once_stopping(live, decoder: int, stopping: str) -> int:
    """Ctrl-C once ``live`` says ``stopping``; its exit code (killed, decoder resumed, if
    it has not exited within 30 s)."""
    try:
        _wait_line(live, stopping)
        live.proc.send_signal(signal.SIGINT)
        rc = live.proc.wait(timeout=30)
    finally:
        if live.proc.poll() is None:
            os.kill(decoder, signal.SIGCONT)
            live.proc.kill()
    live._t.join(5)
    live._out.close()
    return rc


def test_second_ctrl_c_stops_at_once(tmp_path):
    live, decoder = _with_backlog(tmp_path)
    rc = _ctrl_c_once_stopping(live, decoder, "kafkasniff: stopping (SIGINT)")
    assert rc == 130
    assert not any(x.startswith("summary:") for x in live.stderr_lines)
    for pid in (decoder,):                  # nothing left behind
        assert not os.path.exists(f"/proc/{pid}") or \
            open(f"/proc/{pid}/stat").read().split()[2] == "Z"


def test_ctrl_c_during_a_duration_stop_stops_at_once(tmp_path):
    """A stop already under way (--duration, -c, q in the TUI) is cut short by the first
    Ctrl-C, as its progress line says."""
    live, decoder = _with_backlog(tmp_path, "--duration", "1")
    rc = _ctrl_c_once_stopping(live, decoder, "kafkasniff: stopping (duration)")
    assert rc == 130
