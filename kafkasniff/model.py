"""The records that flow from the pipeline to every sink: one model, one module.

:class:`~kafkasniff.pipeline.Pipeline` returns a list of :data:`Record` values: an
:class:`Exchange` (a request with its response, or the lack of one), a standalone
:class:`DecodeIssue`, and, when asked for, a :class:`ConnectionSummary` when a TCP
connection ends and a :class:`TopicName` when a topic id is first seen with its name. The
console, JSON Lines, statistics, TUI, Parquet export, Spark and live sinks all consume these
and nothing else. They are frozen, slotted dataclasses; times are integer ns since the epoch
(UTC); Kafka integers keep their sign.

This module imports nothing of the project, so every stage can build records without
depending on another; the vocabulary of issue kinds and severities is :mod:`kafkasniff.issues`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Union

from kafkasniff.frozen import fast_init

if TYPE_CHECKING:
    from kafkasniff.protocol.primitives import RawRecords

__all__ = [
    "ConnectionKind", "ConnectionSummary", "DecodeIssue", "Exchange", "ExchangeStatus",
    "LocatedRecords", "Message", "Record", "RecordsSummary", "TopicName", "WireFormat",
    "connection_id_of",
]


class ExchangeStatus(StrEnum):
    """How an exchange ended (the values are the strings every output shows).

    - ``paired``: request and response both captured and matched by correlation_id;
    - ``no_response_expected``: Produce with acks=0 (Kafka sends no response), or a Kafka 0.7
      PRODUCE/MULTIPRODUCE;
    - ``unanswered``: the request was captured but no response came before the connection
      closed or the capture ended (or the response was lost in a gap);
    - ``orphan_response``: a response whose request was not captured (capture began
      mid-stream, or the request was lost in a gap). Its layout is inferred when exactly one
      API fits.
    """

    PAIRED = "paired"
    NO_RESPONSE_EXPECTED = "no_response_expected"
    UNANSWERED = "unanswered"
    ORPHAN_RESPONSE = "orphan_response"


class WireFormat(StrEnum):
    """The Kafka wire format an exchange was decoded in.

    ``kafka``: the size-prefixed request/response format of Kafka 0.8 and later (api_key,
    api_version, correlation_id headers). ``kafka07``: the pre-0.8 format (a 2-byte request
    type, no correlation id, no versions; :mod:`kafkasniff.protocol.legacy07`).
    """

    KAFKA = "kafka"
    KAFKA07 = "kafka07"


class ConnectionKind(StrEnum):
    """What a TCP connection carried: Kafka (0.8+), Kafka 0.7, TLS, or something else."""

    KAFKA = "kafka"
    KAFKA07 = "kafka07"
    TLS = "tls"
    OTHER = "other"


@fast_init
@dataclass(frozen=True, slots=True)
class DecodeIssue:
    """One thing that could not be decoded as the spec says.

    Attributes:
        kind: an :class:`~kafkasniff.issues.IssueKind` value.
        severity: a :class:`~kafkasniff.issues.Severity` value.
        message: one human sentence with offsets, field paths, expected and actual values.
        ts_ns: capture time (ns since epoch, UTC) of the packet/frame concerned, 0 if unknown.
        connection_id: id of the TCP connection (``-1`` if none).
        client / broker: ``"ip:port"`` endpoints (``""`` if unknown).
        direction: ``"request"`` (client to broker), ``"response"``, or ``""``.
        stream_offset: byte offset in the TCP stream of that direction (``-1`` if n/a).
        length_bytes: bytes concerned (gap length, bytes skipped, trailing bytes), 0 if n/a.
        field_path: dotted Kafka field path (snake_case), ``""`` if n/a.
        frame_offset: byte offset inside the frame payload (``-1`` if n/a).
        correlation_id / api_key / api_version: of the frame concerned, ``None`` if unknown.
    """

    kind: str
    severity: str
    message: str
    ts_ns: int = 0
    connection_id: int = -1
    client: str = ""
    broker: str = ""
    direction: str = ""
    stream_offset: int = -1
    length_bytes: int = 0
    field_path: str = ""
    frame_offset: int = -1
    correlation_id: int | None = None
    api_key: int | None = None
    api_version: int | None = None

    def to_dict(self) -> dict:
        """A JSON-ready dict (every attribute, issue kinds as strings)."""
        return {
            "kind": str(self.kind),
            "severity": str(self.severity),
            "message": self.message,
            "ts_ns": self.ts_ns,
            "connection_id": self.connection_id,
            "client": self.client,
            "broker": self.broker,
            "direction": self.direction,
            "stream_offset": self.stream_offset,
            "length_bytes": self.length_bytes,
            "field_path": self.field_path,
            "frame_offset": self.frame_offset,
            "correlation_id": self.correlation_id,
            "api_key": self.api_key,
            "api_version": self.api_version,
        }


@fast_init
@dataclass(frozen=True, slots=True)
class Message:
    """One request or response frame, decoded.

    Attributes:
        frame_bytes: bytes on the wire (size prefix + payload).
        first_ts_ns / last_ts_ns: capture time of the first and last byte.
        stream_offset: offset of the frame in its TCP stream direction.
        header: decoded header fields (``correlation_id``, and for requests ``api_key``,
            ``api_version``, ``client_id``; ``_unknown_tagged_fields`` when present).
        body: decoded body (see :mod:`kafkasniff.protocol.codegen`), partial when
            ``complete`` is False, ``None`` when not decodable.
        raw_body: the undecoded body bytes when ``body`` is None, else ``None``.
        complete: the whole body layout was decoded.
        missing_bytes: bytes of the frame never captured (gap or end of capture).
        body_offset: offset of the body in the frame payload (the header length).
        seq: TCP sequence number of the frame's first byte (its size prefix), ``-1`` if
            unknown: with the connection's endpoints and ``first_ts_ns`` it finds the frame's
            bytes in the capture again (see :mod:`kafkasniff.capture.frames`).
    """

    frame_bytes: int
    first_ts_ns: int
    last_ts_ns: int
    stream_offset: int
    header: dict
    body: dict | None
    raw_body: bytes | None = None
    complete: bool = True
    missing_bytes: int = 0
    body_offset: int = 0
    seq: int = -1


@fast_init
@dataclass(frozen=True, slots=True)
class LocatedRecords:
    """One ``records`` field of a decoded body, with where it is.

    Attributes:
        topic: topic name as on the wire (``None`` when only an id is on the wire).
        topic_id: topic id text (Kafka uuid form) when on the wire, else ``None``.
        partition: partition index, ``None`` if the layout has none.
        field_path: dotted path of the field, e.g. ``topic_data[0].partition_data[1].records``.
        records: the field (:class:`~kafkasniff.protocol.primitives.RawRecords`; its
            ``decoded`` holds the batches once :mod:`kafkasniff.content.records` decoded them).
        resolved_topic: the name of ``topic_id`` learnt from responses seen earlier on any
            connection (for display only: exports keep to what is on the wire), else None.
    """

    topic: str | None
    topic_id: str | None
    partition: int | None
    field_path: str
    records: "RawRecords"
    resolved_topic: str | None = None

    @property
    def display_topic(self) -> str:
        """The best name to show: on the wire, else resolved, else the id, else ``?``."""
        return self.topic or self.resolved_topic or self.topic_id or "?"


@fast_init
@dataclass(frozen=True, slots=True)
class RecordsSummary:
    """Record data of one exchange (its request and response), condensed.

    Attributes:
        batches / records: counts (record batches or top-level messages; records in them).
        codecs: distinct codecs, in order of appearance (``none``, ``gzip`` ...).
        magics: distinct message format versions (0, 1, 2).
        records_bytes: bytes of the records fields on the wire (batch headers included).
        compressed_bytes: bytes of the batches' record sections as sent (compressed or not).
        uncompressed_bytes: the same sections after decompression (``None`` if some batch
            could not be decompressed, or was cut); ``compressed_bytes / uncompressed_bytes``
            is the compression ratio.
        first_offset / last_offset: smallest base offset and largest last offset.
        min_timestamp_ms / max_timestamp_ms: over the batches (``None`` for magic 0 only).
        timestamp_types: distinct ``create_time`` / ``log_append_time``.
        producer_ids: distinct producer ids other than -1.
        transactional / control: some batch is transactional / a control batch.
        crc_errors: batches whose CRC did not match.
        partial: some records data ended inside a batch (normal at the end of a Fetch).
    """

    batches: int
    records: int
    codecs: tuple[str, ...]
    magics: tuple[int, ...]
    records_bytes: int
    compressed_bytes: int
    uncompressed_bytes: int | None
    first_offset: int | None
    last_offset: int | None
    min_timestamp_ms: int | None
    max_timestamp_ms: int | None
    timestamp_types: tuple[str, ...]
    producer_ids: tuple[int, ...]
    transactional: bool
    control: bool
    crc_errors: int
    partial: bool


@fast_init
@dataclass(frozen=True, slots=True)
class TlsSession:
    """The TLS session an exchange was decrypted from (``--tls-keylog``, docs/tls.md).

    Attributes:
        version: ``"TLS 1.2"`` or ``"TLS 1.3"`` (the ServerHello's, RFC 8446 4.2.1).
        cipher_suite: IANA name of the negotiated suite (``TLS_AES_128_GCM_SHA256`` ...).
        sni: the server name the client asked for (RFC 6066 server_name), ``None`` if none.
    """

    version: str
    cipher_suite: str
    sni: str | None = None

    def to_dict(self) -> dict:
        """``{"version", "cipher_suite", "sni"}``."""
        return {"version": self.version, "cipher_suite": self.cipher_suite, "sni": self.sni}


@fast_init
@dataclass(frozen=True, slots=True)
class Exchange:
    """A Kafka request and its response, with what an operator asks first.

    Attributes:
        conn_id: TCP connection id (see :class:`kafkasniff.tcp.types.TcpConnection`).
        client / broker: ``"ip:port"`` endpoints.
        status: an :class:`ExchangeStatus`.
        api_key / api_name / api_version: of the request (for orphans: inferred, or
            -1/"Unknown"; raw SASL tokens: -2/"SaslToken"/-1; Kafka 0.7: the request type,
            ``"FETCH (0.7)"``, -1).
        correlation_id: as on the wire (-1 for raw SASL tokens and Kafka 0.7).
        client_id: from the request header (``None`` if null, absent or not captured).
        request / response: the decoded :class:`Message`, or ``None`` when not captured.
        latency_ns: response first byte minus request last byte (``None`` unless paired).
        errors: distinct error names of every non-zero error code in the response (top level,
            per partition, per resource), in order of first appearance.
        throttle_time_ms: the response's throttle time (``None`` if the layout has none).
        topics: topic names the exchange touches (ids resolved through Metadata responses
            seen earlier; unresolved ids kept as their text form), request and response.
        inferred: the response layout of an orphan was inferred (exactly one API fit).
        assumed_version: a version the definitions do not know was decoded as this one.
        issues: the issues of this exchange (decode problems, gaps inside it ...).
        records: the record data of the exchange, condensed (Produce request, Fetch /
            ShareFetch / FetchSnapshot response), ``None`` when it carries none.
        record_fields: every records field with its topic, partition and decoded batches
            (:class:`LocatedRecords`), in wire order.
        wire_topics: topic names carried by the exchange itself (``topics`` also holds ids
            resolved through earlier responses; exports use these two instead, so that a
            row does not depend on what other connections showed before).
        topic_ids: topic ids carried by the exchange itself.
        wire_format: the :class:`WireFormat` it was decoded in.
        tls: the :class:`TlsSession` it was decrypted from, ``None`` for plaintext.
        long_poll: the broker held the response by design (a Fetch that waited out
            ``max_wait_ms`` with nothing to return, a JoinGroup held for the rebalance ...):
            its latency is waiting, not slowness, and stays out of the default latency
            percentiles (docs/long-polls.md).
        long_poll_rule: the name of the rule that marked it (``None`` when not a long-poll).
    """

    conn_id: int
    client: str
    broker: str
    status: ExchangeStatus
    api_key: int
    api_name: str
    api_version: int
    correlation_id: int
    client_id: str | None
    request: Message | None
    response: Message | None
    latency_ns: int | None
    errors: tuple[str, ...] = ()
    throttle_time_ms: int | None = None
    topics: tuple[str, ...] = ()
    inferred: bool = False
    assumed_version: int | None = None
    issues: tuple[DecodeIssue, ...] = field(default=())
    records: RecordsSummary | None = None
    record_fields: tuple[LocatedRecords, ...] = ()
    wire_topics: tuple[str, ...] = ()
    topic_ids: tuple[str, ...] = ()
    wire_format: WireFormat = WireFormat.KAFKA
    tls: TlsSession | None = None
    long_poll: bool = False
    long_poll_rule: str | None = None

    @property
    def ts_ns(self) -> int:
        """When the exchange started: the request's first byte, else the response's."""
        if self.request is not None:
            return self.request.first_ts_ns
        return self.response.first_ts_ns if self.response is not None else 0

    @property
    def request_bytes(self) -> int:
        """Request frame size on the wire (0 if not captured)."""
        return self.request.frame_bytes if self.request is not None else 0

    @property
    def response_bytes(self) -> int:
        """Response frame size on the wire (0 if not captured)."""
        return self.response.frame_bytes if self.response is not None else 0


@fast_init
@dataclass(frozen=True, slots=True)
class ConnectionSummary:
    """One TCP connection, when it ended (the pipeline's ``meta_records`` option).

    Attributes:
        conn_id: the pipeline's connection id (order of first packet).
        kind: a :class:`ConnectionKind`.
        client / broker: ``"ip:port"``; for ``other`` connections the SYN sender (or first
            sender) and its peer.
        first_ts_ns / last_ts_ns: first and last packet.
        handshake_seen: the SYN was captured (False: the capture began mid-stream).
        closed: ``fin``, ``rst``, ``idle``, ``evicted``, ``port_reuse``, ``end_of_capture``.
        bytes_to_broker / bytes_to_client: TCP payload bytes delivered each way.
        segments: TCP segments both ways.
        gap_bytes: bytes never captured, both ways.
        retransmitted_bytes / overlap_conflicts: retransmissions, and those with other bytes.
        exchanges / unanswered / orphans: Kafka exchanges of the connection.
        tls: ``{"client_hello": ..., "server_hello": ...}`` for TLS connections.
        sasl: the SASL session (mechanism, username, state ...) when there was one.
    """

    conn_id: int
    kind: ConnectionKind
    client: str
    broker: str
    first_ts_ns: int
    last_ts_ns: int
    handshake_seen: bool
    closed: str
    bytes_to_broker: int
    bytes_to_client: int
    segments: int
    gap_bytes: int
    retransmitted_bytes: int
    overlap_conflicts: int
    exchanges: int
    unanswered: int
    orphans: int
    tls: dict | None
    sasl: dict | None


@fast_init
@dataclass(frozen=True, slots=True)
class TopicName:
    """A topic id seen with its name for the first time (the ``meta_records`` option).

    Attributes:
        topic_id: Kafka's text form of the uuid.
        name: the topic name.
        ts_ns: capture time when it was learnt.
    """

    topic_id: str
    name: str
    ts_ns: int


#: what :meth:`kafkasniff.pipeline.Pipeline.feed` and ``finish`` return, item by item
Record = Union[Exchange, DecodeIssue, ConnectionSummary, TopicName]


def connection_id_of(rec: Record) -> int:
    """The TCP connection id a record belongs to, -1 for none (a topic name, an issue of the
    capture file)."""
    t = type(rec)
    if t is Exchange or t is ConnectionSummary:
        return rec.conn_id
    if t is DecodeIssue:
        return rec.connection_id
    return -1
