#!/usr/bin/env python3
"""Regenerate the Kafka packet captures in ``captures/`` and their ground truth.

Usage (as root, because tcpdump captures on the loopback interface)::

    .venv/bin/python captures/make_captures.py                 # every scenario
    .venv/bin/python captures/make_captures.py kafka_python    # some scenarios
    .venv/bin/python captures/make_captures.py --list
    .venv/bin/python captures/make_captures.py --crafted        # crafted_* (craft_captures.py)

For each scenario the script starts a librdkafka mock Kafka cluster
(:class:`tests.support.mock_cluster.MockCluster`, brokers on random 127.0.0.1
ports), starts ``tcpdump -i lo`` filtered on the broker ports, runs real Kafka clients
(confluent-kafka/librdkafka, kafka-python, aiokafka) against it, closes them, stops
tcpdump with SIGINT and writes two files:

* ``captures/NAME.pcap``: the packets (nanosecond pcap, Linux loopback = Ethernet);
* ``captures/NAME.truth.json``: what the clients and the mock said happened, recorded
  from client callbacks, client debug logs and the mock's request tracking, never from
  the pcap. The decoder's tests compare their decode against it. See captures/README.md
  for the field list.

``tls_handshake`` has no mock cluster: a Python ``ssl`` server on 127.0.0.1:9093 and
TLS clients (librdkafka, Python ssl). Traffic no client or the mock can produce (SASL, old
compressed message sets, Kafka 0.7, ...) is built by ``captures/craft_captures.py``.

Byte strings in the truth files are hex (``*_hex``) with a ``*_text`` convenience copy
when they are printable UTF-8. Wall-clock times are ``*_ts_ns`` (ns since the epoch).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import logging
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from _common import TRUTH_FORMAT, dump_truth, text_or_none  # noqa: E402

from kafkasniff.protocol.schema import load_definitions  # noqa: E402
from tests.support.mock_cluster import MockCluster, librdkafka_version  # noqa: E402

CAPTURES = ROOT / "captures"
log = logging.getLogger("make_captures")

# Kafka API and error names, as the decoder names them (kafkasniff's generated definitions).
DEFS = load_definitions()
API_NAMES: dict[int, str] = {key: info.name for key, info in DEFS.apis.items()}
API_KEYS: dict[str, int] = {name: key for key, name in API_NAMES.items()}
# librdkafka's own spellings (rd_kafka_ApiKey2str)
API_KEYS.update({"ApiVersion": 18, "Offset": 2, "GroupCoordinator": 10})

TIMESTAMP_TYPES = {0: "NotAvailable", 1: "CreateTime", 2: "LogAppendTime"}


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def api_name(key: int | None) -> str | None:
    return None if key is None else API_NAMES.get(key, f"ApiKey{key}")


# --------------------------------------------------------------------------- values


def now_ns() -> int:
    return time.time_ns()


def _bytes(b: bytes | str | None) -> bytes | None:
    if b is None or isinstance(b, bytes):
        return b
    return b.encode()


def record_fields(key: bytes | None, value: bytes | None,
                  headers: list[tuple[str, bytes | None]] | None) -> dict[str, Any]:
    """The Kafka record content in the truth-file layout."""
    key, value = _bytes(key), _bytes(value)
    return {
        "key_hex": None if key is None else key.hex(),
        "key_text": text_or_none(key),
        "value_hex": None if value is None else value.hex(),
        "value_text": text_or_none(value),
        "headers": [[name, None if hv is None else _bytes(hv).hex()]
                    for name, hv in (headers or [])],
    }


# --------------------------------------------------------------------------- tcpdump


class Tcpdump:
    """``tcpdump -i lo`` writing a nanosecond pcap, filtered on TCP ports."""

    def __init__(self, path: Path, ports: list[int], iface: str = "lo") -> None:
        self.path = path
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
        assert self.proc is not None
        time.sleep(0.2)  # -U writes per packet; let the last ones through the ring
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
        # libpcap keeps one: anything else means packets were lost between the two.
        if self.argv[2] == "lo" and \
                stats.get("received_by_filter") != 2 * stats.get("captured", -1):
            raise SystemExit(f"tcpdump lost packets (stats {stats})")
        return stats


def start_tcpdump(name: str, ports: list[int], truth: dict[str, Any]) -> Tcpdump:
    """Start tcpdump writing ``captures/NAME.pcap``; record it in ``truth["capture"]``."""
    tcpdump = Tcpdump(CAPTURES / f"{name}.pcap", ports)
    tcpdump.start()
    truth["capture"].update(tcpdump.capture_truth())
    return tcpdump


def stop_tcpdump(tcpdump: Tcpdump, truth: dict[str, Any]) -> None:
    """Stop tcpdump; record its stop time and statistics in ``truth["capture"]``."""
    stats = tcpdump.stop()
    truth["capture"].update({"stopped_ts_ns": tcpdump.stopped_ts_ns, "tcpdump_stats": stats})


# --------------------------------------------------------------------------- client logs


class _Collect(logging.Handler):
    """Logging handler calling ``fn(record, ts_ns)`` for every record."""

    def __init__(self, fn: Callable[[logging.LogRecord, int], None]) -> None:
        super().__init__(logging.DEBUG)
        self.fn = fn

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.fn(record, now_ns())
        except Exception:  # never break the client because of the recorder
            self.handleError(record)


@contextmanager
def _collecting(fn: Callable[[logging.LogRecord, int], None], *names: str) -> Iterator[None]:
    """While the block runs, the loggers ``names`` send every record (DEBUG and up) to
    ``fn`` only (not propagated); their level and propagation are restored after."""
    handler = _Collect(fn)
    loggers = [logging.getLogger(n) for n in names]
    saved = [(lg.level, lg.propagate) for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.DEBUG)
        lg.propagate = False
        lg.addHandler(handler)
    try:
        yield
    finally:
        for lg, (level, prop) in zip(loggers, saved):
            lg.removeHandler(handler)
            lg.setLevel(level)
            lg.propagate = prop


_RDK_SENT = re.compile(
    r"^(?P<fac>\S+) \[(?P<client>[^\]]+)\] \[thrd:(?P<thread>[^\]]*)\]: (?P<broker>\S+): "
    r"Sent (?P<api>\w+)Request \(v(?P<ver>\d+), (?P<bytes>\d+) bytes @ (?P<at>\d+), "
    r"CorrId (?P<corr>\d+)\)")
_RDK_RECV = re.compile(
    r"^(?P<fac>\S+) \[(?P<client>[^\]]+)\] \[thrd:(?P<thread>[^\]]*)\]: (?P<broker>\S+): "
    r"Received (?P<api>\w+)Response \(v(?P<ver>\d+), (?P<bytes>\d+) bytes, "
    r"CorrId (?P<corr>\d+), rtt (?P<rtt>[\d.]+)ms\)")
_RDK_CONNECTED = re.compile(
    r"^(?P<fac>\S+) \[(?P<client>[^\]]+)\] \[thrd:(?P<thread>[^\]]*)\]: (?P<broker>\S+): "
    r"Connected \(#(?P<n>\d+)\)")
_RDK_TIMEOUT = re.compile(
    r"^(?P<fac>\S+) \[(?P<client>[^\]]+)\] \[thrd:(?P<thread>[^\]]*)\]: (?P<broker>\S+): "
    r"Timed out (?P<api>\w+)Request in flight \(after (?P<after>\d+)ms")
_RDK_INTERESTING = re.compile(
    r"encountered error|Timed out|Retrying|marking the coordinator|failed|response error|"
    r"error \"(?!Success)|Disconnected|[Uu]nsupported|unknown CorrId|underflow")
_BROKER_PORT = re.compile(r"^[^:/]+:(\d+)/")
_BROKER_ID = re.compile(r"/(\d+)$")


def _broker_port(broker: str) -> int | None:
    m = _BROKER_PORT.match(broker)
    return int(m.group(1)) if m else None


def _broker_id(broker: str) -> int | None:
    """librdkafka handle names end in /<node id>, /bootstrap or /GroupCoordinator..."""
    m = _BROKER_ID.search(broker)
    return int(m.group(1)) if m else None


class RequestLog:
    """Requests as the clients report them, keyed by (client, connection, correlation id).

    ``connection`` names the client-side connection: for librdkafka the broker handle
    (``host:port/nodeid`` or ``host:port/bootstrap``), which owns one TCP connection at a
    time; for kafka-python ``node=ID[host:port]<-localport``; for aiokafka ``host:port``.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.index: dict[tuple[str, str, int], dict[str, Any]] = {}
        self.connects: list[dict[str, Any]] = []
        self.unmatched: list[str] = []
        self.other_lines: list[str] = []
        # (pattern, callback(label, match, ts_ns)): extra librdkafka log lines a scenario
        # wants (e.g. idempotence PIDs and batches); empty for the original scenarios.
        self.watchers: list[tuple[re.Pattern[str], Callable[[str, re.Match[str], int], None]]] = []

    # librdkafka ------------------------------------------------------------
    def rdkafka_logger(self, label: str) -> logging.Logger:
        """A logger to pass as confluent-kafka's ``logger`` (with ``debug: protocol``)."""
        logger = logging.getLogger(f"make_captures.rdkafka.{label}")
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
        logger.handlers[:] = [_Collect(lambda r, ts: self._rdkafka_line(label, r, ts))]
        return logger

    def _rdkafka_line(self, label: str, record: logging.LogRecord, ts: int) -> None:
        line = record.getMessage()
        with self.lock:
            for pattern, fn in self.watchers:
                if wm := pattern.search(line):
                    fn(label, wm, ts)
            if m := _RDK_SENT.match(line):
                key = (label, m["broker"], int(m["corr"]))
                api_key = API_KEYS.get(m["api"])
                if api_key is None:
                    self.unmatched.append(line)
                entry = {
                    "client": label,
                    "client_instance": m["client"],
                    "connection": m["broker"],
                    "broker_id": _broker_id(m["broker"]),
                    "broker_port": _broker_port(m["broker"]),
                    "local_port": None,
                    "api_key": api_key,
                    "api_name": api_name(api_key),
                    "api_version": int(m["ver"]),
                    "correlation_id": int(m["corr"]),
                    "request_bytes": int(m["bytes"]),
                    "logged_sent_ts_ns": ts,
                    "response": None,
                }
                self.requests.append(entry)
                self.index[key] = entry
            elif m := _RDK_RECV.match(line):
                entry = self.index.get((label, m["broker"], int(m["corr"])))
                if entry is None:
                    self.unmatched.append(line)
                    return
                entry["response"] = {"status": "received", "api_version": int(m["ver"]),
                                     "response_bytes": int(m["bytes"]),
                                     "client_rtt_ms": float(m["rtt"]),
                                     "logged_ts_ns": ts}
            elif m := _RDK_TIMEOUT.match(line):
                # librdkafka does not log the CorrId here: take the oldest unanswered
                # request of that API on that connection.
                for entry in self.requests:
                    if (entry["client"], entry["connection"], entry["api_key"]) == (
                            label, m["broker"], API_KEYS.get(m["api"])) \
                            and entry["response"] is None:
                        entry["response"] = {"status": "timed_out",
                                             "client_timeout_after_ms": int(m["after"]),
                                             "logged_ts_ns": ts}
                        break
                self.other_lines.append(line)
            elif m := _RDK_CONNECTED.match(line):
                self.connects.append({"client": label, "connection": m["broker"],
                                      "broker_id": _broker_id(m["broker"]),
                                      "broker_port": _broker_port(m["broker"]),
                                      "connect_number": int(m["n"]), "logged_ts_ns": ts})
            elif _RDK_INTERESTING.search(line) and len(self.other_lines) < 200:
                self.other_lines.append(line)

    # kafka-python ----------------------------------------------------------
    @contextmanager
    def kafka_python(self, label: str) -> Iterator[None]:
        """Record kafka-python 3.x requests from its DEBUG logs while the block runs."""
        local_ports: dict[str, int] = {}
        conn_re = re.compile(r"node_id=(\S+) host=\[([^\]<]+)<-(\d+)\]")

        def on_record(record: logging.LogRecord, ts: int) -> None:
            if record.name == "kafka.net.connection" and record.msg.endswith("Connection made"):
                m = conn_re.search(str(record.args[0]))
                if m:
                    local_ports[f"node={m[1]}[{m[2]}]"] = int(m[3])
                return
            if record.name != "kafka.protocol.parser":
                return
            if record.msg.startswith("%s Sending request"):
                ident, corr, req = record.args
                with self.lock:
                    lport = local_ports.get(ident)
                    conn = f"{ident}<-{lport}"
                    port = re.search(r":(\d+)\]$", ident)
                    node = re.match(r"node=(\d+)\[", ident)
                    entry = {
                        "client": label, "client_instance": label, "connection": conn,
                        "broker_id": int(node[1]) if node else None,
                        "broker_port": int(port[1]) if port else None,
                        "local_port": lport,
                        "api_key": int(req.API_KEY), "api_name": api_name(int(req.API_KEY)),
                        "api_version": int(req.API_VERSION), "correlation_id": int(corr),
                        "request_bytes": None, "logged_sent_ts_ns": ts,
                        "expects_response": bool(req.expect_response()),
                        "response": None,
                    }
                    self.requests.append(entry)
                    self.index[(label, conn, int(corr))] = entry
            elif record.msg.startswith("%s Received response"):
                ident, corr, _resp = record.args
                with self.lock:
                    conn = f"{ident}<-{local_ports.get(ident)}"
                    entry = self.index.get((label, conn, int(corr)))
                    if entry is None:
                        self.unmatched.append(f"{label} {ident} response {corr}")
                    else:
                        entry["response"] = {"status": "received", "logged_ts_ns": ts}

        with _collecting(on_record, "kafka.protocol.parser", "kafka.net.connection"):
            yield

    # aiokafka --------------------------------------------------------------
    @contextmanager
    def aiokafka(self, label: str) -> Iterator[None]:
        """Record aiokafka requests from ``aiokafka.conn`` DEBUG logs while the block runs."""

        def on_record(record: logging.LogRecord, ts: int) -> None:
            if record.msg.startswith("Request to %s:%d %d"):
                host, port, corr, req = record.args
                conn = f"{host}:{port}"
                api_key = int(req.API_KEY)
                with self.lock:
                    entry = {
                        "client": label, "client_instance": label, "connection": conn,
                        "broker_id": None, "broker_port": int(port), "local_port": None,
                        "api_key": api_key, "api_name": api_name(api_key),
                        "api_version": int(req.API_VERSION), "correlation_id": int(corr),
                        "request_bytes": None, "logged_sent_ts_ns": ts, "response": None,
                    }
                    self.requests.append(entry)
                    self.index[(label, conn, int(corr))] = entry
            elif record.msg.startswith("Response from %s:%d %d"):
                host, port, corr, _resp = record.args
                with self.lock:
                    entry = self.index.get((label, f"{host}:{port}", int(corr)))
                    if entry is None:
                        self.unmatched.append(f"{label} {host}:{port} response {corr}")
                    else:
                        entry["response"] = {"status": "received", "logged_ts_ns": ts}

        with _collecting(on_record, "aiokafka.conn"):
            yield

    def summary(self) -> dict[str, Any]:
        counts: Counter[str] = Counter(r["api_name"] or "?" for r in self.requests)
        return {"count": len(self.requests), "count_by_api": dict(sorted(counts.items()))}


