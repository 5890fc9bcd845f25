"""The vocabulary of issues: what kinds of problems exist and how bad each is.

Nothing is dropped silently: a gap, a resync, an unknown api_key, an unsupported version, a
body that does not fit its frame, an unanswered request, an orphan response ... each becomes a
:class:`kafkasniff.model.DecodeIssue` of one :class:`IssueKind` with a :class:`Severity`,
counted, shown and exported.
"""

from __future__ import annotations

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
    TLS_UNDECRYPTED = "tls_undecrypted"              # with a key log: what was not decrypted
    # pairing
    UNANSWERED_REQUEST = "unanswered_request"
    ORPHAN_RESPONSE = "orphan_response"
    DUPLICATE_CORRELATION_ID = "duplicate_correlation_id"
    PENDING_OVERFLOW = "pending_overflow"
    # a bug in kafkasniff while decoding one frame: reported, analysis goes on
    INTERNAL_ERROR = "internal_error"
    # a budget of kafkasniff.content.budgets spent: what it skipped is named, once
    BUDGET_EXHAUSTED = "budget_exhausted"
