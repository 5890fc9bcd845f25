"""Outputs of a live capture.

In the decoder processes: :class:`DecoderSink` turns what a ``Pipeline`` produces into what the
collector needs: console lines or JSON Lines (rendered where the exchange was decoded, so that
rendering runs on every decoder core and only text crosses processes),
light exchanges for the terminal UI (and whole ones kept a while for its detail view), topic
ids learnt (shared with the other decoders), exchanges held back until the topic ids they
carry are known, and rolling Parquet files (:class:`LiveExport`).

In the capture process: :class:`RotatingPcapNg` (``--write``, with ``--ring N`` /
``--ring-size MB``), which closes every file with an Interface Statistics Block carrying the
kernel's received / dropped counters.

In the main process: :func:`stats_line`, :func:`stats_json` and :func:`summary_line` show the
drops in every output.
"""

from __future__ import annotations

import json
import os
import time
from collections import OrderedDict, deque
from dataclasses import replace
from typing import Callable, NamedTuple

from kafkasniff.capture.writer import PcapNgWriter, isb_block
from kafkasniff.content.summary import resolve_topic_ids
from kafkasniff.live.messages import DetailRequest, TopicIdsLearned
from kafkasniff.protocol.apis import SASL_AUTHENTICATE, SASL_TOKEN

__all__ = [
    "DecoderSink",
    "LiveExport",
    "RotatingPcapNg",
    "drain_line",
    "light_exchange",
    "stats_json",
    "stats_line",
    "summary_line",
]

MAX_HELD = 10_000
#: whole exchanges a decoder keeps for the TUI's detail view (count, and their frame bytes)
RECENT_EXCHANGES = 5_000
RECENT_BYTES = 128 << 20


class _LightBatch(NamedTuple):
    record_count: int


class _LightDecoded(NamedTuple):
    batches: tuple


class _LightRecords(NamedTuple):
    """Stands for a ``RawRecords`` field in a light exchange: its size and record count."""

    size_bytes: int
    decoded: _LightDecoded | None


#: response bodies kept in light exchanges (for per-partition errors) up to this size
LIGHT_BODY_BYTES = 64 * 1024


def light_exchange(ex):
    """``ex`` without what is costly to send between processes: bodies (kept for SASL
    requests, and for error responses up to :data:`LIGHT_BODY_BYTES`, which per-partition
    error tables read) and record data (replaced by sizes and counts). What the TUI's
    ``SummaryBuilder`` and ``Aggregates`` read is kept."""
    from kafkasniff.model import Message

    def light(m, keep: bool):
        if m is None:
            return None
        return Message(m.frame_bytes, m.first_ts_ns, m.last_ts_ns, m.stream_offset, m.header,
                       m.body if keep else None, None, m.complete, m.missing_bytes,
                       m.body_offset, m.seq)

    resp = ex.response
    keep_resp = bool(ex.errors) and resp is not None and resp.frame_bytes <= LIGHT_BODY_BYTES
    fields = ex.record_fields
    if fields:
        out = []
        for loc in fields:
            rs = loc.records.decoded
            n = sum(b.record_count for b in rs.batches) if rs is not None else 0
            out.append(replace(loc, records=_LightRecords(
                loc.records.size_bytes, _LightDecoded((_LightBatch(n),)) if rs is not None
                else None)))
        fields = tuple(out)
    return replace(ex, request=light(ex.request, ex.api_key in (SASL_AUTHENTICATE, SASL_TOKEN)),
                   response=light(resp, keep_resp), record_fields=fields)


def _filters(f: dict):
    """``read``'s exchange filters (``--api``, ``--client``, ``--topic``, ``--errors-only``,
    ``--min-latency``) as one predicate (:mod:`kafkasniff.output.filters`), ``None`` when
    none is set."""
    if not f:
        return None
    from kafkasniff.output.filters import Filter

    return Filter(apis=tuple(f.get("api") or ()), client=f.get("client") or "",
                  topic=f.get("topic") or "", errors_only=bool(f.get("errors_only")),
                  min_latency_ms=f.get("min_latency")).predicate()


