"""The terminal UI over live traffic: a :class:`kafkasniff.tui.source.DataSource` fed by the
live engine.

Decoders send light exchanges (no bodies, record data as counts), standalone issues and
connection summaries (:class:`kafkasniff.live.outputs.DecoderSink` with ``cfg.tui``); the
source's thread runs the engine's collector, turns them into the TUI's compact rows
(:class:`~kafkasniff.tui.store.SummaryBuilder`) and dashboards
(:class:`~kafkasniff.tui.aggregates.Aggregates`) and publishes a batch a few times per
second. The status line carries the kernel and queue drops (the source's ``title``).

Detail view: a decoder keeps its last exchanges whole (5 000, at most 128 MB of frames);
:meth:`LiveDataSource.detail` asks the decoder of the exchange's connection for it. Frame
bytes are not kept live (no hex view); older exchanges show their summary only.

The app is :class:`LiveApp`: Ctrl-C quits like ``q`` (an orderly stop), and it draws on
standard output, the terminal (``2>file`` keeps only messages in the file). Connection ids are
shown interleaved (:meth:`LiveDataSource.shown_id`): decoder ``i`` numbers from
``i * CONN_ID_STRIDE``, ten digits from the second decoder on, cut in the 6-column Id; the
status line cuts the capture's name (interface, filter) so that the drops stay in view
(:func:`fit_title`).

Memory: the TUI's exchange list keeps at most ``max_rows`` rows (about 110 bytes each);
beyond that, new exchanges still count in every dashboard but are not listed (the status line
says so). Aggregates are bounded (see :mod:`kafkasniff.tui.aggregates`).
"""

from __future__ import annotations

import inspect
import itertools
import os
import sys
import threading
import time
from dataclasses import replace
from typing import Sequence

from textual.binding import Binding

from kafkasniff.live.config import CONN_ID_STRIDE
from kafkasniff.model import ConnectionSummary, DecodeIssue, Exchange
from kafkasniff.tui.aggregates import Aggregates
from kafkasniff.tui.app import KafkaSniffApp
from kafkasniff.tui.detail import Detail, kept_detail
from kafkasniff.tui.models import fmt_count
from kafkasniff.tui.source import Progress, ThreadedSource
from kafkasniff.tui.store import RowInfo, SummaryBuilder

__all__ = ["LiveApp", "LiveDataSource", "NoTerminal", "fit_title", "terminal_driver"]

DEFAULT_MAX_ROWS = 1_000_000
#: the name in the status line is cut (with an ellipsis) to leave the drops visible, but
#: keeps at least this many characters
MIN_NAME_CHARS = 12


class NoTerminal(RuntimeError):
    """The terminal UI was asked for without a terminal on standard output."""


def terminal_driver():
    """Textual's Linux driver drawing on standard output instead of its default, standard
    error: ``kafkasniff live 2>errors.txt`` keeps the UI on the terminal and only messages in
    the file. Sizes come from standard output too (``shutil.get_terminal_size``).

    Raises:
        NoTerminal: standard output is not a terminal.
    """
    from textual.drivers.linux_driver import LinuxDriver

    out = sys.__stdout__
    if out is None or not out.isatty():
        raise NoTerminal("the terminal UI needs a terminal on standard output; use --no-tui")

    class StdoutDriver(LinuxDriver):
        def __init__(self, app, **kwargs) -> None:
            super().__init__(app, **kwargs)
            self._file = out

    return StdoutDriver


class LiveApp(KafkaSniffApp):
    """The terminal UI of ``kafkasniff live``: ``kafkasniff tui``'s app, with Ctrl-C
    quitting like ``q`` (the terminal is in raw mode: Ctrl-C is a key, not SIGINT; Textual
    binds it to a hint), which stops the capture in order, and drawing on standard output
    (:func:`terminal_driver`) when run on a terminal."""

    BINDINGS = [Binding("ctrl+c", "quit", "Quit", show=False, priority=True)]
    # Textual reads a relative CSS_PATH next to the subclass's module: the app's own file
    CSS_PATH = os.path.join(os.path.dirname(inspect.getfile(KafkaSniffApp)),
                            KafkaSniffApp.CSS_PATH)

    def get_driver_class(self):
        if os.name == "posix" and sys.__stdout__ is not None and sys.__stdout__.isatty():
            return terminal_driver()
        return super().get_driver_class()


def fit_title(name: str, drops: str, width: int, rest: int) -> str:
    """The status line's title ``name  [drops]`` for a terminal ``width`` columns wide, when
    the status line adds ``rest`` characters of its own (``kafkasniff``, live marker, counts):
    ``name`` (interface, backend, filter) is cut with an ellipsis so that the drop counters
    stay on the line; it keeps at least :data:`MIN_NAME_CHARS`."""
    room = width - rest - len(drops) - 4
    if len(name) > max(room, MIN_NAME_CHARS):
        name = name[:max(room, MIN_NAME_CHARS) - 1].rstrip() + "…"
    return f"{name}  [{drops}]"


