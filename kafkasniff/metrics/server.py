"""The HTTP endpoint of ``kafkasniff live --metrics-port PORT`` (docs/metrics.md).

:class:`LiveMetrics` holds the collector's :class:`~kafkasniff.metrics.families.ExchangeMetrics`
(decoders' deltas are merged into it with their caps applied), and serves it, with the
capture's counters read at each scrape, on ``http://HOST:PORT/metrics`` (only there: any
other path is ``404 Not Found``) with ``prometheus_client``'s WSGI application: the
Prometheus text format (0.0.4), or OpenMetrics 1.0.0 when the scraper asks for it
(``Accept: application/openmetrics-text``, as Prometheus does), gzip-compressed when asked.

The socket is bound by the constructor (so that a port in use fails before the capture
starts) and served by a daemon thread from :meth:`LiveMetrics.serve` (called after the live
engine has forked its processes: no thread exists when they fork).
"""

from __future__ import annotations

import socket
import threading
from socketserver import ThreadingMixIn
from typing import Callable
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from kafkasniff.metrics.families import ExchangeMetrics, MetricsCollector

__all__ = ["METRICS_PATH", "LiveMetrics", "snapshot_runtime"]


class _QuietHandler(WSGIRequestHandler):
    """No access log on stderr (it would mix with the capture's output)."""

    def log_message(self, format, *args) -> None:  # noqa: A002 - the base class's name
        pass


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        """A client gone mid-answer: nothing to report (no traceback on stderr)."""


#: the one path the metrics are served on (Prometheus's default ``metrics_path``)
METRICS_PATH = "/metrics"
_NOT_FOUND = f"404 not found: kafkasniff serves its metrics at {METRICS_PATH}\n".encode()


def _guarded(app):
    """``app`` on :data:`METRICS_PATH` only (``prometheus_client``'s application answers
    every path, ``/favicon.ico`` with an empty 200): any other path is ``404 Not Found``
    with a one-line pointer. The query string is the application's (``?name[]=``).
    And ``400 Bad Request`` to an ``Accept`` header ``prometheus_client`` cannot parse
    (e.g. ``application/openmetrics-text; version=zz``, on which it raises
    ``TypeError``/``ValueError``, answers 500 and prints a traceback on stderr)."""
    from prometheus_client.exposition import choose_encoder

    def wsgi(environ, start_response):
        if environ.get("PATH_INFO") != METRICS_PATH:
            start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8"),
                                             ("Content-Length", str(len(_NOT_FOUND)))])
            return [_NOT_FOUND]
        try:
            choose_encoder(environ.get("HTTP_ACCEPT"))
        except (TypeError, ValueError) as e:
            body = f"bad Accept header: {e}\n".encode()
            start_response("400 Bad Request", [("Content-Type", "text/plain; charset=utf-8"),
                                               ("Content-Length", str(len(body)))])
            return [body]
        return app(environ, start_response)
    return wsgi


class _Server6(_Server):
    address_family = socket.AF_INET6


def snapshot_runtime(snap) -> dict:
    """The ``runtime`` counters of :func:`~kafkasniff.metrics.families.metric_families` from
    a live :class:`kafkasniff.live.collector.Snapshot` (packets captured and decoded, kernel
    and queue drops, issues by kind; the kernel's count is ``None`` for a stream)."""
    return {"packets_captured": snap.captured, "packets_decoded": snap.decoded,
            "drops": {"kernel": snap.kernel_drops, "queue": snap.queue_drops},
            "issues": dict(snap.issues)}


class LiveMetrics:
    """Metrics of a live capture, served over HTTP.

    Args:
        host: address to listen on (``127.0.0.1``, ``0.0.0.0``, ``::`` ...).
        port: TCP port (0: any free port, see :attr:`port`).
        topics / max_values: as :class:`~kafkasniff.metrics.families.ExchangeMetrics`.

    Raises:
        OSError: the address cannot be bound (in use, not an address of this host, no
            permission); ``socket.gaierror`` for a host name that does not resolve.
    """

    def __init__(self, host: str, port: int, topics: bool = False,
                 max_values: int = 100) -> None:
        from prometheus_client import CollectorRegistry, make_wsgi_app

        self.metrics = ExchangeMetrics(topics=topics, max_values=max_values)
        self.lock = threading.Lock()
        self.runtime: Callable[[], dict] | None = None
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(MetricsCollector(self.metrics, self._runtime, self.lock))
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
        family, _, _, _, addr = infos[0]
        cls = _Server6 if family == socket.AF_INET6 else _Server
        self.httpd = make_server(addr[0], port, _guarded(make_wsgi_app(self.registry)), cls,
                                 handler_class=_QuietHandler)
        self.host = addr[0]
        self.port = self.httpd.server_address[1]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://HOST:PORT/metrics``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{METRICS_PATH}"

    def settings(self) -> dict:
        """What decoders need to count the same way (``LiveConfig.metrics``)."""
        return self.metrics.settings()

    def merge(self, delta: dict) -> None:
        """Add a decoder's delta (``DecoderOutput.metrics``)."""
        with self.lock:
            self.metrics.merge(delta)

    def _runtime(self) -> dict:
        rt = self.runtime
        return rt() if rt is not None else {}

    def serve(self) -> None:
        """Answer scrapes from a daemon thread (until :meth:`close` or the process ends)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self.httpd.serve_forever,
                                            name="kafkasniff-metrics", daemon=True)
            self._thread.start()

    def close(self) -> None:
        """Stop serving and close the socket."""
        if self._thread is not None:
            self.httpd.shutdown()
            self._thread.join(5)
            self._thread = None
        self.httpd.server_close()
