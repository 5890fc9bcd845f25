"""A real Prometheus server (Debian's ``prometheus`` package: ``/usr/bin/prometheus``, run
here with its own configuration, port and storage in a temporary directory) scrapes
``kafkasniff live --metrics-port`` every second while real clients talk to librdkafka's
mock cluster on loopback; the series it stores, read back through its HTTP API, are those
``kafkasniff stats`` reports for the packets ``live --write`` kept of the same traffic.

Skipped without the prometheus binary or without capture permission (CI runs as root and
installs prometheus in .ci/setup)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
import uuid

import pytest

from tests.cli.common import run
from tests.live.helpers import LiveProcess, capture_permission, port_args
from tests.live.test_capture_lo import _confluent, cluster  # noqa: F401 - the fixture

from .helpers import parse_openmetrics, sum_by

PROMETHEUS = shutil.which("prometheus") or (
    "/usr/bin/prometheus" if os.path.exists("/usr/bin/prometheus") else None)

pytestmark = [
    pytest.mark.skipif(PROMETHEUS is None, reason="prometheus is not installed "
                                                  "(apt-get install prometheus)"),
    pytest.mark.skipif(capture_permission() is not None, reason=capture_permission() or ""),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

#: the capture's own counters (compared with live's final stats, not with stats on a file)
RUNTIME = ("kafkasniff_packets_captured", "kafkasniff_packets_dropped",
           "kafkasniff_packets_decoded")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    """``/usr/bin/prometheus`` scraping one target every second."""

    def __init__(self, tmp_path, target: str) -> None:
        self.port = _free_port()
        cfg = tmp_path / "prometheus.yml"
        cfg.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            "scrape_configs:\n  - job_name: kafkasniff\n"
            f"    static_configs:\n      - targets: ['{target}']\n")
        self.log = open(tmp_path / "prometheus.log", "w")
        self.argv = [PROMETHEUS, f"--config.file={cfg}",
                     f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                     f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"]

    def start(self, timeout: float = 60) -> "Prometheus":
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"prometheus exited {self.proc.returncode}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready",
                                            timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError("prometheus did not become ready")

    def query(self, expr: str) -> list[dict]:
        """An instant query's result vector (``[{"metric": {...}, "value": [t, "v"]}]``)."""
        url = (f"http://127.0.0.1:{self.port}/api/v1/query?"
               + urllib.parse.urlencode({"query": expr}))
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        return body["data"]["result"]

    def targets_up(self) -> bool:
        return any(float(r["value"][1]) == 1 for r in self.query('up{job="kafkasniff"}'))

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.log.close()


