"""The collector: the main process side of the live engine.

:class:`LiveSession` forks the decoders and the capture process, reads the result queue
(:mod:`kafkasniff.live.messages`) and hands what decoders send to its callbacks (stdout
lines / JSON, the terminal UI), forwards the topic ids one decoder learns to the others,
runs the end barrier, sums the counters (:meth:`LiveSession.snapshot`: a
:class:`Snapshot`), and stops everything in order.

See :mod:`kafkasniff.live` for how the parts fit together.
"""

from __future__ import annotations

import multiprocessing as mp
import queue as queue_mod
import time
from dataclasses import dataclass
from typing import Any, Callable

from kafkasniff.live.capture import capture_main
from kafkasniff.live.config import (C_DISPATCHED, C_DONE, C_KERNEL_DROPS, C_KERNEL_RECEIVED,
                                    C_PACKETS, C_PACKETS_AT_STATS, C_QUEUE_DROPS, C_RING_PENDING,
                                    C_STARTED_NS, C_WRITTEN, CONN_ID_STRIDE, N_COUNTERS,
                                    LiveConfig)
from kafkasniff.live.decoder import decoder_main
from kafkasniff.live.messages import (AllFed, CaptureFailed, DecoderDone, DecoderFailed,
                                      DecoderFed, DecoderOutput, DetailReply, DetailRequest,
                                      KeptExchanges, TopicIdsLearned)

__all__ = [
    "LiveSession",
    "Snapshot",
    "merge_stats",
]


@dataclass
class Snapshot:
    """Counters of a live session at one moment (what stats lines and the summary show).

    Attributes:
        elapsed_s: seconds since capture started.
        captured: packets read from the source (after the kernel filter), as of the last
            reading of the kernel counters (at most 0.1 s old; <= ``kernel_received``).
        captured_bytes: captured bytes of the packets decoded so far.
        kernel_received / kernel_drops: ``PACKET_STATISTICS`` (``None`` for streams).
        queue_drops: packets dropped because a decoder queue was full.
        decoded: packets the decoders have processed.
        backlog: packets captured or waiting in the kernel rings, not decoded yet (how far
            behind the decoders are).
        exchanges / issues: by status / by kind, all decoders.
        kafka_connections / other_connections: TCP connections.
        written: packets written to ``--write`` files.
        stats: merged pipeline statistics (dict, see ``PipelineStats``).
    """

    elapsed_s: float
    captured: int
    captured_bytes: int
    kernel_received: int | None
    kernel_drops: int | None
    queue_drops: int
    decoded: int
    backlog: int
    exchanges: dict
    issues: dict
    kafka_connections: int
    other_connections: int
    written: int
    stats: dict

    @property
    def exchange_count(self) -> int:
        """Exchanges of every status."""
        return sum(self.exchanges.values())

    @property
    def issue_count(self) -> int:
        """Issues of every kind."""
        return sum(self.issues.values())

    def to_dict(self) -> dict:
        """The JSON stats object's fields (``--json``: ``packets``, ``kernel_drops`` ...;
        the kernel counters are ``None`` for streams)."""
        return {"elapsed_s": round(self.elapsed_s, 3), "packets": self.captured,
                "bytes": self.captured_bytes, "kernel_received": self.kernel_received,
                "kernel_drops": self.kernel_drops, "queue_drops": self.queue_drops,
                "decoded_packets": self.decoded, "backlog": self.backlog,
                "exchanges": self.exchange_count,
                "exchanges_by_status": self.exchanges, "issues": self.issue_count,
                "issues_by_kind": self.issues, "kafka_connections": self.kafka_connections,
                "other_connections": self.other_connections, "written_packets": self.written,
                "skipped": self.stats.get("skipped", {})}


def _add_into(into: dict, counts: dict) -> None:
    """Add nested counters ``counts`` into ``into``."""
    for k, v in counts.items():
        if isinstance(v, dict):
            _add_into(into.setdefault(k, {}), v)
        else:
            into[k] = into.get(k, 0) + v


