"""First-class records of everything that could not be decoded as the spec says.

Nothing is dropped silently: a gap, a resync, an unknown api_key, an unsupported version, a
body that does not fit its frame, an unanswered request, an orphan response ... each becomes a
:class:`DecodeIssue` that is counted, shown and exported.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Severity(StrEnum):
    """How bad an issue is.

    ``info``: expected in real captures (capture started mid-stream, request still open at
    the end of the capture). ``warning``: data was lost or a peer departed from the spec but
    decoding went on. ``error``: something could not be decoded at all.
    """

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


class IssueKind(StrEnum):
    """Stable names of issue kinds (used as counters, JSON values and Parquet values)."""

    # capture file / packet level
    CAPTURE_TRUNCATED = "capture_truncated"          # file ends inside a record/block
    CAPTURE_BLOCK_INVALID = "capture_block_invalid"  # a pcapng block that cannot be parsed
    PACKET_TRUNCATED = "packet_truncated"            # snaplen cut a TCP payload (becomes a gap)
    PACKET_MALFORMED = "packet_malformed"            # IP/TCP header inconsistent
    # TCP
    MID_STREAM_START = "mid_stream_start"            # connection already open when capture began
    TCP_GAP = "tcp_gap"                              # bytes never captured
    TCP_OVERLAP_CONFLICT = "tcp_overlap_conflict"    # retransmission with different bytes
    TCP_OOO_OVERFLOW = "tcp_ooo_overflow"            # out-of-order buffer limit hit
    CONNECTION_EVICTED = "connection_evicted"        # connection table limit hit
    # framing
    FRAME_TOO_LARGE = "frame_too_large"
    FRAME_TRUNCATED = "frame_truncated"              # stream ended inside a frame
    FRAME_DAMAGED = "frame_damaged"                  # a gap inside a frame
    RESYNC = "resync"                                # bytes skipped to find a frame boundary
    # decode
    HEADER_DECODE_ERROR = "header_decode_error"
    UNKNOWN_API_KEY = "unknown_api_key"
    UNSUPPORTED_VERSION = "unsupported_version"
    BODY_DECODE_ERROR = "body_decode_error"
    TRAILING_BYTES = "trailing_bytes"
    SPEC_DEPARTURE = "spec_departure"                # null in a non-nullable field, bad UTF-8 ...
    # record data (message sets, record batches)
    CRC_MISMATCH = "crc_mismatch"
    DECOMPRESSION_ERROR = "decompression_error"
    DECOMPRESSION_LIMIT = "decompression_limit"      # a batch would decompress beyond the limit
    TRUNCATED_BATCH = "truncated_batch"              # cut where it should be whole (not a Fetch tail)
    RECORD_DECODE_ERROR = "record_decode_error"
    UNKNOWN_MAGIC = "unknown_magic"
    UNKNOWN_CODEC = "unknown_codec"
    # encrypted traffic on a Kafka port: reported, not decoded
    TLS_CONNECTION = "tls_connection"
    # pairing
    UNANSWERED_REQUEST = "unanswered_request"
    ORPHAN_RESPONSE = "orphan_response"
    DUPLICATE_CORRELATION_ID = "duplicate_correlation_id"
    PENDING_OVERFLOW = "pending_overflow"
    # a bug in kafkasniff while decoding one frame: reported, analysis goes on
    INTERNAL_ERROR = "internal_error"


@dataclass(frozen=True, slots=True)
class DecodeIssue:
    """One thing that could not be decoded as the spec says.

    Attributes:
        kind: an :class:`IssueKind` value.
        severity: a :class:`Severity` value.
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