# --------------------------------------------------------------------------- run


_ACTIVE_RUNS: list[Run] = []


class Run:
    """One scenario: a mock cluster, a capture, and the truth being recorded."""

    def __init__(self, name: str, description: str, num_brokers: int = 3) -> None:
        self.name = name
        self.cluster = MockCluster(num_brokers=num_brokers)
        # librdkafka's request-tracking clock is CLOCK_MONOTONIC in microseconds
        self.mono_to_epoch_ns = time.time_ns() - time.monotonic_ns()
        self.log = RequestLog()
        self.tcpdump: Tcpdump | None = None
        self.truth: dict[str, Any] = {
            "format": TRUTH_FORMAT,
            "scenario": name,
            "description": description,
            "generated_by": "captures/make_captures.py",
            "generated_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "pcap": f"{name}.pcap",
            "client_library": {},
            "mock_cluster": {"librdkafka_version": librdkafka_version(),
                             "num_brokers": num_brokers},
            "broker_ports": self.cluster.broker_ports,
            "broker_port_by_id": {str(k): v for k, v in self.cluster.broker_port_by_id.items()},
            "bootstrap_servers": self.cluster.bootstrap_servers,
            "topics": {},
            "capture": {},
            "produced": [],
            "consumed": [],
            "requests": [],
            "request_summary": {},
            "mock_requests": {},
            "injected": [],
            "notes": [],
        }
        self._produce_lock = threading.Lock()
        _ACTIVE_RUNS.append(self)

    def abort(self) -> None:
        """After a failure: stop tcpdump (keeping nothing) and close the cluster."""
        if self.tcpdump is not None:
            self.tcpdump.kill()
        self.cluster.close()

    # topology / injection --------------------------------------------------
    def create_topic(self, name: str, partitions: int) -> None:
        self.cluster.create_topic(name, partitions)
        self.truth["topics"][name] = partitions

    def inject(self, kind: str, **details: Any) -> None:
        """Apply a fault to the mock and record it under ``injected``."""
        c = self.cluster
        if kind == "request_errors":
            c.push_request_errors(details["api_key"], *details["error_codes"])
        elif kind == "broker_rtt":
            c.broker_set_rtt(details["broker_id"], details["rtt_ms"])
        elif kind == "broker_request_error_rtts":
            c.broker_push_request_error_rtts(details["broker_id"], details["api_key"],
                                             *[tuple(x) for x in details["errors_and_rtts"]])
        else:
            raise ValueError(kind)
        entry = {"kind": kind, **details, "applied_ts_ns": now_ns()}
        if "api_key" in details:
            entry["api_name"] = api_name(details["api_key"])
        if "error_codes" in details:
            entry["error_names"] = [DEFS.error_name(e) for e in details["error_codes"]]
        if "broker_id" in details and details["broker_id"] >= 0:
            entry["broker_port"] = c.broker_port_by_id[details["broker_id"]]
        self.truth["injected"].append(entry)

    # capture ---------------------------------------------------------------
    def start_capture(self, track_requests: bool = True) -> None:
        """Start tcpdump on the broker ports, then (``track_requests``) the mock's request
        tracking."""
        self.tcpdump = start_tcpdump(self.name, self.cluster.broker_ports, self.truth)
        if track_requests:
            self.cluster.start_request_tracking()

    def stop_capture(self) -> None:
        assert self.tcpdump is not None
        stop_tcpdump(self.tcpdump, self.truth)

    # records ---------------------------------------------------------------
    def add_produced(self, **fields: Any) -> None:
        with self._produce_lock:
            self.truth["produced"].append(fields)

    def rdkafka_delivery(self, client: str, key: Any, value: Any, headers: Any,
                         sent_ts_ns: int, timestamp_ms: int) -> Callable[[Any, Any], None]:
        """A confluent-kafka on_delivery callback that records the message.

        ``timestamp_ms`` is the CreateTime the script passed to produce(): the value in the
        record on the wire. The delivery report's timestamp is kept separately: the mock
        answers Produce with LogAppendTime 1234, which librdkafka then reports.
        """

        def on_delivery(err: Any, msg: Any) -> None:
            ts_type, ts_ms = msg.timestamp()
            offset = msg.offset()
            self.add_produced(
                client=client, topic=msg.topic(), partition=msg.partition(),
                offset=offset if offset is not None and offset >= 0 else None,
                **record_fields(key, value, headers),
                timestamp_ms=timestamp_ms,
                delivery_report_timestamp=[TIMESTAMP_TYPES.get(ts_type, ts_type), ts_ms],
                produce_call_ts_ns=sent_ts_ns, delivery_report_ts_ns=now_ns(),
                error=None if err is None else err.name(),
            )

        return on_delivery

    def add_consumed(self, client: str, topic: str, partition: int, offset: int,
                     key: Any, value: Any, headers: Any, timestamp_ms: int | None) -> None:
        self.truth["consumed"].append(dict(
            client=client, topic=topic, partition=partition, offset=offset,
            **record_fields(key, value, headers), timestamp_ms=timestamp_ms,
            received_ts_ns=now_ns()))

    def rdkafka_consumed(self, client: str, msg: Any) -> None:
        ts_type, ts_ms = msg.timestamp()
        self.add_consumed(client, msg.topic(), msg.partition(), msg.offset(), msg.key(),
                          msg.value(), msg.headers(), ts_ms if ts_type != 0 else None)
        self.truth["consumed"][-1]["timestamp_type"] = TIMESTAMP_TYPES.get(ts_type, ts_type)

    def finish(self) -> Path:
        """Collect tracking + logs, close the cluster, write the truth file."""
        reqs = self.cluster.get_requests()
        self.cluster.stop_request_tracking()
        self.cluster.close()
        t = self.truth
        by_key = Counter(r.api_key for r in reqs)
        by_broker: dict[str, Counter[str]] = {}
        for r in reqs:
            by_broker.setdefault(str(r.broker_id), Counter())[api_name(r.api_key) or "?"] += 1
        t["mock_requests"] = {
            "tracking": "started right after tcpdump was listening; stopped after it stopped"
                        if not t["capture"].get("mid_stream") else
                        "covers the whole run (before and after the capture window)",
            "count": len(reqs),
            "count_by_api_key": {str(k): v for k, v in sorted(by_key.items())},
            "count_by_api": {api_name(k): v for k, v in sorted(by_key.items())},
            "count_by_broker_and_api": {b: dict(sorted(c.items()))
                                        for b, c in sorted(by_broker.items())},
            "requests": [{"api_key": r.api_key, "api_name": api_name(r.api_key),
                          "broker_id": r.broker_id,
                          "broker_port": self.cluster.broker_port_by_id.get(r.broker_id),
                          "ts_us_monotonic": r.timestamp_us,
                          "ts_ns": r.timestamp_us * 1000 + self.mono_to_epoch_ns}
                         for r in reqs],
        }
        ports = self.cluster.broker_port_by_id
        port_ids = {v: k for k, v in ports.items()}
        with self.log.lock:
            for entry in self.log.requests + self.log.connects:
                if entry.get("broker_port") is None and entry.get("broker_id") in ports:
                    entry["broker_port"] = ports[entry["broker_id"]]
                if entry.get("broker_id") is None and entry.get("broker_port") in port_ids \
                        and not str(entry.get("connection", "")).endswith("/bootstrap"):
                    entry["broker_id"] = port_ids[entry["broker_port"]]
            t["requests"] = self.log.requests
            t["request_summary"] = self.log.summary()
            t["client_connections"] = self.log.connects
            if self.log.unmatched:
                t["notes"].append({"unparsed_client_log_lines": self.log.unmatched[:50]})
            if self.log.other_lines:
                t["client_log_excerpts"] = self.log.other_lines[:200]
        t["produced"].sort(key=lambda m: (m["produce_call_ts_ns"], m["topic"],
                                          m["partition"], m["offset"] or -1))
        path = CAPTURES / f"{self.name}.truth.json"
        path.write_text(dump_truth(t))
        return path


# --------------------------------------------------------------------------- helpers


def confluent_version() -> dict[str, str]:
    import confluent_kafka

    return {"name": "confluent-kafka", "version": confluent_kafka.version()[0],
            "librdkafka_version": confluent_kafka.libversion()[0]}


def rdkafka_conf(run: Run, label: str, **extra: Any) -> dict[str, Any]:
    conf = {
        "bootstrap.servers": run.cluster.bootstrap_servers,
        "client.id": label,
        "debug": "protocol",
        "logger": run.log.rdkafka_logger(label),
        # no KIP-714 metrics pushes: keep the captures about the scenario
        "enable.metrics.push": False,
    }
    conf.update(extra)
    return conf


def settle(seconds: float = 0.3) -> None:
    time.sleep(seconds)


def rdkafka_consume(run: Run, consumer: Any, label: str, want: int,
                    timeout_s: float = 20.0, drain_s: float = 0.0) -> int:
    """Poll ``consumer`` until ``want`` messages arrived (or timeout); record them.

    With ``drain_s`` > 0, keep polling after that until no message came for ``drain_s``.
    """
    got = 0
    deadline = time.monotonic() + timeout_s
    last = time.monotonic()
    while time.monotonic() < deadline:
        if got >= want and time.monotonic() - last >= drain_s:
            break
        msg = consumer.poll(0.2 if got < want else min(0.2, drain_s))
        if msg is None:
            continue
        last = time.monotonic()
        if msg.error():
            run.truth["notes"].append(f"{label} poll error: {msg.error().name()}")
            continue
        run.rdkafka_consumed(label, msg)
        got += 1
    if got < want:
        run.truth["notes"].append(f"{label} received {got} of {want} messages before timeout")
    return got


ORDER_MESSAGES: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = [
    (b"order-0001", b'{"order":1,"item":"widget","qty":3}',
     [("trace-id", b"trace-0001"), ("source", b"kafkasniff")]),
    (b"order-0002", b'{"order":2,"item":"gadget","qty":1}', [("trace-id", b"trace-0002")]),
    (b"order-0003", b'{"order":3,"item":"sprocket","qty":12}', []),
    (None, b"no-key-order-0004", [("null-key", b"yes")]),
    (b"order-0005", b"", [("empty-value", b"yes")]),
    (b"order-0006", None, [("tombstone", b"yes")]),
    (b"order-0007", b'{"order":7,"item":"\xc3\xa9clair","qty":2}', []),
    (None, b"no-key-order-0008", []),
    (b"order-0009", b"x" * 300, [("big", b"300 bytes")]),
    (b"order-0010", b'{"order":10}', [("dup", b"first"), ("dup", b"second")]),
]
EVENT_MESSAGES: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = [
    (b"event-01", bytes(range(0, 256, 5)), [("bin-header", b"\x00\x01\x02\xff")]),
    (b"event-02", b"\x00\xff\x00\xfe\x80\x81", [("null-header", None)]),
    (b"\x00\x01binary-key", b"binary key, text value", []),
    (b"event-04", b"click", [("user", b"u-42"), ("session", b"s-9")]),
    (b"event-05", b"view", []),
    (None, b"\xde\xad\xbe\xef", [("null-key", b"yes")]),
    (b"event-07", b"purchase", [("amount", b"19.99")]),
    (b"event-08", "unicode \u2603 snowman".encode(), []),
    (b"event-09", b"", []),
    (b"event-10", b"last event", [("last", b"true")]),
]


