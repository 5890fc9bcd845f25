"""A decoder process of ``--jobs N``: the packets of its connections in, finished records out.

It runs a :class:`~kafkasniff.pipeline.Pipeline` over its share of the packets (both
directions of each connection come here, so reassembly and pairing are exact) and holds what
the pipeline produces until every decoder has decoded up to the same packet
(:attr:`Control.upto <kafkasniff.parallel.wire.Control>`). Then what is global across
connections is known and the record is completed as ``--jobs 1`` would have made it:

* connection ids: the reader tells each decoder the global ids of its connections (their
  rank among all connections by the packet that opened them);
* topic ids another decoder learnt from Metadata before the record's packet name its topics;
* the ``topic_ids`` rows: a topic id another decoder learnt first is not written again.

Completed records go to the command's :class:`Output` here (rendering, statistics, Parquet
rows run on every decoder's core); what needs the whole capture's order (printed lines,
standalone issues under the ``capture_issues`` budget) goes to the reader with its order key
(:mod:`kafkasniff.parallel.wire`).
"""

from __future__ import annotations

import io
import os
import pickle
import signal
import traceback
from collections import deque

from kafkasniff.capture.pcapfile import packed_records
from kafkasniff.content.summary import resolve_topic_ids
from kafkasniff.model import ConnectionSummary, DecodeIssue, Exchange, TopicName
from kafkasniff.parallel.wire import (
    END,
    END_INDEX,
    SECRETS,
    SOURCE,
    TICK,
    batch_header,
)

__all__ = ["Output", "decoder_main"]

#: sets a field of a frozen record this process made and nobody else holds yet
_set = object.__setattr__
#: records a decoder holds (decoded, waiting for the slowest decoder to pass their packet)
#: before it stops taking batches until the others catch up. The queue of packets is bounded
#: in bytes (4 MiB), which small packets that each complete records turn into tens of
#: thousands of held records: 33,000 (about 30 MB) in a capture of a million connections
#: that each send one request
HOLD_MAX = 8192


class Output:
    """What a command does with completed records in a decoder (the base: nothing).

    ``exchange(ex, first_ts, capture)`` and ``meta(rec, capture)`` return an item payload
    for the reader or ``None``; standalone issues always go to the reader (the
    ``capture_issues`` budget counts them in capture order), as ``("i", issue, capture,
    first_ts, fallback_ts)``. ``result()`` is sent to the reader at the end.
    """

    #: keep the first packet time of each record's connection (the Parquet rows' key)
    wants_first_ts = False

    def exchange(self, ex: Exchange, first_ts, capture: str):
        return None

    def meta(self, rec, capture: str, first_ts) -> None:
        return None

    def result(self):
        return None


class ReadOutput(Output):
    """``read``: each exchange rendered as ``read`` prints it (``None`` when the filter
    hides it), with its count of warning and error issues (``--strict``)."""

    def __init__(self, spec: dict) -> None:
        from kafkasniff.output.render import json_default, write_exchange

        self.write = write_exchange
        self.keep = spec["keep"]
        self.kw = dict(as_json=spec["as_json"], with_records=spec["with_records"],
                       value_bytes=spec["value_bytes"], color=spec["color"],
                       default=json_default(spec["value_bytes"]))

    def exchange(self, ex, first_ts, capture):
        bad = sum(1 for i in ex.issues if i.severity != "info")
        if self.keep is not None and not self.keep(ex):
            return ("e", None, bad)
        buf = io.StringIO()
        self.write(ex, buf, **self.kw)
        return ("e", buf.getvalue(), bad)


class StatsOutput(Output):
    """``stats``: exchanges counted in an :class:`~kafkasniff.stats.aggregate.Aggregator`,
    sent at the end (the reader merges them); with ``spec["metrics"]`` (``--openmetrics``)
    also in a :class:`~kafkasniff.metrics.families.ExchangeMetrics`, sent as
    ``(aggregator, metrics delta)``."""

    def __init__(self, spec: dict) -> None:
        from kafkasniff.stats.aggregate import Aggregator

        self.agg = Aggregator()
        self.metrics = None
        if spec.get("metrics") is not None:     # stats --openmetrics
            from kafkasniff.metrics.families import ExchangeMetrics

            self.metrics = ExchangeMetrics(**spec["metrics"], decoder=True)

    def exchange(self, ex, first_ts, capture):
        self.agg.add(ex)
        if self.metrics is not None:
            self.metrics.add(ex)
        return None

    def result(self):
        if self.metrics is not None:
            return self.agg, self.metrics.take_delta()
        return self.agg