class LiveDataSource(ThreadedSource):
    """Live traffic for :class:`kafkasniff.tui.app.KafkaSniffApp`.

    Args:
        session: a started :class:`kafkasniff.live.collector.LiveSession` (``cfg.tui`` on).
        name: what is captured (for the status line).
        show_secrets: secrets are not redacted.
        max_rows: exchanges listed at most (memory bound of the list).
    """

    live = True
    interval_s = 0.25

    def __init__(self, session, name: str, show_secrets: bool = False,
                 max_rows: int = DEFAULT_MAX_ROWS) -> None:
        super().__init__()
        self.session = session
        self.name = name
        self.title = name
        self.show_secrets = show_secrets
        self.max_rows = max_rows
        self.rows = 0
        self.unlisted = 0
        self.builder = SummaryBuilder(self.tables, keep_unlocatable=False)
        self.agg = self._aggregates()
        self._lock_in = threading.Lock()
        self._ids = itertools.count(1)
        self._waiting: dict[int, list] = {}
        self.final = None
        self.app = None
        #: the app is on the screen (nothing else may write to the terminal)
        self.ui_running = False
        self.on_tick = None
        self.workers = session.cfg.workers
        session.on_extra = self.on_extra
        session.on_detail = self.on_detail
        session.on_learned = self.on_learned
        session.on_kept = self.on_kept
        self.kept: dict = {}

    def _aggregates(self) -> Aggregates:
        from kafkasniff.content.summary import TopicRegistry
        from kafkasniff.protocol.schema import load_definitions

        defs = load_definitions(self.session.cfg.pipeline.get("definitions_dir"))
        self.registry = TopicRegistry()     # topic ids the decoders learnt
        return Aggregates(self.registry, defs)

    # ----------------------------------------------------------------- connection ids
    def shown_id(self, conn_id: int) -> int:
        """The id the UI shows for engine connection id ``conn_id``. Decoder ``i`` numbers
        from ``i * CONN_ID_STRIDE`` (unique, but ten digits from the second decoder on); the
        UI interleaves them: connection ``k`` of decoder ``i`` of ``N`` is ``k * N + i``
        (unique, as short as with one decoder, the same with one decoder)."""
        n = self.workers
        if n == 1 or conn_id < 0:
            return conn_id
        return (conn_id % CONN_ID_STRIDE) * n + conn_id // CONN_ID_STRIDE

    def engine_id(self, shown: int) -> int:
        """The engine's connection id of a shown id (inverse of :meth:`shown_id`)."""
        n = self.workers
        if n == 1 or shown < 0:
            return shown
        return (shown % n) * CONN_ID_STRIDE + shown // n

    def _shown(self, rec):
        """``rec`` (exchange, issue, connection summary) with the shown connection ids."""
        t = type(rec)
        if t is Exchange:
            issues = rec.issues
            if issues:
                issues = tuple(self._shown(i) for i in issues)
            return replace(rec, conn_id=self.shown_id(rec.conn_id), issues=issues)
        if t is DecodeIssue:
            if rec.connection_id < 0:
                return rec
            return replace(rec, connection_id=self.shown_id(rec.connection_id))
        if t is ConnectionSummary:
            return replace(rec, conn_id=self.shown_id(rec.conn_id))
        return rec

    # ----------------------------------------------------------------- from the engine
    def on_extra(self, wid: int, items: list) -> None:
        """Light exchanges, issues and connection summaries from a decoder (collector
        thread)."""
        b = self.builder
        agg = self.agg
        remap = self.workers > 1
        for kind, value in items:
            if remap:
                value = self._shown(value)
            if kind == "x":
                agg.add(value)
                if self.rows < self.max_rows:
                    b.add(value)
                    self.rows += 1
                else:
                    self.unlisted += 1
            elif kind == "i":
                agg.add_issue(value)
                b.add_issue(value)
            elif kind == "c":
                agg.add_connection(value)

    def on_learned(self, learned: list) -> None:
        """Topic ids a decoder learnt (per-partition errors name topics with them)."""
        reg = self.registry
        for tid, name, _ts in learned:
            reg.learn(tid, name)
        reg.learned.clear()

    def on_kept(self, exchanges: list) -> None:
        """A decoder's last whole exchanges, handed over when the capture ended."""
        for ex in exchanges:
            ex = self._shown(ex)
            self.kept[(ex.conn_id, ex.correlation_id, ex.ts_ns)] = ex

    def on_detail(self, rid: int, ex) -> None:
        """A decoder's answer to detail request ``rid``: the whole exchange, or ``None``
        when it no longer keeps it (wakes :meth:`detail`)."""
        slot = self._waiting.get(rid)
        if slot is not None:
            slot[1] = ex
            slot[0].set()

    # ----------------------------------------------------------------- the thread
    def _run(self) -> None:
        s = self.session
        last = [0.0]
        n_pub = [0]
        snap = [None]

        def publish(finished: bool = False) -> None:
            c = s.snapshot()
            drops = (f"kernel drops {c.kernel_drops}" if c.kernel_drops is not None
                     else "kernel drops n/a") + f", queue drops {c.queue_drops}"
            title = fit_title(self.name, drops, self._width(), self._status_rest(c))
            if self.unlisted:
                title += f"  [list full: {self.unlisted:,} newest exchanges not listed]"
            self.title = title
            full = finished or n_pub[0] % 4 == 0
            pipeline = dict(c.stats)
            pipeline.update(kernel_received=c.kernel_received, kernel_drops=c.kernel_drops,
                            queue_drops=c.queue_drops, captured=c.captured)
            snap[0] = self.agg.snapshot(full=full, pipeline=pipeline, previous=snap[0])
            n_pub[0] += 1
            self.publish(self.builder.take(), snap[0],
                         Progress(c.captured_bytes, None, True, finished, c.captured,
                                  c.exchange_count, self.name, c.elapsed_s,
                                  "; ".join(s.errors) or None))

        def tick(sess) -> None:
            if self.on_tick is not None:
                self.on_tick(sess)
            now = time.monotonic()
            if now - last[0] >= self.interval_s:
                last[0] = now
                publish()

        self.final = s.run(tick)
        publish(finished=True)

    def _width(self) -> int:
        app = self.app
        try:
            return app.size.width if app is not None and app.size.width else 80
        except Exception:  # noqa: BLE001 - not running yet
            return 80

    def _status_rest(self, c) -> int:
        """What the app's status line shows besides the title (``kafkasniff ``, the live
        marker, exchanges, packets, issues; padding), in characters, about."""
        return (2 + len("kafkasniff ") + len("  ● live")
                + len(f"  {c.exchange_count:,} exchanges  {fmt_count(c.captured)} packets")
                + (len(f"  {c.issue_count:,} issues") if c.issue_count else 0))

    def stop(self) -> None:
        """Stop capturing (orderly: drain, flush) and wait for the last batch."""
        self.session.request_stop("quit")
        super().stop()

    # ----------------------------------------------------------------- detail
    def detail(self, info: RowInfo, issues: Sequence[DecodeIssue] = ()) -> Detail:
        """The whole exchange from the decoder that decoded it, if it still keeps it."""
        key = (info.conn_id, info.correlation_id, info.ts_ns)
        kept = self.kept.get(key)
        if kept is not None:
            return kept_detail(kept, "decoded fields as the live capture decoded them (frame "
                                     "bytes are not kept)")
        rid = next(self._ids)
        slot = [threading.Event(), None]
        self._waiting[rid] = slot
        conn_id = self.engine_id(info.conn_id)
        try:
            if not self.session.request_detail(rid, conn_id, (conn_id,) + key[1:]):
                return Detail(None, {}, "the capture has ended and this exchange is not among "
                                        "the last ones kept (use --write to keep the packets)")
            if not slot[0].wait(5.0):
                return Detail(None, {}, "the decoder did not answer in time")
            ex = slot[1]
        finally:
            self._waiting.pop(rid, None)
        if ex is None:
            return Detail(None, {}, "no longer kept in memory (a decoder keeps its last "
                                    "5,000 exchanges); use --write to keep the packets")
        return kept_detail(self._shown(ex),
                           "live capture: decoded fields (frame bytes are not kept; use "
                           "--write FILE.pcapng and 'kafkasniff tui FILE' for the hex view)")

    # ----------------------------------------------------------------- running the app
    def make_app(self) -> LiveApp:
        """The app over this source (kept in :attr:`app`)."""
        self.app = LiveApp(self)
        return self.app

    def run(self, on_tick=None):
        """Run the terminal UI until the user quits (``q``, Ctrl-C; or the capture ends and
        the user quits); returns the final :class:`~kafkasniff.live.collector.Snapshot`.
        ``on_tick`` (``--duration``, ``-c``) runs with the collector about every 0.1 s.
        The UI draws on standard output (:func:`terminal_driver`).

        Raises:
            NoTerminal: standard output is not a terminal (nothing was started).
        """
        terminal_driver()           # refuse before the app starts
        self.on_tick = on_tick
        self.make_app()
        self.ui_running = True
        try:
            self.app.run()
        finally:
            self.ui_running = False
        self.stop()
        if self.final is None:
            # the collector thread did not finish (should not happen): count what we have
            self.final = self.session.snapshot()
        return self.final

    def request_exit(self) -> None:
        """Leave the UI (SIGTERM): the app exits, then :meth:`run` stops the capture."""
        self.session.request_stop("signal")
        app = self.app
        if app is not None:
            try:
                app.exit()
            except Exception:  # noqa: BLE001 - the app may be closing already
                pass