def rdkafka_produce_all(run: Run, producer: Any, label: str, topic: str,
                        messages: list[tuple[Any, Any, Any]], *,
                        partition_for: Callable[[int], int | None] = lambda i: None,
                        timestamp_for: Callable[[int], int | None] = lambda i: None) -> None:
    for i, (key, value, headers) in enumerate(messages):
        kwargs: dict[str, Any] = {"key": key, "value": value}
        if headers:
            kwargs["headers"] = headers
        if (p := partition_for(i)) is not None:
            kwargs["partition"] = p
        ts = timestamp_for(i)
        kwargs["timestamp"] = ts = now_ms() if ts is None else ts
        producer.produce(topic, on_delivery=run.rdkafka_delivery(label, key, value, headers,
                                                                  now_ns(), ts), **kwargs)
        producer.poll(0)


def check_flush(producer: Any, timeout_s: float = 15.0) -> None:
    left = producer.flush(timeout_s)
    if left:
        raise SystemExit(f"{left} messages not delivered within {timeout_s} s")


# --------------------------------------------------------------------------- scenarios


def scenario_librdkafka_produce_consume() -> Run:
    from confluent_kafka import Consumer, Producer

    run = Run("librdkafka_produce_consume",
              "confluent-kafka producer (acks=all, no compression) writes 20 records to two "
              "3-partition topics (keys, null keys, empty and null values, binary values, "
              "headers), then a consumer-group member subscribes, reads them all, commits "
              "synchronously and closes.")
    run.truth["client_library"] = confluent_version()
    run.create_topic("ks-orders", 3)
    run.create_topic("ks-events", 3)
    run.start_capture()

    producer = Producer(rdkafka_conf(run, "ks-producer-1", acks="all",
                                     **{"compression.type": "none", "linger.ms": 5}))
    # first wave: explicit partitions and keys; one explicit timestamp
    rdkafka_produce_all(run, producer, "ks-producer-1", "ks-orders", ORDER_MESSAGES,
                        partition_for=lambda i: i % 3 if i < 3 else None,
                        timestamp_for=lambda i: 1700000000000 if i == 2 else None)
    check_flush(producer)
    # second wave: a separate set of Produce requests
    rdkafka_produce_all(run, producer, "ks-producer-1", "ks-events", EVENT_MESSAGES)
    check_flush(producer)
    settle()

    want = len(run.truth["produced"])
    consumer = Consumer(rdkafka_conf(run, "ks-consumer-1", **{
        "group.id": "ks-group-1", "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "fetch.wait.max.ms": 100,
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000}))
    consumer.subscribe(["ks-orders", "ks-events"])
    rdkafka_consume(run, consumer, "ks-consumer-1", want)
    committed = consumer.commit(asynchronous=False)
    run.truth["committed"] = [{"topic": tp.topic, "partition": tp.partition,
                               "offset": tp.offset} for tp in committed or []]
    consumer.close()
    producer.flush(1)
    producer.poll(0.1)  # serve the last log lines
    del producer
    settle()
    run.stop_capture()
    return run