class ExportOutput(Output):
    """``export``: the rows of every record in this decoder's own part files
    (``part-<stem>-j<decoder>-<n>``); standalone issues are written by the reader."""

    wants_first_ts = True

    def __init__(self, spec: dict, wid: int, defs) -> None:
        from kafkasniff.export.writer import ExportSink

        self.groups = None                  # the group tables: written by the reader
        if spec.get("groups"):
            from kafkasniff.groups.analysis import GroupAnalyzer

            self.groups = GroupAnalyzer(defs, budgets=spec.get("group_budgets"))
        self.sink = ExportSink(spec["out_dir"], file_stem=f"{spec['stem']}-j{wid}",
                               fmt=spec["fmt"], partition_by=spec["partition_by"],
                               with_records=spec["with_records"],
                               row_group_rows=spec["row_group_rows"], defs=defs,
                               groups=self.groups)

    def exchange(self, ex, first_ts, capture):
        self.sink.add(ex, capture=capture, conn_first_ts_ns=first_ts)
        return None

    def meta(self, rec, capture, first_ts):
        self.sink.add(rec, capture=capture)
        return None

    def result(self):
        return (self.sink.close(empty_files=False), self.sink.files,
                self.groups.snapshot() if self.groups is not None else None)

    def abort(self) -> None:
        self.sink.abort()


def make_output(mode: str, spec: dict, wid: int, defs) -> Output:
    """The :class:`Output` of ``mode`` (``read``, ``stats``, ``export``)."""
    if mode == "read":
        return ReadOutput(spec)
    if mode == "stats":
        return StatsOutput(spec)
    if mode == "export":
        return ExportOutput(spec, wid, defs)
    return Output()


def decoder_main(wid: int, options, defs, mode: str, spec: dict, inq, ctlq, conn) -> None:
    """Decoder process body (see the module docstring).

    Args:
        wid: this decoder's index.
        options: the :class:`~kafkasniff.pipeline.PipelineOptions` (``external_clock`` and
            ``meta_records`` on).
        defs: the protocol definitions (loaded once before the fork).
        mode / spec: the command and its output settings (:func:`make_output`).
        inq: the :class:`~kafkasniff.parallel.shm.Channel` of batches from the reader.
        ctlq: the channel of pickled :class:`~kafkasniff.parallel.wire.Control` from the
            reader (apart from the batches, so that they do not wait behind them).
        conn: the pipe to the reader (messages of :mod:`kafkasniff.parallel.wire`).

    Sends ``("error", ...)`` instead of raising; returns when the reader is gone.
    """
    # the terminal's signals go to the whole process group: the reader decides; its
    # SIGTERM (the run failed or was stopped) unwinds here, so that unfinished files go
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _terminated)
    out = None
    try:
        import gc

        from kafkasniff.pipeline import Pipeline

        pipe = Pipeline(options, defs)
        out = make_output(mode, spec, wid, defs)
        # the definitions live for the whole run: out of the cyclic collector's sweeps.
        # No collection first: it would traverse every object inherited from the parent,
        # copying its pages (from a parent holding 3M small dicts, a notebook's or the test
        # suite's heap, a --jobs 2 run of a small capture took 1.48 s instead of 0.24 s);
        # cyclic garbage of the start-up stays frozen
        gc.freeze()
        _Decoder(wid, pipe, out, inq, ctlq, conn).run()
    except BaseException as exc:  # noqa: BLE001 - reported to the reader
        if out is not None and hasattr(out, "abort"):
            try:
                out.abort()
            except Exception:  # noqa: BLE001
                pass
        try:
            conn.send_bytes(pickle.dumps(("error", wid, f"{type(exc).__name__}: {exc}",
                                          traceback.format_exc())))
        except (OSError, ValueError):
            pass
    finally:
        conn.close()