class DecoderSink:
    """Collects a decoder's output between two sends (see the module docstring).

    Args:
        cfg: the :class:`kafkasniff.live.config.LiveConfig`.
        pipe: the decoder's ``Pipeline`` (its topic registry is shared knowledge).
        wid: decoder index.
    """

    def __init__(self, cfg, pipe, wid: int) -> None:
        from kafkasniff.output import render

        self.cfg = cfg
        self.pipe = pipe
        self.wid = wid
        self.mode = cfg.output
        self.color = cfg.color
        self.with_records = cfg.with_records
        self.value_bytes = cfg.value_bytes
        self.keep = _filters(cfg.filters)
        self.show_issues = cfg.show_issues and self.keep is None
        self.tui = cfg.tui
        self.recent: OrderedDict = OrderedDict()     # (conn, corr, ts) -> whole exchange
        self.recent_bytes = 0
        self.export = None
        self.default = render.json_default(cfg.value_bytes)
        # renderers bound once (imports inside the per-exchange path cost ~0.5 µs each)
        self._render = render
        self.multi = cfg.workers > 1
        self.hold_s = cfg.topic_hold_s
        self.registry = pipe.topics
        self.remote: dict[str, tuple[str, int]] = {}
        self.items: list = []
        self.learned: list = []
        self.extra: list = []
        self.held: deque = deque()
        self.replies: list = []
        from kafkasniff.model import ConnectionSummary, Exchange, TopicName

        self._Exchange = Exchange
        self._TopicName = TopicName
        self._ConnectionSummary = ConnectionSummary
        self.metrics = None
        if cfg.metrics is not None:     # --metrics-port: every exchange, before filters
            from kafkasniff.metrics.families import ExchangeMetrics

            self.metrics = ExchangeMetrics(**cfg.metrics, decoder=True)

    @property
    def pending(self) -> bool:
        """Something is waiting to be sent (:meth:`take`)."""
        return bool(self.items or self.learned or self.extra)

    def take(self) -> tuple:
        """``(items, learned, extra)`` collected since the last call."""
        out = (self.items, self.learned, self.extra)
        self.items, self.learned, self.extra = [], [], []
        return out

    def take_metrics(self) -> dict | None:
        """The metrics counted since the last call (``--metrics-port``), else ``None``."""
        if self.metrics is None:
            return None
        return self.metrics.take_delta() or None

    # ----------------------------------------------------------------- records in
    def handle(self, recs: list) -> None:
        """Records a ``Pipeline.feed`` / ``finish`` returned."""
        Exchange = self._Exchange
        if self.export is not None:
            self.export.add(recs)
        for r in recs:
            t = type(r)
            if t is Exchange:
                if self.multi and r.topic_ids and any(tid in r.topics for tid in r.topic_ids):
                    ts = self.pipe.stats.last_ts_ns
                    if self._known_before(r, ts):
                        self._emit(self._resolved(r, ts))
                    else:
                        self._hold(r)
                else:
                    self._emit(r)
            elif t is self._TopicName:
                self.learned.append((r.topic_id, r.name, r.ts_ns))
            elif t is self._ConnectionSummary:
                if self.tui:
                    self.extra.append(("c", r))
            else:
                self._emit_issue(r)

    def _hold(self, ex) -> None:
        self.held.append((ex, self.pipe.stats.last_ts_ns, time.monotonic() + self.hold_s))
        if len(self.held) > MAX_HELD:
            ex, ts, _ = self.held.popleft()
            self._emit(self._resolved(ex, ts))

    # ----------------------------------------------------------------- detail (TUI)
    def _remember(self, ex) -> None:
        """Keep the last exchanges whole (bounded by count and frame bytes) for the detail
        view."""
        key = (ex.conn_id, ex.correlation_id, ex.ts_ns)
        size = ex.request_bytes + ex.response_bytes
        self.recent[key] = ex
        self.recent_bytes += size
        while len(self.recent) > RECENT_EXCHANGES or self.recent_bytes > RECENT_BYTES:
            _, old = self.recent.popitem(last=False)
            self.recent_bytes -= old.request_bytes + old.response_bytes

    def find(self, key: tuple):
        """A kept whole exchange by ``(conn_id, correlation_id, ts_ns)``, else ``None``."""
        return self.recent.get(tuple(key))

    # ----------------------------------------------------------------- control messages
    def apply_control(self, msgs: list) -> None:
        """Control messages from the collector (:mod:`kafkasniff.live.messages`).
        :class:`TopicIdsLearned` (by other decoders): remember them and release held
        exchanges whose ids are all known now. :class:`DetailRequest`: answered in
        :attr:`replies` as ``(request_id, exchange or None)``. Others are ignored."""
        reg = self.registry
        for msg in msgs:
            if type(msg) is DetailRequest:
                self.replies.append((msg.request_id, self.find(msg.key)))
                continue
            if type(msg) is not TopicIdsLearned:
                continue
            for tid, name, ts in msg.learned:
                old = self.remote.get(tid)
                if old is None or ts < old[1]:     # the earliest learning counts
                    self.remote[tid] = (name, ts)
                if len(self.remote) > reg.max_topics:
                    self.remote.pop(next(iter(self.remote)))
        if self.held:
            keep = deque()
            for ex, ts, dl in self.held:
                if self._known_before(ex, ts):
                    self._emit(self._resolved(ex, ts))
                else:
                    keep.append((ex, ts, dl))
            self.held = keep

    def _known_before(self, ex, ts: int) -> bool:
        """Every topic id ``ex`` could not name was learnt by another decoder at or before
        ``ts`` (capture time)."""
        remote = self.remote
        for tid in ex.topic_ids:
            if tid in ex.topics:
                r = remote.get(tid)
                if r is None or r[1] > ts:
                    return False
        return True

    def tick(self, now: float) -> None:
        """Release held exchanges whose wait is over."""
        held = self.held
        while held and held[0][2] <= now:
            ex, ts, _ = held.popleft()
            self._emit(self._resolved(ex, ts))

    def release_all(self) -> None:
        """Release every held exchange (end of capture), with the names known now."""
        while self.held:
            ex, ts, _ = self.held.popleft()
            self._emit(self._resolved(ex, ts))

    def _resolved(self, ex, ts: int):
        """``ex`` with the topic ids learnt elsewhere at or before ``ts`` (its completion in
        capture time, as ``read`` resolves them) replaced by names."""
        if not ex.topic_ids:
            return ex
        remote = self.remote

        def name_of(tid: str) -> str | None:
            r = remote.get(tid)
            return r[0] if r is not None and r[1] <= ts else None

        got = resolve_topic_ids(ex.topics, ex.topic_ids, ex.record_fields, name_of)
        if got is None:
            return ex
        return replace(ex, topics=got[0], record_fields=got[1])

    # ----------------------------------------------------------------- rendering
    def _emit(self, ex) -> None:
        if self.metrics is not None:
            self.metrics.add(ex)
        if self.tui:
            self.extra.append(("x", light_exchange(ex)))
            self._remember(ex)
        if self.keep is not None and not self.keep(ex):
            return
        mode = self.mode
        if mode == "lines":
            text = self._render.exchange_line(ex, self.color)
            if self.with_records:
                # record_lines is a generator: joined, an exchange without records adds none
                # (it added an empty line)
                lines = "\n".join(self._render.record_lines(ex, self.value_bytes))
                if lines:
                    text += "\n" + lines
            self.items.append(("e", text))
        elif mode == "json":
            self.items.append(("e", json.dumps(
                self._render.exchange_to_dict(ex, self.value_bytes, convert=False),
                ensure_ascii=False, default=self.default)))
        elif mode == "count":
            self.items.append(("e", ""))

    def _emit_issue(self, issue) -> None:
        if self.tui:
            self.extra.append(("i", issue))
        if not self.show_issues:
            return
        if self.mode == "lines":
            self.items.append(("i", self._render.issue_line(issue)))
        elif self.mode == "json":
            self.items.append(("i", json.dumps(self._render.issue_to_dict(issue))))


