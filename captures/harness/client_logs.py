"""Requests as the clients report them, from their debug logs (never from the pcap).

librdkafka (confluent-kafka with ``debug: protocol``) logs every request it sends and every
response it receives ("Sent XRequest (vN, B bytes @ ..., CorrId C)"); kafka-python and
aiokafka log theirs at DEBUG. :class:`RequestLog` turns those lines into the truth file's
``requests`` (one dict per request, its ``response`` filled in when it arrives) and
``client_connections``.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from harness.values import API_KEYS, api_name, now_ns


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


def broker_port_of(broker: str) -> int | None:
    """The port of a librdkafka broker handle name (``host:port/...``), else ``None``."""
    m = _BROKER_PORT.match(broker)
    return int(m.group(1)) if m else None


def broker_id_of(broker: str) -> int | None:
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
                    "broker_id": broker_id_of(m["broker"]),
                    "broker_port": broker_port_of(m["broker"]),
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
                                      "broker_id": broker_id_of(m["broker"]),
                                      "broker_port": broker_port_of(m["broker"]),
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
        """The truth's ``request_summary``: ``count`` and ``count_by_api`` (sorted names)."""
        counts: Counter[str] = Counter(r["api_name"] or "?" for r in self.requests)
        return {"count": len(self.requests), "count_by_api": dict(sorted(counts.items()))}

