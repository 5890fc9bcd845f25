"""Helpers of the live capture tests: running ``kafkasniff live`` as a subprocess, capture
permission, JSON normalisation for comparisons with ``kafkasniff read``."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "captures"
PY = sys.executable
LIVE = [PY, "-c", "from kafkasniff.cli.live import live_command; live_command()"]
READ = [PY, "-m", "kafkasniff.cli", "read"]
READY = "kafkasniff: capturing on"


def capture_permission() -> str | None:
    """``None`` when this process may open packet sockets, else why not (skip reason)."""
    try:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    except PermissionError:
        return ("capturing needs root or CAP_NET_RAW (run the tests as root, or "
                "setcap cap_net_raw+eip on the venv's python)")
    except OSError as exc:
        return f"no packet sockets here: {exc}"
    s.close()
    return None


def broker_ports(capture: Path) -> list[int]:
    truth = capture.with_suffix(".truth.json")
    if truth.is_file():
        return list(json.loads(truth.read_text()).get("broker_ports", []))
    return []


def stream_session(capture: Path, workers: int):
    """A started ``LiveSession`` (output none, TUI on) of the stream backend reading
    ``capture`` from a pipe put on fd 0 while the backend opens it (fd 0 restored after),
    and the pipe's ``(read, write)`` fds: ``(session, r, w)``. The capture must fit in the
    pipe (64 kB); ``w`` stays open so the session keeps running: close both, and stop the
    session, when done."""
    from kafkasniff.live.backends import StreamBackend
    from kafkasniff.live.collector import LiveSession
    from kafkasniff.live.config import LiveConfig

    r, w = os.pipe()
    os.write(w, capture.read_bytes())
    saved = os.dup(0)
    os.dup2(r, 0)
    try:
        src = StreamBackend("-")
    finally:
        os.dup2(saved, 0)
        os.close(saved)
    cfg = LiveConfig(workers=workers, output="none", tui=True,
                     pipeline={"ports": frozenset(broker_ports(capture))})
    session = LiveSession(src, cfg)
    session.start()
    return session, r, w


def port_args(ports) -> list[str]:
    out: list[str] = []
    for p in ports:
        out += ["--port", str(p)]
    return out


def run_live(args: list[str], *, stdin=None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(LIVE + args, stdin=stdin if stdin is not None else subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout)


def run_read(args: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(READ + args, capture_output=True, text=True, timeout=timeout)


class LiveProcess:
    """``kafkasniff live`` in the background: started, waited for until it captures,
    stopped with a signal; stdout to a file, stderr collected."""

    def __init__(self, args: list[str], stdout_path: Path) -> None:
        self.args = args
        self.stdout_path = stdout_path
        self.stderr_lines: list[str] = []

    def start(self, timeout: float = 30) -> "LiveProcess":
        self._out = open(self.stdout_path, "w")
        self.proc = subprocess.Popen(LIVE + self.args, stdin=subprocess.DEVNULL,
                                     stdout=self._out, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + timeout
        fd = self.proc.stderr.fileno()
        buf = ""
        while READY not in buf:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                self.proc.kill()
                raise AssertionError(f"kafkasniff live did not start: {buf}"
                                     f"{self.proc.stderr.read()}")
            r, _, _ = select.select([fd], [], [], left)
            if r:
                chunk = os.read(fd, 4096).decode()
                if not chunk:
                    continue
                buf += chunk
        self.stderr_lines += buf.splitlines()
        self._t = threading.Thread(target=self._drain, daemon=True)
        self._t.start()
        return self

    def _drain(self) -> None:
        for line in self.proc.stderr:
            self.stderr_lines.append(line.rstrip("\n"))

    def stop(self, sig: int = signal.SIGINT, timeout: float = 60) -> int:
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        self._t.join(5)
        self._out.close()
        return rc

    @property
    def stderr(self) -> str:
        return "\n".join(self.stderr_lines)

    def json_lines(self) -> list[dict]:
        return [json.loads(line) for line in self.stdout_path.read_text().splitlines() if line]


TIME_KEYS = {"ts_ns", "first_ts_ns", "last_ts_ns", "latency_ns"}


def normalize(obj: dict, drop_times: bool = False) -> str:
    """A ``read --json`` / ``live --json`` object as a comparable string: without connection
    ids (live numbers them per decoder) and, with ``drop_times``, without timestamps (two
    sockets on loopback do not time a packet to the same nanosecond)."""
    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items()
                    if k != "connection_id" and not (k == "id" and "broker" in x)
                    and not (drop_times and k in TIME_KEYS)}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x
    return json.dumps(strip(obj), sort_keys=True)


def records_of(lines: list[dict], types=("exchange", "issue"), drop_times: bool = False
               ) -> Counter:
    return Counter(normalize(d, drop_times) for d in lines if d.get("type") in types)


def parse_json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


# --------------------------------------------------------------------------- traffic on lo


def kafka_frames(n: int) -> list[bytes]:
    """``n`` Ethernet frames replaying the repository's client captures with fresh endpoints
    (broker port 9092), addressed so that on ``lo`` only packet sockets see them
    (``bench/live_traffic.py``)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import live_traffic

    return live_traffic.build_frames(live_traffic.default_seeds(), n)


class Blaster:
    """Sends frames on ``lo`` through an ``AF_PACKET`` socket at about ``rate`` packets/s in
    a thread, until the frames run out or :meth:`stop`; ``sent`` counts them."""

    def __init__(self, frames: list[bytes], rate: float) -> None:
        self.frames = frames
        self.rate = rate
        self.sent = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "Blaster":
        self._t.start()
        return self

    def _run(self) -> None:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        try:
            s.bind(("lo", 0))
            t0 = time.monotonic()
            for fr in self.frames:
                if self._stop.is_set():
                    break
                ahead = self.sent / self.rate - (time.monotonic() - t0)
                if ahead > 0.001:
                    time.sleep(ahead)
                try:
                    s.send(fr)
                except BlockingIOError:
                    time.sleep(0.001)
                    continue
                self.sent += 1
        finally:
            s.close()

    def stop(self) -> int:
        self._stop.set()
        self._t.join(10)
        return self.sent

    @property
    def running(self) -> bool:
        return self._t.is_alive()


def pcapng_blocks(path) -> list[tuple[int, bytes]]:
    """``(block type, body)`` of every block of a little-endian pcapng file."""
    import struct

    data = Path(path).read_bytes()
    out, off = [], 0
    while off + 12 <= len(data):
        btype, blen = struct.unpack_from("<II", data, off)
        out.append((btype, data[off + 8:off + blen - 4]))
        off += blen
    return out


def isb_counters(body: bytes) -> dict[int, int]:
    """The 64-bit options of an Interface Statistics Block body (``4``: ``isb_ifrecv``,
    ``5``: ``isb_ifdrop``)."""
    import struct

    out, off = {}, 12
    while off + 4 <= len(body):
        code, length = struct.unpack_from("<HH", body, off)
        if code == 0:
            break
        if code in (4, 5):
            out[code] = struct.unpack_from("<Q", body, off + 4)[0]
        off += 4 + (length + 3) // 4 * 4
    return out
