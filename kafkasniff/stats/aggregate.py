"""Aggregates over exchanges in bounded memory: per API, client_id, broker and topic.

Latency percentiles follow one rank rule in every output (``stats``, the TUI, ``spark
report``, the groups tables): **nearest rank**, the p-th percentile of n latencies is the
value of rank ``ceil(p * n)`` (1-based) of the sorted latencies (:func:`nearest_rank`).
Here they are estimated with DDSketch (``ddsketch`` library,
``LogCollapsingLowestDenseDDSketch``, read at that rank by :class:`NearestRankSketch`):
every reported percentile is within 1 % relative error of that value
(``RELATIVE_ACCURACY``), and each sketch holds at most ``SKETCH_BINS`` bins whatever the
number of values, so memory does not grow with the capture. Tables are capped at
``max_keys`` rows each; exchanges of further keys go to an ``(other)`` row.
"""

from __future__ import annotations

import math
from collections import Counter

from ddsketch import LogCollapsingLowestDenseDDSketch

from kafkasniff.model import DecodeIssue, Exchange, ExchangeStatus

RELATIVE_ACCURACY = 0.01
SKETCH_BINS = 2048
OTHER = "(other)"
#: how outputs name the percentile rule and its accuracy
PERCENTILE_RULE = f"nearest rank, DDSketch within {RELATIVE_ACCURACY:.0%} of the value"


def nearest_rank(q: float, n: int) -> int:
    """The 1-based rank of the ``q`` quantile (0 <= q <= 1) of ``n`` >= 1 sorted values:
    ``ceil(q * n)``, at least 1 (nearest rank; computed in floating point as Spark's
    ``percentile_approx`` computes it, so both pick the same rank)."""
    return min(n, max(1, math.ceil(q * n)))


class NearestRankSketch(LogCollapsingLowestDenseDDSketch):
    """A DDSketch whose :meth:`get_quantile_value` reads the value of rank
    :func:`nearest_rank` (DDSketch's own rule reads rank ``floor(q * (n - 1))``, 0-based, one
    lower for many ``n``: Produce p90 541.92 ms where ``spark report`` said 653.39 ms on
    ``broker_failover.pcap``). Merges and pickles as the base class."""

    def get_quantile_value(self, quantile: float) -> float | None:
        """The value of rank ``ceil(quantile * n)`` within the relative accuracy; ``None``
        when empty or ``quantile`` is outside [0, 1]."""
        n = self.count
        if n == 0 or not 0 <= quantile <= 1:
            return None
        rank = nearest_rank(quantile, int(n)) - 1          # 0-based
        if n == 1:
            return super().get_quantile_value(0.0)
        # the base class reads rank q * (n - 1) and takes the bin holding it: rank + 0.5
        # lands inside the wanted value's bin whatever the floating-point rounding
        return super().get_quantile_value(min(1.0, (rank + 0.5) / (n - 1)))


def new_sketch() -> NearestRankSketch:
    """A bounded DDSketch with 1 % relative accuracy, read at nearest ranks."""
    return NearestRankSketch(relative_accuracy=RELATIVE_ACCURACY, bin_limit=SKETCH_BINS)



def api_row_key(ex: Exchange) -> str:
    """The per-API row an exchange counts in: its api_name, ``Unknown`` for the exchanges
    without a Kafka api_key (orphans not inferred, raw SASL tokens, ...)."""
    return ex.api_name if ex.api_key >= 0 else "Unknown"

def _by_count(counts: Counter) -> dict:
    """``counts`` as a dict, most frequent first, ties by name (the same order whatever
    order the counts were made in: merged decoders give the same report)."""
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _clamped_quantile(sketch, q: float, lo: int, hi: int) -> int | None:
    """Quantile ``q`` of a latency sketch in ns, clamped to ``[lo, hi]`` (the observed range);
    ``None`` for a missing or empty sketch."""
    if sketch is None or sketch.count == 0:
        return None
    v = sketch.get_quantile_value(q)
    return None if v is None else max(lo, min(hi, int(round(v))))