def scenario_librdkafka_admin() -> Run:
    from confluent_kafka import Consumer, Producer, TopicCollection, TopicPartition
    from confluent_kafka.admin import (
        AdminClient,
        ConfigResource,
        NewPartitions,
        NewTopic,
        OffsetSpec,
    )

    run = Run("librdkafka_admin",
              "confluent-kafka AdminClient calls against the mock: the ones the mock serves "
              "(Metadata-based list/describe, DescribeCluster via Metadata, ListOffsets, "
              "OffsetFetch) and ones librdkafka refuses before sending because the mock does "
              "not advertise the API (CreateTopics, DescribeConfigs, DeleteRecords, ...).")
    run.truth["client_library"] = confluent_version()
    run.create_topic("ks-admin", 3)
    run.cluster.set_controller_id(1)
    run.truth["mock_cluster"]["controller_id"] = 1

    # Before the capture: some records and a committed group offset to describe.
    pre = Producer({"bootstrap.servers": run.cluster.bootstrap_servers, "linger.ms": 0})
    for i in range(3):
        pre.produce("ks-admin", key=b"pre-%d" % i, value=b"preloaded", partition=0)
    check_flush(pre)
    del pre
    c = Consumer({"bootstrap.servers": run.cluster.bootstrap_servers,
                  "group.id": "ks-admin-group", "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("ks-admin", 0, 2)], asynchronous=False)
    c.close()
    run.truth["preloaded"] = {"ks-admin": {"0": 3}, "committed": {
        "ks-admin-group": [{"topic": "ks-admin", "partition": 0, "offset": 2}]},
        "note": "written before the capture started; not in the pcap"}

    run.start_capture()
    admin = AdminClient(rdkafka_conf(run, "ks-admin-1"))
    results: list[dict[str, Any]] = []

    def call(name: str, fn: Callable[[], Any], show: Callable[[Any], Any] = repr) -> None:
        admin.poll(0.05)  # serves librdkafka's log queue (the request records)
        t0 = now_ns()
        try:
            res = fn()
            results.append({"operation": name, "ok": True, "result": show(res),
                            "started_ts_ns": t0, "ended_ts_ns": now_ns()})
        except Exception as exc:  # record real failures
            err = exc.args[0] if exc.args else exc
            code = getattr(err, "name", lambda: None)()
            results.append({"operation": name, "ok": False, "error": code,
                            "error_text": str(err), "started_ts_ns": t0,
                            "ended_ts_ns": now_ns()})

    opts = {"request_timeout": 3}
    call("list_topics", lambda: admin.list_topics(timeout=5),
         lambda md: {"topics": sorted(md.topics), "brokers": sorted(
             [b.id, b.host, b.port] for b in md.brokers.values()),
             "controller_id": md.controller_id, "cluster_id": md.cluster_id})
    call("describe_cluster", lambda: admin.describe_cluster(**opts).result(10),
         lambda r: {"cluster_id": r.cluster_id, "controller": r.controller.id
                    if r.controller else None, "nodes": sorted(n.id for n in r.nodes)})
    call("describe_topics",
         lambda: admin.describe_topics(TopicCollection(["ks-admin"]), **opts)["ks-admin"]
         .result(10),
         lambda r: {"name": r.name, "partitions": [[p.id, p.leader.id if p.leader else None]
                                                   for p in r.partitions]})
    call("list_offsets_latest",
         lambda: admin.list_offsets({TopicPartition("ks-admin", 0): OffsetSpec.latest()},
                                    **opts)[TopicPartition("ks-admin", 0)].result(10),
         lambda r: {"offset": r.offset})
    call("list_offsets_earliest",
         lambda: admin.list_offsets({TopicPartition("ks-admin", 0): OffsetSpec.earliest()},
                                    **opts)[TopicPartition("ks-admin", 0)].result(10),
         lambda r: {"offset": r.offset})
    from confluent_kafka import ConsumerGroupTopicPartitions

    call("list_consumer_group_offsets",
         lambda: admin.list_consumer_group_offsets(
             [ConsumerGroupTopicPartitions("ks-admin-group",
                                           [TopicPartition("ks-admin", 0)])],
             **opts)["ks-admin-group"].result(10),
         lambda r: [[tp.topic, tp.partition, tp.offset] for tp in r.topic_partitions])
    call("list_consumer_groups", lambda: admin.list_consumer_groups(**opts).result(10),
         lambda r: {"valid": sorted(g.group_id for g in r.valid),
                    "errors": [str(e) for e in r.errors]})
    call("describe_consumer_groups",
         lambda: admin.describe_consumer_groups(["ks-admin-group"], **opts)["ks-admin-group"]
         .result(10))
    call("create_topics",
         lambda: admin.create_topics([NewTopic("ks-admin-new", 2, 1)], **opts)
         ["ks-admin-new"].result(10))
    call("create_partitions",
         lambda: admin.create_partitions([NewPartitions("ks-admin", 4)], **opts)["ks-admin"]
         .result(10))
    call("describe_configs",
         lambda: list(admin.describe_configs([ConfigResource("topic", "ks-admin")], **opts)
                      .values())[0].result(10))
    call("delete_records",
         lambda: list(admin.delete_records([TopicPartition("ks-admin", 0, 1)], **opts)
                      .values())[0].result(10))
    call("delete_topics",
         lambda: admin.delete_topics(["ks-admin"], **opts)["ks-admin"].result(10))
    run.truth["admin_results"] = results
    settle()
    admin.poll(0.1)
    del admin
    settle()
    run.stop_capture()
    run.truth["notes"].append(
        "Operations with ok=false and error _UNSUPPORTED_FEATURE were refused by librdkafka "
        "before sending anything: the mock's ApiVersions response does not list that API.")
    return run


def scenario_librdkafka_errors_latency() -> Run:
    from confluent_kafka import Consumer, KafkaException, Producer

    run = Run("librdkafka_errors_latency",
              "Injected broker errors and latency. Producer: the first two Produce requests "
              "on broker 1 fail with NOT_LEADER_OR_FOLLOWER (6) and are retried, the third "
              "is answered after 150 ms; broker 2 answers everything 40 ms late; the first "
              "Produce on broker 3 is answered after 2500 ms, so the producer's 1000 ms "
              "socket.timeout.ms fires first (request unanswered on that connection, "
              "reconnect, retry; the record is written twice). Consumer: its first "
              "FindCoordinator gets COORDINATOR_NOT_AVAILABLE (15), its first Fetch "
              "NOT_LEADER_OR_FOLLOWER (6) and its first OffsetCommit NOT_COORDINATOR (16).")
    run.truth["client_library"] = confluent_version()
    run.create_topic("ks-errors", 3)  # the mock puts partition p's leader on broker p+1
    run.start_capture()
    run.inject("broker_request_error_rtts", broker_id=1, api_key=0,
               errors_and_rtts=[[6, 0], [6, 0], [0, 150]],
               effect="the next 3 Produce requests on broker 1: error 6, error 6, "
                      "success after 150 ms")
    run.inject("broker_rtt", broker_id=2, rtt_ms=40,
               effect="every response from broker 2 is delayed 40 ms")
    run.inject("broker_request_error_rtts", broker_id=3, api_key=0,
               errors_and_rtts=[[0, 2500]],
               effect="the next Produce on broker 3 is answered after 2500 ms (after the "
                      "client gave up at 1000 ms and closed the connection)")
    debug = "protocol,msg,cgrp"
    producer = Producer(rdkafka_conf(run, "ks-producer-err", acks="all", debug=debug, **{
        "linger.ms": 0, "retry.backoff.ms": 50, "socket.timeout.ms": 1000,
        "message.timeout.ms": 15000}))
    msgs = [(b"err-%02d" % i, b"payload with errors %02d" % i, [("attempt", b"%d" % i)])
            for i in range(6)]
    rdkafka_produce_all(run, producer, "ks-producer-err", "ks-errors", msgs,
                        partition_for=lambda i: i % 3)
    check_flush(producer, 20)
    settle(0.5)

    run.inject("request_errors", api_key=10, error_codes=[15], scope="cluster",
               effect="the next FindCoordinator fails with COORDINATOR_NOT_AVAILABLE")
    run.inject("request_errors", api_key=1, error_codes=[6], scope="cluster",
               effect="the next Fetch fails with NOT_LEADER_OR_FOLLOWER")
    run.inject("request_errors", api_key=8, error_codes=[16], scope="cluster",
               effect="the next OffsetCommit fails with NOT_COORDINATOR")
    consumer = Consumer(rdkafka_conf(run, "ks-consumer-err", debug=debug, **{
        "group.id": "ks-errors-group", "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "fetch.wait.max.ms": 100,
        "session.timeout.ms": 6000, "retry.backoff.ms": 50}))
    consumer.subscribe(["ks-errors"])
    # 6 records, plus the copies written by the timed-out-then-retried Produce
    rdkafka_consume(run, consumer, "ks-consumer-err", len(msgs) + 1, timeout_s=10,
                    drain_s=1.0)
    commits = []
    for attempt in range(3):
        try:
            res = consumer.commit(asynchronous=False)
            commits.append({"attempt": attempt, "ok": True, "offsets": [
                [tp.topic, tp.partition, tp.offset] for tp in res or []]})
            break
        except KafkaException as exc:
            commits.append({"attempt": attempt, "ok": False, "error": exc.args[0].name()})
            time.sleep(0.2)
    run.truth["commit_attempts"] = commits
    consumer.close()
    producer.flush(1)
    producer.poll(0.1)  # serve the last log lines
    del producer
    settle()
    run.stop_capture()
    run.truth["notes"].append(
        "librdkafka retries NOT_COORDINATOR commits internally, so commit_attempts shows "
        "one successful call while the pcap holds two OffsetCommit exchanges.")
    return run


def scenario_librdkafka_acks0() -> Run:
    from confluent_kafka import Consumer, Producer, TopicPartition

    n = 8
    run = Run("librdkafka_acks0",
              "confluent-kafka producer with acks=0: eight Produce requests (one record "
              "each) with no response on the wire, as with a real broker. The mock, unlike "
              "Kafka, does answer acks=0 Produce requests, so its Produce responses on broker "
              "1 are held back for 10 minutes (never sent during the capture; the producer "
              "closes first). A group-less consumer then reads the partition to learn the "
              "offsets the mock assigned. See librdkafka_mock_quirks for the mock's acks=0 "
              "answers.")
    run.truth["client_library"] = confluent_version()
    run.create_topic("ks-fire", 1)  # leader: broker 1
    run.start_capture()
    run.inject("broker_request_error_rtts", broker_id=1, api_key=0,
               errors_and_rtts=[[0, 600_000]] * n,
               effect="the mock's (non-standard) answers to the next 8 Produce requests on "
                      "broker 1 are delayed 10 minutes, i.e. never sent during the capture")
    producer = Producer(rdkafka_conf(run, "ks-producer-acks0", acks=0, **{"linger.ms": 0}))
    producer.list_topics("ks-fire", timeout=5)  # connect first: one record per request
    msgs = [(b"fire-%02d" % i, b"fire and forget %02d" % i, [("acks", b"0")] if i % 2 else [])
            for i in range(n)]
    for m in msgs:
        rdkafka_produce_all(run, producer, "ks-producer-acks0", "ks-fire", [m],
                            partition_for=lambda _i: 0)
        check_flush(producer)
    settle()
    producer.flush(1)
    producer.poll(0.1)  # serve the last log lines
    del producer
    run.truth["notes"].append(
        "acks=0: delivery reports carry no offset (offset null); see 'consumed' for the "
        "offsets the mock assigned.")
    consumer = Consumer(rdkafka_conf(run, "ks-reader-acks0", **{
        "group.id": "ks-acks0-reader", "enable.auto.commit": False,
        "fetch.wait.max.ms": 100}))
    consumer.assign([TopicPartition("ks-fire", 0, 0)])
    rdkafka_consume(run, consumer, "ks-reader-acks0", len(msgs))
    consumer.close()
    settle()
    run.stop_capture()
    return run


def scenario_librdkafka_mock_quirks() -> Run:
    from confluent_kafka import Producer

    run = Run("librdkafka_mock_quirks",
              "Where librdkafka's mock broker departs from the Kafka protocol, captured on "
              "purpose so the decoder can be tested on non-conforming peers. (1) Every "
              "librdkafka connection opens with ApiVersions v3; the mock supports v0-2 and "
              "answers with error 35 in a body that is neither the v0 layout (KIP-511) nor "
              "v3. (2) A producer with acks=0: the mock answers each Produce anyway (a "
              "response the client never expects). (3) The mock limited to Produce v0-5: it "
              "answers Produce v5 without the LogStartOffset field that v5 added (4 bytes "
              "short); librdkafka fails the message with _UNDERFLOW (permanent error, no "
              "retry).")
    run.truth["client_library"] = confluent_version()
    run.create_topic("ks-quirks", 1)
    run.start_capture()
    p0 = Producer(rdkafka_conf(run, "ks-quirk-acks0", acks=0, **{"linger.ms": 0}))
    p0.list_topics("ks-quirks", timeout=5)
    for i in range(3):
        rdkafka_produce_all(run, p0, "ks-quirk-acks0", "ks-quirks",
                            [(b"acks0-%d" % i, b"answered although acks=0", [])],
                            partition_for=lambda _i: 0)
        check_flush(p0)
    settle()
    p0.flush(1)
    p0.poll(0.1)  # serve the last log lines
    del p0
    run.cluster.set_apiversion(0, 0, 5)
    run.truth["mock_cluster"]["api_versions_set"] = [{"api_key": 0, "api_name": "Produce",
                                                     "min_version": 0, "max_version": 5}]
    p5 = Producer(rdkafka_conf(run, "ks-quirk-produce-v5", acks="all", debug="protocol,msg",
                               **{"linger.ms": 0, "message.timeout.ms": 1500,
                                  "retry.backoff.ms": 200}))
    rdkafka_produce_all(run, p5, "ks-quirk-produce-v5", "ks-quirks",
                        [(b"v5-0", b"answered with a short Produce v5 response", [])],
                        partition_for=lambda _i: 0)
    p5.flush(5)
    settle()
    p5.poll(0.1)  # serve the last log lines
    del p5
    settle()
    run.stop_capture()
    run.truth["notes"].append(
        "The Produce v5 record was appended by the mock (only the response is "
        "malformed): it is in the partition log although its delivery report says "
        "_UNDERFLOW.")
    return run


KAFKA_PYTHON_API_VERSION = (2, 3)


def scenario_kafka_python() -> Run:
    import kafka
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

    run = Run("kafka_python",
              "kafka-python producer (acks=all) writes 12 records, a consumer-group member "
              "reads them and commits, then an admin client lists topics/groups, describes "
              "the cluster and topics, and lists group and partition offsets.")
    run.truth["client_library"] = {"name": "kafka-python", "version": kafka.__version__,
                                   "api_version": list(KAFKA_PYTHON_API_VERSION)}
    run.truth["notes"].append(
        "kafka-python runs with api_version=(2, 3): without it, it opens with ApiVersions "
        "v4, the mock answers UNSUPPORTED_VERSION in a body kafka-python cannot decode, and "
        "bootstrap fails. (2, 3) makes it start with ApiVersions v2.")
    run.create_topic("ks-kp", 3)
    run.cluster.set_controller_id(1)
    common = {"bootstrap_servers": run.cluster.bootstrap_servers,
              "api_version": KAFKA_PYTHON_API_VERSION, "request_timeout_ms": 5000}
    run.start_capture()
    with run.log.kafka_python("kafka-python"):
        producer = KafkaProducer(client_id="ks-kp-producer", acks="all", linger_ms=5,
                                 **common)
        msgs = ORDER_MESSAGES[:6] + EVENT_MESSAGES[:6]
        futures = []
        for i, (key, value, headers) in enumerate(msgs):
            topic_partition = 1 if i == 0 else None
            ts = now_ms()
            # kafka-python refuses null header values: send them as empty values
            headers = [(k, b"" if v is None else v) for k, v in headers]
            fut = producer.send("ks-kp", key=key, value=value, headers=headers or None,
                                partition=topic_partition, timestamp_ms=ts)
            futures.append((fut, key, value, headers, now_ns(), ts))
        producer.flush(10)
        for fut, key, value, headers, t0, ts in futures:
            md = fut.get(timeout=10)
            run.add_produced(client="kafka-python", topic=md.topic, partition=md.partition,
                             offset=md.offset, **record_fields(key, value, headers),
                             timestamp_ms=ts, delivery_report_timestamp=[None, md.timestamp],
                             produce_call_ts_ns=t0, delivery_report_ts_ns=now_ns(),
                             error=None)
        producer.close(5)
        settle()

        consumer = KafkaConsumer("ks-kp", client_id="ks-kp-consumer", group_id="ks-kp-group",
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 fetch_max_wait_ms=100, consumer_timeout_ms=15000, **common)
        got = 0
        for m in consumer:
            run.add_consumed("kafka-python", m.topic, m.partition, m.offset, m.key, m.value,
                             [(k, v) for k, v in m.headers], m.timestamp)
            got += 1
            if got == len(msgs):
                break
        consumer.commit()
        consumer.close()
        settle()

        admin = KafkaAdminClient(client_id="ks-kp-admin", **common)
        results = []
        for name, fn in [
            ("list_topics", admin.list_topics),
            ("describe_cluster", admin.describe_cluster),
            ("describe_topics", lambda: admin.describe_topics(["ks-kp"])),
            ("list_groups", admin.list_groups),
            ("describe_groups", lambda: admin.describe_groups(["ks-kp-group"])),
            ("list_group_offsets", lambda: admin.list_group_offsets("ks-kp-group")),
            ("describe_configs", lambda: admin.describe_configs(
                [kafka.admin.ConfigResource("TOPIC", "ks-kp")])),
        ]:
            t0 = now_ns()
            try:
                res = fn()
                results.append({"operation": name, "ok": True, "result": repr(res)[:2000],
                                "started_ts_ns": t0, "ended_ts_ns": now_ns()})
            except Exception as exc:
                results.append({"operation": name, "ok": False,
                                "error": type(exc).__name__, "error_text": str(exc)[:500],
                                "started_ts_ns": t0, "ended_ts_ns": now_ns()})
        run.truth["admin_results"] = results
        admin.close()
        settle()
    run.stop_capture()
    return run


def scenario_aiokafka() -> Run:
    import aiokafka
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    run = Run("aiokafka",
              "aiokafka producer (acks=all) writes 10 records, then a consumer-group member "
              "reads them, commits and stops.")
    run.truth["client_library"] = {"name": "aiokafka", "version": aiokafka.__version__}
    run.create_topic("ks-aio", 3)
    bs = run.cluster.bootstrap_servers

    async def main() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bs, client_id="ks-aio-producer",
                                    acks="all", linger_ms=5)
        await producer.start()
        msgs = ORDER_MESSAGES[:5] + EVENT_MESSAGES[:5]
        pending = []
        for key, value, headers in msgs:
            ts = now_ms()
            fut = await producer.send("ks-aio", key=key, value=value,
                                      headers=headers or None, timestamp_ms=ts)
            pending.append((fut, key, value, headers, now_ns(), ts))
        for fut, key, value, headers, t0, ts in pending:
            md = await fut
            run.add_produced(client="aiokafka", topic=md.topic, partition=md.partition,
                             offset=md.offset, **record_fields(key, value, headers),
                             timestamp_ms=ts,
                             delivery_report_timestamp=[
                                 None if md.timestamp_type is None
                                 else TIMESTAMP_TYPES.get(md.timestamp_type + 1),
                                 md.timestamp],
                             produce_call_ts_ns=t0, delivery_report_ts_ns=now_ns(),
                             error=None)
        await producer.stop()
        await asyncio.sleep(0.3)
        consumer = AIOKafkaConsumer("ks-aio", bootstrap_servers=bs,
                                    client_id="ks-aio-consumer", group_id="ks-aio-group",
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    fetch_max_wait_ms=100)
        await consumer.start()
        got = 0
        try:
            async with asyncio.timeout(15):
                async for m in consumer:
                    run.add_consumed("aiokafka", m.topic, m.partition, m.offset, m.key,
                                     m.value, list(m.headers), m.timestamp)
                    got += 1
                    if got == len(msgs):
                        break
        except TimeoutError:
            run.truth["notes"].append(f"aiokafka consumer got {got} of {len(msgs)}")
        await consumer.commit()
        await consumer.stop()
        await asyncio.sleep(0.3)

    run.start_capture()
    with run.log.aiokafka("aiokafka"):
        asyncio.run(main())
    run.stop_capture()
    return run


def scenario_librdkafka_midstream() -> Run:
    from confluent_kafka import Consumer, Producer

    run = Run("librdkafka_midstream",
              "A producer (one record every 20 ms) and a consumer-group member run "
              "continuously; tcpdump starts about 1 s after they connected and captures about "
              "1.5 s, so the capture begins in the middle of established connections (no "
              "SYN/handshake, no ApiVersions, possibly mid-frame). The truth covers the whole "
              "run with timestamps; what the decoder sees must be a subset.")
    run.truth["client_library"] = confluent_version()
    run.truth["capture"]["mid_stream"] = True
    run.create_topic("ks-stream", 3)
    run.cluster.start_request_tracking()
    run.truth["run_started_ts_ns"] = now_ns()

    producer = Producer(rdkafka_conf(run, "ks-stream-producer", acks="all",
                                     **{"linger.ms": 10}))
    consumer = Consumer(rdkafka_conf(run, "ks-stream-consumer", **{
        "group.id": "ks-stream-group", "auto.offset.reset": "earliest",
        "enable.auto.commit": True, "auto.commit.interval.ms": 500,
        "fetch.wait.max.ms": 100}))
    consumer.subscribe(["ks-stream"])
    stop = threading.Event()

    def produce_loop() -> None:
        i = 0
        while not stop.is_set():
            key = b"stream-%05d" % i
            value = b"tick %05d " % i + b"." * (i % 50)
            headers = [("seq", b"%d" % i)]
            ts = now_ms()
            producer.produce("ks-stream", key=key, value=value, headers=headers, timestamp=ts,
                             on_delivery=run.rdkafka_delivery("ks-stream-producer", key, value,
                                                              headers, now_ns(), ts))
            producer.poll(0)
            i += 1
            time.sleep(0.02)
        producer.flush(10)

    def consume_loop() -> None:
        while not stop.is_set():
            msg = consumer.poll(0.1)
            if msg is not None and not msg.error():
                run.rdkafka_consumed("ks-stream-consumer", msg)

    threads = [threading.Thread(target=produce_loop, name="producer"),
               threading.Thread(target=consume_loop, name="consumer")]
    for th in threads:
        th.start()
    deadline = time.monotonic() + 15
    while not run.truth["consumed"] and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)
    # The mock's request tracking is already running; do not restart it.
    run.start_capture(track_requests=False)
    time.sleep(1.5)
    run.stop_capture()
    stop.set()
    for th in threads:
        th.join(20)
    consumer.close()
    producer.poll(0.1)  # serve the last log lines
    del producer
    run.truth["run_stopped_ts_ns"] = now_ns()
    run.truth["notes"].append(
        "Clients were running before tcpdump started and were closed after it stopped: "
        "'produced', 'consumed', 'requests' and 'mock_requests' cover the whole run. Use "
        "capture.started_ts_ns / stopped_ts_ns (and record timestamps, timestamp_ms = the "
        "records' CreateTime) to pick what can be in the pcap.")
    return run