# --------------------------------------------------------------------------- Parquet


class LiveExport:
    """``--export DIR``: a decoder's rows as rolling Parquet files.

    Every record the decoder's pipeline produces goes to an
    :class:`kafkasniff.export.writer.ExportSink` (the tables of ``kafkasniff export``, same
    schema); the sink is closed, which renames its files into place atomically, every
    ``every_s`` seconds or ``rows`` exchanges, and a new one started. File names carry the
    capture start, the decoder and the roll number:
    ``DIR/<table>/part-live-<source>-<start>-w<decoder>-<roll>-<n>.parquet``, so decoders
    never collide and Spark (batch, or ``kafkasniff spark watch DIR``) reads them while
    capture goes on. An interval without any row produces no file; a table without rows in
    an interval gets no file either, except in a decoder's first roll (so that every
    table's directory exists from the start). A topic id learnt by two
    decoders can appear twice in ``topic_ids`` (read it with ``DISTINCT`` or the earliest
    ``first_seen``); an id another decoder announced with an earlier time is not written
    again.

    Args:
        pipe: the decoder's pipeline (connection keys from its
            :meth:`~kafkasniff.pipeline.Pipeline.first_seen_ns`).
        wid: decoder index.
        dir / every_s / rows: from ``--export``, ``--export-every``, ``--export-rows``.
        capture: the ``capture`` column (``live-<iface>``).
        with_records: also the ``records`` table (``--records``).
    """

    def __init__(self, pipe, wid: int, dir: str, every_s: float = 60.0, rows: int = 100_000,
                 capture: str = "live", with_records: bool = False, started: str = "") -> None:
        self.pipe = pipe
        self.wid = wid
        self.dir = dir
        self.every_s = every_s
        self.rows = rows
        self.capture = capture
        self.with_records = with_records
        self.started = started or time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        self.roll = 0
        self.sink = None
        self.opened_at = 0.0
        self.exchanges = 0
        self.files = 0
        self.total_rows: dict[str, int] = {}
        self.known: dict = {}       # topic ids other decoders announced (DecoderSink.remote)
        from kafkasniff.model import Exchange, TopicName

        self._Exchange = Exchange
        self._TopicName = TopicName

    def _open(self) -> None:
        from kafkasniff.export.writer import ExportSink

        self.roll += 1
        stem = f"{self.capture}-{self.started}-w{self.wid}-{self.roll:05d}"
        self.sink = ExportSink(self.dir, file_stem=stem, with_records=self.with_records,
                               defs=self.pipe.defs)
        self.opened_at = time.monotonic()
        self.exchanges = 0

    def add(self, recs: list) -> None:
        """Every record of one ``feed`` / ``finish`` call."""
        if self.sink is None:
            self._open()
        known = self.known
        TopicName = self._TopicName
        if known:
            # a topic id another decoder saw first (capture time) is not written again
            recs = [r for r in recs if type(r) is not TopicName or
                    (k := known.get(r.topic_id)) is None or k[1] > r.ts_ns]
        self.sink.add_records(recs, capture=self.capture, pipeline=self.pipe)
        Exchange = self._Exchange
        self.exchanges += sum(1 for r in recs if type(r) is Exchange)
        if self.exchanges >= self.rows:
            self._close()

    def tick(self, now: float) -> None:
        """Close the current files when they are ``every_s`` old."""
        if self.sink is not None and now - self.opened_at >= self.every_s:
            self._close()

    def _close(self) -> None:
        sink, self.sink = self.sink, None
        if sink is None:
            return
        if not any(sink.counts.values()):
            sink.abort()
            return
        # the first files of a decoder make every table's directory (with its schema);
        # later rolls write only tables with rows: no empty files every interval of a
        # days-long run
        counts = sink.close(empty_ts_ns=self.pipe.stats.last_ts_ns,
                            empty_files=self.files == 0)
        self.files += len(sink.files)
        for k, v in counts.items():
            self.total_rows[k] = self.total_rows.get(k, 0) + v

    def close(self) -> None:
        """Close the current files (end of capture)."""
        self._close()


