"""Every metric family kafkasniff exposes, shared by ``live --metrics-port`` and
``stats --openmetrics`` (docs/metrics.md lists them with their labels and units).

Names follow the Prometheus conventions (https://prometheus.io/docs/practices/naming/):
a ``kafkasniff_`` prefix, base units (seconds, bytes), the unit as the name's suffix,
``_total`` on counters (added by the exposition), and, beside them, OpenTelemetry's
``messaging.client.operation.duration`` (semantic conventions for messaging, Kafka page)
translated to Prometheus as ``messaging_client_operation_duration_seconds``.

:class:`ExchangeMetrics` counts exchanges into those families. It is mergeable: a live
decoder (or a ``stats --jobs N`` decoder) counts into its own instance and hands over
:meth:`~ExchangeMetrics.take_delta`, which the collector adds with
:meth:`~ExchangeMetrics.merge`. Values are kept as integers in the units the wire gives
(nanoseconds, milliseconds, bytes) and scaled to base units only when exposed, so sums are
exact whatever the merge order.

Every label value a peer can choose is bounded, and each value folded is counted in
``kafkasniff_metrics_capped_total{label}``:

* cardinality caps (:class:`LabelCap`): the ``client_id``, ``broker`` and ``topic`` labels
  keep at most ``max_values`` distinct values each; later values become :data:`OTHER`
  (counted per exchange; for ``topic`` per exchange-topic pair). The empty value (no
  client_id, no single topic) is never capped.
* what the definitions know (:class:`KnownValues`): an ``api_name`` whose api_key the
  definitions do not have becomes :data:`UNKNOWN_API`, an ``api_version`` outside its
  api_key's versions in the definitions becomes :data:`OTHER` (both counted per exchange;
  ``-1``, no version, is kept), an ``error_name`` the definitions do not name (an
  ``UNKNOWN_ERROR_CODE_<n>``) becomes :data:`UNKNOWN_ERROR` (counted per exchange-error
  pair). These depend on the exchange alone, so decoders fold them before they send deltas.

The other labels are fixed sets: ``status`` (:class:`~kafkasniff.model.ExchangeStatus`),
``rule`` (the long-poll rules), ``kind`` (:class:`~kafkasniff.issues.IssueKind`), ``reason``,
``label`` and the OpenTelemetry operation names.

This module imports :mod:`kafkasniff.model` and, for :class:`KnownValues`, the definitions
(:mod:`kafkasniff.protocol.schema`) and Kafka 0.7's names; ``prometheus_client`` is imported
by :func:`metric_families`, :class:`MetricsCollector` and :func:`openmetrics_text` when called.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

from kafkasniff.model import Exchange, ExchangeStatus

__all__ = [
    "DEFAULT_MAX_VALUES",
    "FAMILIES",
    "OTEL_OPERATIONS",
    "OTHER",
    "UNKNOWN_API",
    "UNKNOWN_ERROR",
    "ExchangeMetrics",
    "Family",
    "KnownValues",
    "LabelCap",
    "MetricsCollector",
    "metric_families",
    "openmetrics_text",
    "server_address_port",
]

#: the label value that stands for every value beyond a cap, and for every ``api_version``
#: outside the definitions' versions of its api_key
OTHER = "__other__"
#: the ``api_name`` of exchanges without a Kafka api_key (orphans not inferred, raw SASL
#: tokens) and of every api_key the definitions do not have (``Unknown(<key>)`` in ``read``)
UNKNOWN_API = "Unknown"
#: the ``error_name`` (and OpenTelemetry ``error_type``) of every error code the definitions
#: do not name (``UNKNOWN_ERROR_CODE_<n>`` in ``read`` and ``stats``)
UNKNOWN_ERROR = "UNKNOWN_ERROR_CODE"
#: distinct values kept per capped label (``client_id``, ``broker``, ``topic``) by default
DEFAULT_MAX_VALUES = 100
#: a decoder's own cap is this many times the collector's (bounded memory in decoders; the
#: collector applies the real cap when it merges)
DECODER_CAP_FACTOR = 10

#: request durations (seconds): loopback and LAN latencies are sub-millisecond, a held
#: request (long-poll, JoinGroup) lasts up to minutes
DURATION_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                      0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
#: OpenTelemetry's advice for messaging.client.operation.duration (explicit bucket
#: boundaries of the semantic conventions' messaging metrics)
OTEL_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                  10.0)
#: broker throttle times (seconds; Kafka sends milliseconds, quota windows are seconds long)
THROTTLE_BUCKETS_S = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0)

#: Kafka APIs that are messaging operations in OpenTelemetry's sense, with the
#: ``messaging.operation.name`` and ``messaging.operation.type`` they are reported with
#: (operation types of the messaging conventions: ``send``, ``receive``, ``settle``).
#: Other APIs (Metadata, group membership, admin ...) are not client messaging operations
#: and are only in the ``kafkasniff_`` families.
OTEL_OPERATIONS: dict[str, tuple[str, str]] = {
    "Produce": ("send", "send"),
    "Fetch": ("poll", "receive"),
    "ShareFetch": ("poll", "receive"),
    "OffsetCommit": ("commit", "settle"),
    "TxnOffsetCommit": ("commit", "settle"),
    "ShareAcknowledge": ("ack", "settle"),
    "PRODUCE (0.7)": ("send", "send"),
    "MULTIPRODUCE (0.7)": ("send", "send"),
    "FETCH (0.7)": ("poll", "receive"),
    "MULTIFETCH (0.7)": ("poll", "receive"),
}


@dataclass(frozen=True)
class Family:
    """One metric family.

    Attributes:
        name: the exposed name (counters without ``_total``: the exposition adds it).
        kind: ``counter`` or ``histogram``.
        help: the HELP text.
        labels: label names as counted (see ``exposed`` for what is shown).
        unit: OpenMetrics unit (``seconds``, ``bytes``) or ``""``.
        bounds: histogram bucket upper bounds in the base unit (``le`` values).
        scale: counted unit -> base unit (ns -> s: ``1e-9``; ms -> s: ``1e-3``).
        caps: ``(label position, cap name)`` of the capped labels.
        counts_caps: values folded into :data:`OTHER` in this family are counted in
            ``kafkasniff_metrics_capped_total`` (one family per kind of observation).
        topics: only exposed with topic metrics on (``--metrics-topics``).
    """

    name: str
    kind: str
    help: str
    labels: tuple[str, ...]
    unit: str = ""
    bounds: tuple[float, ...] = ()
    scale: float = 1.0
    caps: tuple[tuple[int, str], ...] = ()
    counts_caps: bool = False
    topics: bool = False

    @property
    def buckets(self) -> tuple[int, ...]:
        """Bucket upper bounds in the counted unit (integers)."""
        return tuple(round(b / self.scale) for b in self.bounds)

    def base(self, value: int) -> float | int:
        """A counted value in the base unit (``1_500_000`` ns -> ``0.0015`` s)."""
        if self.scale == 1.0:
            return value
        return value / round(1 / self.scale)


_BASE = ("api_name", "api_version", "client_id", "broker")
_BASE_CAPS = ((2, "client_id"), (3, "broker"))
_SHORT = ("api_name", "client_id", "broker")
_SHORT_CAPS = ((1, "client_id"), (2, "broker"))

DURATION = Family(
    "kafkasniff_request_duration_seconds", "histogram",
    "Request duration of paired exchanges that are not long-polls: response first byte "
    "minus request last byte, as captured.", _BASE, "seconds", DURATION_BUCKETS_S, 1e-9,
    _BASE_CAPS)
LONG_POLL = Family(
    "kafkasniff_long_poll_duration_seconds", "histogram",
    "Duration of paired exchanges the broker held by design (long-polls), by the rule that "
    "marked them; kept out of kafkasniff_request_duration_seconds.", _BASE + ("rule",),
    "seconds", DURATION_BUCKETS_S, 1e-9, _BASE_CAPS)
EXCHANGES = Family(
    "kafkasniff_exchanges", "counter",
    "Exchanges (a request and its response, or the lack of one) by how they ended.",
    _BASE + ("status",), caps=_BASE_CAPS, counts_caps=True)
ERRORS = Family(
    "kafkasniff_errors", "counter",
    "Exchanges whose response carries this Kafka error code (top level, partition or "
    "resource), by Kafka error name.", _SHORT + ("error_name",), caps=_SHORT_CAPS)
THROTTLE = Family(
    "kafkasniff_throttle_time_seconds", "histogram",
    "Broker throttle time of responses with throttle_time_ms > 0 (count: throttled "
    "responses, sum: seconds throttled).", _SHORT, "seconds", THROTTLE_BUCKETS_S, 1e-3,
    _SHORT_CAPS)
REQUEST_BYTES = Family(
    "kafkasniff_request_bytes", "counter",
    "Request frames on the wire (size prefix included), client to broker.", _SHORT, "bytes",
    caps=_SHORT_CAPS)
RESPONSE_BYTES = Family(
    "kafkasniff_response_bytes", "counter",
    "Response frames on the wire (size prefix included), broker to client.", _SHORT, "bytes",
    caps=_SHORT_CAPS)
OTEL = Family(
    "messaging_client_operation_duration_seconds", "histogram",
    "OpenTelemetry messaging.client.operation.duration: Produce, Fetch, ShareFetch, "
    "OffsetCommit, TxnOffsetCommit and ShareAcknowledge exchanges that are paired and not "
    "long-polls.",
    ("messaging_operation_name", "messaging_operation_type", "error_type",
     "messaging_client_id", "broker", "messaging_destination_name"),
    "seconds", OTEL_BUCKETS_S, 1e-9, ((3, "client_id"), (4, "broker"), (5, "topic")))
TOPIC_DURATION = Family(
    "kafkasniff_topic_request_duration_seconds", "histogram",
    "Request duration of paired exchanges that are not long-polls, once for each topic the "
    "exchange touches (--metrics-topics).", ("api_name", "topic"), "seconds",
    DURATION_BUCKETS_S, 1e-9, ((1, "topic"),), topics=True)
TOPIC_EXCHANGES = Family(
    "kafkasniff_topic_exchanges", "counter",
    "Exchanges touching this topic, each counted once for each topic it touches "
    "(--metrics-topics).", ("api_name", "topic"), caps=((1, "topic"),), counts_caps=True,
    topics=True)
CAPPED = Family(
    "kafkasniff_metrics_capped", "counter",
    "Exchanges (for topic: exchange-topic pairs; for error_name: exchange-error pairs) whose "
    "label value was folded: client_id, broker, topic beyond their cap of distinct values "
    "(into __other__); api_name, api_version, error_name the definitions do not know (into "
    "Unknown, __other__, UNKNOWN_ERROR_CODE).", ("label",))

#: the families :class:`ExchangeMetrics` counts, in exposition order
FAMILIES: tuple[Family, ...] = (DURATION, LONG_POLL, OTEL, EXCHANGES, ERRORS, THROTTLE,
                                REQUEST_BYTES, RESPONSE_BYTES, TOPIC_DURATION,
                                TOPIC_EXCHANGES, CAPPED)
_BY_NAME = {f.name: f for f in FAMILIES}
_PAIRED = ExchangeStatus.PAIRED
#: ``status`` label strings built once, not per exchange (``api_version`` ones: KnownValues)
_STATUS_STR = {s: str(s) for s in ExchangeStatus}


class KnownValues:
    """The label values the definitions know, for the labels a peer chooses: API names
    (the definitions' and Kafka 0.7's request types), ``api_version`` labels per api_key
    (every version of its ``valid_versions``), error names (the definitions' ``errors.json``
    and Kafka 0.7's).

    Args:
        definitions: the definitions directory (``--definitions``); ``None``: the bundled
            ones.

    Raises:
        kafkasniff.errors.DefinitionError: the directory holds no readable definitions.
    """

    __slots__ = ("api_names", "versions", "errors")

    def __init__(self, definitions: str | None = None) -> None:
        from kafkasniff.protocol.legacy07 import ERRORS_07, REQUEST_TYPES
        from kafkasniff.protocol.schema import load_definitions

        defs = load_definitions(definitions)
        self.api_names = frozenset({a.name for a in defs.apis.values()}
                                   | {f"{n} (0.7)" for n in REQUEST_TYPES.values()}
                                   | {UNKNOWN_API})
        #: (api_key, api_version) -> the label; -1 (no version) is always kept
        self.versions = {(k, v): str(v) for k, a in defs.apis.items()
                         for v in range(a.min_version, a.max_version + 1)}
        self.errors = frozenset({e.name for e in defs.errors.values()}
                                | set(ERRORS_07.values()))


@lru_cache(maxsize=4)
def known_values(definitions: str | None = None) -> KnownValues:
    """:class:`KnownValues` of a definitions directory, built once per process."""
    return KnownValues(definitions)


class LabelCap:
    """The first ``max_values`` distinct values of a label, then :data:`OTHER`.

    Args:
        max_values: distinct values kept (at least 1). ``""`` is always kept and not
            counted.
    """

    __slots__ = ("kept", "max_values")

    def __init__(self, max_values: int) -> None:
        self.kept: set[str] = set()
        self.max_values = max(1, int(max_values))

    def map(self, value: str) -> str:
        """``value`` if kept (or room is left to keep it), else :data:`OTHER`.
        :data:`OTHER` itself (a decoder's capped value, merged) takes no room."""
        kept = self.kept
        if value in kept or not value or value == OTHER:
            return value
        if len(kept) < self.max_values:
            kept.add(value)
            return value
        return OTHER


class ExchangeMetrics:
    """The metric families' values, counted from exchanges (see the module docstring).

    Args:
        topics: also count the per-topic families (``--metrics-topics``).
        max_values: distinct values kept per capped label (``client_id``, ``broker``,
            ``topic``); beyond them :data:`OTHER`.
        decoder: a decoder's instance (live, ``stats --jobs``): caps at
            ``max_values * DECODER_CAP_FACTOR`` only, to bound its memory; the collector's
            instance applies ``max_values`` when it :meth:`merge`\\ s the deltas.
        definitions: the definitions directory the exchanges were decoded with (what
            ``api_name``, ``api_version`` and ``error_name`` values are known,
            :class:`KnownValues`); ``None``: the bundled ones.

    Raises:
        ValueError: ``max_values`` < 1.
    """

    def __init__(self, topics: bool = False, max_values: int = DEFAULT_MAX_VALUES,
                 decoder: bool = False, definitions: str | None = None) -> None:
        if max_values < 1:
            raise ValueError(f"max_values must be at least 1, not {max_values}")
        self.topics = topics
        self.max_values = max_values
        self.definitions = definitions
        n = max_values * DECODER_CAP_FACTOR if decoder else max_values
        self.caps = {"client_id": LabelCap(n), "broker": LabelCap(n), "topic": LabelCap(n)}
        known = known_values(definitions)
        self._api_names = known.api_names
        self._versions = known.versions
        self._errors = known.errors
        self.data: dict[str, dict[tuple, Any]] = {f.name: {} for f in FAMILIES}

    def settings(self) -> dict:
        """Keyword arguments that build an instance counting the same way (for decoders:
        add ``decoder=True``)."""
        out: dict = {"topics": self.topics, "max_values": self.max_values}
        if self.definitions is not None:
            out["definitions"] = self.definitions
        return out

    # ----------------------------------------------------------------- counting
    def _cap(self, name: str, value: str) -> str:
        out = self.caps[name].map(value)
        if out != value and value != OTHER:
            self._count(CAPPED, (name,), 1)
        return out

    def _version(self, ex: Exchange) -> str:
        """The ``api_version`` label of an exchange whose (api_key, api_version) the
        definitions do not have: ``-1`` (no version) as is, any other :data:`OTHER`,
        counted."""
        if ex.api_version == -1:
            return "-1"
        self._count(CAPPED, ("api_version",), 1)
        return OTHER

    def _error(self, name: str) -> str:
        """``name`` if the definitions name it, else :data:`UNKNOWN_ERROR`, counted."""
        if name in self._errors:
            return name
        self._count(CAPPED, ("error_name",), 1)
        return UNKNOWN_ERROR

    def _count(self, fam: Family, labels: tuple, value: int) -> None:
        d = self.data[fam.name]
        d[labels] = d.get(labels, 0) + value

    def _observe(self, fam: Family, buckets: tuple, labels: tuple, value: int) -> None:
        d = self.data[fam.name]
        h = d.get(labels)
        if h is None:
            h = d[labels] = [0] * (len(buckets) + 2)
        h[bisect_left(buckets, value)] += 1
        h[-1] += value

    def add(self, ex: Exchange) -> None:
        """Count one exchange in every family it belongs to.

        A paired exchange's duration is ``latency_ns`` (negative ones count as 0, as in
        ``stats``); it goes to ``kafkasniff_long_poll_duration_seconds`` when
        ``ex.long_poll``, else to ``kafkasniff_request_duration_seconds`` (and to the
        OpenTelemetry family for the APIs of :data:`OTEL_OPERATIONS`).
        """
        data = self.data
        caps = self.caps
        api = ex.api_name if ex.api_key >= 0 else UNKNOWN_API
        if api not in self._api_names:
            self._count(CAPPED, ("api_name",), 1)
            api = UNKNOWN_API
        client = ex.client_id or ""
        if client and client not in caps["client_id"].kept:
            client = self._cap("client_id", client)
        broker = ex.broker
        if broker not in caps["broker"].kept:
            broker = self._cap("broker", broker)
        version = self._versions.get((ex.api_key, ex.api_version)) or self._version(ex)
        base = (api, version, client, broker)
        d = data[_EXCHANGES]
        status = ex.status
        k = (api, version, client, broker, _STATUS_STR.get(status) or str(status))
        d[k] = d.get(k, 0) + 1
        short = (api, client, broker)
        errors = ex.errors
        if errors:
            d = data[_ERRORS]
            known = self._errors
            for e in errors:
                k = short + (e if e in known else self._error(e),)
                d[k] = d.get(k, 0) + 1
        t = ex.throttle_time_ms
        if t is not None and t > 0:
            self._observe(THROTTLE, _THROTTLE_B, short, t)
        if ex.request is not None:
            d = data[_REQUEST_BYTES]
            d[short] = d.get(short, 0) + ex.request.frame_bytes
        if ex.response is not None:
            d = data[_RESPONSE_BYTES]
            d[short] = d.get(short, 0) + ex.response.frame_bytes
        lat = ex.latency_ns if ex.status == _PAIRED else None
        if lat is not None and lat < 0:
            lat = 0
        topics = ()
        if self.topics and ex.topics:
            kept = caps["topic"].kept
            topics = [t if t in kept else self._cap("topic", t) for t in ex.topics]
            d = data[_TOPIC_EXCHANGES]
            for t in topics:
                k = (api, t)
                d[k] = d.get(k, 0) + 1
        if lat is None:
            return
        if ex.long_poll:
            self._observe(LONG_POLL, _DURATION_B, base + (ex.long_poll_rule or "",), lat)
            return
        self._observe(DURATION, _DURATION_B, base, lat)
        for t in topics:
            self._observe(TOPIC_DURATION, _DURATION_B, (api, t), lat)
        op = OTEL_OPERATIONS.get(api)
        if op is not None:
            dest = topics[0] if len(topics) == 1 else ""
            err = errors[0] if errors else ""
            if err and err not in self._errors:
                err = UNKNOWN_ERROR         # counted once above, in the errors family
            self._observe(OTEL, _OTEL_B, (op[0], op[1], err, client, broker, dest), lat)

    # ----------------------------------------------------------------- merging
    def take_delta(self) -> dict:
        """What was counted since the last call, as a picklable dict (family name ->
        {label tuple: count, or histogram ``[per-bucket counts..., +Inf count, sum]``}),
        and start again from zero. Empty families are left out."""
        out = {k: v for k, v in self.data.items() if v}
        self.data = {f.name: {} for f in FAMILIES}
        return out

    def merge(self, delta: dict) -> None:
        """Add a :meth:`take_delta` of another instance (a decoder's), applying this
        instance's caps. Unknown family names are ignored (a newer decoder)."""
        for name, entries in delta.items():
            fam = _BY_NAME.get(name)
            if fam is None:
                continue
            d = self.data[name]
            hist = fam.kind == "histogram"
            for labels, v in entries.items():
                if fam.caps:
                    labels = self._cap_labels(fam, labels, v)
                if hist:
                    h = d.get(labels)
                    if h is None:
                        d[labels] = list(v)
                    else:
                        for i, x in enumerate(v):
                            h[i] += x
                else:
                    d[labels] = d.get(labels, 0) + v

    def _cap_labels(self, fam: Family, labels: tuple, value) -> tuple:
        out = None
        for pos, cap in fam.caps:
            raw = labels[pos]
            new = self.caps[cap].map(raw)
            if new != raw:
                if out is None:
                    out = list(labels)
                out[pos] = new
                if fam.counts_caps and raw != OTHER:
                    self._count(CAPPED, (cap,), value)
        return labels if out is None else tuple(out)

    # ----------------------------------------------------------------- reading
    def value(self, family: str, labels: tuple):
        """The count (counter) or ``[buckets..., +Inf, sum]`` (histogram, counted units)
        of one series, ``None`` when it has none."""
        return self.data[family].get(tuple(labels))

    def families(self) -> list[Family]:
        """The families exposed with these settings (topic ones only with ``topics``)."""
        return [f for f in FAMILIES if self.topics or not f.topics]


_DURATION_B = DURATION.buckets
_OTEL_B = OTEL.buckets
_THROTTLE_B = THROTTLE.buckets
_EXCHANGES = EXCHANGES.name
_ERRORS = ERRORS.name
_REQUEST_BYTES = REQUEST_BYTES.name
_RESPONSE_BYTES = RESPONSE_BYTES.name
_TOPIC_EXCHANGES = TOPIC_EXCHANGES.name


def server_address_port(broker: str) -> tuple[str, str]:
    """``("10.0.0.1", "9092")`` from ``"10.0.0.1:9092"`` (``"[::1]:9092"`` gives
    ``"::1"``); :data:`OTHER` gives ``(OTHER, "")``; a value without a port ``(value, "")``.
    OpenTelemetry's ``server.address`` and ``server.port``."""
    host, sep, port = broker.rpartition(":")
    if not sep or not port.isdigit():
        return broker, ""
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, port


def _exposed_labels(fam: Family) -> tuple[str, ...]:
    if fam is OTEL:
        return ("messaging_system", "messaging_operation_name", "messaging_operation_type",
                "error_type", "messaging_client_id", "server_address", "server_port",
                "messaging_destination_name")
    return fam.labels


def _exposed_values(fam: Family, labels: tuple) -> list[str]:
    if fam is OTEL:
        name, op_type, err, client, broker, dest = labels
        addr, port = server_address_port(broker)
        return ["kafka", name, op_type, err, client, addr, port, dest]
    return list(labels)


def metric_families(metrics: ExchangeMetrics, runtime: dict | None = None) -> list:
    """The ``prometheus_client`` metric families of ``metrics`` and of the capture's own
    counters.

    Args:
        metrics: the counted exchanges.
        runtime: counters of the capture, each optional: ``packets_decoded`` (packets the
            pipeline read), ``packets_captured`` (live: read from the interface),
            ``drops`` (live: ``{"kernel": n, "queue": n}``, a ``None`` value left out),
            ``issues`` (decode issues by kind).

    Returns:
        a list of ``prometheus_client.core`` ``CounterMetricFamily`` /
        ``HistogramMetricFamily``, series sorted by label values.
    """
    from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
    from prometheus_client.utils import floatToGoString

    out: list = []
    for fam in metrics.families():
        entries = metrics.data[fam.name]
        names = _exposed_labels(fam)
        if fam.kind == "histogram":
            m = HistogramMetricFamily(fam.name, fam.help, labels=names, unit=fam.unit)
            les = [floatToGoString(b) for b in fam.bounds] + ["+Inf"]
            for labels in sorted(entries):
                h = entries[labels]
                cum = 0
                buckets = []
                for le, n in zip(les, h):
                    cum += n
                    buckets.append((le, cum))
                m.add_metric(_exposed_values(fam, labels), buckets, fam.base(h[-1]))
        else:
            m = CounterMetricFamily(fam.name, fam.help, labels=names, unit=fam.unit)
            for labels in sorted(entries):
                m.add_metric(_exposed_values(fam, labels), fam.base(entries[labels]))
        out.append(m)
    rt = runtime or {}
    if "packets_captured" in rt:
        m = CounterMetricFamily("kafkasniff_packets_captured",
                                "Packets read from the interface or stream (after the "
                                "kernel filter).")
        m.add_metric([], rt["packets_captured"])
        out.append(m)
    if "packets_decoded" in rt:
        m = CounterMetricFamily("kafkasniff_packets_decoded",
                                "Packets the decoders processed.")
        m.add_metric([], rt["packets_decoded"])
        out.append(m)
    if "drops" in rt:
        m = CounterMetricFamily("kafkasniff_packets_dropped",
                                "Packets lost before decoding: 'kernel' (ring or socket "
                                "buffer full, PACKET_STATISTICS tp_drops), 'queue' (a "
                                "decoder queue was full).", labels=["reason"])
        for reason, n in sorted(rt["drops"].items()):
            if n is not None:
                m.add_metric([reason], n)
        out.append(m)
    if "issues" in rt:
        m = CounterMetricFamily("kafkasniff_issues",
                                "Decode issues by kind (docs/json.md lists the kinds).",
                                labels=["kind"])
        for kind, n in sorted(rt["issues"].items()):
            m.add_metric([str(kind)], n)
        out.append(m)
    return out


class MetricsCollector:
    """A ``prometheus_client`` custom collector over an :class:`ExchangeMetrics`.

    Args:
        metrics: the counted exchanges (read under ``lock`` when given).
        runtime: ``runtime()`` returns :func:`metric_families`' ``runtime`` dict at each
            collection (``None``: none).
        lock: held while reading ``metrics`` (the live collector merges in another thread).
    """

    def __init__(self, metrics: ExchangeMetrics,
                 runtime: Callable[[], dict] | None = None, lock=None) -> None:
        self.metrics = metrics
        self.runtime = runtime
        self.lock = lock

    def collect(self):
        """The metric families now (``prometheus_client``'s collector protocol)."""
        rt = self.runtime() if self.runtime is not None else None
        if self.lock is None:
            return metric_families(self.metrics, rt)
        with self.lock:
            return metric_families(self.metrics, rt)


def openmetrics_text(metrics: ExchangeMetrics, runtime: dict | None = None) -> bytes:
    """The OpenMetrics text exposition (format 1.0.0, ``# EOF`` terminated, UTF-8) of
    ``metrics`` and ``runtime`` (see :func:`metric_families`), as ``prometheus_client``'s
    ``openmetrics.exposition.generate_latest`` writes it."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.openmetrics.exposition import generate_latest

    reg = CollectorRegistry(auto_describe=False)
    reg.register(MetricsCollector(metrics, (lambda: runtime) if runtime else None))
    return generate_latest(reg)
