"""``tcpdump -i lo`` for a scenario: start it, wait until it listens, stop it, check losses."""

from __future__ import annotations

import os
import re
import select
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from harness.values import now_ns


class Tcpdump:
    """``tcpdump -i lo`` writing a nanosecond pcap, filtered on TCP ports."""

    def __init__(self, path: Path, ports: list[int], iface: str = "lo",
                 late_packets: int = 1) -> None:
        self.path = path
        # packets the filter may count while SIGINT ends the capture, not written: traffic
        # that never stops (a live broker's own connections) sends them at any time
        self.late_packets = late_packets
        self.bpf = "tcp and (" + " or ".join(f"port {p}" for p in ports) + ")"
        # --immediate-mode + a 64 MiB ring: without them TPACKET_V3 hands packets over per
        # block and the last block is lost on SIGINT (seen: trailing packets missing).
        self.argv = ["tcpdump", "-i", iface, "-s", "0", "-U", "-n", "--immediate-mode",
                     "-B", "65536", "--time-stamp-precision=nano", "-w", str(path), self.bpf]
        self.proc: subprocess.Popen[bytes] | None = None
        self.stderr_lines: list[str] = []
        self._reader: threading.Thread | None = None
        self.started_ts_ns: int | None = None
        self.stopped_ts_ns: int | None = None

    def start(self, timeout_s: float = 10.0) -> None:
        """Start tcpdump and return once it printed "listening on" (SystemExit after
        ``timeout_s`` seconds or when it exits first)."""
        if shutil.which("tcpdump") is None:
            raise SystemExit("tcpdump not found on PATH")
        self.path.unlink(missing_ok=True)
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        assert self.proc.stderr is not None
        deadline = time.monotonic() + timeout_s
        buf = b""
        fd = self.proc.stderr.fileno()
        while b"listening on" not in buf:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                self.proc.kill()
                raise SystemExit(f"tcpdump did not start: {buf.decode(errors='replace')}")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 4096)
                if not chunk:
                    continue
                buf += chunk
        self.started_ts_ns = now_ns()  # the capture handle is live from here on
        self.stderr_lines += buf.decode(errors="replace").splitlines()
        self._reader = threading.Thread(target=self._drain, name="tcpdump-stderr", daemon=True)
        self._reader.start()
        # libpcap is live once tcpdump prints "listening on"; a short pause covers the
        # kernel attaching the filter to the socket before any scenario traffic.
        time.sleep(0.2)

    def capture_truth(self) -> dict[str, Any]:
        """The truth file's ``capture`` fields known once tcpdump is listening."""
        return {"interface": self.argv[2], "bpf_filter": self.bpf,
                "command": " ".join(self.argv[:-1] + [repr(self.bpf)]),
                "started_ts_ns": self.started_ts_ns}

    def kill(self) -> None:
        """After a failure: stop tcpdump at once (what it wrote is discarded)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def _drain(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for raw in self.proc.stderr:
            self.stderr_lines.append(raw.decode(errors="replace").rstrip())

    def stop(self) -> dict[str, Any]:
        """SIGINT tcpdump and return its statistics (``captured``, ``received_by_filter``,
        ``dropped_by_kernel``: packet counts); SystemExit when packets were dropped or lost."""
        assert self.proc is not None
        # -U writes per packet: let the last ones through the ring, until the file stops
        # growing (a loaded machine delivers the ring's last block late; seen losing the
        # last packets of a 1 MB transfer at SIGINT)
        time.sleep(0.2)
        size, stable_since, deadline = -1, time.monotonic(), time.monotonic() + 5
        while time.monotonic() < deadline:
            now = self.path.stat().st_size if self.path.exists() else 0
            if now != size:
                size, stable_since = now, time.monotonic()
            elif time.monotonic() - stable_since >= 0.3:
                break
            time.sleep(0.05)
        self.stopped_ts_ns = now_ns()
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise SystemExit("tcpdump did not stop on SIGINT")
        if self._reader is not None:
            self._reader.join(timeout=5)
        stats: dict[str, Any] = {}
        for line in self.stderr_lines:
            m = re.match(r"(\d+) packets? (captured|received by filter|dropped by kernel)", line)
            if m:
                stats[m.group(2).replace(" ", "_")] = int(m.group(1))
        if self.path.exists():  # tcpdump drops root privileges to user "tcpdump"
            st = self.path.parent.stat()
            os.chown(self.path, st.st_uid, st.st_gid)
        if stats.get("dropped_by_kernel"):
            raise SystemExit(f"tcpdump dropped packets: {stats}")
        # On Linux "lo" the filter sees every packet twice (outgoing and incoming copy) and
        # libpcap keeps one: anything else means packets were lost between the two, except
        # ``late_packets`` the filter counted while SIGINT ended the capture (a packet lost
        # mid-capture would also show as a gap in the decode).
        missing = stats.get("received_by_filter", 0) - 2 * stats.get("captured", -1)
        if self.argv[2] == "lo" and not 0 <= missing <= 2 * self.late_packets:
            raise SystemExit(f"tcpdump lost packets (stats {stats})")
        return stats


def start_tcpdump(path: Path, ports: list[int], truth: dict[str, Any]) -> Tcpdump:
    """Start tcpdump writing ``path`` (``OUT/NAME.pcap``) filtered on the TCP ``ports``;
    record it in ``truth["capture"]`` (interface, filter, command, start time)."""
    tcpdump = Tcpdump(path, ports)
    tcpdump.start()
    truth["capture"].update(tcpdump.capture_truth())
    return tcpdump


def stop_tcpdump(tcpdump: Tcpdump, truth: dict[str, Any]) -> None:
    """Stop tcpdump; record its stop time and statistics in ``truth["capture"]``."""
    stats = tcpdump.stop()
    truth["capture"].update({"stopped_ts_ns": tcpdump.stopped_ts_ns, "tcpdump_stats": stats})
