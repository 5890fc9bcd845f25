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

from collections import deque
from dataclasses import dataclass

from kafkasniff.issues import IssueKind, Severity
from kafkasniff.pairing.connection import _ISSUE_SEVERITY, IssueSource, PairingContext
from kafkasniff.pairing.exchange import (NO_RESPONSE_EXPECTED, ORPHAN_RESPONSE, PAIRED,
                                         UNANSWERED, Exchange, Message)
from kafkasniff.protocol.framing import HUNTING, Frame, Framer, FramerIssue
from kafkasniff.protocol.legacy07 import (ERRORS_07, NO_RESPONSE_TYPES, REQUEST_TYPES,
                                          decode_request_07, decode_response_07, error_name,
                                          request_topics, request_type_name,
                                          request_validator_07, response_errors, response_fits,
                                          response_validator_07)
from kafkasniff.tcp.types import TcpConnection

MIN_FRAME_BYTES = 2      # request_type / error_code

_SEVERITY = dict(_ISSUE_SEVERITY)
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


class Kafka07Connection(IssueSource):
    """Kafka 0.7 framing, decoding and in-order pairing for one TCP connection.

    Args:
        ctx: the shared :class:`~kafkasniff.pairing.connection.PairingContext` (uses
            ``max_frame_bytes``, ``max_pending`` and ``max_uncompressed_bytes``).
        tcp: the TCP connection (endpoints, counters).
        client_dir: which stream direction (0 or 1) carries requests.
        mid_stream: the capture began after the connection opened (framers start TENTATIVE).

    Exchanges carry ``api_key`` = the 0.7 request type, ``api_name`` like ``"FETCH (0.7)"``,
    ``api_version`` = -1, ``correlation_id`` = -1, ``client_id`` = None; request headers are
    ``{"request_type"}``, response headers ``{"error_code"}`` (both 2 bytes:
    ``body_offset`` = 2; response bodies repeat ``error_code``). ``errors`` names the non-zero
    0.7 error codes (``"OffsetOutOfRange"`` ...), ``topics`` the request's topics.
    """

    __slots__ = ("ctx", "tcp", "client_dir", "client", "broker", "framers", "pending",
                 "mid_stream", "synced_once", "exchanges", "orphans", "unanswered", "requests",
                 "cautious", "cautious_seq", "gave_up", "closing")
    SEVERITY = _SEVERITY

    def __init__(self, ctx: PairingContext, tcp: TcpConnection, client_dir: int,
                 mid_stream: bool) -> None:
        self.ctx = ctx
        self.tcp = tcp
        self.client_dir = client_dir
        self.client = tcp.endpoint(client_dir)
        self.broker = tcp.endpoint(1 - client_dir)
        self.pending: deque[_Pending07] = deque()
        self.mid_stream = mid_stream
        self.synced_once = [not mid_stream, not mid_stream]
        req = Framer(request_validator_07(), min_frame_bytes=MIN_FRAME_BYTES,
                     max_frame_bytes=ctx.max_frame_bytes, synced=not mid_stream)
        resp = Framer(response_validator_07(self._expected_type),
                      min_frame_bytes=MIN_FRAME_BYTES, max_frame_bytes=ctx.max_frame_bytes,
                      synced=not mid_stream)
        self.framers = [req, resp] if client_dir == 0 else [resp, req]
        self.exchanges = 0
        self.orphans = 0
        self.unanswered = 0
        self.requests = 0
        self.cautious = mid_stream     # see the module docstring
        self.cautious_seq = 0          # requests up to this one predate the loss
        self.gave_up = False           # broker side: waiting requests given up for this hunt
        self.closing = False

    def _expected_type(self) -> int | None:
        return self.pending[0].rtype if self.pending else None

    # ------------------------------------------------------------------ events
    def on_data(self, direction: int, offset: int, data: bytes, ts_ns: int) -> list:
        """Feed in-order bytes of ``direction``; returns exchanges and issues."""
        framer = self.framers[direction]
        events = framer.feed(data, offset, ts_ns)
        out = self._handle(direction, events) if events else events
        if framer.state == HUNTING:
            out.extend(self._sync_lost(direction, ts_ns))
        return out

    def on_gap(self, direction: int, offset: int, length: int, ts_ns: int) -> list:
        """Bytes of ``direction`` were lost; returns exchanges and issues."""
        framer = self.framers[direction]
        out = self._handle(direction, framer.gap(offset, length, ts_ns))
        if framer.state == HUNTING:
            out.extend(self._sync_lost(direction, ts_ns))
        return out

    def on_close(self, ts_ns: int, end_of_capture: bool | str) -> list:
        """The connection ended: flush partial frames and unanswered requests.

        ``end_of_capture``: True, or the TCP close reason (as for ``KafkaConnection``).
        Waiting requests become ``unanswered``: info when the capture stopped seeing the
        connection or the client closed it, warning when the broker closed it or the
        connection was evicted.
        """
        out: list = []
        self.closing = True
        for direction in (self.client_dir, 1 - self.client_dir):
            out.extend(self._handle(direction, self.framers[direction].close(ts_ns)))
        reason = "end_of_capture" if end_of_capture is True else (end_of_capture or "fin")
        tcp = self.tcp
        if reason == "end_of_capture":
            severity, why = Severity.INFO, "the capture ended"
        elif reason == "idle":
            severity = Severity.INFO
            why = "the connection went idle (no packet for the idle timeout)"
        elif reason == "evicted":
            severity, why = Severity.WARNING, "the connection table was full (connection evicted)"
        elif tcp.closed_by == self.client_dir:
            severity, why = Severity.INFO, "the client closed the connection"
        elif tcp.closed_by >= 0:
            severity, why = Severity.WARNING, "the broker closed the connection"
        else:
            severity, why = Severity.WARNING, f"the connection ended ({reason})"
        while self.pending:
            out.append(self._unanswered(self.pending.popleft(), severity,
                                        f"no response before {why}"))
        return out

    # ------------------------------------------------------------------ issues
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
    def _handle(self, direction: int, events: list) -> list:
        out: list = []
        is_request = direction == self.client_dir
        for ev in events:
            if type(ev) is Frame:
                self.synced_once[direction] = True
                try:
                    out.extend(self._on_request(ev) if is_request else self._on_response(ev))
                except Exception as exc:  # noqa: BLE001 - one bad frame must not stop the run
                    out.append(self.issue(IssueKind.INTERNAL_ERROR,
                                          f"internal error on this 0.7 frame "
                                          f"({type(exc).__name__}: {exc}); please report it",
                                          severity=Severity.ERROR, ts_ns=ev.first_ts_ns,
                                          direction=direction, stream_offset=ev.stream_offset))
                continue
            assert isinstance(ev, FramerIssue)
            sev = None
            if ev.kind == IssueKind.RESYNC:
                if not self.synced_once[direction]:
                    sev = Severity.INFO  # expected when the capture began mid-stream
                elif not self.closing:
                    if is_request:
                        self._go_cautious()
                    else:
                        if not self.gave_up:
                            # sync was lost and regained inside one feed: requests that
                            # ended before the skipped bytes began are given up
                            out.extend(self._give_up(ev.ts_ns, ev.ts_ns))
                        self.gave_up = False   # the hunt is over
                self.synced_once[direction] = True
            out.append(self.issue(ev.kind, ev.message, severity=sev, ts_ns=ev.ts_ns,
                                  direction=direction, stream_offset=ev.stream_offset,
                                  length_bytes=ev.length_bytes))
        return out

    def _body_issues(self, issues: list, frame: Frame, direction: int, api_key: int) -> list:
        out = []
        for bi in issues:
            if frame.missing_bytes and bi.kind in (IssueKind.BODY_DECODE_ERROR,
                                                   IssueKind.TRAILING_BYTES):
                continue  # explained by the frame_damaged / frame_truncated issue
            length = len(frame.payload) - bi.offset if bi.kind == IssueKind.TRAILING_BYTES else 0
            out.append(self.issue(bi.kind, bi.message, ts_ns=frame.first_ts_ns,
                                  direction=direction, stream_offset=frame.stream_offset,
                                  field_path=bi.field_path, frame_offset=bi.offset,
                                  length_bytes=length, api_key=api_key))
        return out

    def _message(self, frame: Frame, header: dict, body: dict | None, complete: bool,
                 direction: int) -> Message:
        raw = bytes(frame.payload[2:]) if body is None else None
        return Message(frame.size + 4, frame.first_ts_ns, frame.last_ts_ns, frame.stream_offset,
                       header, body, raw, complete and not frame.missing_bytes,
                       frame.missing_bytes, 2, self.tcp.seq_at(direction, frame.stream_offset))

    def _on_request(self, frame: Frame) -> list:
        payload = frame.payload
        if len(payload) < 2:
            return [self.issue(IssueKind.HEADER_DECODE_ERROR,
                               f"0.7 request frame of {frame.size} bytes has no room for a "
                               f"request_type", ts_ns=frame.first_ts_ns,
                               direction=self.client_dir, stream_offset=frame.stream_offset)]
        rtype, body, bissues = decode_request_07(
            payload, max_uncompressed_bytes=self.ctx.max_uncompressed_bytes)
        if rtype not in REQUEST_TYPES:
            return [self.issue(IssueKind.HEADER_DECODE_ERROR,
                               f"unknown 0.7 request type {rtype} (0-4 exist); a 0.7 broker "
                               f"closes the connection on it", ts_ns=frame.first_ts_ns,
                               direction=self.client_dir, stream_offset=frame.stream_offset,
                               field_path="request_type", frame_offset=0)]
        complete = not any(b.kind == IssueKind.BODY_DECODE_ERROR for b in bissues)
        msg = self._message(frame, {"request_type": rtype}, body, complete, self.client_dir)
        issues = self._body_issues(bissues, frame, self.client_dir, rtype)
        self.requests += 1
        p = _Pending07(rtype, body, msg, issues, request_topics(rtype, body), self.requests)
        if rtype in NO_RESPONSE_TYPES:
            return [self._exchange(p, None, NO_RESPONSE_EXPECTED, (), [])]
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
        payload = frame.payload
        rdir = 1 - self.client_dir
        if len(payload) < 2:
            issues = [self.issue(IssueKind.HEADER_DECODE_ERROR,
                                 f"0.7 response frame of {frame.size} bytes has no room for an "
                                 f"error_code", ts_ns=frame.first_ts_ns, direction=rdir,
                                 stream_offset=frame.stream_offset, api_key=p.rtype)]
            msg = self._message(frame, {}, None, False, 1 - self.client_dir)
            return self._exchange(p, msg, PAIRED, (), issues)
        body, bissues = decode_response_07(
            p.rtype, payload, p.body, max_uncompressed_bytes=self.ctx.max_uncompressed_bytes)
        complete = not any(b.kind == IssueKind.BODY_DECODE_ERROR for b in bissues)
        msg = self._message(frame, {"error_code": body["error_code"]}, body, complete,
                            1 - self.client_dir)
        issues = self._body_issues(bissues, frame, rdir, p.rtype)
        return self._exchange(p, msg, PAIRED, response_errors(body), issues)

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
        msg = self._message(frame, header, None, False, 1 - self.client_dir)
        return self._build(-1, None, msg, ORPHAN_RESPONSE, errors, (), [issue])

    def _unanswered(self, p: _Pending07, severity: str, why: str, *, ts_ns: int | None = None,
                    kind: str = IssueKind.UNANSWERED_REQUEST) -> Exchange:
        p.issues.append(self.issue(kind, f"{api_name_07(p.rtype)}: {why}", severity=severity,
                                   ts_ns=p.message.last_ts_ns if ts_ns is None else ts_ns,
                                   direction=self.client_dir, api_key=p.rtype))
        self.unanswered += 1
        return self._exchange(p, None, UNANSWERED, (), [])

    def _exchange(self, p: _Pending07, response: Message | None, status: str, errors: tuple,
                  issues: list) -> Exchange:
        return self._build(p.rtype, p.message, response, status, errors, p.topics,
                           p.issues + issues)

    def _build(self, rtype: int, request: Message | None, response: Message | None, status: str,
               errors: tuple, topics: tuple, issues: list) -> Exchange:
        latency = None
        if request is not None and response is not None:
            latency = response.first_ts_ns - request.last_ts_ns
        self.exchanges += 1
        return Exchange(self.tcp.conn_id, self.client, self.broker, status, rtype,
                        api_name_07(rtype), -1, -1, None, request, response, latency,
                        tuple(errors), None, tuple(topics), False, None, tuple(issues))