class Row:
    """Counters of one row (one API, client_id, broker or topic).

    Attributes: ``count`` exchanges, ``statuses`` by status, ``errors`` (error name ->
    exchanges with it), ``error_exchanges``, ``latency`` sketch (ns, paired exchanges that
    are not long-polls; negative latencies counted as 0), ``min_ns`` / ``max_ns`` of those
    (``min_ns`` -1 before the first), ``long_polls`` (paired exchanges the broker held by
    design, :mod:`kafkasniff.content.waits`) with their own ``long_poll_latency`` sketch
    (``None`` before the first) and ``long_poll_max_ns``, ``throttled`` (exchanges with
    throttle_time_ms > 0), ``throttle_total_ms``, ``throttle_max_ms``, ``request_bytes``,
    ``response_bytes`` (frames on the wire).
    """

    __slots__ = ("count", "statuses", "errors", "error_exchanges", "latency", "max_ns", "min_ns",
                 "long_polls", "long_poll_latency", "long_poll_max_ns", "throttled",
                 "throttle_total_ms", "throttle_max_ms", "request_bytes", "response_bytes")

    def __init__(self) -> None:
        self.count = 0
        self.statuses: Counter = Counter()
        self.errors: Counter = Counter()
        self.error_exchanges = 0
        self.latency = new_sketch()
        self.max_ns = 0
        self.min_ns = -1
        self.long_polls = 0
        self.long_poll_latency: LogCollapsingLowestDenseDDSketch | None = None
        self.long_poll_max_ns = 0
        self.throttled = 0
        self.throttle_total_ms = 0
        self.throttle_max_ms = 0
        self.request_bytes = 0
        self.response_bytes = 0

    def add(self, ex: Exchange) -> None:
        """Count one exchange."""
        self.count += 1
        self.statuses[ex.status] += 1
        if ex.errors:
            self.error_exchanges += 1
            for e in ex.errors:
                self.errors[e] += 1
        if ex.status == ExchangeStatus.PAIRED and ex.latency_ns is not None:
            lat = ex.latency_ns if ex.latency_ns > 0 else 0
            if ex.long_poll:
                self._add_long_poll(lat)
            else:
                self.latency.add(lat)
                if lat > self.max_ns:
                    self.max_ns = lat
                if self.min_ns < 0 or lat < self.min_ns:
                    self.min_ns = lat
        t = ex.throttle_time_ms
        if t:
            self.throttled += 1
            self.throttle_total_ms += t
            if t > self.throttle_max_ms:
                self.throttle_max_ms = t
        self.request_bytes += ex.request_bytes
        self.response_bytes += ex.response_bytes

    def _add_long_poll(self, lat: int) -> None:
        """Count one long-poll's latency (ns) apart from the served exchanges'."""
        self.long_polls += 1
        if self.long_poll_latency is None:
            self.long_poll_latency = new_sketch()
        self.long_poll_latency.add(lat)
        if lat > self.long_poll_max_ns:
            self.long_poll_max_ns = lat

    def merge(self, other: "Row") -> None:
        """Add the counts of ``other`` (the same row from another decoder); the latency
        sketches merge with no loss of accuracy (DDSketch is mergeable)."""
        self.count += other.count
        self.statuses.update(other.statuses)
        self.errors.update(other.errors)
        self.error_exchanges += other.error_exchanges
        if other.latency.count:
            self.latency.merge(other.latency)
            self.max_ns = max(self.max_ns, other.max_ns)
            if self.min_ns < 0 or 0 <= other.min_ns < self.min_ns:
                self.min_ns = other.min_ns
        if other.long_poll_latency is not None:
            self.long_polls += other.long_polls
            if self.long_poll_latency is None:
                self.long_poll_latency = new_sketch()
            self.long_poll_latency.merge(other.long_poll_latency)
            self.long_poll_max_ns = max(self.long_poll_max_ns, other.long_poll_max_ns)
        self.throttled += other.throttled
        self.throttle_total_ms += other.throttle_total_ms
        self.throttle_max_ms = max(self.throttle_max_ms, other.throttle_max_ms)
        self.request_bytes += other.request_bytes
        self.response_bytes += other.response_bytes

    def quantile_ns(self, q: float) -> int | None:
        """Latency quantile in ns (``None`` without paired exchanges): the value of rank
        :func:`nearest_rank` within 1 %, clamped to the observed minimum and maximum (the
        sketch's relative error could otherwise report a p99 above the max)."""
        return _clamped_quantile(self.latency, q, self.min_ns, self.max_ns)

    def long_poll_quantile_ns(self, q: float) -> int | None:
        """Latency quantile of the long-polls in ns (``None`` without any), within 1 % and
        at most their maximum."""
        return _clamped_quantile(self.long_poll_latency, q, 0, self.long_poll_max_ns)

    def to_dict(self) -> dict:
        """JSON-ready summary of the row."""
        paired = int(self.latency.count)
        return {
            "count": self.count,
            "statuses": dict(sorted(self.statuses.items())),
            "error_exchanges": self.error_exchanges,
            "errors": _by_count(self.errors),
            "latency_count": paired,
            "latency_p50_ns": self.quantile_ns(0.5),
            "latency_p90_ns": self.quantile_ns(0.9),
            "latency_p99_ns": self.quantile_ns(0.99),
            "latency_max_ns": self.max_ns if paired else None,
            "long_polls": self.long_polls,
            "long_poll_p50_ns": self.long_poll_quantile_ns(0.5),
            "long_poll_p99_ns": self.long_poll_quantile_ns(0.99),
            "long_poll_max_ns": self.long_poll_max_ns if self.long_polls else None,
            "throttled": self.throttled,
            "throttle_total_ms": self.throttle_total_ms,
            "throttle_max_ms": self.throttle_max_ms,
            "request_bytes": self.request_bytes,
            "response_bytes": self.response_bytes,
        }