def merge_stats(parts: list[dict]) -> dict:
    """Sum decoder stats dicts."""
    out: dict = {"packets": 0, "packet_bytes": 0, "skipped": {}, "tcp_segments": 0,
                 "kafka_connections": 0, "other_connections": 0, "other_bytes": 0,
                 "tls_connections": 0, "tls_secrets_blocks": 0, "kafka07_connections": 0,
                 "exchanges": {},
                 "issues": {}, "first_ts_ns": 0, "last_ts_ns": 0, "bytes": {}, "budgets": {}}
    for p in parts:
        if not p:
            continue
        for k, v in p.items():
            if isinstance(v, dict):
                _add_into(out.setdefault(k, {}), v)
            elif k == "first_ts_ns":
                if v and (not out[k] or v < out[k]):
                    out[k] = v
            elif k == "last_ts_ns":
                out[k] = max(out[k], v)
            else:
                out[k] += v
    return out


class LiveSession:
    """Runs a live capture: start the processes, collect, stop in order.

    Args:
        backend: an opened backend (:mod:`kafkasniff.live.backends`), inherited by the
            capture process (fork).
        cfg: :class:`LiveConfig`.
        on_output: ``on_output(items)`` with ``items`` a list of ``(kind, text)``
            (``"e"`` exchange, ``"i"`` issue) in the order a decoder produced them.
        on_extra: ``on_extra(wid, items)`` with the terminal UI's data (``cfg.tui``): a
            list of ``("x", light exchange)``, ``("i", issue)``, ``("c", connection summary)``.
        on_detail: ``on_detail(request_id, exchange or None)``: a decoder's answer to
            :meth:`request_detail`.

    Two more callbacks are attributes, set after construction: ``on_learned(learned)``
    with the topic ids a decoder learnt (``(topic_id, name, ts_ns)`` tuples), and
    ``on_kept(exchanges)`` with a decoder's last whole exchanges at the end (``cfg.tui``),
    and ``on_metrics(delta)`` with a decoder's metrics delta (``cfg.metrics``).
    Callbacks run in the thread that calls :meth:`poll` / :meth:`run`.

    ``run()`` blocks until the capture ends (stop requested, stream ended, or a process
    failed) and returns the final :class:`Snapshot`; ``errors`` lists failures (text, no
    exception is raised for them). What a ``-r`` stream's reader met (a truncated file)
    comes from decoder 0 as a standalone issue, as ``read`` reports it.
    """

    def __init__(self, backend, cfg: LiveConfig,
                 on_output: Callable[[list], None] | None = None,
                 on_extra: Callable[[int, Any], None] | None = None,
                 on_detail: Callable[[int, Any], None] | None = None) -> None:
        self.backend = backend
        self.cfg = cfg
        self.on_output = on_output or (lambda items: None)
        self.on_extra = on_extra or (lambda wid, payload: None)
        self.on_detail = on_detail or (lambda rid, ex: None)
        self.on_learned: Callable[[list], None] = lambda learned: None
        self.on_kept: Callable[[list], None] = lambda exchanges: None
        self.on_metrics: Callable[[dict], None] = lambda delta: None
        self.errors: list[str] = []
        self.ctx = mp.get_context("fork")
        self.counters = self.ctx.RawArray("q", N_COUNTERS)
        self.stop_ev = self.ctx.Event()
        self.worker_stats: list[dict] = [{} for _ in range(cfg.workers)]
        self.done: set[int] = set()
        self.fed: set[int] = set()
        self._all_fed_sent = False
        self.started_mono = 0.0
        self.stop_reason = ""
        self.procs: list = []
        self._started = False

    # ----------------------------------------------------------------- lifecycle
    def start(self) -> None:
        """Fork the decoders and the capture process."""
        from kafkasniff.protocol.schema import load_definitions

        ctx = self.ctx
        n = self.cfg.workers
        defs = load_definitions(self.cfg.pipeline.get("definitions_dir"))  # shared by fork
        from kafkasniff.parallel.shm import Channel

        self.inqs = [Channel(self.cfg.queue_bytes // n) for _ in range(n)]
        self.ctlqs = [ctx.Queue() for _ in range(n)]
        self.resq = ctx.Queue(256)
        self.errq = ctx.Queue()
        _big_pipe(self.resq)
        for wid in range(n):
            p = ctx.Process(target=decoder_main, name=f"kafkasniff-decoder-{wid}",
                            args=(wid, self.cfg, self.inqs[wid], self.ctlqs[wid], self.resq,
                                  defs), daemon=True)
            p.start()
            self.procs.append(p)
        self.capture_proc = ctx.Process(target=capture_main, name="kafkasniff-capture",
                                        args=(self.backend, self.cfg, self.inqs, self.counters,
                                              self.stop_ev, self.errq), daemon=True)
        self.capture_proc.start()
        # the capture process owns the sockets and rings now
        release = getattr(self.backend, "release_in_parent", None)
        if release is not None:
            try:
                release()
            except (BufferError, ValueError, OSError):
                pass
        self.started_mono = time.monotonic()
        self._started = True

    def request_stop(self, reason: str = "stop") -> None:
        """Ask for an orderly stop (safe from a signal handler)."""
        if not self.stop_reason:
            self.stop_reason = reason
        self.stop_ev.set()

    @property
    def stopping(self) -> bool:
        """A stop was requested (the capture may still be draining)."""
        return self.stop_ev.is_set()

    def poll(self, timeout: float = 0.1) -> bool:
        """Handle what arrived within ``timeout`` s; False once every decoder is done."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                msg = self.resq.get(timeout=left) if left > 0 else self.resq.get_nowait()
            except queue_mod.Empty:
                break
            self._handle(msg)
            if len(self.done) == self.cfg.workers:
                break
            if time.monotonic() >= deadline:
                break
        self._check_processes()
        return len(self.done) < self.cfg.workers

    def _handle(self, msg) -> None:
        """One message of the result queue (:mod:`kafkasniff.live.messages`)."""
        t = type(msg)
        if t is DecoderOutput:
            wid = msg.wid
            self.worker_stats[wid] = msg.stats
            learned = msg.learned
            if learned:
                self.on_learned(learned)
                for other in range(self.cfg.workers):
                    if other != wid and other not in self.done:
                        self.ctlqs[other].put(TopicIdsLearned(learned))
            if msg.items:
                self.on_output(msg.items)
            if msg.extra:
                self.on_extra(wid, msg.extra)
            if msg.metrics:
                self.on_metrics(msg.metrics)
        elif t is DetailReply:
            self.on_detail(msg.request_id, msg.exchange)
        elif t is DecoderFed:
            self.fed.add(msg.wid)
            self._maybe_all_fed()
        elif t is KeptExchanges:
            self.on_kept(msg.exchanges)
        elif t is DecoderDone:
            self.worker_stats[msg.wid] = msg.stats
            self.done.add(msg.wid)
            self._maybe_all_fed()
        elif t is DecoderFailed:
            self.errors.append(f"decoder {msg.wid} failed: {msg.error}")
            self._tb = msg.traceback
            self.done.add(msg.wid)
            self._maybe_all_fed()
            self.request_stop("error")

    def _maybe_all_fed(self) -> None:
        if not self._all_fed_sent and len(self.fed | self.done) >= self.cfg.workers:
            self._all_fed_sent = True
            for wid in range(self.cfg.workers):
                if wid not in self.done:
                    self.ctlqs[wid].put(AllFed())

    def request_detail(self, request_id: int, conn_id: int, key: tuple) -> bool:
        """Ask the decoder of connection ``conn_id`` for a kept whole exchange, ``key``
        ``(conn_id, correlation_id, ts_ns)`` (answered through ``on_detail`` with
        ``request_id``). False if that decoder is gone."""
        wid = conn_id // CONN_ID_STRIDE if conn_id >= 0 else 0
        if not 0 <= wid < self.cfg.workers or wid in self.done:
            return False
        self.ctlqs[wid].put(DetailRequest(request_id, key))
        return True

    def _check_processes(self) -> None:
        while True:
            try:
                msg = self.errq.get_nowait()
            except queue_mod.Empty:
                break
            t = type(msg)
            if t is CaptureFailed:
                self.errors.append(f"capture failed: {msg.error}")
                self._tb = msg.traceback
                self.request_stop("error")
        for wid, p in enumerate(self.procs):
            if wid not in self.done and not p.is_alive():
                # its last messages may still be in the pipe: read them first
                deadline = time.monotonic() + 2.0
                while wid not in self.done and time.monotonic() < deadline:
                    try:
                        self._handle(self.resq.get(timeout=0.1))
                    except queue_mod.Empty:
                        if p.exitcode != 0:
                            break
                if wid in self.done:
                    continue
                self.errors.append(f"decoder {wid} exited unexpectedly (exit code {p.exitcode})")
                self.done.add(wid)
                self._maybe_all_fed()
                self.request_stop("error")
        if not self.capture_proc.is_alive() and not self.counters[C_DONE]:
            self.errors.append(f"capture process exited unexpectedly "
                               f"(exit code {self.capture_proc.exitcode})")
            self.counters[C_DONE] = 1
            for q in self.inqs:
                q.close_producer(timeout=1)

    def snapshot(self) -> Snapshot:
        """Counters now."""
        c = self.counters
        merged = merge_stats(self.worker_stats)
        kstats = self.backend.has_kernel_stats
        # packets as of the last reading of the kernel's counters (published together, every
        # 0.1 s; read before them): a line never shows more packets than the kernel received
        captured = c[C_PACKETS_AT_STATS] if kstats else c[C_PACKETS]
        started = c[C_STARTED_NS]
        elapsed = (time.time_ns() - started) / 1e9 if started else 0.0
        return Snapshot(
            elapsed_s=elapsed, captured=captured, captured_bytes=merged["packet_bytes"],
            kernel_received=c[C_KERNEL_RECEIVED] if kstats else None,
            kernel_drops=c[C_KERNEL_DROPS] if kstats else None,
            queue_drops=c[C_QUEUE_DROPS], decoded=merged["packets"],
            backlog=max(0, c[C_RING_PENDING] + c[C_DISPATCHED] - merged["packets"]),
            exchanges=merged["exchanges"], issues=merged["issues"],
            kafka_connections=merged["kafka_connections"],
            other_connections=merged["other_connections"], written=c[C_WRITTEN],
            stats=merged)

    def finish(self, timeout: float = 30.0) -> None:
        """After the decoders are done: join every process (kill what hangs)."""
        deadline = time.monotonic() + timeout
        for p in [self.capture_proc] + self.procs:
            p.join(max(0.1, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join(1)

    def kill(self) -> None:
        """Stop every process now (second Ctrl-C)."""
        for p in [self.capture_proc] + self.procs:
            if p.is_alive():
                p.kill()
        for p in [self.capture_proc] + self.procs:
            p.join(1)

    def run(self, on_tick: Callable[["LiveSession"], None] | None = None,
            tick_s: float = 0.1) -> Snapshot:
        """Collect until every decoder is done; ``on_tick(session)`` runs about every
        ``tick_s`` (stats lines, duration and count limits)."""
        if not self._started:
            self.start()
        while self.poll(tick_s):
            if on_tick is not None:
                on_tick(self)
        self.finish()
        return self.snapshot()


def _big_pipe(q) -> None:
    """Let a queue's pipe hold 1 MiB (fewer wake-ups per batch); best effort."""
    try:
        import fcntl
        for conn in (getattr(q, "_writer", None), getattr(q, "_reader", None)):
            if conn is not None:
                fcntl.fcntl(conn.fileno(), 1031, 1 << 20)   # F_SETPIPE_SZ
    except (OSError, ValueError, AttributeError, ImportError):
        pass