def scenario_librdkafka_compression() -> Run:
    from confluent_kafka import Consumer, Producer

    codecs = ["gzip", "snappy", "lz4", "zstd"]
    run = Run("librdkafka_compression",
              "Four confluent-kafka producers, one per compression codec (gzip, snappy, lz4, "
              "zstd), each write 5 compressible records as one record batch to its own "
              "partition of ks-compressed (partition i = codecs[i]); a consumer-group member "
              "reads all 20 (Fetch responses carry the compressed batches the mock stored).")
    run.truth["client_library"] = confluent_version()
    run.create_topic("ks-compressed", 4)
    run.truth["compression_by_partition"] = dict(enumerate(codecs))
    run.start_capture()
    for part, codec in enumerate(codecs):
        label = f"ks-producer-{codec}"
        producer = Producer(rdkafka_conf(run, label, acks="all", **{
            "compression.type": codec, "linger.ms": 50}))
        producer.list_topics("ks-compressed", timeout=5)
        msgs = [(f"{codec}-{i}".encode(),
                 (f"{codec} record {i}: " + "the quick brown fox jumps over the lazy dog " * 8)
                 .encode(), [("codec", codec.encode())]) for i in range(5)]
        rdkafka_produce_all(run, producer, label, "ks-compressed", msgs,
                            partition_for=lambda _i, p=part: p)
        check_flush(producer)
        producer.poll(0.1)  # serve the last log lines
        del producer
    for m in run.truth["produced"]:
        m["compression"] = codecs[m["partition"]]
    settle()
    consumer = Consumer(rdkafka_conf(run, "ks-consumer-compressed", **{
        "group.id": "ks-compressed-group", "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "fetch.wait.max.ms": 100}))
    consumer.subscribe(["ks-compressed"])
    rdkafka_consume(run, consumer, "ks-consumer-compressed", len(run.truth["produced"]))
    consumer.commit(asynchronous=False)
    consumer.close()
    settle()
    run.stop_capture()
    return run


def scenario_librdkafka_transactions() -> Run:
    from confluent_kafka import Consumer, Producer, TopicPartition

    run = Run("librdkafka_transactions",
              "Transactional confluent-kafka producer (transactional.id ks-tx-1): "
              "InitProducerId; transaction 1 writes 3 records to ks-tx (one per partition) and "
              "commits the offset of a record read from ks-tx-in (AddPartitionsToTxn, "
              "AddOffsetsToTxn, TxnOffsetCommit, EndTxn commit); transaction 2 writes 2 "
              "records and aborts (EndTxn abort). The mock appends a control batch (commit/"
              "abort marker) to each partition a transaction touched. A read_committed "
              "consumer then reads ks-tx: the mock returns no aborted-transaction list, so "
              "the aborted records are delivered too.")
    run.truth["client_library"] = confluent_version()
    run.create_topic("ks-tx", 3)
    run.create_topic("ks-tx-in", 1)
    run.cluster.coordinator_set("transaction", "ks-tx-1", 1)
    run.cluster.coordinator_set("group", "ks-tx-src", 2)
    run.truth["coordinators"] = {"transaction ks-tx-1": 1, "group ks-tx-src": 2}
    pre = Producer({"bootstrap.servers": run.cluster.bootstrap_servers, "linger.ms": 0})
    pre.produce("ks-tx-in", key=b"in-0", value=b"input record", partition=0)
    check_flush(pre)
    del pre
    run.truth["preloaded"] = {"ks-tx-in": {"0": 1},
                              "note": "written before the capture started; not in the pcap"}
    run.start_capture()
    src = Consumer(rdkafka_conf(run, "ks-tx-src", **{
        "group.id": "ks-tx-src", "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "fetch.wait.max.ms": 100}))
    src.subscribe(["ks-tx-in"])
    got = rdkafka_consume(run, src, "ks-tx-src", 1)
    producer = Producer(rdkafka_conf(run, "ks-tx-producer", **{
        "transactional.id": "ks-tx-1", "linger.ms": 5}))
    producer.init_transactions(10)
    producer.begin_transaction()
    committed = [(b"tx1-%d" % i, b"committed in transaction 1 (%d)" % i, [("txn", b"1")])
                 for i in range(3)]
    n0 = len(run.truth["produced"])
    rdkafka_produce_all(run, producer, "ks-tx-producer", "ks-tx", committed,
                        partition_for=lambda i: i)
    producer.flush(10)
    if got:
        producer.send_offsets_to_transaction([TopicPartition("ks-tx-in", 0, 1)],
                                             src.consumer_group_metadata(), 10)
    producer.commit_transaction(10)
    for m in run.truth["produced"][n0:]:
        m["transaction"] = "committed"
    run.truth["transactional_offsets"] = [{"group": "ks-tx-src", "topic": "ks-tx-in",
                                           "partition": 0, "offset": 1}] if got else []
    producer.begin_transaction()
    aborted = [(b"tx2-%d" % i, b"aborted in transaction 2 (%d)" % i, [("txn", b"2")])
               for i in range(2)]
    n1 = len(run.truth["produced"])
    rdkafka_produce_all(run, producer, "ks-tx-producer", "ks-tx", aborted,
                        partition_for=lambda i: i)
    producer.flush(10)
    producer.abort_transaction(10)
    for m in run.truth["produced"][n1:]:
        m["transaction"] = "aborted"
    src.close()
    settle()
    consumer = Consumer(rdkafka_conf(run, "ks-tx-reader", **{
        "group.id": "ks-tx-reader", "auto.offset.reset": "earliest",
        "isolation.level": "read_committed", "enable.auto.commit": False,
        "fetch.wait.max.ms": 100}))
    consumer.subscribe(["ks-tx"])
    rdkafka_consume(run, consumer, "ks-tx-reader", 5, timeout_s=10)
    consumer.close()
    producer.poll(0.1)  # serve the last log lines
    del producer
    settle()
    run.stop_capture()
    run.truth["expected_control_records"] = [
        {"topic": "ks-tx", "partition": p, "markers": ["COMMIT", "ABORT"] if p < 2
         else ["COMMIT"]} for p in range(3)]
    run.truth["notes"].append(
        "expected_control_records is what the mock is expected to append (one marker per "
        "partition per transaction, at the offsets the data records skip); it is inferred "
        "from the consumed offsets, not reported by a client.")
    return run


def scenario_librdkafka_kip848() -> Run:
    from confluent_kafka import Consumer, Producer

    run = Run("librdkafka_kip848",
              "Consumer group with the KIP-848 protocol (group.protocol=consumer): the "
              "member joins and gets its assignment through ConsumerGroupHeartbeat instead "
              "of JoinGroup/SyncGroup, reads 6 records, commits and leaves.")
    run.truth["client_library"] = confluent_version()
    run.create_topic("ks-848", 3)
    run.start_capture()
    producer = Producer(rdkafka_conf(run, "ks-848-producer", acks="all", **{"linger.ms": 5}))
    msgs = [(b"k848-%d" % i, b"new consumer protocol %d" % i, []) for i in range(6)]
    rdkafka_produce_all(run, producer, "ks-848-producer", "ks-848", msgs)
    check_flush(producer)
    producer.poll(0.1)  # serve the last log lines
    del producer
    consumer = Consumer(rdkafka_conf(run, "ks-848-consumer", **{
        "group.id": "ks-848-group", "group.protocol": "consumer",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "fetch.wait.max.ms": 100}))
    consumer.subscribe(["ks-848"])
    rdkafka_consume(run, consumer, "ks-848-consumer", len(msgs))
    consumer.commit(asynchronous=False)
    consumer.close()
    settle()
    run.stop_capture()
    return run


def scenario_librdkafka_share() -> Run:
    from confluent_kafka import Producer, ShareConsumer

    run = Run("librdkafka_share",
              "Share-group consumer (KIP-932, librdkafka preview): ShareGroupHeartbeat to "
              "join, then ShareFetch/ShareAcknowledge. The records are produced after the "
              "member joined (a new share group starts at the latest offset).")
    run.truth["client_library"] = confluent_version()
    run.create_topic("ks-share", 1)
    run.start_capture()
    share = ShareConsumer(rdkafka_conf(run, "ks-share-consumer", **{"group.id": "ks-share-group"}))
    share.subscribe(["ks-share"])
    want = 4
    t_end = time.monotonic() + 15
    produced = False
    got = 0
    t_join = time.monotonic() + 1.5
    while got < want and time.monotonic() < t_end:
        for m in share.poll(0.2):
            if m.error():
                run.truth["notes"].append(f"share poll error: {m.error().name()}")
                continue
            run.rdkafka_consumed("ks-share-consumer", m)
            got += 1
        if not produced and time.monotonic() > t_join:
            producer = Producer(rdkafka_conf(run, "ks-share-producer", acks="all",
                                             **{"linger.ms": 5}))
            msgs = [(b"share-%d" % i, b"queue-style record %d" % i, []) for i in range(want)]
            rdkafka_produce_all(run, producer, "ks-share-producer", "ks-share", msgs,
                                partition_for=lambda _i: 0)
            check_flush(producer)
            producer.poll(0.1)  # serve the last log lines
            del producer
            produced = True
    share.close()
    settle()
    run.stop_capture()
    return run


# --------------------------------------------------------------------------- kafka-python codecs


class _CramjamSnappy:
    """Stand-in for python-snappy's ``snappy`` module (raw snappy blocks via cramjam)."""

    @staticmethod
    def compress(data: bytes) -> bytes:
        import cramjam

        return bytes(cramjam.snappy.compress_raw(bytes(data)))

    @staticmethod
    def decompress(data: bytes) -> bytes:
        import cramjam

        return bytes(cramjam.snappy.decompress_raw(bytes(data)))


def kafka_python_codec_shims(run: Run) -> None:
    """Give kafka-python the codec modules it looks for when they are not installed.

    kafka-python 3.0.12 imports ``snappy`` (python-snappy) and ``xxhash`` (needed for
    the pre-0.10 lz4 framing; installed with the 'test' extra). python-snappy is not in the
    venv; cramjam (raw snappy) is. The stand-in only supplies the primitive (raw snappy
    block): the framing (xerial) stays kafka-python's own code in ``kafka.codec``.
    """
    import kafka.codec as kc

    shims = []
    if not kc.has_snappy():
        kc.snappy = _CramjamSnappy
        shims.append("snappy: kafka.codec.snappy = cramjam.snappy.compress_raw/decompress_raw "
                     "(python-snappy is not installed)")
    if getattr(kc, "xxhash", None) is None:
        raise SystemExit("kafka-python needs the xxhash package for the pre-0.10 lz4 framing: "
                         "pip install xxhash (it is in kafkasniff's 'test' extra)")
    if shims:
        run.truth["codec_shims"] = shims
        run.truth["notes"].append(
            "kafka-python's codec modules were supplemented in-process (see codec_shims): "
            "the bytes on the wire are kafka-python's framing around the same raw snappy "
            "blocks / LZ4 frames python-snappy / xxhash would have given.")


def kp_send_all(run: Run, producer: Any, label: str, topic: str,
                msgs: list[tuple[Any, Any, Any]], *, partition: int | None,
                with_timestamps: bool = True, **extra: Any) -> list[dict[str, Any]]:
    """Send with kafka-python, flush, and record every record (error included)."""
    pending = []
    for key, value, headers in msgs:
        ts = now_ms() if with_timestamps else None
        fut = producer.send(topic, key=key, value=value, headers=headers or None,
                            partition=partition, timestamp_ms=ts)
        pending.append((fut, key, value, headers, now_ns(), ts))
    try:
        producer.flush(10)
    except Exception as exc:  # a failed batch surfaces on its future below
        run.truth["notes"].append(f"{label}: flush raised {type(exc).__name__}: {exc}")
    out = []
    for fut, key, value, headers, t0, ts in pending:
        try:
            md = fut.get(timeout=10)
            entry = dict(client=label, topic=md.topic, partition=md.partition,
                         offset=md.offset, **record_fields(key, value, headers),
                         timestamp_ms=ts, delivery_report_timestamp=[None, md.timestamp],
                         produce_call_ts_ns=t0, delivery_report_ts_ns=now_ns(), error=None)
        except Exception as exc:
            err = type(exc).__name__
            if getattr(exc, "errno", None) is not None:
                err += f" ({exc.errno})"
            entry = dict(client=label, topic=topic, partition=partition, offset=None,
                         **record_fields(key, value, headers), timestamp_ms=ts,
                         delivery_report_timestamp=None, produce_call_ts_ns=t0,
                         delivery_report_ts_ns=now_ns(), error=err)
        entry.update(extra)
        run.add_produced(**entry)
        out.append(entry)
    return out


def kp_consume(run: Run, consumer: Any, label: str, want: int) -> int:
    got = 0
    for m in consumer:
        run.add_consumed(label, m.topic, m.partition, m.offset, m.key, m.value,
                         [(k, v) for k, v in (m.headers or [])], m.timestamp)
        run.truth["consumed"][-1]["timestamp_type"] = (
            None if m.timestamp_type is None else TIMESTAMP_TYPES.get(m.timestamp_type + 1))
        got += 1
        if got == want:
            break
    if got < want:
        run.truth["notes"].append(f"{label} received {got} of {want} records before timeout")
    return got


def scenario_kafka_python_codecs() -> Run:
    import kafka
    from kafka import KafkaConsumer, KafkaProducer

    codecs = ["gzip", "snappy", "lz4", "zstd"]
    run = Run("kafka_python_codecs",
              "Four kafka-python producers, one per compression codec (gzip, snappy, lz4, "
              "zstd), each write 5 compressible records (headers, one null key) as one "
              "record batch to its own partition of ks-kp-codecs (partition i = codecs[i]); "
              "a consumer-group member reads all 20 back (Fetch responses carry the "
              "kafka-python batches the mock stored, unchanged apart from base offset and "
              "leader epoch).")
    run.truth["client_library"] = {"name": "kafka-python", "version": kafka.__version__,
                                   "api_version": list(KAFKA_PYTHON_API_VERSION)}
    kafka_python_codec_shims(run)
    run.truth["notes"] += [
        "kafka-python runs with api_version=(2, 3) as in the kafka_python capture (the mock's "
        "ApiVersions v4 answer breaks its bootstrap otherwise): Produce v7, record batches "
        "magic 2 (DefaultRecordBatchBuilder).",
        "snappy framing: kafka-python writes snappy with the xerial framing (Java's "
        "SnappyOutputStream layout) also inside magic-2 batches: kafka.codec.snappy_encode() "
        "defaults to xerial_compatible=True, 32 KiB blocks; the compressed records of the "
        "snappy batch therefore start with 82 53 4e 41 50 50 59 00 (\\x82SNAPPY\\0), then "
        "int32 version 1, int32 compatible 1, then int32-length-prefixed raw snappy blocks. "
        "librdkafka writes raw snappy (see librdkafka_compression).",
        "lz4: LZ4 frame from python-lz4 (block_linked=False, content size present); zstd: "
        "zstandard frame with content size; gzip: level 9 gzip member.",
        "kafka-python 3 is idempotent by default with acks=all: each producer starts with "
        "InitProducerId and its batch carries that producer id, epoch 0, base sequence 0.",
    ]
    run.create_topic("ks-kp-codecs", len(codecs))
    run.truth["compression_by_partition"] = dict(enumerate(codecs))
    common = {"bootstrap_servers": run.cluster.bootstrap_servers,
              "api_version": KAFKA_PYTHON_API_VERSION, "request_timeout_ms": 5000}
    run.start_capture()
    with run.log.kafka_python("kafka-python"):
        for part, codec in enumerate(codecs):
            label = f"ks-kp-{codec}"
            producer = KafkaProducer(client_id=label, acks="all", compression_type=codec,
                                     linger_ms=200, **common)
            msgs = [(None if i == 3 else f"kp-{codec}-{i}".encode(),
                     (f"kafka-python {codec} record {i}: "
                      + "pack my box with five dozen liquor jugs " * 8).encode(),
                     [("codec", codec.encode()), ("i", b"%d" % i)]) for i in range(5)]
            kp_send_all(run, producer, label, "ks-kp-codecs", msgs, partition=part,
                        compression=codec, magic=2)
            producer.close(5)
        settle()
        consumer = KafkaConsumer("ks-kp-codecs", client_id="ks-kp-codecs-consumer",
                                 group_id="ks-kp-codecs-group", auto_offset_reset="earliest",
                                 enable_auto_commit=False, fetch_max_wait_ms=100,
                                 consumer_timeout_ms=15000, **common)
        kp_consume(run, consumer, "ks-kp-codecs-consumer", len(codecs) * 5)
        consumer.commit()
        consumer.close()
        settle()
    run.stop_capture()
    return run


def scenario_kafka_python_legacy() -> Run:
    import kafka
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    sections = [((0, 10), 1, 0), ((0, 9), 0, 1)]  # api_version, magic, partition
    codecs: list[str | None] = [None, "gzip", "snappy", "lz4"]
    run = Run("kafka_python_legacy",
              "Old message formats from kafka-python: with api_version=(0, 10) (Produce v2, "
              "message format magic 1, KIP-32 timestamps) and with api_version=(0, 9) (Produce "
              "v1, magic 0), one producer per codec (none, gzip, snappy, lz4), 3 records each "
              "(ks-legacy partition 0 = magic 1, partition 1 = magic 0). The mock stores "
              "uncompressed magic 0/1 message sets but rejects every compressed one with "
              "UNSUPPORTED_VERSION (35): the compressed wrapper messages are on the wire in the "
              "Produce requests only. Then a (0, 10) consumer reads partition 0 (Fetch v2) and "
              "a (0, 9) consumer reads partition 1 (Fetch v1), without a group.",
              num_brokers=1)
    run.truth["client_library"] = {"name": "kafka-python", "version": kafka.__version__,
                                   "api_version": [[0, 10], [0, 9]]}
    kafka_python_codec_shims(run)
    run.truth["notes"] += [
        "Mock (librdkafka 2.16): magic 0/1 message sets are accepted only uncompressed "
        "(offsets assigned, records served back by Fetch); a Produce whose message set is a "
        "compressed magic 0/1 wrapper is answered with error 35 UNSUPPORTED_VERSION and not "
        "stored. kafka-python does not retry it (retries=0): one Produce per codec and "
        "section, records with error UnsupportedVersionError and offset null.",
        "Wire formats written by kafka-python (kafka.record.legacy_records): inner "
        "messages carry offsets 0..n-1 (relative for magic 1, KIP-31); the wrapper message "
        "has offset 0, null key and, for magic 1, timestamp 0 (CreateTime), not the last "
        "inner offset / max timestamp Java writes; gzip is level 9; snappy is "
        "xerial-framed (\\x82SNAPPY\\0, version 1, compatible 1, int32-length blocks); lz4 for "
        "magic 1 is a correct LZ4 frame, for magic 0 the pre-0.10 framing "
        "(kafka.codec.lz4_encode_old_kafka: content-size flag cleared, header checksum "
        "computed over magic + descriptor, KAFKA-3160).",
        "Magic 0 records have no timestamp: timestamp_ms is null for them; the magic 1 "
        "records carry CreateTime timestamp_ms.",
        "api_version=(0, 10) starts every connection with ApiVersions v0; (0, 9) sends no "
        "ApiVersions (Metadata v0 first).",
    ]
    run.create_topic("ks-legacy", 2)
    run.truth["magic_by_partition"] = {"0": 1, "1": 0}
    bs = run.cluster.bootstrap_servers
    run.start_capture()
    with run.log.kafka_python("kafka-python"):
        for api_version, magic, part in sections:
            for codec in codecs:
                name = codec or "none"
                label = f"ks-legacy-m{magic}-{name}"
                producer = KafkaProducer(client_id=label, bootstrap_servers=bs,
                                         api_version=api_version, acks=1, retries=0,
                                         linger_ms=200, compression_type=codec,
                                         request_timeout_ms=5000, max_block_ms=5000)
                msgs = [(None if i == 1 else f"m{magic}-{name}-{i}".encode(),
                         (f"magic {magic} {name} record {i}: "
                          + "sphinx of black quartz, judge my vow " * 4).encode(), [])
                        for i in range(3)]
                kp_send_all(run, producer, label, "ks-legacy", msgs, partition=part,
                            with_timestamps=magic == 1, compression=name, magic=magic,
                            api_version=list(api_version))
                producer.close(5)
        settle()
        for api_version, magic, part in sections:
            label = f"ks-legacy-reader-m{magic}"
            consumer = KafkaConsumer(client_id=label, bootstrap_servers=bs,
                                     api_version=api_version, auto_offset_reset="earliest",
                                     enable_auto_commit=False, group_id=None,
                                     fetch_max_wait_ms=100, consumer_timeout_ms=8000,
                                     request_timeout_ms=5000)
            consumer.assign([TopicPartition("ks-legacy", part)])
            want = sum(1 for m in run.truth["produced"]
                       if m["partition"] == part and m["error"] is None)
            kp_consume(run, consumer, label, want)
            consumer.close()
        settle()
    run.stop_capture()
    return run


# --------------------------------------------------------------------------- idempotence


_RDK_PID = re.compile(r"Acquired PID\{Id:(?P<pid>-?\d+),Epoch:(?P<epoch>-?\d+)\}")
_RDK_PRODUCE_BATCH = re.compile(
    r"\]: (?P<broker>\S+): (?P<topic>\S+) \[(?P<part>\d+)\]: Produce MessageSet with "
    r"(?P<cnt>\d+) message\(s\) \((?P<bytes>\d+) bytes, ApiVersion (?P<ver>\d+), "
    r"MsgVersion (?P<mv>\d+), MsgId (?P<msgid>\d+), BaseSeq (?P<seq>-?\d+), "
    r"PID\{Id:(?P<pid>-?\d+),Epoch:(?P<epoch>-?\d+)\}, (?P<codec>\w+)\)")
_RDK_BATCH_OUTCOME = re.compile(
    r"\]: (?P<broker>\S+): (?P<topic>\S+) \[(?P<part>\d+)\]: MessageSet with (?P<cnt>\d+) "
    r"message\(s\) \(MsgId (?P<msgid>\d+), BaseSeq (?P<seq>-?\d+)\) "
    r"(?P<outcome>delivered|encountered error: .*)$")


def scenario_librdkafka_idempotent() -> Run:
    from confluent_kafka import Consumer, Producer, TopicPartition

    run = Run("librdkafka_idempotent",
              "Idempotent confluent-kafka producer (enable.idempotence=true, acks=all): "
              "InitProducerId, then two waves of Produce to the 3 partitions of ks-idem "
              "(wave 1: 3 records per partition, wave 2: 2 records per partition with "
              "headers); every record batch carries the producer id, epoch 0 and the base "
              "sequence of its first record. The first Produce request is failed with "
              "NOT_LEADER_OR_FOLLOWER (6) and retried: the retry carries the same producer "
              "id, epoch and base sequence. A group-less consumer reads everything back.")
    run.truth["client_library"] = confluent_version()
    run.create_topic("ks-idem", 3)
    idem: dict[str, Any] = {"producer_id": None, "producer_epoch": None, "acquired": []}
    batches: list[dict[str, Any]] = []

    def on_pid(label: str, m: re.Match[str], ts: int) -> None:
        idem["acquired"].append({"client": label, "producer_id": int(m["pid"]),
                                 "producer_epoch": int(m["epoch"]), "logged_ts_ns": ts})
        idem["producer_id"], idem["producer_epoch"] = int(m["pid"]), int(m["epoch"])

    def on_batch(label: str, m: re.Match[str], ts: int) -> None:
        batches.append({"client": label, "connection": m["broker"],
                        "broker_port": _broker_port(m["broker"]),
                        "topic": m["topic"], "partition": int(m["part"]),
                        "record_count": int(m["cnt"]), "message_set_bytes": int(m["bytes"]),
                        "produce_api_version": int(m["ver"]), "magic": int(m["mv"]),
                        "first_msg_id": int(m["msgid"]), "base_sequence": int(m["seq"]),
                        "producer_id": int(m["pid"]), "producer_epoch": int(m["epoch"]),
                        "compression": m["codec"], "outcome": None, "logged_ts_ns": ts})

    def on_outcome(label: str, m: re.Match[str], ts: int) -> None:
        for b in batches:
            if (b["connection"], b["topic"], b["partition"], b["first_msg_id"],
                    b["base_sequence"]) == (m["broker"], m["topic"], int(m["part"]),
                                            int(m["msgid"]), int(m["seq"])) \
                    and b["outcome"] is None:
                b["outcome"] = m["outcome"]
                break

    run.log.watchers += [(_RDK_PID, on_pid), (_RDK_PRODUCE_BATCH, on_batch),
                         (_RDK_BATCH_OUTCOME, on_outcome)]
    run.start_capture()
    run.inject("request_errors", api_key=0, error_codes=[6], scope="cluster",
               effect="the first Produce request fails with NOT_LEADER_OR_FOLLOWER; the "
                      "idempotent producer retries the same batch (same PID/epoch/BaseSeq)")
    label = "ks-idem-producer"
    producer = Producer(rdkafka_conf(run, label, debug="protocol,eos,msg", **{
        "enable.idempotence": True, "linger.ms": 50, "retry.backoff.ms": 50}))
    seq: Counter[int] = Counter()
    for wave, (n, with_headers) in enumerate([(3, False), (2, True)], start=1):
        msgs = []
        parts = []
        for p in range(3):
            for i in range(n):
                msgs.append((b"idem-w%d-p%d-%d" % (wave, p, i),
                             b"idempotent wave %d partition %d record %d" % (wave, p, i),
                             [("wave", b"%d" % wave), ("seq", b"%d" % seq[p])]
                             if with_headers else []))
                parts.append(p)
                seq[p] += 1
        n0 = len(run.truth["produced"])
        rdkafka_produce_all(run, producer, label, "ks-idem", msgs,
                            partition_for=lambda i, parts=parts: parts[i])
        check_flush(producer)
        for m in run.truth["produced"][n0:]:
            m["wave"] = wave
    producer.poll(0.1)
    del producer
    # sequence numbers: librdkafka numbers each partition's records 0, 1, 2 ... in
    # produce() order (msgid - epoch base msgid): wave 1 records 0-2, wave 2 records 3-4.
    for m in run.truth["produced"]:
        _, wave, _part, i = bytes.fromhex(m["key_hex"]).decode().split("-")
        m["sequence"] = int(i) + (3 if wave == "w2" else 0)
        m["producer_id"] = idem["producer_id"]
        m["producer_epoch"] = idem["producer_epoch"]
    settle()
    consumer = Consumer(rdkafka_conf(run, "ks-idem-reader", **{
        "group.id": "ks-idem-reader", "enable.auto.commit": False, "fetch.wait.max.ms": 100}))
    consumer.assign([TopicPartition("ks-idem", p, 0) for p in range(3)])
    rdkafka_consume(run, consumer, "ks-idem-reader", len(run.truth["produced"]))
    consumer.close()
    settle()
    run.stop_capture()
    run.truth["idempotence"] = idem
    run.truth["produce_batches"] = batches
    run.truth["notes"] += [
        "idempotence and produce_batches come from librdkafka's eos/msg debug logs "
        "(\"Acquired PID{...}\", \"Produce MessageSet with N message(s) (... BaseSeq S, "
        "PID{Id:..,Epoch:..}, ...)\" and the batch outcome line); a batch retried after an "
        "error appears twice with the same base_sequence.",
        "produced[].sequence is the record's sequence number (its batch's base sequence + "
        "its offset delta): librdkafka numbers each partition's records 0, 1, 2 ... in "
        "produce() order; partitions are fresh and written only by this producer, so it "
        "also equals the record's offset.",
    ]
    return run


# --------------------------------------------------------------------------- TLS


TLS_PORT = 9093
TLS_SNI = "broker1.kafka.test"
_TLS_VERSION_NAMES = {0x0304: "TLSv1.3", 0x0303: "TLSv1.2", 0x0302: "TLSv1.1",
                      0x0301: "TLSv1.0", 0x0300: "SSLv3"}


def parse_client_hello(msg: bytes) -> dict[str, Any]:
    """Fields of a TLS ClientHello handshake message (4-byte handshake header included)."""
    if not msg or msg[0] != 1:
        raise ValueError("not a ClientHello")
    body = msg[4:4 + int.from_bytes(msg[1:4], "big")]
    legacy_version = int.from_bytes(body[0:2], "big")
    p = 34
    p += 1 + body[p]
    cs_len = int.from_bytes(body[p:p + 2], "big")
    ciphers = [int.from_bytes(body[p + 2 + i:p + 4 + i], "big") for i in range(0, cs_len, 2)]
    p += 2 + cs_len
    p += 1 + body[p]
    end = p + 2 + int.from_bytes(body[p:p + 2], "big")
    p += 2
    ext_types: list[int] = []
    sni = None
    versions: list[int] = []
    while p + 4 <= end:
        etype = int.from_bytes(body[p:p + 2], "big")
        elen = int.from_bytes(body[p + 2:p + 4], "big")
        val = body[p + 4:p + 4 + elen]
        p += 4 + elen
        ext_types.append(etype)
        if etype == 0 and len(val) >= 5 and val[2] == 0:
            sni = val[5:5 + int.from_bytes(val[3:5], "big")].decode()
        elif etype == 43 and val:
            versions = [int.from_bytes(val[1 + i:3 + i], "big") for i in range(0, val[0], 2)]
    offered = versions or [legacy_version]
    return {"legacy_version": _TLS_VERSION_NAMES.get(legacy_version, hex(legacy_version)),
            "supported_versions_extension": [_TLS_VERSION_NAMES.get(v, hex(v))
                                             for v in versions] or None,
            "versions_offered": [_TLS_VERSION_NAMES.get(v, hex(v)) for v in offered],
            "sni": sni, "cipher_suite_count": len(ciphers),
            "extension_types": ext_types, "client_hello_bytes": len(msg)}


def make_self_signed_cert(directory: Path) -> dict[str, Any]:
    """A self-signed EC P-256 certificate for TLS_SNI (cryptography, else ``openssl req``)."""
    cert, key = directory / "broker.pem", directory / "broker.key"
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        pkey = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, TLS_SNI)])
        now = dt.datetime.now(dt.timezone.utc)
        crt = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
               .public_key(pkey.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(minutes=5))
               .not_valid_after(now + dt.timedelta(days=2))
               .add_extension(x509.SubjectAlternativeName([x509.DNSName(TLS_SNI)]), False)
               .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
               .sign(pkey, hashes.SHA256()))
        cert.write_bytes(crt.public_bytes(serialization.Encoding.PEM))
        key.write_bytes(pkey.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
        tool = "cryptography"
    except ImportError:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
                        "-subj", f"/CN={TLS_SNI}", "-addext", f"subjectAltName=DNS:{TLS_SNI}",
                        "-keyout", str(key), "-out", str(cert)],
                       check=True, capture_output=True)
        tool = "openssl req"
    return {"cert": cert, "key": key,
            "summary": {"subject": f"CN={TLS_SNI}", "subject_alt_names": [f"DNS:{TLS_SNI}"],
                        "key": "EC P-256", "self_signed": True, "generated_with": tool,
                        "note": "generated at run time, not kept"}}


def parse_kafka_request_header(frame: bytes) -> dict[str, Any]:
    """api_key, api_version, correlation_id, client_id of a size-prefixed request frame."""
    size = int.from_bytes(frame[0:4], "big", signed=True)
    api_key = int.from_bytes(frame[4:6], "big", signed=True)
    ver = int.from_bytes(frame[6:8], "big", signed=True)
    corr = int.from_bytes(frame[8:12], "big", signed=True)
    clen = int.from_bytes(frame[12:14], "big", signed=True)
    client_id = None if clen < 0 else frame[14:14 + clen].decode(errors="replace")
    return {"frame_size": size, "api_key": api_key, "api_name": api_name(api_key),
            "api_version": ver, "correlation_id": corr, "client_id": client_id}


class TlsServer(threading.Thread):
    """A Python ``ssl`` server on 127.0.0.1:TLS_PORT recording each connection's ClientHello.

    For every connection: TLS handshake, then read one size-prefixed Kafka request from
    inside the TLS stream (header recorded), then close. Handled one at a time.
    """

    def __init__(self, cert: Path, key: Path) -> None:
        super().__init__(name="tls-server", daemon=True)
        import socket
        import ssl

        self.ssl = ssl
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(str(cert), str(key))
        ctx.sni_callback = self._on_sni
        ctx._msg_callback = self._on_msg  # type: ignore[attr-defined]  # CPython debug hook
        self.ctx = ctx
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", TLS_PORT))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.stop_event = threading.Event()
        self.connections: list[dict[str, Any]] = []
        self._current: dict[str, Any] | None = None

    def _on_sni(self, _sslobj: Any, server_name: str | None, _ctx: Any) -> None:
        if self._current is not None:
            self._current["sni_seen_by_server"] = server_name

    def _on_msg(self, _conn: Any, direction: str, _version: Any, content_type: Any,
                msg_type: Any, data: bytes) -> None:
        ssl = self.ssl
        if self._current is None or direction != "read":
            return
        if content_type == ssl._TLSContentType.HANDSHAKE \
                and msg_type == ssl._TLSMessageType.CLIENT_HELLO \
                and "client_hello" not in self._current:
            try:
                self._current["client_hello"] = parse_client_hello(bytes(data))
            except Exception as exc:  # record, never break the handshake
                self._current["client_hello"] = {"parse_error": repr(exc)}

    def run(self) -> None:
        import socket

        while not self.stop_event.is_set():
            try:
                raw, addr = self.sock.accept()
            except socket.timeout:
                continue
            entry: dict[str, Any] = {"client_port": addr[1], "accepted_ts_ns": now_ns()}
            self._current = entry
            raw.settimeout(5)
            tls = self.ctx.wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
            try:
                tls.do_handshake()
                entry.update(handshake="completed", negotiated_version=tls.version(),
                             cipher=tls.cipher()[0], handshake_done_ts_ns=now_ns())
                buf = b""
                while len(buf) < 4 or len(buf) < 4 + int.from_bytes(buf[:4], "big"):
                    chunk = tls.recv(65536)
                    if not chunk:
                        break
                    buf += chunk
                if len(buf) >= 14:
                    entry["kafka_request_inside_tls"] = parse_kafka_request_header(buf)
                    entry["kafka_request_inside_tls"]["read_ts_ns"] = now_ns()
            except Exception as exc:
                entry.setdefault("handshake", f"failed: {exc!r}")
                entry["error"] = repr(exc)
            finally:
                self._current = None
                self.connections.append(entry)
                try:
                    tls.close()
                except OSError:
                    pass

    def stop(self) -> None:
        self.stop_event.set()
        self.join(5)
        self.sock.close()


_TLS_RDKAFKA_CLIENT = r'''
import sys
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "security.protocol": "SSL",
              "ssl.ca.location": sys.argv[2], "client.id": "ks-tls-librdkafka",
              "debug": "security,protocol,broker", "enable.metrics.push": False,
              "reconnect.backoff.ms": 10000, "reconnect.backoff.max.ms": 10000})
p.poll(float(sys.argv[3]))
'''


class TlsRun:
    """The TLS scenario: no mock cluster, a Python TLS server on TLS_PORT."""

    def __init__(self, name: str, description: str) -> None:
        import ssl

        self.name = name
        self.tcpdump: Tcpdump | None = None
        self.truth: dict[str, Any] = {
            "format": TRUTH_FORMAT, "scenario": name, "description": description,
            "generated_by": "captures/make_captures.py",
            "generated_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "pcap": f"{name}.pcap", "client_library": {},
            "tls_server": {"implementation": "Python ssl (make_captures.TlsServer)",
                           "openssl": ssl.OPENSSL_VERSION, "port": TLS_PORT,
                           "minimum_version": "TLSv1.2"},
            "broker_ports": [TLS_PORT], "capture": {}, "tls_connections": [],
            "produced": [], "consumed": [], "requests": [], "notes": [],
        }
        _ACTIVE_RUNS.append(self)  # type: ignore[arg-type]

    def abort(self) -> None:
        if self.tcpdump is not None:
            self.tcpdump.kill()

    def finish(self) -> Path:
        path = CAPTURES / f"{self.name}.truth.json"
        path.write_text(dump_truth(self.truth))
        return path


def scenario_tls_handshake() -> TlsRun:
    import ssl
    import tempfile

    run = TlsRun("tls_handshake",
                 f"Kafka over TLS on 127.0.0.1:{TLS_PORT} (a Python ssl server with a "
                 f"self-signed certificate for {TLS_SNI}; no Kafka broker behind it). Three "
                 "connections, each with SNI broker1.kafka.test: (1) librdkafka "
                 "(confluent-kafka, security.protocol=SSL) offering TLS 1.3 and 1.2, full "
                 "handshake, then its ApiVersions request encrypted; the server reads it and "
                 "closes; (2) Python ssl client limited to TLS 1.2 (no supported_versions "
                 "extension), sends an ApiVersions v0 request inside TLS; (3) Python ssl client "
                 "offering only TLS 1.3, same request. Nothing Kafka is readable on the wire.")
    run.truth["client_library"] = {**confluent_version(), "python_ssl": ssl.OPENSSL_VERSION}
    with tempfile.TemporaryDirectory(prefix="ks-tls-") as tmp:
        tmpdir = Path(tmp)
        cert = make_self_signed_cert(tmpdir)
        run.truth["tls_server"]["certificate"] = cert["summary"]
        hosts = tmpdir / "hosts"
        hosts.write_text(f"127.0.0.1 localhost\n127.0.0.1 {TLS_SNI}\n")
        server = TlsServer(cert["cert"], cert["key"])
        server.start()
        run.tcpdump = start_tcpdump(run.name, [TLS_PORT], run.truth)
        clients: list[dict[str, Any]] = []
        # (1) librdkafka in a private mount namespace whose /etc/hosts names TLS_SNI, so
        # librdkafka connects by that name and puts it in the SNI (nothing changes outside).
        argv = ["unshare", "-m", "sh", "-c",
                'mount --bind "$0" /etc/hosts && exec "$@"', str(hosts), sys.executable,
                "-c", _TLS_RDKAFKA_CLIENT, f"{TLS_SNI}:{TLS_PORT}", str(cert["cert"]), "2.0"]
        t0 = now_ns()
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        log_lines = [ln for ln in proc.stderr.splitlines()
                     if re.search(r"SSL|TLS|Sent |Received |Connected|Disconnected|"
                                  r"handshake|certificate|failed", ln)]
        clients.append({"client": "librdkafka", "client_id": "ks-tls-librdkafka",
                        "how": "confluent-kafka Producer, security.protocol=SSL, "
                               f"bootstrap.servers={TLS_SNI}:{TLS_PORT}, ssl.ca.location="
                               "the self-signed certificate",
                        "started_ts_ns": t0, "exit_code": proc.returncode,
                        "client_log_excerpts": log_lines[:60]})
        if proc.returncode != 0:
            raise SystemExit(f"librdkafka TLS client failed ({proc.returncode}): "
                             f"{proc.stderr[-2000:]}")
        time.sleep(0.3)
        # (2) and (3): Python ssl clients with a fixed version range
        import socket

        request = b"".join([(18).to_bytes(2, "big"), (0).to_bytes(2, "big"),
                            (1).to_bytes(4, "big"), len(b"ks-tls-python").to_bytes(2, "big"),
                            b"ks-tls-python"])
        frame = len(request).to_bytes(4, "big") + request
        for label, vmin, vmax in [("python-ssl-tls12", ssl.TLSVersion.TLSv1_2,
                                   ssl.TLSVersion.TLSv1_2),
                                  ("python-ssl-tls13", ssl.TLSVersion.TLSv1_3,
                                   ssl.TLSVersion.TLSv1_3)]:
            ctx = ssl.create_default_context(cafile=str(cert["cert"]))
            ctx.minimum_version, ctx.maximum_version = vmin, vmax
            t0 = now_ns()
            with socket.create_connection(("127.0.0.1", TLS_PORT), timeout=5) as raw:
                with ctx.wrap_socket(raw, server_hostname=TLS_SNI) as tls:
                    local_port = raw.getsockname()[1] if raw.fileno() >= 0 else None
                    version = tls.version()
                    tls.sendall(frame)
                    try:
                        tls.recv(1)  # the server closes after reading the request
                    except (ssl.SSLError, OSError):
                        pass
            clients.append({"client": label, "client_id": "ks-tls-python",
                            "how": f"Python ssl client, versions {vmin.name}..{vmax.name}, "
                                   f"server_hostname={TLS_SNI}",
                            "started_ts_ns": t0, "local_port": local_port,
                            "negotiated_version": version,
                            "kafka_request_sent_inside_tls": {
                                "api_key": 18, "api_name": "ApiVersions", "api_version": 0,
                                "correlation_id": 1, "client_id": "ks-tls-python",
                                "frame_hex": frame.hex()}})
            time.sleep(0.3)
        stop_tcpdump(run.tcpdump, run.truth)
        server.stop()
    for i, entry in enumerate(server.connections):
        entry["client"] = clients[i]["client"] if i < len(clients) else None
    run.truth["tls_connections"] = server.connections
    run.truth["clients"] = clients
    run.truth["notes"] += [
        "tls_connections is what the TLS server saw, one entry per accepted connection in "
        "order: client_hello is parsed from the ClientHello handshake message handed to the "
        "server by OpenSSL (ssl.SSLContext._msg_callback), kafka_request_inside_tls is the "
        "header of the first Kafka request the server decrypted. Nothing is taken from the pcap.",
        "versions_offered: the supported_versions extension if present, else the "
        "ClientHello's legacy_version.",
        "The server closes each connection after reading one request (close_notify alert, "
        "FIN). librdkafka logs \"SSL connection closed by peer\" (it would reconnect after "
        "10 s); its poll() returns on that error event and the client process exits. The "
        "kafka requests inside TLS are not in 'requests' (a decoder cannot see them).",
        "librdkafka ran in a private mount namespace (unshare -m) with /etc/hosts bind-"
        f"mounted to a file naming {TLS_SNI} = 127.0.0.1, so it connects by that name and "
        "sends it as SNI; the host's /etc/hosts is untouched.",
    ]
    return run


def check_tls(name: str) -> dict[str, Any]:
    """tshark: no truncated packet; the ClientHellos' SNI and versions equal the truth."""
    truth = json.loads((CAPTURES / f"{name}.truth.json").read_text())
    pcap = CAPTURES / f"{name}.pcap"
    out = subprocess.run(
        ["tshark", "-r", str(pcap), "-n", "-T", "fields", "-E", "separator=|",
         "-e", "frame.len", "-e", "frame.cap_len", "-e", "tcp.stream",
         "-e", "tls.handshake.type", "-e", "tls.handshake.extensions_server_name",
         "-e", "tls.handshake.extensions.supported_version"],
        capture_output=True, text=True, check=True).stdout
    packets = truncated = 0
    hellos = []
    streams = set()
    for line in out.splitlines():
        flen, clen, stream, htype, sni, versions = line.split("|")
        packets += 1
        truncated += flen != clen
        streams.add(stream)
        if "1" in htype.split(","):
            hellos.append((sni, versions))
    problems = []
    if truncated:
        problems.append(f"{truncated} truncated packets")
    want = [c.get("client_hello", {}).get("sni") for c in truth["tls_connections"]]
    if [h[0] for h in hellos] != want:
        problems.append(f"ClientHello SNI {hellos} != truth {want}")
    summary = {"pcap_bytes": pcap.stat().st_size, "packets": packets,
               "tcp_streams": len(streams), "client_hellos": hellos, "problems": problems}
    if problems:
        raise SystemExit(f"{name}: " + "; ".join(problems))
    return summary


# --------------------------------------------------------------------------- check


def check_capture(name: str) -> dict[str, Any]:
    """Cross-check NAME.pcap against NAME.truth.json with tshark (independent dissector).

    Returns a summary; raises SystemExit when the pcap has truncated packets, when a
    request the clients reported is missing on the wire, or when (outside mid-stream
    captures) tshark's request counts per API differ from the mock's request tracking.
    """
    truth = json.loads((CAPTURES / f"{name}.truth.json").read_text())
    pcap = CAPTURES / f"{name}.pcap"
    ports = set(truth["broker_ports"])
    argv = ["tshark", "-r", str(pcap), "-n"]
    for p in sorted(ports):
        argv += ["-d", f"tcp.port=={p},kafka"]
    argv += ["-T", "fields", "-E", "separator=|", "-e", "frame.len", "-e", "frame.cap_len",
             "-e", "tcp.stream", "-e", "tcp.srcport", "-e", "tcp.dstport",
             "-e", "kafka.api_key", "-e", "kafka.api_version", "-e", "kafka.correlation_id",
             "-e", "frame.time_epoch"]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    packets = truncated = 0
    requests: Counter[tuple[int, int, int, int]] = Counter()
    req_by_api: Counter[int] = Counter()
    responses = 0
    streams: set[str] = set()
    for line in out.splitlines():
        flen, clen, stream, sport, dport, keys, vers, corrs, _ts = line.split("|")
        packets += 1
        truncated += flen != clen
        streams.add(stream)
        if not corrs:
            continue
        corr_list = [int(c) for c in corrs.split(",")]
        if int(dport) in ports:  # client -> broker: requests carry key and version
            key_list = [int(k) for k in keys.split(",")]
            ver_list = [int(v) for v in vers.split(",")]
            for k, v, c in zip(key_list, ver_list, corr_list):
                requests[(int(dport), k, v, c)] += 1
                req_by_api[k] += 1
        else:
            responses += len(corr_list)
    if truncated:
        raise SystemExit(f"{name}: {truncated} truncated packets")
    mid = bool(truth["capture"].get("mid_stream"))
    problems = []
    matched = missing = 0
    remaining = requests.copy()
    t0, t1 = truth["capture"]["started_ts_ns"], truth["capture"]["stopped_ts_ns"]
    for r in truth["requests"]:
        key = (r["broker_port"], r["api_key"], r["api_version"], r["correlation_id"])
        if remaining[key] > 0:
            remaining[key] -= 1
            matched += 1
        elif not mid or t0 + 500_000_000 < r["logged_sent_ts_ns"] < t1 - 500_000_000:
            missing += 1
            problems.append(f"client-reported request not on the wire: {key}")
    mock = {int(k): v for k, v in truth["mock_requests"]["count_by_api_key"].items()}
    # The mock does not track requests for APIs it does not implement (it drops the
    # connection instead of answering): leave those out when they went unanswered.
    rejected = {k for k in req_by_api if k not in mock and all(
        r["response"] is None for r in truth["requests"] if r["api_key"] == k)}
    tracked = {k: v for k, v in req_by_api.items() if k not in rejected}
    if not mid and mock != tracked:
        problems.append(f"per-API request counts differ: mock {mock} tshark {dict(req_by_api)}")
    if mid and any(req_by_api[k] > mock.get(k, 0) for k in req_by_api):
        problems.append("tshark sees more requests than the mock tracked")
    produced = {(m["topic"], m["partition"], m["offset"]): m for m in truth["produced"]}
    same = 0
    for c in truth["consumed"]:
        m = produced.get((c["topic"], c["partition"], c["offset"]))
        if m is None:
            continue
        fields = ("key_hex", "value_hex", "headers", "timestamp_ms")
        if any(m[f] != c[f] for f in fields):
            problems.append(f"consumed record differs from produced: {c}")
        same += 1
    summary = {"pcap_bytes": pcap.stat().st_size, "packets": packets,
               "tcp_streams": len(streams), "requests_tshark": sum(req_by_api.values()),
               "responses_tshark": responses, "client_requests_matched": matched,
               "client_requests_total": len(truth["requests"]),
               "mock_requests": sum(mock.values()),
               "untracked_rejected_api_keys": sorted(rejected),
               "consumed_equal_to_produced": same, "problems": problems}
    if problems:
        raise SystemExit(f"{name}: " + "; ".join(problems[:10]))
    return summary


SCENARIOS: dict[str, Callable[[], Run]] = {
    "librdkafka_produce_consume": scenario_librdkafka_produce_consume,
    "librdkafka_admin": scenario_librdkafka_admin,
    "librdkafka_errors_latency": scenario_librdkafka_errors_latency,
    "librdkafka_acks0": scenario_librdkafka_acks0,
    "kafka_python": scenario_kafka_python,
    "aiokafka": scenario_aiokafka,
    "librdkafka_midstream": scenario_librdkafka_midstream,
    "librdkafka_mock_quirks": scenario_librdkafka_mock_quirks,
    "librdkafka_compression": scenario_librdkafka_compression,
    "librdkafka_transactions": scenario_librdkafka_transactions,
    "librdkafka_kip848": scenario_librdkafka_kip848,
    "librdkafka_share": scenario_librdkafka_share,
    # added with the record-data / codec / TLS work (the 12 above are committed as is)
    "kafka_python_codecs": scenario_kafka_python_codecs,
    "kafka_python_legacy": scenario_kafka_python_legacy,
    "librdkafka_idempotent": scenario_librdkafka_idempotent,
    "tls_handshake": scenario_tls_handshake,  # type: ignore[dict-item]
}
CHECKS: dict[str, Callable[[str], dict[str, Any]]] = {"tls_handshake": check_tls}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenarios", nargs="*", help="scenario names (default: all)")
    parser.add_argument("--list", action="store_true", help="list scenario names")
    parser.add_argument("--check", action="store_true",
                        help="only cross-check existing captures with tshark")
    parser.add_argument("--crafted", action="store_true",
                        help="run captures/craft_captures.py instead (the crafted captures: "
                             "crafted_sasl, crafted_records, crafted_kafka07; no root needed)")
    args = parser.parse_args(argv)
    if args.crafted:
        sys.path.insert(0, str(CAPTURES))
        import craft_captures

        return craft_captures.main(args.scenarios + (["--list"] if args.list else [])
                                   + (["--check"] if args.check else []))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if args.list:
        print("\n".join(SCENARIOS))
        return 0
    unknown = [s for s in args.scenarios if s not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(unknown)}")
    if os.geteuid() != 0:
        log.warning("not root: tcpdump may fail to open the loopback interface")
    if args.check:
        for name in args.scenarios or list(SCENARIOS):
            print(name, json.dumps(CHECKS.get(name, check_capture)(name)))
        return 0
    for noisy in ("kafka", "aiokafka"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    for name in args.scenarios or list(SCENARIOS):
        t0 = time.monotonic()
        _ACTIVE_RUNS.clear()
        try:
            run = SCENARIOS[name]()
        except BaseException:
            for active in _ACTIVE_RUNS:
                active.abort()
            (CAPTURES / f"{name}.pcap").unlink(missing_ok=True)
            raise
        path = run.finish()
        if shutil.which("tshark"):
            log.info("%s: tshark check %s", name,
                     json.dumps(CHECKS.get(name, check_capture)(name)))
        pcap = CAPTURES / f"{name}.pcap"
        log.info("%s: %s (%d bytes), %s, %d requests logged, %.1f s", name, pcap.name,
                 pcap.stat().st_size, path.name, len(run.truth["requests"]),
                 time.monotonic() - t0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