# --------------------------------------------------------------------------- pcapng files


class RotatingPcapNg:
    """``--write PATH`` pcapng output, optionally rotated.

    Args:
        path: the file (``x.pcapng``). With ``file_bytes``, files are ``x-00001.pcapng``,
            ``x-00002.pcapng`` ... (a new one when the current one reaches ``file_bytes``).
        files: keep at most this many files (``--ring N``; oldest deleted), 0: all.
        file_bytes: rotate at this size (``--ring-size MB``), 0: one file.
        snaplen: written in the interface blocks.

    Every file ends with an Interface Statistics Block per interface: packets received by the
    kernel filter and dropped by the kernel since the capture started (``isb_ifrecv``,
    ``isb_ifdrop``), read through :attr:`kernel_stats` (set by the capture process to the
    backend's ``kernel_stats``: ``() -> (received, dropped)``) when the file is closed, so
    they count at least the packets written so far; ``None`` (streams): no counters.
    """

    def __init__(self, path: str, files: int = 0, file_bytes: int = 0,
                 snaplen: int = 0) -> None:
        self._Writer = PcapNgWriter
        self.path = path
        self.files = files
        self.file_bytes = file_bytes
        self.snaplen = snaplen
        self.packets = 0
        self.files_opened = 0
        self.kernel_stats: Callable[[], tuple[int, int]] | None = None
        self.start_ns = time.time_ns()
        self.last_ts = 0
        self.names: deque[str] = deque()
        self._f = None
        self._w = None
        self._open()

    def _name(self, i: int) -> str:
        if not self.file_bytes:
            return self.path
        root, ext = os.path.splitext(self.path)
        return f"{root}-{i:05d}{ext or '.pcapng'}"

    def _open(self) -> None:
        self.files_opened += 1
        name = self._name(self.files_opened)
        self._f = open(name, "wb")  # noqa: SIM115 - closed in _close_current
        self._w = self._Writer(self._f, snaplen=self.snaplen)
        self.names.append(name)
        if self.files and len(self.names) > self.files:
            old = self.names.popleft()
            try:
                os.unlink(old)
            except OSError:
                pass

    def write(self, ts_ns: int, link_type: int, data: bytes, orig_len: int) -> None:
        """One packet (``ts_ns`` since the epoch; ``orig_len`` its length on the wire);
        starts the next file when this one reached ``file_bytes``."""
        w = self._w
        w.write_packet(ts_ns, link_type, data, orig_len)
        self.packets += 1
        self.last_ts = ts_ns
        if self.file_bytes and w.bytes_written >= self.file_bytes:
            self._close_current()
            self._open()

    def _close_current(self) -> None:
        w, f = self._w, self._f
        if w is None:
            return
        w.close()
        rec, drops = self.kernel_stats() if self.kernel_stats is not None else (None, None)
        for iface in w.link_types:
            f.write(isb_block(iface, self.last_ts or time.time_ns(), self.start_ns, rec, drops,
                              "kafkasniff live: counters since the capture started"))
        f.close()
        self._w = self._f = None

    def close(self) -> None:
        """Close the current file (with its statistics blocks)."""
        self._close_current()


