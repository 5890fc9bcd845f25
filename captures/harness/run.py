"""One scenario run: the mock cluster, the capture and the truth being recorded.

A scenario module builds a :class:`Run` (or, without the mock cluster, its own class with
the same :class:`ScenarioRun` surface), starts the capture, drives its clients and returns
the run; ``make_captures.py`` then calls :meth:`ScenarioRun.finish` to write
``OUT/NAME.truth.json``, or after a failure :func:`abort_active` to stop tcpdump and the mock
clusters of every run the scenario created.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from _common import TRUTH_FORMAT, dump_truth

from harness.client_logs import RequestLog
from harness.tcpdump import Tcpdump, start_tcpdump, stop_tcpdump
from harness.values import DEFS, TIMESTAMP_TYPES, api_name, now_ns, record_fields
from tests.support.mock_cluster import MockCluster, librdkafka_version

#: the ``generated_by`` of every truth file make_captures.py writes
GENERATED_BY = "captures/make_captures.py"


class ScenarioRun(Protocol):
    """What a scenario's ``run(out_dir)`` returns."""

    name: str
    #: the truth being recorded, written as ``OUT/NAME.truth.json`` by :meth:`finish`
    truth: dict[str, Any]

    def finish(self) -> Path:
        """Write the truth file (after the capture stopped); return its path."""
        ...

    def abort(self) -> None:
        """After a failure: stop tcpdump (what it wrote is discarded) and free resources."""
        ...


_ACTIVE_RUNS: list[ScenarioRun] = []


def track(run: ScenarioRun) -> None:
    """Register ``run`` so that :func:`abort_active` cleans it up if the scenario fails."""
    _ACTIVE_RUNS.append(run)


def abort_active() -> None:
    """Abort every run tracked since the last :func:`clear_active`."""
    for run in _ACTIVE_RUNS:
        run.abort()


def clear_active() -> None:
    """Forget the tracked runs (before the next scenario starts)."""
    _ACTIVE_RUNS.clear()


class Run:
    """One scenario against a librdkafka mock cluster (``num_brokers`` brokers on random
    127.0.0.1 ports): the cluster, the capture (``out_dir/NAME.pcap``), the client request
    log and the truth being recorded (``out_dir/NAME.truth.json``)."""

    def __init__(self, name: str, description: str, num_brokers: int = 3, *,
                 out_dir: Path) -> None:
        self.name = name
        self.out_dir = out_dir
        self.cluster = MockCluster(num_brokers=num_brokers)
        # librdkafka's request-tracking clock is CLOCK_MONOTONIC in microseconds
        self.mono_to_epoch_ns = time.time_ns() - time.monotonic_ns()
        self.log = RequestLog()
        self.tcpdump: Tcpdump | None = None
        self.truth: dict[str, Any] = {
            "format": TRUTH_FORMAT,
            "scenario": name,
            "description": description,
            "generated_by": GENERATED_BY,
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
        track(self)

    def abort(self) -> None:
        """After a failure: stop tcpdump (keeping nothing) and close the cluster."""
        if self.tcpdump is not None:
            self.tcpdump.kill()
        self.cluster.close()

    # topology / injection --------------------------------------------------
    def create_topic(self, name: str, partitions: int) -> None:
        """Create ``name`` on the mock (partition p led by broker p+1) and list it in
        ``topics``."""
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
        self.tcpdump = start_tcpdump(self.out_dir / f"{self.name}.pcap",
                                     self.cluster.broker_ports, self.truth)
        if track_requests:
            self.cluster.start_request_tracking()

    def stop_capture(self) -> None:
        """Stop tcpdump; its stop time and statistics go to ``capture``."""
        assert self.tcpdump is not None
        stop_tcpdump(self.tcpdump, self.truth)

    # records ---------------------------------------------------------------
    def add_produced(self, **fields: Any) -> None:
        """Append one ``produced`` record (thread-safe: delivery callbacks run anywhere)."""
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
        """Append one ``consumed`` record (``timestamp_ms``: the record's timestamp, ms)."""
        self.truth["consumed"].append(dict(
            client=client, topic=topic, partition=partition, offset=offset,
            **record_fields(key, value, headers), timestamp_ms=timestamp_ms,
            received_ts_ns=now_ns()))

    def rdkafka_consumed(self, client: str, msg: Any) -> None:
        """Record a confluent-kafka message as ``consumed`` (with its ``timestamp_type``)."""
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
        path = self.out_dir / f"{self.name}.truth.json"
        path.write_text(dump_truth(t))
        return path