def _scrape(url: str) -> str:
    req = urllib.request.Request(url, headers={
        "Accept": "application/openmetrics-text; version=1.0.0"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.read().decode()


def _samples(prom: Prometheus) -> list[tuple[str, dict, float]]:
    """Every kafkasniff and OpenTelemetry series Prometheus holds now, as
    ``(name, labels, value)`` without the labels Prometheus adds (job, instance)."""
    out = []
    for r in prom.query('{__name__=~"kafkasniff_.*|messaging_.*",job="kafkasniff"}'):
        labels = dict(r["metric"])
        name = labels.pop("__name__")
        labels.pop("job")
        labels.pop("instance")
        out.append((name, {k: v for k, v in labels.items() if v != ""}, float(r["value"][1])))
    return out


def _comparable(samples) -> list:
    return sorted((n, sorted((k, v) for k, v in lab.items() if v != ""), v)
                  for n, lab, v in samples if not n.startswith(RUNTIME))


def test_prometheus_scrapes_live_and_the_series_match_stats(cluster, tmp_path):  # noqa: F811
    cluster.create_topic("metrics-prom", 3)
    ports = cluster.broker_ports
    pcap = tmp_path / "live.pcapng"
    live = LiveProcess(["-i", "lo", "--no-tui", "--json", "--workers", "2", "-w", str(pcap),
                        "--metrics-port", "0", "--metrics-topics"] + port_args(ports),
                       tmp_path / "live.jsonl").start()
    url = next(line.split(" on ", 1)[1] for line in live.stderr_lines
               if line.startswith("kafkasniff: metrics on "))
    prom = Prometheus(tmp_path, url.split("//", 1)[1].split("/", 1)[0]).start()
    try:
        deadline = time.monotonic() + 60
        while not prom.targets_up():
            assert time.monotonic() < deadline, "prometheus never scraped kafkasniff"
            time.sleep(0.5)
        _confluent(cluster.bootstrap_servers, "metrics-prom", 60,
                   f"prom{uuid.uuid4().hex[:6]}")
        # the clients have closed their connections: wait until live has decoded every
        # packet, its endpoint has stopped changing, and Prometheus holds that state
        deadline = time.monotonic() + 90
        stable = 0
        prev = None
        while True:
            assert time.monotonic() < deadline, "the series never settled"
            s = parse_openmetrics(_scrape(url))
            now = _comparable(s)
            decoded = (sum_by(s, "kafkasniff_packets_captured_total")
                       == sum_by(s, "kafkasniff_packets_decoded_total"))
            stable = stable + 1 if decoded and now == prev else 0
            prev = now
            if stable >= 3 and _comparable(_samples(prom)) == now:
                break
            time.sleep(0.5)
        stored = _samples(prom)
    finally:
        rc = live.stop(signal.SIGINT)
        prom.stop()
    assert rc == 0, live.stderr
    final = [d for d in live.json_lines() if d.get("type") == "stats"][-1]
    assert final["final"]

    # the same packets, kept by --write, through `stats`
    om = tmp_path / "stats.txt"
    res = run("stats", "--json", "--jobs", "1", "--metrics-topics", "--openmetrics", om,
              *port_args(ports), pcap)
    assert res.exit_code == 0
    rep = json.loads(res.output)
    assert len(stored) > 500
    assert _comparable(stored) == _comparable(parse_openmetrics(om.read_text()))
    # ... and the numbers of the stats report itself
    assert sum_by(stored, "kafkasniff_exchanges_total") == rep["total"]["count"] > 20
    for api, row in rep["apis"].items():
        assert sum_by(stored, "kafkasniff_exchanges_total", "status", api_name=api) == \
            {k: float(v) for k, v in row["statuses"].items()}, api
        assert sum_by(stored, "kafkasniff_request_duration_seconds_count", api_name=api) == \
            row["latency_count"], api
        assert sum_by(stored, "kafkasniff_long_poll_duration_seconds_count", api_name=api) == \
            row["long_polls"], api
        assert sum_by(stored, "kafkasniff_request_bytes_total", api_name=api) == \
            row["request_bytes"], api
        assert sum_by(stored, "kafkasniff_response_bytes_total", api_name=api) == \
            row["response_bytes"], api
        assert sum_by(stored, "kafkasniff_errors_total", "error_name", api_name=api) == \
            row["errors"], api
    assert sum_by(stored, "kafkasniff_exchanges_total", "client_id") == \
        {k: r["count"] for k, r in rep["clients"].items()}
    assert sum_by(stored, "kafkasniff_topic_exchanges_total", "topic") == \
        {k: r["count"] for k, r in rep["topics"].items()}
    assert sum_by(stored, "messaging_client_operation_duration_seconds_count",
                  "messaging_operation_type").keys() >= {"send", "receive"}
    # the capture's counters: what live's final stats say, no drops
    assert sum_by(stored, "kafkasniff_packets_captured_total") == final["packets"]
    assert sum_by(stored, "kafkasniff_packets_decoded_total") == final["decoded_packets"]
    assert sum_by(stored, "kafkasniff_packets_dropped_total", "reason") == \
        {"kernel": 0.0, "queue": 0.0}
    assert final["kernel_drops"] == final["queue_drops"] == 0
