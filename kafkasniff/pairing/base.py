"""What the pairing of every wire format shares: the context, issues located on the
connection, frame dispatch, closing, messages and exchanges.

A connection class (:class:`~kafkasniff.pairing.connection.KafkaConnection` for Kafka 0.8+,
:class:`~kafkasniff.pairing.legacy07.Kafka07Connection` for Kafka 0.7) is fed the stream
events of one TCP connection whose client side is known, frames both directions, hands every
frame's payload to the content decoder (:class:`~kafkasniff.content.frames.ContentDecoder`)
and pairs requests with responses by its wire format's rule. This module holds the part that
does not depend on the rule; subclasses implement :meth:`PairingConnection._on_frame`,
:meth:`~PairingConnection._give_up_all` and, where they need them, the hooks
:meth:`~PairingConnection._release_held` and :meth:`~PairingConnection._resynced`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from kafkasniff.content import redaction
from kafkasniff.content.budgets import Budgets
from kafkasniff.content.frames import ContentDecoder, DecodedFrame
from kafkasniff.content.redaction import is_redacted, redacted_body
from kafkasniff.content.waits import WAIT_APIS, long_poll_rule
from kafkasniff.issues import IssueKind, Severity
from kafkasniff.model import DecodeIssue, Exchange, Message, RecordsSummary, WireFormat
from kafkasniff.protocol.compression import DEFAULT_MAX_BYTES
from kafkasniff.protocol.detect import request_validator
from kafkasniff.protocol.framing import DEFAULT_MAX_FRAME_BYTES, Frame, FramerIssue
from kafkasniff.protocol.lenient import BodyIssue
from kafkasniff.protocol.schema import Definitions
from kafkasniff.tcp.types import TcpConnection

DEFAULT_MAX_PENDING = 10_000

#: :attr:`PairingConnection.synced_once` values, by bit (1: direction 0, 2: direction 1)
_SYNCED = ((False, False), (True, False), (False, True), (True, True))

#: default severity of each issue kind a connection reports (others: warning)
SEVERITY = {
    IssueKind.UNKNOWN_API_KEY: Severity.WARNING,
    IssueKind.UNSUPPORTED_VERSION: Severity.WARNING,
    IssueKind.BODY_DECODE_ERROR: Severity.ERROR,
    IssueKind.TRAILING_BYTES: Severity.WARNING,
    IssueKind.SPEC_DEPARTURE: Severity.WARNING,
    IssueKind.FRAME_TOO_LARGE: Severity.ERROR,
    IssueKind.FRAME_DAMAGED: Severity.WARNING,
    IssueKind.FRAME_TRUNCATED: Severity.WARNING,
    IssueKind.RESYNC: Severity.WARNING,
    IssueKind.HEADER_DECODE_ERROR: Severity.ERROR,
    IssueKind.INTERNAL_ERROR: Severity.ERROR,
}


@dataclass(slots=True)
class PairingContext:
    """What every connection of an analysis shares.

    Attributes:
        defs: the definitions.
        content: the frame content decoder (its topic-id registry is shared by every
            connection).
        max_frame_bytes: largest accepted frame payload (bytes).
        max_pending: requests waiting for a response per connection (and raw SASL tokens
            waiting for the broker's); beyond it the oldest becomes ``unanswered`` (requests
            with a ``pending_overflow`` issue).
        infer_orphans: guess the layout of responses whose request was not captured.
        pending_bytes: frame bytes of the requests waiting for a response, all connections
            together; above the content decoder's ``pending_bytes`` budget
            (:mod:`kafkasniff.content.budgets`) a connection adding a request gives up its
            oldest ones (``pending_overflow``), keeping at least the newest.
    """

    defs: Definitions
    content: ContentDecoder
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    max_pending: int = DEFAULT_MAX_PENDING
    infer_orphans: bool = True
    pending_bytes: int = 0
    _request_validator: object = field(default=None, repr=False)

    @classmethod
    def create(cls, defs: Definitions, *, with_records: bool = False,
               max_uncompressed_bytes: int = DEFAULT_MAX_BYTES, show_secrets: bool = False,
               budgets: Budgets | None = None, **options) -> "PairingContext":
        """A context with a fresh content decoder for ``defs``; ``with_records``,
        ``max_uncompressed_bytes``, ``show_secrets`` and ``budgets`` configure the content
        decoder, the other keyword arguments the context's fields."""
        content = ContentDecoder(defs, with_records=with_records,
                                 max_uncompressed_bytes=max_uncompressed_bytes,
                                 show_secrets=show_secrets, budgets=budgets)
        return cls(defs, content, **options)

    @property
    def max_pending_bytes(self) -> int:
        return self.content.meter.budgets.limit("pending_bytes")

    def request_validator(self):
        """The request-frame validator (:func:`kafkasniff.protocol.detect.request_validator`),
        shared by every connection."""
        if self._request_validator is None:
            self._request_validator = request_validator(self.defs)
        return self._request_validator