class Table:
    """Rows by key, at most ``max_keys`` of them (then ``(other)``)."""

    __slots__ = ("rows", "max_keys")

    def __init__(self, max_keys: int) -> None:
        self.rows: dict[str, Row] = {}
        self.max_keys = max_keys

    def row(self, key: str) -> Row:
        """The row of ``key`` (created on first use, or the ``(other)`` row when full)."""
        r = self.rows.get(key)
        if r is None:
            if len(self.rows) >= self.max_keys:
                key = OTHER
                r = self.rows.get(key)
            if r is None:
                r = self.rows[key] = Row()
        return r

    def merge(self, other: "Table") -> None:
        """Add the rows of ``other`` (keys beyond ``max_keys`` go to ``(other)``)."""
        for key, r in other.rows.items():
            self.row(key).merge(r)


#: distinct (api, client_id, broker, topics) combinations counted before they are folded
#: into the tables (bounds the memory of the deferred rows)
MAX_PENDING_COMBINATIONS = 4096


class Aggregator:
    """Stats over a stream of exchanges and issues (what ``kafkasniff stats`` prints).

    Each exchange counts in the total, its API's, client_id's and broker's rows and each of
    its topics' rows. Rather than adding it to four or five rows (and latency sketches) one by
    one, :meth:`add` counts it once in the row of its combination of those keys; the
    combinations are folded into the tables (:meth:`Row.merge`, lossless: the sketches'
    bins add up) when the tables are read (``total``, ``apis``, ``clients``, ``brokers``,
    ``topics``, :meth:`merge`, :meth:`to_dict`, pickling) or when there are
    ``MAX_PENDING_COMBINATIONS`` of them. The folding goes in the order the combinations
    first appeared, so rows are created in the order of their keys' first exchanges and
    the ``max_keys`` cap picks the same rows as counting one exchange at a time.

    Args:
        max_keys: row limit of each table.
    """

    def __init__(self, max_keys: int = 10_000) -> None:
        self._apis = Table(max_keys)
        self._clients = Table(max_keys)
        self._brokers = Table(max_keys)
        self._topics = Table(max_keys)
        self._total = Row()
        self._pending: dict[tuple, Row] = {}
        self.issues: Counter = Counter()
        self.issue_severity: Counter = Counter()

    def add(self, ex: Exchange) -> None:
        """Count one exchange in every table."""
        key = (api_row_key(ex), ex.client_id if ex.client_id is not None else "(none)",
               ex.broker, ex.topics)
        row = self._pending.get(key)
        if row is None:
            if len(self._pending) >= MAX_PENDING_COMBINATIONS:
                self._fold()
            row = self._pending[key] = Row()
        row.add(ex)
        for i in ex.issues:
            self.add_issue(i)

    def _fold(self) -> None:
        """Add the pending combination rows to the tables, in the order they appeared."""
        pending, self._pending = self._pending, {}
        for (api, client, broker, topics), row in pending.items():
            self._total.merge(row)
            self._apis.row(api).merge(row)
            self._clients.row(client).merge(row)
            self._brokers.row(broker).merge(row)
            for t in topics:
                self._topics.row(t).merge(row)

    def _table(self, table):
        if self._pending:
            self._fold()
        return table

    total = property(lambda self: self._table(self._total), doc="The row of every exchange.")
    apis = property(lambda self: self._table(self._apis), doc="Rows by API (api_row_key).")
    clients = property(lambda self: self._table(self._clients), doc="Rows by client_id.")
    brokers = property(lambda self: self._table(self._brokers), doc="Rows by broker.")
    topics = property(lambda self: self._table(self._topics), doc="Rows by topic.")

    def __getstate__(self) -> dict:
        """Pickled (``--jobs`` decoders) with the pending combinations folded in; unpickling
        is the default ``__dict__`` update."""
        if self._pending:
            self._fold()
        return self.__dict__

    def add_issue(self, issue: DecodeIssue) -> None:
        """Count one issue (by kind and by severity)."""
        self.issues[issue.kind] += 1
        self.issue_severity[issue.severity] += 1

    def merge(self, other: "Aggregator") -> None:
        """Add ``other``'s counts (another decoder's exchanges of the same capture)."""
        self.apis.merge(other.apis)
        self.clients.merge(other.clients)
        self.brokers.merge(other.brokers)
        self.topics.merge(other.topics)
        self.total.merge(other.total)
        self.issues.update(other.issues)
        self.issue_severity.update(other.issue_severity)

    def to_dict(self) -> dict:
        """JSON-ready report: ``total``, ``apis``, ``clients``, ``brokers``, ``topics``,
        ``issues`` (tables and counters most frequent first, ties by name)."""
        def table(t: Table) -> dict:
            return {k: r.to_dict() for k, r in sorted(t.rows.items(),
                                                     key=lambda kv: (-kv[1].count, kv[0]))}
        return {
            "latency_relative_accuracy": RELATIVE_ACCURACY,
            "total": self.total.to_dict(),
            "apis": table(self.apis),
            "clients": table(self.clients),
            "brokers": table(self.brokers),
            "topics": table(self.topics),
            "issues": _by_count(self.issues),
            "issue_severity": dict(sorted(self.issue_severity.items())),
        }