def _terminated(signum, frame):
    raise SystemExit(128 + signum)


class _Decoder:
    """The loop of :func:`decoder_main`."""

    def __init__(self, wid: int, pipe, out: Output, inq, ctlq, conn) -> None:
        self.wid = wid
        self.pipe = pipe
        self.out = out
        self.inq = inq
        self.ctlq = ctlq
        self.conn = conn
        self.held: deque = deque()   # (index, phase, local conn id, sub, record, first_ts,
        #                               fallback_ts, capture)
        # local connection id -> global id, of the connections whose last record (the
        # ConnectionSummary every connection ends with here: meta records are on) is not
        # completed yet: bounded by the connections open, not by all the capture had
        self.gids: dict[int, int] = {}
        self.next_local = 0           # the local id of the next global id the reader sends
        self.opened = 0               # connections opened (reported to the reader)
        self.opens: list[int] = []    # packet index of each connection opened since the last report
        self.learned: list = []       # (topic_id, name, index) since the last report
        # topic id -> [(index, name)] learnt by any decoder (this one included)
        self.known: dict[str, list] = {}
        self.items: list = []         # completed items for the reader since the last report
        self.upto = -1                # records up to this packet index are completed
        self.clock = -1               # every packet up to this index was fed
        self.capture = ""
        self.finished = False
        self.parent = os.getppid()

    def run(self) -> None:
        inq = self.inq
        while True:
            if self.controls():
                self.report()
            if self.finished and self.upto >= END_INDEX:
                self.send(("done", self.wid, self.pipe.stats, self.out.result()))
                return
            if len(self.held) >= HOLD_MAX and not self.finished:
                # ahead of the others: wait for the control that completes what is held
                # (the slowest decoder's own records are completable once it reported)
                msg = self.ctlq.get(0.05)
                if msg is None:
                    return
                if msg:
                    self.control(pickle.loads(msg[0]))
                    self.report()
                elif os.getppid() != self.parent:
                    return
                continue
            msg = inq.get(0.05)
            if msg is None:
                return
            if not msg:
                if os.getppid() != self.parent:
                    return                      # the reader is gone
                continue
            self.clock = max(self.clock, self.batch(msg[0]))
            self.report()

    def controls(self) -> bool:
        """Apply the controls the reader sent (without waiting); True if there was one."""
        got = False
        while True:
            msg = self.ctlq.get(0)
            if not msg:
                return got
            self.control(pickle.loads(msg[0]))
            got = True

    def report(self) -> None:
        self.send(("progress", self.wid, self.clock, self.opens, self.learned, self.items,
                   self.upto))
        self.opens, self.learned, self.items = [], [], []

    def send(self, msg) -> None:
        self.conn.send_bytes(pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL))

    def batch(self, buf: bytes) -> int:
        """Feed one batch; returns its clock."""
        clock = batch_header.unpack_from(buf, 0)[0]
        pipe = self.pipe
        feed = pipe.feed
        rstats = pipe.reassembly_stats
        for kind, idx, item in packed_records(buf, batch_header.size):
            if kind >= 0:
                recs = feed(item)
                if rstats.connections_opened != self.opened:
                    k = rstats.connections_opened - self.opened
                    self.opens.extend([idx] * k)
                    self.opened += k
                if recs:
                    self.hold(recs, idx, 0)
                continue
            ts, data = item
            if kind == TICK:
                pipe.stats.last_ts_ns = ts
                recs = pipe.expire(ts)
                if recs:
                    self.hold(recs, idx, 1)
            elif kind == SECRETS:
                pipe.add_secrets(int.from_bytes(data[:4], "little"), data[4:])
            elif kind == SOURCE:
                self.capture = data.decode()
            elif kind == END:
                pipe.stats.last_ts_ns = ts
                self.hold(pipe.finish(), END_INDEX, 0)
                self.finished = True
                clock = END_INDEX
        return clock

    def hold(self, recs: list, idx: int, phase: int) -> None:
        """Keep what one pipeline call produced until it can be completed."""
        pipe = self.pipe
        first_ts = self.out.wants_first_ts
        fallback = pipe.stats.last_ts_ns
        append = self.held.append
        capture = self.capture
        conn = 0
        for sub, rec in enumerate(recs):
            t = type(rec)
            if t is Exchange or t is ConnectionSummary:
                conn = rec.conn_id
            elif t is DecodeIssue:
                if rec.connection_id >= 0:
                    conn = rec.connection_id
            elif t is TopicName:
                self.learned.append((rec.topic_id, rec.name, idx))
                self.known.setdefault(rec.topic_id, []).append((idx, rec.name))
            append((idx, phase, conn, sub, rec,
                    pipe.first_seen_ns(conn) if first_ts else None, fallback, capture))

    def control(self, ctl) -> None:
        """Global ids and topic ids from the reader: complete what can be completed."""
        gids = self.gids
        local = self.next_local
        for g in ctl.conn_ids:
            gids[local] = g
            local += 1
        self.next_local = local
        for tid, name, idx in ctl.learned:
            self.known.setdefault(tid, []).append((idx, name))
        self.upto = ctl.upto
        held = self.held
        out = self.out
        items = self.items
        wid = self.wid
        ended = []
        while held and held[0][0] <= ctl.upto:
            idx, phase, conn, sub, rec, first_ts, fallback, capture = held.popleft()
            t = type(rec)
            g = gids.get(conn, conn)
            if idx == END_INDEX:
                key = (idx, 0, g, sub) if t is not TopicName else (idx, 1, wid, sub)
            elif phase:
                key = (idx, phase, g, sub)
            else:
                key = (idx, 0, 0, sub)
            if t is Exchange:
                item = out.exchange(self.complete(rec, idx), first_ts, capture)
            elif t is DecodeIssue:
                item = ("i", self.remap_issue(rec), capture, first_ts, fallback)
            elif t is TopicName:
                item = out.meta(rec, capture, None) if self.first_learnt(rec, idx) else None
            else:
                ended.append(rec.conn_id)
                _set(rec, "conn_id", gids[rec.conn_id])
                item = out.meta(rec, capture, None)
            if item is not None:
                items.append((key, item))
        # a connection's summary is its last record, and the records of its last packet
        # (an issue after the summary among them) were completed above
        for conn in ended:
            del gids[conn]

    def remap_issue(self, issue: DecodeIssue) -> DecodeIssue:
        c = issue.connection_id
        if c >= 0:
            _set(issue, "connection_id", self.gids[c])
        return issue

    def complete(self, ex: Exchange, idx: int) -> Exchange:
        """``ex`` with its global connection id, and the topic ids another decoder learnt
        before packet ``idx`` named. Changed in place: the record is this decoder's own and
        nothing else holds it yet (``dataclasses.replace`` cost more than the rest of the
        completion)."""
        g = self.gids[ex.conn_id]
        _set(ex, "conn_id", g)
        for i in ex.issues:
            if i.connection_id >= 0:
                _set(i, "connection_id", g)
        if ex.topic_ids:
            got = resolve_topic_ids(ex.topics, ex.topic_ids, ex.record_fields,
                                    lambda tid: self.name_before(tid, idx))
            if got is not None:
                _set(ex, "topics", got[0])
                _set(ex, "record_fields", got[1])
        return ex

    def name_before(self, tid: str, idx: int) -> str | None:
        """The name topic id ``tid`` had, by the latest learning before packet ``idx`` in any
        decoder; ``None`` when none was learnt before it."""
        best = -1
        name = None
        for i, n in self.known.get(tid, ()):
            if best < i < idx:
                best, name = i, n
        return name

    def first_learnt(self, rec: TopicName, idx: int) -> bool:
        """Whether ``--jobs 1`` lists this learning (the topic id's name changed, or it is
        new) rather than only another decoder's earlier one."""
        return self.name_before(rec.topic_id, idx) != rec.name