class PairingConnection:
    """The shared part of a connection's pairing state (see the module docstring).

    Args:
        ctx: the shared :class:`PairingContext`.
        tcp: the TCP connection (endpoints, counters).
        client_dir: which stream direction (0 or 1) carries requests.
        mid_stream: the capture began after the connection opened (framers start tentative).

    Subclasses make the framer of each direction (:meth:`_new_framer`); a direction's framer
    is made at its first event (a connection waiting for its first response has no response
    framer yet: an open connection's state is what a full connection table holds 50,000
    times). Counters: ``exchanges``, ``orphans``, ``unanswered``, ``requests``.
    """

    __slots__ = ("ctx", "tcp", "client_dir", "_client", "_broker", "_f0", "_f1", "mid_stream",
                 "synced_once", "exchanges", "orphans", "unanswered", "requests", "closing",
                 "tls")
    #: default severity of each issue kind (subclasses may extend it)
    SEVERITY: dict = SEVERITY
    #: how the frames of this wire format are named in internal-error issues
    FRAME_NAME = "frame"

    def __init__(self, ctx: PairingContext, tcp: TcpConnection, client_dir: int,
                 mid_stream: bool) -> None:
        self.ctx = ctx
        self.tcp = tcp
        self.client_dir = client_dir
        self._client: str | None = None     # the endpoints' text, made when first asked for
        self._broker: str | None = None
        self._f0 = self._f1 = None      # the framers of direction 0 and 1, once made
        self.mid_stream = mid_stream
        # per direction, whether a frame boundary was found: one of the four shared tuples
        # (an open connection's state is what a full connection table holds 50,000 times)
        self.synced_once = _SYNCED[0 if mid_stream else 3]
        self.exchanges = 0
        self.orphans = 0
        self.unanswered = 0
        self.requests = 0
        self.closing = False
        #: the TlsSession this connection's plaintext was decrypted from (set by the
        #: pipeline), given to every exchange
        self.tls = None

    @property
    def client(self) -> str:
        """The client's ``ip:port`` (made at the first exchange or issue: a connection
        waiting for its first answer does not keep it)."""
        c = self._client
        if c is None:
            c = self._client = self.tcp.endpoint(self.client_dir)
        return c

    @property
    def broker(self) -> str:
        """The broker's ``ip:port`` (made when first asked for, as :attr:`client`)."""
        b = self._broker
        if b is None:
            b = self._broker = self.tcp.endpoint(1 - self.client_dir)
        return b

    # ------------------------------------------------------------------ framers
    @property
    def framers(self) -> tuple:
        """The :class:`~kafkasniff.protocol.framing.Framer` of direction 0 and of direction 1
        (asking for them makes the ones not made yet)."""
        return self._framer(0), self._framer(1)

    def made_framers(self) -> list:
        """The framers made so far: a direction that carried nothing (no byte, no gap) has
        none, and its framer would have framed nothing."""
        return [f for f in (self._f0, self._f1) if f is not None]

    def _framer(self, direction: int):
        """The framer of ``direction``, made now if it was not yet."""
        f = self._f1 if direction else self._f0
        if f is None:
            f = self._new_framer(direction == self.client_dir)
            if direction:
                self._f1 = f
            else:
                self._f0 = f
        return f

    def _new_framer(self, is_request: bool):
        """A new :class:`~kafkasniff.protocol.framing.Framer` for the requests (client to
        broker) or the responses of this connection."""
        raise NotImplementedError

    # ------------------------------------------------------------------ events
    def on_data(self, direction: int, offset: int, data: bytes, ts_ns: int) -> list:
        """Feed in-order bytes of ``direction``; returns exchanges and issues."""
        f = self._f1 if direction else self._f0
        if f is None:
            f = self._framer(direction)
        events = f.feed(data, offset, ts_ns)
        return self._handle(direction, events) if events else events

    def on_gap(self, direction: int, offset: int, length: int, ts_ns: int) -> list:
        """Bytes of ``direction`` were lost; returns exchanges and issues."""
        return self._handle(direction, self._framer(direction).gap(offset, length, ts_ns))

    def on_close(self, ts_ns: int, end_of_capture: bool | str) -> list:
        """The connection ended: flush partial frames and the requests still waiting.

        ``end_of_capture`` is True for the end of the capture, or the close reason of the
        TCP layer (``"fin"``, ``"rst"``, ``"idle"``, ``"evicted"``, ``"port_reuse"``,
        ``"end_of_capture"``). Requests left waiting become ``unanswered``: info severity
        when the capture simply stopped seeing the connection (end, idle) or the client
        closed it, warning when the broker closed it or the connection table was full.
        """
        out: list = []
        self.closing = True
        for direction in (self.client_dir, 1 - self.client_dir):
            f = self._f1 if direction else self._f0
            if f is not None:       # a framer never made has nothing to report
                out.extend(self._handle(direction, f.close(ts_ns)))
        out.extend(self._release_held())
        severity, why = self._close_reason(end_of_capture)
        out.extend(self._give_up_all(severity, f"no response before {why}"))
        return out

    def _close_reason(self, end_of_capture: bool | str) -> tuple[str, str]:
        """``(severity, why)`` of requests left waiting when the connection ended."""
        reason = "end_of_capture" if end_of_capture is True else (end_of_capture or "fin")
        tcp = self.tcp
        if reason == "end_of_capture":
            return Severity.INFO, "the capture ended"
        if reason == "idle":
            return Severity.INFO, "the connection went idle (no packet for the idle timeout)"
        if reason == "evicted":
            return Severity.WARNING, "the connection table was full (connection evicted)"
        if tcp.closed_by == self.client_dir:
            return Severity.INFO, "the client closed the connection"
        if tcp.closed_by >= 0:
            return Severity.WARNING, "the broker closed the connection"
        return Severity.WARNING, f"the connection ended ({reason})"

    # ------------------------------------------------------------------ hooks
    def _on_frame(self, direction: int, is_request: bool, frame: Frame) -> list:
        """One whole frame of ``direction``: returns exchanges and issues."""
        raise NotImplementedError

    def _give_up_all(self, severity: str, why: str) -> list:
        """The connection ended: every request still waiting -> ``unanswered``."""
        raise NotImplementedError

    def _release_held(self) -> list:
        """The connection ended: requests held for a reason of the wire format's own (acks=0
        Produce requests) are released."""
        return []

    def _resynced(self, direction: int, ev: FramerIssue) -> list:
        """The framer of ``direction`` found frames again after losing them (the connection
        had synced before and is not closing)."""
        return []

    def _frame_ids(self, is_request: bool, frame: Frame) -> dict:
        """``correlation_id``, ``api_key``, ``api_version`` a frame's first bytes name (for
        the issues of a damaged or cut frame); empty when the wire format has none."""
        return {}

    # ------------------------------------------------------------------ frames
    def _synced(self, direction: int) -> None:
        """A frame boundary of ``direction`` was found (:attr:`synced_once`)."""
        s = self.synced_once
        self.synced_once = _SYNCED[(s[0] or direction == 0) | (s[1] or direction == 1) << 1]

    def _handle(self, direction: int, events: list) -> list:
        out: list = []
        is_request = direction == self.client_dir
        frame: Frame | None = None      # the frame just handled, with where its output starts
        frame_out = 0
        for ev in events:
            if type(ev) is Frame:
                frame, frame_out = ev, len(out)
                if not self.synced_once[direction]:
                    self._synced(direction)
                try:
                    out.extend(self._on_frame(direction, is_request, ev))
                except Exception as exc:  # noqa: BLE001 - one bad frame must not stop the run
                    out.append(self.issue(IssueKind.INTERNAL_ERROR,
                                          f"internal error on this {self.FRAME_NAME} "
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
                    out.extend(self._resynced(direction, ev))
                self._synced(direction)
            ids = {}
            if (frame is not None and frame.missing_bytes
                    and ev.kind in (IssueKind.FRAME_DAMAGED, IssueKind.FRAME_TRUNCATED)):
                ids = self._frame_ids(is_request, frame)   # the issue of the frame before it
            issue = self.issue(ev.kind, ev.message, severity=sev, ts_ns=ev.ts_ns,
                               direction=direction, stream_offset=ev.stream_offset,
                               length_bytes=ev.length_bytes, **ids)
            frame = None
            if ids:
                # the cut frame completed an exchange: the issue is that exchange's
                done = [i for i in range(frame_out, len(out)) if type(out[i]) is Exchange
                        and out[i].correlation_id == ids["correlation_id"]]
                if done:
                    ex = out[done[-1]]
                    out[done[-1]] = replace(ex, issues=(*ex.issues, replace(
                        issue, api_key=ex.api_key, api_version=ex.api_version)))
                    continue
            out.append(issue)
        return out

    # ------------------------------------------------------------------ records
    def issue(self, kind: str, message: str, *, severity: str | None = None, ts_ns: int = 0,
              direction: int = -1, stream_offset: int = -1, length_bytes: int = 0,
              field_path: str = "", frame_offset: int = -1, correlation_id: int | None = None,
              api_key: int | None = None, api_version: int | None = None) -> DecodeIssue:
        """A :class:`~kafkasniff.model.DecodeIssue` located on this connection, with the
        default severity of its kind (:attr:`SEVERITY`) unless ``severity`` is given;
        ``direction`` is the stream direction (0/1, -1 for none), named ``request`` /
        ``response`` in the issue."""
        if severity is None:
            severity = self.SEVERITY.get(kind, Severity.WARNING)
        dname = "" if direction < 0 else ("request" if direction == self.client_dir else "response")
        return DecodeIssue(kind, severity, message, ts_ns, self.tcp.conn_id, self.client,
                           self.broker, dname, stream_offset, length_bytes, field_path,
                           frame_offset, correlation_id, api_key, api_version)

    def _body_issues(self, issues: list[BodyIssue], frame: Frame, direction: int,
                     corr: int | None, api_key: int | None,
                     api_version: int | None) -> list[DecodeIssue]:
        """A decoded frame's departures located on the connection (a body cut by a gap or the
        end of the capture is explained by that issue, not by a decode error)."""
        out = []
        for bi in issues:
            if frame.missing_bytes and bi.kind in (IssueKind.BODY_DECODE_ERROR,
                                                   IssueKind.TRAILING_BYTES):
                continue  # explained by the frame_damaged / frame_truncated issue
            length = len(frame.payload) - bi.offset if bi.kind == IssueKind.TRAILING_BYTES else 0
            out.append(self.issue(bi.kind, bi.message, ts_ns=frame.first_ts_ns,
                                  direction=direction, stream_offset=frame.stream_offset,
                                  field_path=bi.field_path, frame_offset=bi.offset,
                                  length_bytes=length, correlation_id=corr, api_key=api_key,
                                  api_version=api_version))
        return out

    def _message(self, frame: Frame, decoded: DecodedFrame, direction: int, *,
                 guessed: bool = False, orphan: bool = False) -> Message:
        """The :class:`~kafkasniff.model.Message` of a frame and what it held; its body is
        redacted whole when :func:`kafkasniff.content.redaction.reason` says so (unless
        ``show_secrets``). ``guessed`` / ``orphan``: an orphan response decoded by guess /
        kept raw."""
        body, raw = decoded.body, decoded.raw_body
        if not self.ctx.content.show_secrets:
            why = self._redaction_reason(decoded, guessed, orphan)
            if why is not None:
                body, raw = redacted_body(why, max(frame.size - decoded.body_offset, 0)), None
        return Message(frame.size + 4, frame.first_ts_ns, frame.last_ts_ns, frame.stream_offset,
                       decoded.header, body, raw,
                       decoded.complete and not frame.missing_bytes, frame.missing_bytes,
                       decoded.body_offset, self.tcp.seq_at(direction, frame.stream_offset))

    def _redaction_reason(self, decoded: DecodedFrame, guessed: bool,
                          orphan: bool) -> str | None:
        """The redaction rule for one frame of this connection (subclasses say whether the
        connection has shown SASL)."""
        return redaction.reason(decoded, guessed=guessed, orphan=orphan)

    def _exchange(self, status: str, api_key: int, api_name: str, api_version: int,
                  correlation_id: int, client_id: str | None, request: Message | None,
                  response: Message | None, issues: list, *, errors: tuple = (),
                  throttle_time_ms: int | None = None, topics: tuple = (),
                  inferred: bool = False, assumed_version: int | None = None,
                  records: RecordsSummary | None = None, record_fields: tuple = (),
                  wire_topics: tuple = (), topic_ids: tuple = (),
                  wire_format: WireFormat = WireFormat.KAFKA) -> Exchange:
        """An :class:`~kafkasniff.model.Exchange` of this connection (latency from the
        request's last byte to the response's first; ``long_poll`` set by
        :func:`kafkasniff.content.waits.long_poll_rule`); the keyword arguments are the
        optional fields of the same names."""
        latency = None
        if request is not None and response is not None:
            latency = response.first_ts_ns - request.last_ts_ns
        long_poll, rule = False, None
        if (request is not None and is_redacted(request.body)) or \
                (response is not None and is_redacted(response.body)):
            # nothing derived from a redacted body: its records and names could be secrets
            records, topics, wire_topics, topic_ids, record_fields = None, (), (), (), ()
        elif api_key in WAIT_APIS and latency is not None:
            rule = long_poll_rule(api_key, request.body, response.body, latency, records)
            long_poll = rule is not None
        self.exchanges += 1
        # positional, in Exchange's field order: a class called with keywords takes twice
        # as long (tests/pairing/test_exchange_fields.py holds the order)
        return Exchange(self.tcp.conn_id, self.client, self.broker, status, api_key, api_name,
                        api_version, correlation_id, client_id, request, response, latency,
                        errors, throttle_time_ms, topics, inferred, assumed_version,
                        tuple(issues), records, record_fields, wire_topics, topic_ids,
                        wire_format, self.tls, long_poll, rule)
