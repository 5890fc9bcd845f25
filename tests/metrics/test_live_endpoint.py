"""``kafkasniff live --metrics-port``: the endpoint serves, while the capture runs, the
series ``stats --openmetrics`` writes for the same packets (a pcap stream on stdin here,
which needs no capture permission; tests/metrics/test_prometheus.py scrapes a live capture
on loopback with a real Prometheus server)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import threading
import time
import urllib.request

import pytest

from tests.cli.common import run
from tests.live.helpers import LIVE, READY, broker_ports, port_args

from .helpers import parse_openmetrics, sum_by
from .test_openmetrics import ERR

OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"
#: families of the capture itself (live only, or counted differently by a stream)
RUNTIME = ("kafkasniff_packets_captured", "kafkasniff_packets_dropped")


def scrape(url: str, accept: str = OPENMETRICS) -> tuple[str, str]:
    """(content type, body) of one scrape."""
    req = urllib.request.Request(url, headers={"Accept": accept})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.headers.get("Content-Type", ""), r.read().decode()


def exchange_series(text: str) -> list:
    """The samples of an OpenMetrics text, without the capture's own counters, sorted."""
    return sorted((n, sorted(lab.items()), v) for n, lab, v in parse_openmetrics(text)
                  if not n.startswith(RUNTIME))


def start_live(args: list[str], data: bytes) -> tuple[subprocess.Popen, str, list[str]]:
    """``live`` in the background reading ``data`` from stdin, which stays open (live keeps
    serving); returns it, its metrics URL and the stderr lines up to "capturing on"."""
    p = subprocess.Popen(LIVE + args, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=False)

    def feed() -> None:                 # the stream's header is read before capture starts
        p.stdin.write(data)
        p.stdin.flush()

    threading.Thread(target=feed, daemon=True).start()
    lines: list[str] = []
    while not any(READY in line for line in lines):
        line = p.stderr.readline().decode()
        if not line:
            p.kill()
            raise AssertionError(f"live did not start: {lines}")
        lines.append(line.rstrip("\n"))
    url = next(m.group(0) for line in lines
               if (m := re.search(r"http://\S+/metrics", line)))
    return p, url, lines


def test_endpoint_serves_what_stats_writes(tmp_path):
    ports = port_args(broker_ports(ERR))
    om = tmp_path / "stats.txt"
    res = run("stats", "--jobs", "1", "--json", "--metrics-topics", "--openmetrics", om,
              *ports, ERR)
    assert res.exit_code == 0
    want = exchange_series(om.read_text())
    packets = json.loads(res.output)["pipeline"]["packets"]
    p, url, _ = start_live(["-r", "-", "--no-tui", "-q", "--workers", "2", "--metrics-port",
                            "0", "--metrics-topics"] + ports, ERR.read_bytes())
    try:
        deadline = time.monotonic() + 60
        got = None
        while time.monotonic() < deadline:
            _, text = scrape(url)
            got = exchange_series(text)
            if got == want:
                break
            time.sleep(0.2)
        assert got == want
        # the capture's counters: every packet read and decoded, nothing dropped
        s = parse_openmetrics(text)
        assert sum_by(s, "kafkasniff_packets_captured_total") == packets
        assert sum_by(s, "kafkasniff_packets_dropped_total", "reason") == {"queue": 0}
        # Prometheus's text format when the scraper does not ask for OpenMetrics
        ctype, plain = scrape(url, accept="text/plain")
        assert ctype.startswith("text/plain; version=0.0.4")
        assert "kafkasniff_exchanges_total{" in plain and "# EOF" not in plain
    finally:
        p.stdin.close()
        rc = p.wait(timeout=60)
        err = p.stderr.read().decode()
    assert rc == 0, err


def test_port_in_use_fails_before_capture():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = subprocess.run(LIVE + ["-r", os.fspath(ERR), "--no-tui", "--metrics-port",
                                   str(port)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1
    assert p.stderr.startswith(f"kafkasniff: error: --metrics-port {port}")
    assert "in use" in p.stderr and p.stdout == ""


def test_server_on_ipv6_loopback_answers_scrapes():
    from kafkasniff.metrics.server import LiveMetrics

    try:
        m = LiveMetrics("::1", 0)
    except OSError as exc:
        pytest.skip(f"no IPv6 loopback here: {exc}")
    try:
        m.runtime = lambda: {"packets_decoded": 3, "issues": {"tcp_gap": 1}}
        m.serve()
        assert m.url.startswith("http://[::1]:")
        _, text = scrape(m.url)
        s = parse_openmetrics(text)
        assert sum_by(s, "kafkasniff_packets_decoded_total") == 3
        assert sum_by(s, "kafkasniff_issues_total", "kind") == {"tcp_gap": 1}
    finally:
        m.close()


def test_bad_accept_header_is_a_400_not_a_traceback(capfd):
    """An ``Accept`` version ``prometheus_client`` cannot parse gets ``400 Bad Request``
    (it raised, answered 500 and printed a traceback among the capture's output); the
    server keeps answering good scrapes."""
    import urllib.error

    from kafkasniff.metrics.server import LiveMetrics

    m = LiveMetrics("127.0.0.1", 0)
    m.serve()
    try:
        with pytest.raises(urllib.error.HTTPError) as e:
            scrape(m.url, "application/openmetrics-text; version=zz")
        assert e.value.code == 400
        ctype, body = scrape(m.url)
        assert ctype.startswith("application/openmetrics-text") and body.endswith("# EOF\n")
    finally:
        m.close()
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.parametrize("path", ["/", "/foo", "/metrics/", "/metricsx", "/favicon.ico",
                                  "/metrics/../x", "/METRICS"])
def test_only_metrics_path_is_served(path):
    """The metrics are at ``/metrics`` only (Prometheus's default ``metrics_path``): every
    other path is ``404 Not Found`` with a one-line pointer, over a real HTTP request (the
    endpoint answered the whole exposition on any path); ``/metrics`` with a query string
    still answers."""
    import http.client

    from kafkasniff.metrics.server import LiveMetrics

    m = LiveMetrics("127.0.0.1", 0)
    m.runtime = lambda: {"packets_decoded": 1}
    m.serve()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", m.port, timeout=10)
        conn.request("GET", path, headers={"Accept": OPENMETRICS})
        r = conn.getresponse()
        body = r.read().decode()
        conn.close()
        assert r.status == 404, (path, r.status, body[:200])
        assert r.getheader("Content-Type", "").startswith("text/plain")
        assert "kafkasniff_" not in body and "/metrics" in body
        assert body.count("\n") == 1
        _, text = scrape(m.url + "?x=1")
        assert sum_by(parse_openmetrics(text), "kafkasniff_packets_decoded_total") == 1
    finally:
        m.close()
