"""``kafkasniff live -r PATH`` reads a named FIFO as it reads stdin (issue 45, item 6): what
arrives is decoded while the writer is quiet, and Ctrl-C stops in order while the writer
writes nothing (a FIFO read as a file blocked in ``read``: no line came out, and the stop
waited for the writer)."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from .helpers import CAPTURES, LiveProcess, run_read

JAVA = CAPTURES / "broker_java.pcap"


def test_fifo_decoded_while_the_writer_is_quiet_and_stopped_in_order(tmp_path):
    fifo = tmp_path / "capture.fifo"
    os.mkfifo(fifo)
    want = sorted(run_read(["-q", str(JAVA)]).stdout.splitlines())
    # the whole capture, then the writer keeps the FIFO open and writes nothing
    writer = subprocess.Popen(["sh", "-c", 'exec > "$1"; cat "$0"; exec sleep 600',
                               str(JAVA), str(fifo)])
    out = tmp_path / "out.txt"
    live = LiveProcess(["-r", str(fifo), "--no-tui", "--workers", "2"], out)
    try:
        live.start()
        deadline = time.monotonic() + 60
        while len(out.read_text().splitlines()) < len(want):
            assert time.monotonic() < deadline, (
                f"{len(out.read_text().splitlines())} of {len(want)} lines while the writer "
                f"is quiet")
            time.sleep(0.1)
        rc = live.stop(signal.SIGINT, timeout=60)
    finally:
        writer.kill()
        writer.wait()
        if live.proc.poll() is None:
            live.proc.kill()
    assert rc == 0, live.stderr
    assert sorted(out.read_text().splitlines()) == want
    summary = [ln for ln in live.stderr_lines if ln.startswith("summary:")]
    assert summary and summary[0].startswith("summary: 137 exchanges"), live.stderr
