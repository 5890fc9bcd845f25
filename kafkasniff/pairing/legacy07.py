"""Per-connection Kafka 0.7 state: framing both directions, decoding, pairing in order.

Sans-IO, same interface as :class:`kafkasniff.pairing.connection.KafkaConnection`: fed the
stream events of one TCP connection whose client side is known, returns
:class:`~kafkasniff.pairing.exchange.Exchange` and :class:`~kafkasniff.issues.DecodeIssue`
records.

Kafka 0.7 (:mod:`kafkasniff.protocol.legacy07`) has no correlation id: a broker answers the
requests of a connection one by one, in order, and never answers PRODUCE or MULTIPRODUCE.
So:

- PRODUCE/MULTIPRODUCE become ``no_response_expected`` exchanges as soon as they are read;
- FETCH, MULTIFETCH and OFFSETS wait in a FIFO; each response frame pairs with the oldest;
- a response with no waiting request is an ``orphan_response`` kept raw (its error code is
  read); requests still waiting at the end are ``unanswered``.

Lost bytes (the choice made here, since nothing on the wire re-aligns responses):

- client side: the framer resynchronises on a plausible 0.7 request header
  (:func:`~kafkasniff.protocol.legacy07.request_validator_07`). Requests lost in the gap may
  still be answered, so pairing turns *cautious* (below) until a request sent after the
  gap has been paired.
- broker side: once the framer loses frame sync (a gap between frames or past the end of the
  current frame, or an implausible size), the number of responses lost is unknown. Every
  request waiting at that moment is given up as ``unanswered`` (warning: "response lost")
  and the framer hunts for a plausible response header (an error code -1..4 and the layout of
  the oldest waiting request's answer, or of any 0.7 answer when none waits,
  :func:`~kafkasniff.protocol.legacy07.response_validator_07`). Pairing turns cautious.
  A gap inside a frame whose size is known keeps sync: the damaged response still pairs.
- cautious pairing: a response pairs with the oldest waiting request only when it started
  after that request ended and its layout fits that request's answer; otherwise it is an
  orphan (it most likely answers a request given up or lost). 0.7 clients (SimpleConsumer,
  the producers) send one request at a time and wait, so this re-aligns at once; a client
  that pipelines fetches across a gap can still be mis-paired.

A connection captured mid-stream starts cautious, its framers tentative; responses before
the first captured request are orphans with info severity.
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass

from kafkasniff.content import redaction
from kafkasniff.content.frames import DecodedFrame
from kafkasniff.issues import IssueKind, Severity
from kafkasniff.model import Exchange, ExchangeStatus, Message, WireFormat
from kafkasniff.pairing.base import SEVERITY, PairingConnection, PairingContext
from kafkasniff.protocol.apis import SASL_AUTHENTICATE, SASL_HANDSHAKE
from kafkasniff.protocol.framing import HUNTING, Frame, Framer, FramerIssue
from kafkasniff.protocol.legacy07 import (
    ERRORS_07,
    NO_RESPONSE_TYPES,
    REQUEST_TYPES,
    error_name,
    request_topics,
    request_type_name,
    request_validator_07,
    response_errors,
    response_fits,
    response_validator_07,
)
from kafkasniff.tcp.types import TcpConnection

_SASL_PEEK = struct.Struct(">hh")   # a Kafka 0.8+ request's api_key and api_version

MIN_FRAME_BYTES = 2      # request_type / error_code

_SEVERITY = dict(SEVERITY)
_SEVERITY.update({IssueKind.CRC_MISMATCH: Severity.WARNING,
                  IssueKind.DECOMPRESSION_ERROR: Severity.ERROR})


def api_name_07(request_type: int) -> str:
    """``"FETCH (0.7)"``; ``"Unknown (0.7)"`` for -1."""
    if request_type < 0:
        return "Unknown (0.7)"
    return f"{request_type_name(request_type)} (0.7)"


@dataclass(slots=True)
class _Pending07:
    rtype: int
    body: dict | None
    message: Message
    issues: list
    topics: tuple
    seq: int


class Kafka07Connection(PairingConnection):
    """Kafka 0.7 framing, decoding and in-order pairing for one TCP connection.

    Args:
        ctx: the shared :class:`~kafkasniff.pairing.base.PairingContext` (uses
            ``max_frame_bytes``, ``max_pending`` and the content decoder's
            ``max_uncompressed_bytes``).
        tcp: the TCP connection (endpoints, counters).
        client_dir: which stream direction (0 or 1) carries requests.
        mid_stream: the capture began after the connection opened (framers start TENTATIVE).

    Exchanges carry ``api_key`` = the 0.7 request type, ``api_name`` like ``"FETCH (0.7)"``,
    ``api_version`` = -1, ``correlation_id`` = -1, ``client_id`` = None, ``wire_format`` =
    ``kafka07``; request headers are ``{"request_type"}``, response headers
    ``{"error_code"}`` (both 2 bytes: ``body_offset`` = 2; response bodies repeat
    ``error_code``). ``errors`` names the non-zero 0.7 error codes (``"OffsetOutOfRange"``
    ...), ``topics`` the request's topics.
    """

    __slots__ = ("pending", "cautious", "cautious_seq", "gave_up", "sasl_like")
    SEVERITY = _SEVERITY
    FRAME_NAME = "0.7 frame"

    def __init__(self, ctx: PairingContext, tcp: TcpConnection, client_dir: int,
                 mid_stream: bool) -> None:
        super().__init__(ctx, tcp, client_dir, mid_stream)
        self.pending: deque[_Pending07] = deque()
        self.cautious = mid_stream     # see the module docstring
        self.cautious_seq = 0          # requests up to this one predate the loss
        self.gave_up = False           # broker side: waiting requests given up for this hunt
        self.sasl_like = False         # a request parsed as a 0.8+ SaslHandshake/Authenticate

    def _new_framer(self, is_request: bool) -> Framer:
        validator = request_validator_07() if is_request else \
            response_validator_07(self._expected_type)
        return Framer(validator, min_frame_bytes=MIN_FRAME_BYTES,
                      max_frame_bytes=self.ctx.max_frame_bytes, synced=not self.mid_stream)

    def _expected_type(self) -> int | None:
        return self.pending[0].rtype if self.pending else None

    # ------------------------------------------------------------------ events
    def on_data(self, direction: int, offset: int, data: bytes, ts_ns: int) -> list:
        """Feed in-order bytes of ``direction``; returns exchanges and issues."""
        out = super().on_data(direction, offset, data, ts_ns)
        if self._framer(direction).state == HUNTING:
            out.extend(self._sync_lost(direction, ts_ns))
        return out

    def on_gap(self, direction: int, offset: int, length: int, ts_ns: int) -> list:
        """Bytes of ``direction`` were lost; returns exchanges and issues."""
        out = super().on_gap(direction, offset, length, ts_ns)
        if self._framer(direction).state == HUNTING:
            out.extend(self._sync_lost(direction, ts_ns))
        return out

    # ------------------------------------------------------------------ base hooks
    def _on_frame(self, direction: int, is_request: bool, frame: Frame) -> list:
        if is_request and not self.sasl_like and len(frame.payload) >= 4:
            api_key, version = _SASL_PEEK.unpack_from(frame.payload, 0)
            self.sasl_like = api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE) and \
                0 <= version <= 16
        return self._on_request(frame) if is_request else self._on_response(frame)

    def _redaction_reason(self, decoded: DecodedFrame, guessed: bool,
                          orphan: bool) -> str | None:
        if self.sasl_like and (decoded.body is not None or decoded.raw_body is not None):
            return redaction.SASL_LIKE_07      # every body of such a connection
        return super()._redaction_reason(decoded, guessed, orphan)

    def _give_up_all(self, severity: str, why: str) -> list:
        out = []
        while self.pending:
            out.append(self._unanswered(self.pending.popleft(), severity, why))
        return out

    def _resynced(self, direction: int, ev: FramerIssue) -> list:
        if direction == self.client_dir:
            self._go_cautious()
            return []
        out = []
        if not self.gave_up:
            # sync was lost and regained inside one feed: requests that ended before the
            # skipped bytes began are given up
            out = self._give_up(ev.ts_ns, ev.ts_ns)
        self.gave_up = False   # the hunt is over
        return out

    # ------------------------------------------------------------------ sync
    def _go_cautious(self) -> None:
        self.cautious = True
        self.cautious_seq = self.requests

    def _sync_lost(self, direction: int, ts_ns: int) -> list:
        """The framer of ``direction`` is hunting (after a gap or an implausible size)."""
        if self.closing or not self.synced_once[direction]:
            return []   # joined mid-stream: bytes before the first boundary, nothing lost
        if direction == self.client_dir:
            self._go_cautious()
            return []
        if self.gave_up:
            return []
        self.gave_up = True
        return self._give_up(None, ts_ns)

    def _give_up(self, before_ns: int | None, ts_ns: int) -> list:
        """Waiting requests (ended before ``before_ns``, or all) -> unanswered."""
        out = []
        keep: deque[_Pending07] = deque()
        while self.pending:
            p = self.pending.popleft()
            if before_ns is not None and p.message.last_ts_ns > before_ns:
                keep.append(p)
                continue
            out.append(self._unanswered(
                p, Severity.WARNING, "its response is presumed lost: the broker side lost "
                "frame sync (bytes not captured or not a frame), and 0.7 responses carry no "
                "correlation id to re-pair by", ts_ns=ts_ns))
        self.pending = keep
        self._go_cautious()
        return out

    # ------------------------------------------------------------------ frames
    def _on_request(self, frame: Frame) -> list:
        payload = frame.payload
        if len(payload) < 2:
            return [self.issue(IssueKind.HEADER_DECODE_ERROR,
                               f"0.7 request frame of {frame.size} bytes has no room for a "
                               f"request_type", ts_ns=frame.first_ts_ns,
                               direction=self.client_dir, stream_offset=frame.stream_offset,
                               length_bytes=frame.size + 4)]
        d = self.ctx.content.decode_request_07(payload)
        rtype = d.api_key
        if rtype not in REQUEST_TYPES:
            return [self.issue(IssueKind.HEADER_DECODE_ERROR,
                               f"unknown 0.7 request type {rtype} (0-4 exist); a 0.7 broker "
                               f"closes the connection on it", ts_ns=frame.first_ts_ns,
                               direction=self.client_dir, stream_offset=frame.stream_offset,
                               length_bytes=frame.size + 4,
                               field_path="request_type", frame_offset=0)]
        msg = self._message(frame, d, self.client_dir)
        issues = self._body_issues(d.issues, frame, self.client_dir, None, rtype, None)
        self.requests += 1
        p = _Pending07(rtype, d.body, msg, issues, request_topics(rtype, d.body), self.requests)
        if rtype in NO_RESPONSE_TYPES:
            return [self._answered(p, None, ExchangeStatus.NO_RESPONSE_EXPECTED, (), [])]
        self.pending.append(p)
        if len(self.pending) > self.ctx.max_pending:
            return [self._unanswered(self.pending.popleft(), Severity.WARNING,
                                     f"more than {self.ctx.max_pending} requests waiting on "
                                     f"this connection: the oldest is given up",
                                     kind=IssueKind.PENDING_OVERFLOW)]
        return []

    def _on_response(self, frame: Frame) -> list:
        payload = frame.payload
        if not self.pending:
            return [self._orphan(frame, "no request is waiting for a response")]
        p = self.pending[0]
        if self.cautious:
            if frame.first_ts_ns < p.message.last_ts_ns:
                return [self._orphan(frame, f"it began before the oldest waiting request "
                                            f"({request_type_name(p.rtype)}) ended, after lost "
                                            f"bytes")]
            fits = (len(payload) >= 2 and int.from_bytes(payload[:2], "big", signed=True)
                    in ERRORS_07) if frame.missing_bytes else \
                response_fits(p.rtype, payload, p.body)
            if not fits:
                return [self._orphan(frame, f"its layout does not fit a "
                                            f"{request_type_name(p.rtype)} response, after lost "
                                            f"bytes")]
            if p.seq > self.cautious_seq:
                self.cautious = False
        self.pending.popleft()
        return [self._pair(p, frame)]

    def _pair(self, p: _Pending07, frame: Frame) -> Exchange:
        rdir = 1 - self.client_dir
        d = self.ctx.content.decode_response_07(frame.payload, p.rtype, p.body)
        msg = self._message(frame, d, rdir)
        if d.body is None:
            issues = [self.issue(IssueKind.HEADER_DECODE_ERROR,
                                 f"0.7 response frame of {frame.size} bytes has no room for an "
                                 f"error_code", ts_ns=frame.first_ts_ns, direction=rdir,
                                 stream_offset=frame.stream_offset,
                               length_bytes=frame.size + 4, api_key=p.rtype)]
            return self._answered(p, msg, ExchangeStatus.PAIRED, (), issues)
        issues = self._body_issues(d.issues, frame, rdir, None, p.rtype, None)
        return self._answered(p, msg, ExchangeStatus.PAIRED, response_errors(d.body), issues)

    def _orphan(self, frame: Frame, why: str) -> Exchange:
        payload = frame.payload
        header: dict = {}
        errors: tuple = ()
        if len(payload) >= 2:
            code = int.from_bytes(payload[:2], "big", signed=True)
            header["error_code"] = code
            if code != 0:
                errors = (error_name(code),)
        self.orphans += 1
        sev = Severity.INFO if self.mid_stream and self.requests == 0 else Severity.WARNING
        issue = self.issue(IssueKind.ORPHAN_RESPONSE,
                           f"0.7 response of {frame.size} bytes has no captured request "
                           f"({why}); body kept raw", severity=sev, ts_ns=frame.first_ts_ns,
                           direction=1 - self.client_dir, stream_offset=frame.stream_offset)
        msg = self._message(frame, DecodedFrame(header, None, bytes(payload[2:]), False, 2, []),
                            1 - self.client_dir, orphan=True)
        return self._build(-1, None, msg, ExchangeStatus.ORPHAN_RESPONSE, errors, (), [issue])

    def _unanswered(self, p: _Pending07, severity: str, why: str, *, ts_ns: int | None = None,
                    kind: str = IssueKind.UNANSWERED_REQUEST) -> Exchange:
        p.issues.append(self.issue(kind, f"{api_name_07(p.rtype)}: {why}", severity=severity,
                                   ts_ns=p.message.last_ts_ns if ts_ns is None else ts_ns,
                                   direction=self.client_dir, api_key=p.rtype))
        self.unanswered += 1
        return self._answered(p, None, ExchangeStatus.UNANSWERED, (), [])

    def _answered(self, p: _Pending07, response: Message | None, status: str, errors: tuple,
                  issues: list) -> Exchange:
        return self._build(p.rtype, p.message, response, status, errors, p.topics,
                           p.issues + issues)

    def _build(self, rtype: int, request: Message | None, response: Message | None, status: str,
               errors: tuple, topics: tuple, issues: list) -> Exchange:
        return self._exchange(status, rtype, api_name_07(rtype), -1, -1, None, request, response,
                              issues, errors=tuple(errors), topics=tuple(topics),
                              wire_format=WireFormat.KAFKA07)
