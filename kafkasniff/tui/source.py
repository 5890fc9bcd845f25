"""Where the TUI's data comes from: one interface for capture files now and live traffic later.

The app consumes a :class:`DataSource`. A source decodes in its own thread (never on the UI
thread) and hands the app *batches*:

* :class:`~kafkasniff.tui.store.SummaryChunk`: compact summaries of the exchanges completed
  since the last batch (columns of ``array``s over interned strings, ~120 bytes per
  exchange), with their issues and the standalone issues;
* a :class:`~kafkasniff.tui.aggregates.Snapshot` of the dashboards (per-API / broker /
  client / topic / connection tables, timeline, latency histograms, issue counters);
* :class:`Progress` (bytes done and total, or ``live``; finished; error).

Protocol (all methods but :meth:`DataSource.drain`'s return value are thread-agnostic):

1. ``start(notify)``: begin producing. ``notify()`` is called from the source's thread when
   a batch is ready *and the previous one was drained*, at most a few times per second
   (``interval_s``), so messages coalesce: whatever piles up while the UI is busy is merged
   into the next :meth:`~DataSource.drain`.
2. ``drain() -> SourceUpdate``: everything produced since the last drain (chunks in order,
   the latest snapshot and progress). Called on the UI thread after ``notify``.
3. ``detail(info, issues) -> Detail``: decode one exchange in full from its summary
   (:class:`~kafkasniff.tui.store.RowInfo`); blocking, called from a worker thread.
4. ``exchanges(rows, store, cancel) -> Iterator[Exchange]``: the full exchanges of some rows
   (saving a view); blocking, called from a worker thread.
5. ``stop()``: stop producing and release files (idempotent).

:class:`ThreadedSource` implements the batching and coalescing; a source implements
``_run()`` (its thread's body) and calls :meth:`ThreadedSource.publish`. :class:`FileSource`
runs :class:`~kafkasniff.pipeline.Pipeline` over capture files. A live source (issue 6) does
the same with packets from the network; for ``detail`` it must keep the frames' bytes
(e.g. the packets it writes with ``--write``, indexed like :class:`FileSource` does, or a
bounded buffer) and pass them to :func:`kafkasniff.tui.detail.decode_exchange`.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Iterator, NamedTuple, Sequence

from kafkasniff.capture.frames import DEFAULT_CHECKPOINT_EVERY, CaptureIndex, FrameFinder, FrameRef
from kafkasniff.model import DecodeIssue, Exchange
from kafkasniff.tui.aggregates import Aggregates, Snapshot
from kafkasniff.tui.detail import Detail, decode_exchange, kept_detail
from kafkasniff.tui.store import RowInfo, SummaryBuilder, SummaryChunk, SummaryStore, Tables


class Progress(NamedTuple):
    """How far a source got.

    Attributes:
        done_bytes / total_bytes: bytes read and to read (``total_bytes`` ``None`` when
            unknown: stdin, live).
        live: the source is live traffic (no end).
        finished: nothing more will come.
        packets / exchanges: counted so far.
        current: what is being read (file name, interface).
        elapsed_s: wall time since start.
        error: why the source stopped early, else ``None``.
    """

    done_bytes: int = 0
    total_bytes: int | None = None
    live: bool = False
    finished: bool = False
    packets: int = 0
    exchanges: int = 0
    current: str = ""
    elapsed_s: float = 0.0
    error: str | None = None

    @property
    def fraction(self) -> float | None:
        """Share done, 0.0 to 1.0 (1.0 once finished; ``None`` when the total is unknown)."""
        if self.finished:
            return 1.0
        if not self.total_bytes:
            return None
        return min(1.0, self.done_bytes / self.total_bytes)


@dataclass
class SourceUpdate:
    """What :meth:`DataSource.drain` returns (merged batches)."""

    chunks: list[SummaryChunk] = field(default_factory=list)
    snapshot: Snapshot | None = None
    progress: Progress | None = None
    #: the latest consumer-group analysis (:class:`~kafkasniff.groups.model.GroupsReport`),
    #: ``None`` when no new one was made since the last drain
    groups: object | None = None


class DataSource:
    """The interface the app consumes (see the module docstring for the protocol).

    Attributes:
        title: shown in the header (file names, interface).
        short_title: what the header shows instead when ``title`` does not fit the width
            (``""``: ``title``, cut at its end); the progress and the counters are never
            given up for the title.
        live: live traffic (follow mode on by default, no progress bar).
        tables: the interned tables the chunks refer to (give them to the
            :class:`~kafkasniff.tui.store.SummaryStore`).
        show_secrets: secrets are shown (``--show-secrets``); else redacted everywhere.
        has_groups: the source publishes a consumer-group analysis
            (:attr:`SourceUpdate.groups`, a :class:`~kafkasniff.groups.model.GroupsReport`)
            for the Groups view; ``False`` (the default): the view says it is not available.
        groups_error: why the consumer-group analysis failed (``"TypeError: ..."``), ``None``
            when it did not; the Groups view shows it when no report came.
    """

    title = ""
    short_title = ""
    live = False
    show_secrets = False
    has_groups = False
    groups_error: str | None = None

    def __init__(self) -> None:
        self.tables = Tables()

    def start(self, notify: Callable[[], None]) -> None:
        """Begin producing in the source's own thread(s); call ``notify()`` (from any
        thread) when a batch is ready and the previous notification was drained."""
        raise NotImplementedError

    def drain(self) -> SourceUpdate:
        """Everything produced since the last drain, merged (UI thread, after ``notify``)."""
        raise NotImplementedError

    def stop(self) -> None:
        """Stop producing and release files; idempotent."""
        raise NotImplementedError

    def detail(self, info: RowInfo, issues: Sequence[DecodeIssue] = ()) -> Detail:
        """The exchange of summary ``info`` decoded in full, with its ``issues`` (blocking,
        called from a worker thread); a :class:`Detail` without exchange, whose note says
        why, when it cannot be decoded any more."""
        raise NotImplementedError

    def exchanges(self, rows: Sequence[int], store: SummaryStore,
                  cancel: threading.Event | None = None) -> Iterator[Exchange]:
        """Default: decode each row with :meth:`detail` (fine for a few rows)."""
        for r in rows:
            if cancel is not None and cancel.is_set():
                return
            d = self.detail(store.row(r), store.row_issues(r))
            if d.exchange is not None:
                yield d.exchange


class ThreadedSource(DataSource):
    """Batching and coalescing for sources that produce in a thread.

    Subclasses implement :meth:`_run` and call :meth:`publish`; ``interval_s`` is the
    shortest time between two notifications.
    """

    interval_s = 0.25

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._pending = SourceUpdate()
        self._notified = False
        self._notify: Callable[[], None] | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.t0 = 0.0
        self.error: str | None = None

    def start(self, notify: Callable[[], None]) -> None:
        self._notify = notify
        self.t0 = time.monotonic()
        self._thread = threading.Thread(target=self._main, name=f"{type(self).__name__}",
                                        daemon=True)
        self._thread.start()

    def _main(self) -> None:
        from kafkasniff.errors import KafkaSniffError

        try:
            self._run()
        except Exception as exc:  # noqa: BLE001 - shown in the UI, never a silent death
            self.error = str(exc) if isinstance(exc, KafkaSniffError) else \
                f"{type(exc).__name__}: {exc}"
            self.publish(progress=Progress(finished=True, error=self.error,
                                           elapsed_s=time.monotonic() - self.t0))

    def _run(self) -> None:
        raise NotImplementedError

    def publish(self, chunk: SummaryChunk | None = None, snapshot: Snapshot | None = None,
                progress: Progress | None = None, groups=None) -> None:
        """Queue a batch for the UI (any thread); notifies the UI if it is not already
        notified of an undrained batch. ``groups``: a new
        :class:`~kafkasniff.groups.model.GroupsReport` (the latest one wins)."""
        with self._lock:
            p = self._pending
            if chunk is not None:
                p.chunks.append(chunk)
            if snapshot is not None:
                p.snapshot = snapshot
            if progress is not None:
                p.progress = progress
            if groups is not None:
                p.groups = groups
            notify = not self._notified
            self._notified = True
        if notify and self._notify is not None:
            self._notify()

    def drain(self) -> SourceUpdate:
        with self._lock:
            out, self._pending = self._pending, SourceUpdate()
            self._notified = False
        return out

    def stop(self) -> None:
        self._stop.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=5)

    @property
    def running(self) -> bool:
        """The producing thread is alive."""
        return self._thread is not None and self._thread.is_alive()


class _Tee:
    """Reads from ``raw`` and appends every byte read to ``copy`` (the spooling of an input
    that can be read only once: stdin, a FIFO, a pipe)."""

    def __init__(self, raw, copy, name: str = "<stdin>") -> None:
        self._read = getattr(raw, "read1", None) or raw.read
        self.copy = copy
        self.name = name

    def read(self, n: int = -1) -> bytes:
        data = self._read(n if n >= 0 else 1 << 20)
        if data:
            self.copy.write(data)
            self.copy.flush()
        return data

    def readable(self) -> bool:
        return True


class FileSource(ThreadedSource):
    """Capture files decoded by :class:`~kafkasniff.pipeline.Pipeline` in a worker thread.

    Args:
        sources: paths, ``"-"`` (stdin) or binary streams (what
            :func:`~kafkasniff.capture.pcapfile.probe_capture` returns for an input that can
            be read only once). What cannot be read again, stdin, a stream, a path that is
            not a regular file (a named FIFO, a ``/dev/fd/N`` pipe), is read once and
            spooled to a temporary file as it is read, so that frames can be found again
            (the spools are removed by :meth:`stop`); a stream is closed once read.
        options: :class:`~kafkasniff.pipeline.PipelineOptions` (``meta_records`` is turned
            on: the connections view needs the connection summaries).
        checkpoint_every: packets between two checkpoints of the sparse index.
        interval_s: shortest time between two batches.
        stdin: the binary stream ``"-"`` reads (default ``sys.stdin.buffer``).

    ``few_rows``: up to this many rows are saved by decoding each from its frames; more by
    decoding the capture again.

    Consumer groups (``has_groups``): every exchange also feeds a
    :class:`~kafkasniff.groups.analysis.GroupAnalyzer`; its report is published with the
    last batch, and with the full snapshots while loading as long as the capture has at most
    :attr:`groups_live_events` group exchanges (the analysis replays them all each time).

    Frames are found again through the sparse index (:mod:`kafkasniff.capture.frames`):
    uncompressed files are reopened at the checkpoint before the frame; gzip-compressed
    files are read again from their start up to the frame.
    """

    has_groups = True

    def __init__(self, sources: Sequence[str], options=None, *,
                 checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY, interval_s: float = 0.25,
                 stdin=None) -> None:
        super().__init__()
        from kafkasniff.pipeline import PipelineOptions

        self.sources = [s if hasattr(s, "read") else str(s) for s in sources]
        base = options or PipelineOptions()
        self.options = replace(base, meta_records=True)
        self.show_secrets = self.options.show_secrets
        self.checkpoint_every = checkpoint_every
        self.interval_s = interval_s
        names = [_input_name(s) for s in self.sources]
        self.title = " ".join(names)
        if len(names) > 1:
            self.short_title = f"{names[0]} +{len(names) - 1} files"
        self.index = CaptureIndex()
        self.finder = FrameFinder(self.index)
        self.pipeline = None
        self._stdin = stdin
        self._spools: list[str] = []
        self._detail_content = None
        self._ctx_lock = threading.Lock()
        self.few_rows = 100
        self.groups_live_events = 5_000

    # ------------------------------------------------------------------ the thread
    def _sizes(self) -> list[int | None]:
        from kafkasniff.capture.pcapfile import is_regular_file

        out = []
        for s in self.sources:
            try:
                out.append(os.path.getsize(s) if is_regular_file(s) else None)
            except OSError:
                out.append(None)
        return out

    def _read_once(self, src):
        """The stream of an input that can be read only once (stdin, a stream, a FIFO or
        pipe path), and whether it is ours to close; ``None`` for a regular file (or a path
        that cannot be opened: :meth:`Pipeline.open` says why)."""
        from kafkasniff.capture.pcapfile import is_regular_file, open_path

        if hasattr(src, "read"):
            return src, True
        if src == "-":
            return (self._stdin if self._stdin is not None else sys.stdin.buffer), False
        if is_regular_file(src) or not os.path.exists(src) or os.path.isdir(src):
            return None
        return open_path(src), True

    def _run(self) -> None:
        from kafkasniff.groups.analysis import GroupAnalyzer
        from kafkasniff.model import ConnectionSummary
        from kafkasniff.pipeline import Pipeline

        pipe = Pipeline(self.options)
        self.pipeline = pipe
        agg = Aggregates(pipe.topics, pipe.defs)
        groups = GroupAnalyzer(pipe.defs)
        groups_seen = -1          # group exchanges in the last report published
        builder = SummaryBuilder(self.tables, error_counts=agg.error_counts)
        # kept beyond the thread: freeing them all at its end would hold the GIL (and pause
        # the UI) for a noticeable moment
        self.aggregates, self.builder = agg, builder
        sizes = self._sizes()
        total = None if None in sizes else sum(sizes)
        done_before = 0
        exchanges = 0
        n_pub = 0
        snap: Snapshot | None = None
        Ex, Issue = Exchange, DecodeIssue
        next_pub = time.monotonic()
        stop = self._stop

        def handle(out: list) -> int:
            n = 0
            for rec in out:
                t = type(rec)
                if t is Ex:
                    builder.add(rec)
                    agg.add(rec)
                    groups.add(rec)
                    n += 1
                elif t is Issue:
                    builder.add_issue(rec)
                    agg.add_issue(rec)
                elif t is ConnectionSummary:
                    agg.add_connection(rec)
            return n

        def publish(current: str, done: int, finished: bool = False) -> None:
            nonlocal n_pub, snap, groups_seen
            full = finished or n_pub % 4 == 0
            snap = agg.snapshot(full=full, pipeline=pipe.stats.to_dict(), previous=snap)
            n_pub += 1
            report = None
            n_events = groups.kept_events
            if finished or (full and n_events != groups_seen
                            and n_events <= self.groups_live_events):
                groups_seen = n_events
                try:
                    report = groups.finish(pipe.topics.names)
                except Exception as exc:  # noqa: BLE001 - the groups view says so, loading goes on
                    self.groups_error = f"{type(exc).__name__}: {exc}"
            self.publish(builder.take(), snap,
                         Progress(done, total, False, finished, pipe.stats.packets, exchanges,
                                  current, time.monotonic() - self.t0), groups=report)

        for src in self.sources:
            name = _input_name(src)
            once = self._read_once(src)
            spool = raw = None
            try:
                if once is not None:
                    # read once: spooled as it is read, the detail finds its frames in the copy
                    stream, ours = once
                    raw = stream if ours else None
                    spool = tempfile.NamedTemporaryFile(prefix="kafkasniff-input-",
                                                        suffix=".cap", delete=False)
                    self._spools.append(spool.name)
                    opened = pipe.open(_Tee(stream, spool, _input_name(src, full=True)),
                                       checkpoint_every=self.checkpoint_every)
                    path, seekable = spool.name, not opened.compressed
                else:
                    opened = pipe.open(src, checkpoint_every=self.checkpoint_every)
                    path, seekable = src, opened.seekable
                fno = self.index.add_file(path, seekable)
                ncp = 0
                with opened as packets:
                    feed = pipe.feed
                    n = 0
                    for pkt in packets:
                        out = feed(pkt)
                        if out:
                            exchanges += handle(out)
                        n += 1
                        if not n & 511:
                            cps = packets.checkpoints
                            if len(cps) > ncp:
                                self.index.add_checkpoints(fno, cps[ncp:])
                                ncp = len(cps)
                            now = time.monotonic()
                            if now >= next_pub:
                                next_pub = now + self.interval_s
                                publish(name, done_before + packets.bytes_read)
                            if stop.is_set():
                                return
                    cps = packets.checkpoints
                    self.index.add_checkpoints(fno, cps[ncp:])
                    for issue in packets.issues:
                        handle([pipe.feed_issue(issue)])
                    pipe.account_source(packets.accounting())
                    done_before += packets.bytes_read
            finally:
                if spool is not None:
                    spool.close()
                if raw is not None:
                    raw.close()
        exchanges += handle(pipe.finish())
        publish("", done_before, finished=True)

    # ------------------------------------------------------------------ detail
    def _content(self):
        """The content decoder of the detail view: every record decoded, secrets as the user
        asked, topic ids resolved with what the capture taught the pipeline."""
        with self._ctx_lock:
            if self._detail_content is None:
                from kafkasniff.content.frames import ContentDecoder
                from kafkasniff.protocol.schema import load_definitions

                o = self.options
                pipe = self.pipeline
                defs = pipe.defs if pipe is not None else load_definitions(o.definitions_dir)
                self._detail_content = ContentDecoder(
                    defs, with_records=True, max_uncompressed_bytes=o.max_uncompressed_bytes,
                    show_secrets=o.show_secrets, budgets=o.budgets,
                    registry=pipe.topics if pipe is not None else None)
            return self._detail_content

    def detail(self, info: RowInfo, issues: Sequence[DecodeIssue] = ()) -> Detail:
        """Find the exchange's frames in the capture and decode them in full."""
        kept = info.extra.get("exchange")
        if kept is not None:
            return kept_detail(kept, _unlocatable_note(kept) + "; decoded fields as kept "
                                     "while loading")
        if info.req_seq < 0 and info.resp_seq < 0 and (info.req_bytes or info.resp_bytes):
            # not kept (past MAX_KEPT_EXCHANGES) and not locatable: decode the capture again
            # up to this row (the pipeline's output order is the row order)
            ex = next(self._redecode([info.row]), None)
            if ex is None:
                return Detail(None, {}, "the exchange was not found decoding the capture again")
            return kept_detail(ex, _unlocatable_note(ex) + "; decoded again from the capture")
        frames = {}
        notes = []
        for side, seq, ts, size, sender, receiver in (
                ("request", info.req_seq, info.req_ts, info.req_bytes, info.client, info.broker),
                ("response", info.resp_seq, info.resp_ts, info.resp_bytes, info.broker,
                 info.client)):
            if not size:                  # no such frame
                continue
            found = self.finder.find(FrameRef(sender, receiver, seq, ts, size))
            if found is None:
                notes.append(f"{side} frame not found in the capture")
                continue
            frames[side] = found
        req, resp = frames.get("request"), frames.get("response")
        d = decode_exchange(self._content(), info, req.data if req else None,
                            resp.data if resp else None, issues,
                            request_missing=req.missing if req else None,
                            response_missing=resp.missing if resp else None,
                            request_last_ts_ns=req.last_ts_ns if req else 0,
                            response_last_ts_ns=resp.last_ts_ns if resp else 0)
        if notes:
            d.note = "; ".join(notes)
        return d

    def exchanges(self, rows: Sequence[int], store: SummaryStore,
                  cancel: threading.Event | None = None) -> Iterator[Exchange]:
        """Full exchanges of ``rows``, in row order, with every record decoded (as
        ``read --json --records``). Few rows: each decoded from its frames; many: the capture
        is decoded again (rows are the pipeline's output order) and the wanted exchanges
        picked."""
        rows = sorted(set(rows))
        if len(rows) <= self.few_rows:
            yield from super().exchanges(rows, store, cancel)
            return
        yield from self._redecode(rows, cancel)

    def _redecode(self, rows: list[int], cancel: threading.Event | None = None
                  ) -> Iterator[Exchange]:
        """The exchanges of the sorted ``rows``, decoded again from the capture's start with
        every record (the pipeline's output order is the row order)."""
        from kafkasniff.pipeline import Pipeline

        wanted = set(rows)
        last = rows[-1]
        pipe = Pipeline(replace(self.options, with_records=True))
        k = 0
        paths = [f.path for f in self.index.files]

        def pick(out):
            nonlocal k
            for rec in out:
                if type(rec) is Exchange:
                    if k in wanted:
                        yield rec
                    k += 1

        for path in paths:
            with pipe.open(path) as packets:
                n = 0
                for pkt in packets:
                    out = pipe.feed(pkt)
                    if out:
                        yield from pick(out)
                        if k > last:
                            return
                    n += 1
                    if cancel is not None and not n & 4095 and cancel.is_set():
                        return
        yield from pick(pipe.finish())

    def stop(self) -> None:
        super().stop()
        spools, self._spools = self._spools, []
        for path in spools:
            try:
                os.unlink(path)
            except OSError:
                pass


def _input_name(src, full: bool = False) -> str:
    """How an input is named: ``<stdin>`` for ``"-"``, a path's base name (``full``: the
    path, as messages name it), a stream's name."""
    if hasattr(src, "read"):
        name = getattr(src, "name", "")
        name = name if isinstance(name, str) and name else "<stream>"
    else:
        name = "<stdin>" if src == "-" else str(src)
    return name if full or name.startswith("<") else os.path.basename(name)


def _unlocatable_note(ex: Exchange) -> str:
    """Why the detail of ``ex`` has no frame bytes."""
    if ex.tls is not None:
        return (f"decrypted from {ex.tls.version} ({ex.tls.cipher_suite}): the plaintext "
                f"frame bytes are not kept")
    return "frame bytes not available (this frame carries no TCP sequence number)"
