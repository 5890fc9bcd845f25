"""Dashboards' numbers, computed where the exchanges are decoded (the data source's thread).

:class:`Aggregates` is fed every exchange, standalone issue and connection summary and
produces immutable :class:`Snapshot` values for the UI a few times per second. Memory is
bounded whatever the capture: latency percentiles come from DDSketch
(:mod:`kafkasniff.stats.aggregate`, 1 % relative accuracy), the timeline keeps at most
:data:`TIMELINE_BUCKETS` buckets (their width doubles as the capture grows), histograms have
fixed log-scale bins, and the connection, topic and client tables are capped.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

from kafkasniff.content.summary import ERROR, summary_field
from kafkasniff.model import DecodeIssue, Exchange, ExchangeStatus, WireFormat
from kafkasniff.protocol.walk import PlanWalker
from kafkasniff.stats.aggregate import Aggregator, Row, api_row_key, new_sketch

TIMELINE_BUCKETS = 120
#: the error-code fields of response bodies, with their topic and partition
_ERRORS = PlanWalker(lambda f: ERROR if summary_field(f) is ERROR else None)
#: latency histogram bin edges: 4 bins per decade from 10 µs to 100 s (ns); below and above
#: go to the first and last bin
HIST_EDGES_NS = tuple(int(10_000 * 10 ** (k / 4)) for k in range(0, 29))
MAX_CONNECTIONS = 100_000
MAX_TOPICS = 10_000
MAX_PARTITION_ERRORS = 1_000


class StatRow(NamedTuple):
    """One row of an API / broker / client table (latencies in ns, ``None`` when no paired
    exchange). The percentiles and max are those of the served exchanges: long-polls
    (:mod:`kafkasniff.content.waits`) are counted apart in ``long_polls``, with their median
    ``long_poll_p50_ns`` and ``long_poll_max_ns``."""

    key: str
    count: int
    rate_per_s: float
    error_exchanges: int
    errors: tuple[tuple[str, int], ...]
    p50_ns: int | None
    p99_ns: int | None
    max_ns: int | None
    throttled: int
    throttle_total_ms: int
    request_bytes: int
    response_bytes: int
    statuses: tuple[tuple[str, int], ...]
    p90_ns: int | None = None
    long_polls: int = 0
    long_poll_p50_ns: int | None = None
    long_poll_max_ns: int | None = None


class ConnRow(NamedTuple):
    """One TCP connection (Kafka, Kafka 0.7 or TLS)."""

    conn_id: int
    kind: str
    client: str
    broker: str
    client_id: str
    exchanges: int
    error_exchanges: int
    issues: int
    request_bytes: int
    response_bytes: int
    first_ts_ns: int
    last_ts_ns: int
    max_latency_ns: int | None
    state: str          # "open" or the close reason
    gap_bytes: int
    retransmitted_bytes: int
    sasl: str           # "MECHANISM user" when the connection authenticated
    handshake_seen: bool | None
    long_polls: int = 0  # long-polls, kept out of max_latency_ns


class TopicRow(NamedTuple):
    """One topic: errors per partition and produce/fetch throughput."""

    topic: str
    exchanges: int
    error_exchanges: int
    partition_errors: tuple[tuple[int | None, str, int], ...]   # (partition, error, count)
    produce_records: int
    produce_bytes: int
    fetch_records: int
    fetch_bytes: int
    produce_rate_bps: float
    fetch_rate_bps: float


class ClientRow(NamedTuple):
    """One client_id: its stats row plus where it connects from."""

    stats: StatRow
    connections: int
    hosts: int


class Bucket(NamedTuple):
    """One timeline bucket."""

    start_ns: int
    width_ns: int
    count: int
    errors: int
    p99_ns: int | None


@dataclass(frozen=True)
class Snapshot:
    """Everything the dashboards show, at one moment (immutable, made in the source thread).

    ``connections``, ``topics`` and ``clients`` are refreshed less often than the rest
    (every ``full_every`` snapshots and at the end); ``histograms`` maps API names to
    counts per bin of :data:`HIST_EDGES_NS`.
    """

    exchanges: int = 0
    first_ts_ns: int = 0
    last_ts_ns: int = 0
    total: StatRow | None = None
    apis: tuple[StatRow, ...] = ()
    brokers: tuple[StatRow, ...] = ()
    clients: tuple[ClientRow, ...] = ()
    issues: tuple[tuple[str, int], ...] = ()
    severities: tuple[tuple[str, int], ...] = ()
    timeline: tuple[Bucket, ...] = ()
    histograms: dict = field(default_factory=dict)
    connections: tuple[ConnRow, ...] = ()
    topics: tuple[TopicRow, ...] = ()
    pipeline: dict = field(default_factory=dict)

    @property
    def span_s(self) -> float:
        """Capture time covered, first to last exchange (seconds, >= 0)."""
        return max(0.0, (self.last_ts_ns - self.first_ts_ns) / 1e9)


def _stat_row(key: str, r: Row, span_s: float) -> StatRow:
    paired = int(r.latency.count)
    return StatRow(key, r.count, r.count / span_s if span_s > 0 else 0.0, r.error_exchanges,
                   tuple(r.errors.most_common()), r.quantile_ns(0.5), r.quantile_ns(0.99),
                   r.max_ns if paired else None, r.throttled, r.throttle_total_ms,
                   r.request_bytes, r.response_bytes, tuple(r.statuses.most_common()),
                   p90_ns=r.quantile_ns(0.9), long_polls=r.long_polls,
                   long_poll_p50_ns=r.long_poll_quantile_ns(0.5),
                   long_poll_max_ns=r.long_poll_max_ns if r.long_polls else None)


class _Timeline:
    def __init__(self) -> None:
        self.start = 0
        self.width = 1_000_000_000
        self.counts: list[int] = []
        self.errors: list[int] = []
        self.sketches: list = []

    def add(self, ts: int, error: bool, latency: int | None) -> None:
        if not self.counts:
            self.start = ts - ts % self.width
        elif ts < self.start:
            self._extend_back(ts)       # an earlier time (files given out of time order)
        i = (ts - self.start) // self.width
        while i >= TIMELINE_BUCKETS:
            self._halve()
            i = (ts - self.start) // self.width
        while len(self.counts) <= i:
            self.counts.append(0)
            self.errors.append(0)
            self.sketches.append(None)
        self.counts[i] += 1
        if error:
            self.errors[i] += 1
        if latency is not None:
            sk = self.sketches[i]
            if sk is None:
                sk = self.sketches[i] = new_sketch()
            sk.add(latency)

    def _extend_back(self, ts: int) -> None:
        """Start the timeline at the bucket of ``ts`` (before :attr:`start`): empty buckets
        put in front, merged in pairs first while there would be too many."""
        while True:
            start = ts - ts % self.width
            k = (self.start - start) // self.width
            if len(self.counts) + k <= TIMELINE_BUCKETS:
                self.counts[:0] = [0] * k
                self.errors[:0] = [0] * k
                self.sketches[:0] = [None] * k
                self.start = start
                return
            self._halve()

    def _halve(self) -> None:
        old_start, old_w = self.start, self.width
        self.width = old_w * 2
        self.start = old_start - old_start % self.width
        counts: list[int] = []
        errors: list[int] = []
        sketches: list = []
        for k, (c, e, s) in enumerate(zip(self.counts, self.errors, self.sketches)):
            j = (old_start + k * old_w - self.start) // self.width
            while len(counts) <= j:
                counts.append(0)
                errors.append(0)
                sketches.append(None)
            counts[j] += c
            errors[j] += e
            if s is not None:
                if sketches[j] is None:
                    sketches[j] = s
                else:
                    sketches[j].merge(s)
        self.counts, self.errors, self.sketches = counts, errors, sketches

    def snapshot(self) -> tuple[Bucket, ...]:
        out = []
        for k, (c, e, s) in enumerate(zip(self.counts, self.errors, self.sketches)):
            p99 = None
            if s is not None and s.count:
                v = s.get_quantile_value(0.99)
                p99 = None if v is None else int(round(v))
            out.append(Bucket(self.start + k * self.width, self.width, c, e, p99))
        return tuple(out)


def _first(row):
    return row[0]


def _hist_bin(lat_ns: int) -> int:
    if lat_ns <= HIST_EDGES_NS[0]:
        return 0
    k = int(4 * math.log10(lat_ns / 10_000))
    return min(k, len(HIST_EDGES_NS) - 2)


class Aggregates:
    """Running dashboards of one analysis (not thread-safe: one feeding thread).

    Args:
        registry: the pipeline's topic-id registry
            (:class:`~kafkasniff.content.summary.TopicRegistry`, to name the topics of
            per-partition errors carried by id), or ``None``: no per-partition errors.
        defs: the definitions (plans of response layouts), or ``None``.
    """

    def __init__(self, registry=None, defs=None) -> None:
        self.agg = Aggregator()
        self.timeline = _Timeline()
        self.hist: dict[str, list[int]] = {}
        self.conns: dict[int, list] = {}          # open connections (mutable rows)
        self.conn_meta: dict[int, object] = {}
        self.topics: dict[str, list] = {}
        self.client_conns: Counter = Counter()
        self.client_hosts: dict[str, set] = {}
        self.first_ts = 0
        self.last_ts = 0
        self.registry = registry
        self.defs = defs
        self.conns_dropped = 0
        self._conn_rows: dict[int, ConnRow] = {}   # rows of the last snapshot
        self._dirty_conns: set[int] = set()
        self._n_conns = 0

    # ------------------------------------------------------------------ feeding
    def add(self, ex: Exchange) -> None:
        """Count one exchange."""
        self.agg.add(ex)
        ts = ex.ts_ns
        if ts:
            if not self.first_ts or ts < self.first_ts:
                self.first_ts = ts
            if ts > self.last_ts:
                self.last_ts = ts
        lat = ex.latency_ns if ex.status == ExchangeStatus.PAIRED else None
        if lat is not None and lat < 0:
            lat = 0
        served = None if ex.long_poll else lat     # long-polls: out of the percentiles
        if ts:      # an exchange without a time would stretch the timeline back to 1970
            self.timeline.add(ts, bool(ex.errors), served)
        # the key of the exchange's row in self.agg.apis (the Overview's API table finds the
        # histogram of the row under its cursor by that key)
        name = api_row_key(ex)
        if lat is not None:
            h = self.hist.get(name)
            if h is None:
                h = self.hist[name] = [0] * (len(HIST_EDGES_NS) - 1)
            h[_hist_bin(lat)] += 1
        self._conn(ex, served, lat is not None and ex.long_poll)
        if ex.topics or ex.record_fields:
            self._topics(ex)

    def add_issue(self, issue: DecodeIssue) -> None:
        """Count a standalone issue."""
        self.agg.add_issue(issue)
        if issue.connection_id >= 0:
            c = self._open_conn(issue.connection_id)
            if c is not None:
                c[7] += 1
                self._dirty_conns.add(issue.connection_id)

    def add_connection(self, summary) -> None:
        """A :class:`~kafkasniff.pipeline.ConnectionSummary` (connection ended). Its row is
        final from now on: kept as an immutable tuple (cheap for the garbage collector)."""
        if summary.kind == "other":
            return
        cid = summary.conn_id
        c = self._open_conn(cid)
        if c is None:
            if self._full():
                self.conns_dropped += 1
                return
            c = self._new_conn(cid, summary.client, summary.broker, None)
        c[1] = summary.kind
        c[10] = min(c[10], summary.first_ts_ns) if c[10] else summary.first_ts_ns
        c[11] = max(c[11], summary.last_ts_ns)
        sasl = ""
        if summary.sasl:
            s = summary.sasl
            sasl = " ".join(str(x) for x in (s.get("mechanism"), s.get("username")) if x)
        # plain values only (an untracked tuple, not the summary and its dicts)
        self.conn_meta[cid] = (summary.closed, summary.gap_bytes, summary.retransmitted_bytes,
                               sasl, summary.handshake_seen)
        self._conn_rows[cid] = self._conn_row(c)
        self.conns.pop(cid, None)
        self._dirty_conns.discard(cid)

    def _full(self) -> bool:
        return self._n_conns >= MAX_CONNECTIONS

    def _open_conn(self, cid: int) -> list | None:
        """The mutable row of a connection (reopened from its final row if it closed)."""
        c = self.conns.get(cid)
        if c is None:
            row = self._conn_rows.get(cid)
            if row is not None:
                c = self.conns[cid] = [*row[:4], row[4] or None, *row[5:13], row.long_polls]
        return c

    # ------------------------------------------------------------------ internals
    def _new_conn(self, conn_id, client, broker, client_id) -> list:
        # conn_id kind client broker client_id exchanges errors issues req resp first last max
        # long_polls
        self._n_conns += 1
        return [conn_id, "kafka", client, broker, client_id, 0, 0, 0, 0, 0, 0, 0, None, 0]

    def _conn(self, ex: Exchange, lat: int | None, long_poll: bool = False) -> None:
        """Count ``ex`` in its connection's row; ``lat``: its latency if paired and served
        (the max latency), ``long_poll``: a paired long-poll (counted apart)."""
        c = self._open_conn(ex.conn_id)
        if c is None:
            if self._full():
                self.conns_dropped += 1
                return
            c = self.conns[ex.conn_id] = self._new_conn(ex.conn_id, ex.client, ex.broker,
                                                        ex.client_id)
            if ex.wire_format is WireFormat.KAFKA07:
                c[1] = "kafka07"
        self._dirty_conns.add(ex.conn_id)
        if c[4] is None and ex.client_id is not None:
            c[4] = ex.client_id
        if c[5] == 0:
            cid = ex.client_id if ex.client_id is not None else "(none)"
            self.client_conns[cid] += 1
            hosts = self.client_hosts.get(cid)
            if hosts is None:
                hosts = self.client_hosts[cid] = set()
            if len(hosts) < 10_000:
                hosts.add(ex.client.rpartition(":")[0])
        c[5] += 1
        if ex.errors:
            c[6] += 1
        c[7] += len(ex.issues)
        c[8] += ex.request_bytes
        c[9] += ex.response_bytes
        ts = ex.ts_ns
        if ts and (not c[10] or ts < c[10]):
            c[10] = ts
        end = ts + (lat if lat is not None else max(0, ex.latency_ns or 0) if long_poll else 0)
        if end > c[11]:
            c[11] = end
        if lat is not None and (c[12] is None or lat > c[12]):
            c[12] = lat
        if long_poll:
            c[13] += 1

    def _topic(self, name: str) -> list | None:
        t = self.topics.get(name)
        if t is None:
            if len(self.topics) >= MAX_TOPICS:
                return None
            # exchanges, error_exchanges, Counter[(partition, error)], p_rec, p_bytes, f_rec,
            # f_bytes
            t = self.topics[name] = [0, 0, Counter(), 0, 0, 0, 0]
        return t

    def _topics(self, ex: Exchange) -> None:
        for name in ex.topics:
            t = self._topic(name)
            if t is not None:
                t[0] += 1
                if ex.errors:
                    t[1] += 1
        if ex.errors and ex.response is not None and ex.response.body and \
                self.registry is not None:
            for topic, part, err in self._partition_errors(ex):
                t = self._topic(topic)
                if t is not None and (len(t[2]) < MAX_PARTITION_ERRORS or (part, err) in t[2]):
                    t[2][(part, err)] += 1
        produce = ex.api_key == 0
        for loc in ex.record_fields:
            name = loc.display_topic
            t = self._topic(name)
            if t is None:
                continue
            rs = loc.records.decoded
            n = sum(b.record_count for b in rs.batches) if rs is not None else 0
            if produce:
                t[3] += n
                t[4] += loc.records.size_bytes
            else:
                t[5] += n
                t[6] += loc.records.size_bytes

    def error_counts(self, ex: Exchange) -> tuple[tuple[str, int], ...]:
        """``((error name, occurrences), ...)`` of the exchange's response, in the order of
        ``ex.errors``: how many non-zero error codes of each name the response carries (top
        level, per topic, per partition, per resource). A name the walk does not find
        (no definitions, a layout it cannot name) counts 1."""
        names = ex.errors
        if not names:
            return ()
        counts: dict[str, int] = {}
        defs = self.defs
        resp = ex.response
        info = defs.apis.get(ex.api_key) if defs is not None and resp is not None \
            and resp.body else None
        if info is not None:
            version = ex.assumed_version if ex.assumed_version is not None else \
                ex.api_version
            error_name = defs.error_name

            def visit(tag, key, v, *rest):
                if v:
                    n = error_name(v)
                    counts[n] = counts.get(n, 0) + 1
            try:
                _ERRORS.walk(defs.plan(info.response, version), resp.body, visit)
            except Exception:  # noqa: BLE001 - a layout we cannot name: count 1 per name
                counts = {}
        return tuple((n, counts.get(n) or 1) for n in names)

    def _partition_errors(self, ex: Exchange) -> list[tuple[str, int | None, str]]:
        """(topic, partition, error name) of every non-zero error code under a topic."""
        defs = self.defs
        info = defs.apis.get(ex.api_key) if defs is not None else None
        if info is None:
            return []
        version = ex.assumed_version if ex.assumed_version is not None else ex.api_version
        try:
            plan = defs.plan(info.response, version)
        except Exception:  # noqa: BLE001 - a layout we cannot name: no per-partition errors
            return []
        out: list = []
        resolve = self.registry.resolve
        error_name = defs.error_name

        def visit(tag, key, v, struct, node, topic, topic_id, partition, path):
            if v:
                if topic is None and topic_id:
                    topic = resolve(topic_id)
                if topic is not None:
                    out.append((topic, partition, error_name(v)))

        _ERRORS.walk(plan, ex.response.body, visit)
        return out

    # ------------------------------------------------------------------ snapshots
    def snapshot(self, full: bool = True, pipeline: dict | None = None,
                 previous: Snapshot | None = None) -> Snapshot:
        """An immutable picture of everything so far. With ``full=False`` the connection,
        topic and client tables are taken from ``previous`` (they are the costly part)."""
        agg = self.agg
        span = max(1e-9, (self.last_ts - self.first_ts) / 1e9)

        def table(t) -> tuple[StatRow, ...]:
            rows = sorted(t.rows.items(), key=lambda kv: -kv[1].count)
            return tuple(_stat_row(k, r, span) for k, r in rows)

        if full or previous is None:
            clients = tuple(ClientRow(row, self.client_conns.get(row.key, 0),
                                      len(self.client_hosts.get(row.key, ())))
                            for row in table(agg.clients))
            rows = self._conn_rows
            for cid in self._dirty_conns:
                c = self.conns.get(cid)
                if c is not None:
                    rows[cid] = self._conn_row(c)
            self._dirty_conns.clear()
            conns = tuple(sorted(rows.values(), key=_first))
            topics = tuple(self._topic_row(k, t, span) for k, t in
                           sorted(self.topics.items(), key=lambda kv: -kv[1][0]))
        else:
            clients, conns, topics = previous.clients, previous.connections, previous.topics
        return Snapshot(
            exchanges=agg.total.count, first_ts_ns=self.first_ts, last_ts_ns=self.last_ts,
            total=_stat_row("total", agg.total, span), apis=table(agg.apis),
            brokers=table(agg.brokers), clients=clients,
            issues=tuple(agg.issues.most_common()),
            severities=tuple(agg.issue_severity.most_common()),
            timeline=self.timeline.snapshot(),
            histograms={k: tuple(v) for k, v in self.hist.items()},
            connections=conns, topics=topics, pipeline=dict(pipeline or {}))

    def _conn_row(self, c: list) -> ConnRow:
        closed, gaps, retrans, sasl, handshake = self.conn_meta.get(c[0],
                                                                    ("open", 0, 0, "", None))
        return ConnRow(c[0], c[1], c[2], c[3], c[4] if c[4] is not None else "", c[5], c[6],
                       c[7], c[8], c[9], c[10], c[11], c[12], closed, gaps, retrans, sasl,
                       handshake, c[13])

    @staticmethod
    def _topic_row(name: str, t: list, span: float) -> TopicRow:
        perrs = tuple(sorted(((p, e, n) for (p, e), n in t[2].items()),
                             key=lambda x: (-x[2], x[0] if x[0] is not None else -1, x[1])))
        return TopicRow(name, t[0], t[1], perrs, t[3], t[4], t[5], t[6],
                        t[4] / span if span > 0 else 0.0, t[6] / span if span > 0 else 0.0)