# --------------------------------------------------------------------------- main process


def _rate(n: float) -> str:
    if n >= 10_000:
        return f"{n / 1000:.0f}k"
    if n >= 1000:
        return f"{n / 1000:.1f}k"
    return f"{n:.0f}"


def stats_line(snap, prev=None) -> str:
    """One periodic stats line (``--stats-every``)."""
    dt = snap.elapsed_s - prev.elapsed_s if prev is not None else snap.elapsed_s
    pk_rate = (snap.captured - (prev.captured if prev else 0)) / dt if dt > 0 else 0.0
    ex_rate = (snap.exchange_count - (prev.exchange_count if prev else 0)) / dt if dt > 0 else 0.0
    kd = "n/a" if snap.kernel_drops is None else str(snap.kernel_drops)
    return (f"stats: {snap.elapsed_s:.1f}s  packets {snap.captured} ({_rate(pk_rate)}/s)  "
            f"kernel drops {kd}  queue drops {snap.queue_drops}  backlog {snap.backlog}  "
            f"exchanges {snap.exchange_count} ({_rate(ex_rate)}/s)  "
            f"issues {snap.issue_count}  kafka connections {snap.kafka_connections}")


def stats_json(snap, final: bool = False) -> str:
    """The stats as one JSON Lines object (``"type": "stats"``)."""
    d = {"type": "stats", "final": final}
    d.update(snap.to_dict())
    return json.dumps(d)


def drain_line(snap, prev, reason: str, since_s: float, done: int, workers: int) -> str:
    """A line on stderr while an orderly stop goes on (``live`` after Ctrl-C): what is left
    to decode (the snapshot's ``backlog``: packets captured before the stop and not decoded
    yet), the decoding rate since ``prev`` (an earlier snapshot, or ``None``), the seconds
    since the stop, and how to cut it short. Once nothing is left, the decoders still
    finishing (``done`` of ``workers``: pending requests, end barrier, Parquet files)."""
    head = f"kafkasniff: stopping ({reason}), {since_s:.1f}s so far: "
    if snap.backlog > 0:
        rate = ""
        dt = snap.elapsed_s - prev.elapsed_s if prev is not None else 0.0
        if dt > 0:
            rate = f" at {_rate((snap.decoded - prev.decoded) / dt)} packets/s"
        what = (f"decoding the packets captured before the stop, {snap.backlog:,} left"
                f" ({snap.decoded:,} decoded{rate})")
    else:
        what = f"decoders finishing ({done} of {workers} done)"
    return head + what + "; Ctrl-C again to stop at once (exit 130)"


def summary_line(snap, shown: int | None, source: str) -> str:
    """The final summary (like ``read``'s, with the capture counters and drops)."""
    from kafkasniff.output.render import summary_parts
    from kafkasniff.text import plural

    parts = summary_parts(snap.exchanges, snap.issues, snap.decoded,
                          snap.stats.get("skipped", {}), snap.kafka_connections,
                          snap.other_connections, shown, packets_label="packets decoded",
                          ledger=snap.stats.get("bytes"))
    cap = f"captured {plural(snap.captured, 'packet')} from {source} in {snap.elapsed_s:.1f}s"
    if snap.kernel_received is not None:
        cap += f" (kernel: {snap.kernel_received} received, {snap.kernel_drops} dropped)"
    else:
        cap += " (kernel drops: n/a)"
    parts.append(cap)
    parts.append(f"queue drops {snap.queue_drops}")
    if snap.written:
        parts.append(f"{plural(snap.written, 'packet')} written")
    return "summary: " + "; ".join(parts)
