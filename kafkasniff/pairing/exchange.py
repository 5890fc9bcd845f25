"""Exchanges: a request paired with its response (or the lack of one).

An :class:`Exchange` is what every sink consumes. Status values:

- ``paired``: request and response both captured and matched by correlation_id;
- ``no_response_expected``: Produce with acks=0 (Kafka sends no response);
- ``unanswered``: the request was captured but no response came before the connection
  closed or the capture ended (or the response was lost in a gap);
- ``orphan_response``: a response whose request was not captured (capture began mid-stream,
  or the request was lost in a gap). Its layout is inferred when exactly one API fits.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from typing import TYPE_CHECKING

from kafkasniff.issues import DecodeIssue

if TYPE_CHECKING:
    from kafkasniff.pairing.record_data import RecordsSummary

PAIRED = "paired"
NO_RESPONSE_EXPECTED = "no_response_expected"
UNANSWERED = "unanswered"
ORPHAN_RESPONSE = "orphan_response"

# pseudo api_key of a raw SASL token exchange (KIP-43: tokens without Kafka framing after
# SaslHandshake v0); such exchanges are named ``SaslToken``, version and correlation_id -1
SASL_TOKEN_API_KEY = -2


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


@dataclass(frozen=True, slots=True)
class Exchange:
    """A Kafka request and its response, with what an operator asks first.

    Attributes:
        conn_id: TCP connection id (see :class:`kafkasniff.tcp.types.TcpConnection`).
        client / broker: ``"ip:port"`` endpoints.
        status: one of ``paired``, ``no_response_expected``, ``unanswered``, ``orphan_response``.
        api_key / api_name / api_version: of the request (for orphans: inferred, or -1/"Unknown").
        correlation_id: as on the wire.
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
            (:class:`kafkasniff.pairing.record_data.LocatedRecords`), in wire order.
        wire_topics: topic names carried by the exchange itself (``topics`` also holds ids
            resolved through earlier responses; exports use these two instead, so that a
            row does not depend on what other connections showed before).
        topic_ids: topic ids carried by the exchange itself.
    """

    conn_id: int
    client: str
    broker: str
    status: str
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
    records: "RecordsSummary | None" = None
    record_fields: tuple = ()
    wire_topics: tuple[str, ...] = ()
    topic_ids: tuple[str, ...] = ()

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
