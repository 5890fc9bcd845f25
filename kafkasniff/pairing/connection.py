"""Per-connection Kafka state: framing both directions, decoding, pairing by correlation_id.

Sans-IO: a :class:`KafkaConnection` is fed the stream events of one TCP connection whose
client side is known, and returns :class:`Exchange` and :class:`DecodeIssue` records.

Pairing rules (Kafka protocol guide, "Network"): a client may pipeline requests; the broker
answers them in order, each response carrying the request's correlation_id; a Produce with
``acks=0`` gets no response. A response is decoded with the api_key and api_version of the
request it answers. Requests still waiting when the connection closes or the capture ends are
``unanswered``; a response with no waiting request is an ``orphan_response`` whose layout is
inferred when exactly one API's response layout fits the whole frame.
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass, field, replace

from kafkasniff.errors import DecodeError
from kafkasniff.issues import DecodeIssue, IssueKind, Severity
from kafkasniff.pairing.exchange import (NO_RESPONSE_EXPECTED, ORPHAN_RESPONSE, PAIRED,
                                         SASL_TOKEN_API_KEY, UNANSWERED, Exchange, Message)
from kafkasniff.pairing.embedded import EmbeddedDecoder, embedded_topics
from kafkasniff.pairing.record_data import RecordsLocator, RecordsSummary, decode_located
from kafkasniff.pairing.sasl import (REDACTED_APIS, SASL_AUTHENTICATE, SASL_HANDSHAKE, Redacted,
                                    SaslSession, is_secret_api, redact_body)
from kafkasniff.pairing.record_data import summarize as summarize_records
from kafkasniff.pairing.summary import Summarizer
from kafkasniff.protocol.compression import DEFAULT_MAX_BYTES
from kafkasniff.protocol.decoder import STRICT_ERRORS, BodyDecoder, BodyResult
from kafkasniff.protocol.detect import request_validator, response_validator
from kafkasniff.protocol.lenient import BodyIssue
from kafkasniff.protocol.framing import (ACCEPT, DEFAULT_MAX_FRAME_BYTES, Frame, Framer,
                                         FramerIssue)
from kafkasniff.protocol.headers import (RequestHeader, decode_request_header,
                                         decode_response_header, peek_correlation_id,
                                         peek_request_ids, response_header_version)
from kafkasniff.protocol.schema import Definitions
from kafkasniff.tcp.types import TcpConnection

_SIZE = struct.Struct(">i")
PRODUCE = 0
GROUP_APIS = (11, 14, 15)  # JoinGroup, SyncGroup, DescribeGroups carry the consumer protocol
DEFAULT_MAX_PENDING = 10_000
MAX_INFERRED_ORPHANS = 64       # per connection; later orphans are kept raw without trying
ACKS0_HOLD_NS = 1_000_000_000   # how long an acks=0 Produce waits for an (unexpected) answer
ACKS0_MAX_HELD = 256

_ISSUE_SEVERITY = {
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
}


@dataclass(slots=True)
class PairingContext:
    """What every connection shares: definitions, decoders and options.

    Attributes:
        defs / decoder / summarizer: decoding machinery (the summarizer's topic-id registry
            is shared by every connection).
        max_frame_bytes: largest accepted frame payload (bytes).
        max_pending: requests waiting for a response per connection (and raw SASL tokens
            waiting for the broker's); beyond it the oldest becomes ``unanswered`` (requests
            with a ``pending_overflow`` issue).
        infer_orphans: try every response layout on orphan responses.
        with_records: decode every record of record batches, not only batch headers.
        max_uncompressed_bytes: bound on one batch's decompressed size (bytes).
        show_secrets: keep SASL tokens, SCRAM credentials, delegation-token HMACs and
            sensitive configs instead of redacting them.
        locator: finds the ``records`` fields of a decoded body.
        embedded: decodes the consumer protocol inside group APIs (set by :meth:`create`).
    """

    defs: Definitions
    decoder: BodyDecoder
    summarizer: Summarizer
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    max_pending: int = DEFAULT_MAX_PENDING
    infer_orphans: bool = True
    with_records: bool = False
    max_uncompressed_bytes: int = DEFAULT_MAX_BYTES
    show_secrets: bool = False
    locator: RecordsLocator = field(default_factory=RecordsLocator)
    embedded: EmbeddedDecoder | None = None
    _orphan_candidates: list = field(default_factory=list)
    _request_validator: object = None

    def request_validator(self):
        """The request-frame validator, shared by every connection."""
        if self._request_validator is None:
            self._request_validator = request_validator(self.defs)
        return self._request_validator

    @classmethod
    def create(cls, defs: Definitions, **options) -> "PairingContext":
        """A context with a fresh decoder and summarizer for ``defs``."""
        ctx = cls(defs, BodyDecoder(defs), Summarizer(defs), **options)
        ctx.embedded = EmbeddedDecoder(defs)
        return ctx

    def postprocess(self, api_key: int, version: int, is_response: bool, body: dict | None,
                    request_body: dict | None = None, mechanism: str | None = None
                    ) -> tuple[list[BodyIssue], RecordsSummary | None, tuple]:
        """After a body decode: redact secrets (SASL tokens, SCRAM credentials, delegation
        token HMACs, sensitive configs) unless ``show_secrets``, decode the consumer protocol in
        group APIs and the record data in records fields.
        Returns ``(issues, records summary, located records)``."""
        if body is None:
            return [], None, ()
        if api_key in REDACTED_APIS:
            redact_body(api_key, is_response, body, mechanism, self.show_secrets)
        issues = self.embedded.apply(api_key, is_response, body, request_body) \
            if api_key in GROUP_APIS else []
        info = self.defs.apis.get(api_key)
        plan = self.defs.plan(info.response if is_response else info.request, version)
        if not self.locator.tree(plan):
            return issues, None, ()
        located = self.locator.find(plan, body)
        if not located:
            return issues, None, ()
        names = self.summarizer.registry.names
        located = [loc if loc.topic is not None or loc.topic_id not in names else
                   replace(loc, resolved_topic=names[loc.topic_id]) for loc in located]
        issues += decode_located(located, with_records=self.with_records,
                                 max_uncompressed_bytes=self.max_uncompressed_bytes,
                                 defs=self.defs, partial_is_issue=not is_response)
        return issues, summarize_records(located), tuple(located)

    def orphan_candidates(self) -> list[tuple[int, object, list[tuple[int, int]]]]:
        """Distinct response layouts an orphan may have: ``(header_version, strict decoder,
        [(api_key, version), ...])``; versions with identical layouts share one entry."""
        if not self._orphan_candidates:
            by_layout: dict[tuple[int, str], tuple[int, object, list]] = {}
            for key, info in sorted(self.defs.apis.items()):
                for v in self.defs.message_versions(info.response):
                    hv = response_header_version(self.defs, key, v)
                    fn = self.decoder.strict_decoder(key, v, True)
                    entry = by_layout.setdefault((hv, fn._source), (hv, fn, []))
                    entry[2].append((key, v))
            self._orphan_candidates = list(by_layout.values())
        return self._orphan_candidates


@dataclass(slots=True)
class _Pending:
    header: object
    message: Message
    result: BodyResult | None
    issues: list
    seq: int = 0
    records: object = None
    record_fields: tuple = ()
    waiting: bool = True        # False once answered, given up or flushed


class IssueSource:
    """Mixin of the per-connection pairing classes: :meth:`issue` builds a
    :class:`DecodeIssue` located on the connection (``tcp``, ``client``, ``broker``,
    ``client_dir`` attributes), with the default severity of each kind from the class's
    ``SEVERITY`` table."""

    __slots__ = ()
    SEVERITY: dict = _ISSUE_SEVERITY

    def issue(self, kind: str, message: str, *, severity: str | None = None, ts_ns: int = 0,
              direction: int = -1, stream_offset: int = -1, length_bytes: int = 0,
              field_path: str = "", frame_offset: int = -1, correlation_id: int | None = None,
              api_key: int | None = None, api_version: int | None = None) -> DecodeIssue:
        """A :class:`DecodeIssue` located on this connection; ``direction`` is the stream
        direction (0/1, -1 for none), named ``request`` / ``response`` in the issue."""
        if severity is None:
            severity = self.SEVERITY.get(kind, Severity.WARNING)
        dname = "" if direction < 0 else ("request" if direction == self.client_dir else "response")
        return DecodeIssue(kind, severity, message, ts_ns, self.tcp.conn_id, self.client,
                           self.broker, dname, stream_offset, length_bytes, field_path,
                           frame_offset, correlation_id, api_key, api_version)


class KafkaConnection(IssueSource):
    """Kafka framing, decoding and pairing for one TCP connection.

    Args:
        ctx: the shared :class:`PairingContext`.
        tcp: the TCP connection (endpoints, counters).
        client_dir: which stream direction (0 or 1) carries requests.
        mid_stream: the capture began after the connection opened (framers start TENTATIVE).
    """

    __slots__ = ("ctx", "tcp", "client_dir", "client", "broker", "framers", "pending",
                 "pending_count", "mid_stream", "synced_once", "exchanges", "orphans",
                 "unanswered", "acks0", "requests", "sasl", "sasl_tokens", "_overflow")

    def __init__(self, ctx: PairingContext, tcp: TcpConnection, client_dir: int,
                 mid_stream: bool) -> None:
        self.ctx = ctx
        self.tcp = tcp
        self.client_dir = client_dir
        self.client = tcp.endpoint(client_dir)
        self.broker = tcp.endpoint(1 - client_dir)
        self.pending: dict[int, list[_Pending]] = {}  # FIFO per correlation_id
        self.pending_count = 0
        # while over max_pending: every waiting request in arrival order (answered ones are
        # skipped when reached), so that giving up the oldest costs O(1), not a scan
        self._overflow: deque | None = None
        self.mid_stream = mid_stream
        self.synced_once = [not mid_stream, not mid_stream]
        # minimum size 0: raw SASL tokens (KIP-43) may be empty; shorter-than-header Kafka
        # frames are then reported by the header decoders (hunting still uses validators)
        req = Framer(ctx.request_validator(), min_frame_bytes=0,
                     max_frame_bytes=ctx.max_frame_bytes, synced=not mid_stream)
        resp = Framer(response_validator(self.pending), min_frame_bytes=0,
                      max_frame_bytes=ctx.max_frame_bytes, synced=not mid_stream)
        self.framers = [req, resp] if client_dir == 0 else [resp, req]
        self.exchanges = 0
        self.orphans = 0
        self.unanswered = 0
        # Produce requests with acks=0, held briefly: Kafka sends no response, but some
        # peers (librdkafka's mock cluster) do; such an answer is paired and flagged.
        self.acks0: dict[int, _Pending] = {}
        self.requests = 0
        self.sasl: SaslSession | None = None           # created at the first SASL request
        self.sasl_tokens: list[Message] = []            # raw client tokens awaiting an answer

    # ------------------------------------------------------------------ events
    def on_data(self, direction: int, offset: int, data: bytes, ts_ns: int) -> list:
        """Feed in-order bytes of ``direction``; returns exchanges and issues."""
        events = self.framers[direction].feed(data, offset, ts_ns)
        return self._handle(direction, events) if events else events

    def on_gap(self, direction: int, offset: int, length: int, ts_ns: int) -> list:
        """Bytes of ``direction`` were lost; returns exchanges and issues."""
        return self._handle(direction, self.framers[direction].gap(offset, length, ts_ns))

    def on_close(self, ts_ns: int, end_of_capture: bool | str) -> list:
        """The connection ended: flush partial frames and unanswered requests.

        ``end_of_capture`` is True for the end of the capture, or the close reason of the
        TCP layer (``"fin"``, ``"rst"``, ``"idle"``, ``"evicted"``, ``"port_reuse"``,
        ``"end_of_capture"``). Requests left waiting become ``unanswered``: info severity
        when the capture simply stopped seeing the connection (end, idle) or the client
        closed it, warning when the broker closed it or the connection table was full.
        """
        out: list = []
        for direction in (self.client_dir, 1 - self.client_dir):
            out.extend(self._handle(direction, self.framers[direction].close(ts_ns)))
        out.extend(self._release_acks0(None))
        reason = "end_of_capture" if end_of_capture is True else (end_of_capture or "fin")
        tcp = self.tcp
        if reason == "end_of_capture":
            severity, why = Severity.INFO, "the capture ended"
        elif reason == "idle":
            severity, why = Severity.INFO, "the connection went idle (no packet for the idle timeout)"
        elif reason == "evicted":
            severity, why = Severity.WARNING, "the connection table was full (connection evicted)"
        elif tcp.closed_by == self.client_dir:
            severity, why = Severity.INFO, "the client closed the connection"
        elif tcp.closed_by >= 0:
            severity, why = Severity.WARNING, "the broker closed the connection"
        else:
            severity, why = Severity.WARNING, f"the connection ended ({reason})"
        for tok in self.sasl_tokens:
            out.append(self._sasl_exchange(tok, None, UNANSWERED))
        self.sasl_tokens.clear()
        for queue in self.pending.values():
            for p in queue:
                out.append(self._unanswered(p, severity, f"no response before {why}"))
        self.pending.clear()
        self.pending_count = 0
        self._overflow = None
        return out

    # ------------------------------------------------------------------ internals
    def _handle(self, direction: int, events: list) -> list:
        out: list = []
        is_request = direction == self.client_dir
        for ev in events:
            if type(ev) is Frame:
                self.synced_once[direction] = True
                try:
                    sasl = self.sasl
                    if sasl is not None and sasl.raw_phase:
                        if is_request and sasl.raw_client:
                            if not self._looks_like_request(ev):
                                out.extend(self._raw_token(ev, True))
                                continue
                            sasl.end_raw_phase()
                        elif not is_request and sasl.server_frame_is_raw(ev.payload,
                                                                         self.pending):
                            out.extend(self._raw_token(ev, False))
                            continue
                    out.extend(self._on_request(ev) if is_request else self._on_response(ev))
                except Exception as exc:  # noqa: BLE001 - one bad frame must not stop the run
                    out.append(self.issue(IssueKind.INTERNAL_ERROR,
                                          f"internal error on this frame ({type(exc).__name__}: "
                                          f"{exc}); please report it", severity=Severity.ERROR,
                                          ts_ns=ev.first_ts_ns, direction=direction,
                                          stream_offset=ev.stream_offset))
            else:
                assert isinstance(ev, FramerIssue)
                sev = None
                if ev.kind == IssueKind.RESYNC and not self.synced_once[direction]:
                    sev = Severity.INFO  # expected when the capture began mid-stream
                if ev.kind == IssueKind.RESYNC:
                    self.synced_once[direction] = True
                out.append(self.issue(ev.kind, ev.message, severity=sev, ts_ns=ev.ts_ns,
                                      direction=direction, stream_offset=ev.stream_offset,
                                      length_bytes=ev.length_bytes))
        return out

    def _looks_like_request(self, frame: Frame) -> bool:
        head = _SIZE.pack(frame.size) + frame.payload[:600]
        return self.ctx.request_validator()(head, 0, False) == ACCEPT

    def _raw_token(self, frame: Frame, from_client: bool) -> list:
        """A raw SASL token frame (after SaslHandshake v0): client tokens wait for the
        broker's next token, which completes the exchange (api_key -2, ``SaslToken``)."""
        desc = self.sasl.raw_token(from_client, frame.payload, self.ctx.show_secrets)
        d = self.client_dir if from_client else 1 - self.client_dir
        msg = Message(frame.size + 4, frame.first_ts_ns, frame.last_ts_ns, frame.stream_offset,
                      {}, desc, None, not frame.missing_bytes, frame.missing_bytes, 0,
                      self.tcp.seq_at(d, frame.stream_offset))
        if from_client:
            self.sasl_tokens.append(msg)
            if len(self.sasl_tokens) > self.ctx.max_pending:  # bounded, like requests
                return [self._sasl_exchange(self.sasl_tokens.pop(0), None, UNANSWERED)]
            return []
        request = self.sasl_tokens.pop(0) if self.sasl_tokens else None
        return [self._sasl_exchange(request, msg, PAIRED if request else ORPHAN_RESPONSE)]

    def _sasl_exchange(self, request: Message | None, response: Message | None,
                       status: str) -> Exchange:
        latency = None
        if request is not None and response is not None:
            latency = response.first_ts_ns - request.last_ts_ns
        self.exchanges += 1
        return Exchange(self.tcp.conn_id, self.client, self.broker, status, SASL_TOKEN_API_KEY,
                        "SaslToken", -1, -1, None, request, response, latency)

    def _message(self, frame: Frame, header: dict, result: BodyResult | None, body_offset: int,
                 payload: bytes, api_key: int | None = None, is_request: bool = False) -> Message:
        body = result.value if result is not None else None
        raw = payload[body_offset:] if body is None else None
        if raw is not None and api_key is not None and not self.ctx.show_secrets and \
                is_secret_api(api_key):
            body, raw = {"_raw_body": Redacted("undecoded body of a secret-bearing API",
                                               len(raw))}, None
        complete = result.complete if result is not None else False
        seq = self.tcp.seq_at(self.client_dir if is_request else 1 - self.client_dir,
                              frame.stream_offset)
        return Message(frame.size + 4, frame.first_ts_ns, frame.last_ts_ns, frame.stream_offset,
                       header, body, raw, complete and not frame.missing_bytes,
                       frame.missing_bytes, body_offset, seq)

    def _body_issues(self, result: BodyResult, frame: Frame, direction: int, corr: int,
                     api_key: int, api_version: int) -> list:
        out = []
        for bi in result.issues:
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

    def _on_request(self, frame: Frame) -> list:
        ctx = self.ctx
        payload = frame.payload
        try:
            hdr = decode_request_header(ctx.defs, payload)
        except DecodeError as exc:
            if frame.missing_bytes and len(payload) >= 8:
                # the gap cut the header after api_key/version/correlation_id: keep the
                # request so that its response still pairs (the frame_damaged issue says why)
                api_key, api_version, corr = peek_request_ids(payload)
                hdr = RequestHeader(api_key, api_version, corr, None, -1, len(payload))
            else:
                return [self.issue(IssueKind.HEADER_DECODE_ERROR, f"request header: {exc}",
                                   ts_ns=frame.first_ts_ns, direction=self.client_dir,
                                   stream_offset=frame.stream_offset, field_path=exc.field_path,
                                   frame_offset=exc.offset)]
        header = {"api_key": hdr.api_key, "api_version": hdr.api_version,
                  "correlation_id": hdr.correlation_id, "client_id": hdr.client_id}
        if hdr.tagged_fields:
            header["_unknown_tagged_fields"] = hdr.tagged_fields
        records, located = None, ()
        if hdr.header_version < 0:
            result = None
            issues = []
        else:
            result = ctx.decoder.decode(hdr.api_key, hdr.api_version, False, payload, hdr.size)
            if result.value is not None:
                if hdr.api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE) and self.sasl is None:
                    self.sasl = SaslSession()
                if hdr.api_key == SASL_HANDSHAKE:
                    self.sasl.observe(hdr.api_key, hdr.api_version, False, result.value)
                extra, records, located = ctx.postprocess(
                    hdr.api_key, result.layout_version, False, result.value,
                    mechanism=self.sasl.mechanism if self.sasl else None)
                result.issues.extend(extra)
                if self.sasl is not None and hdr.api_key != SASL_HANDSHAKE:
                    self.sasl.observe(hdr.api_key, hdr.api_version, False, result.value)
            issues = self._body_issues(result, frame, self.client_dir, hdr.correlation_id,
                                       hdr.api_key, hdr.api_version)
        if hdr.client_id_offset >= 0:
            issues.insert(0, self.issue(
                IssueKind.SPEC_DEPARTURE, "client_id is not valid UTF-8 (shown with \\x "
                "escapes)", ts_ns=frame.first_ts_ns, direction=self.client_dir,
                stream_offset=frame.stream_offset, field_path="header.client_id",
                frame_offset=hdr.client_id_offset, correlation_id=hdr.correlation_id,
                api_key=hdr.api_key, api_version=hdr.api_version))
        msg = self._message(frame, header, result, hdr.size, payload, hdr.api_key, is_request=True)
        self.requests += 1
        p = _Pending(hdr, msg, result, issues, self.requests, records, located)
        out: list = self._release_acks0(frame.first_ts_ns - ACKS0_HOLD_NS) if self.acks0 else []
        if hdr.api_key == PRODUCE and result is not None and result.value is not None and \
                result.value.get("acks") == 0:
            if hdr.correlation_id in self.acks0:
                out.extend(self._release_acks0(None))
            self.acks0[hdr.correlation_id] = p
            if len(self.acks0) > ACKS0_MAX_HELD:
                first = next(iter(self.acks0))
                out.append(self._exchange(self.acks0.pop(first), None, None,
                                          NO_RESPONSE_EXPECTED, []))
            return out
        queue = self.pending.get(hdr.correlation_id)
        if queue is None:
            self.pending[hdr.correlation_id] = [p]
        else:
            issues.append(self.issue(IssueKind.DUPLICATE_CORRELATION_ID,
                                     f"correlation_id {hdr.correlation_id} reused while "
                                     f"{len(queue)} request(s) with it still wait for a response",
                                     ts_ns=frame.first_ts_ns, direction=self.client_dir,
                                     stream_offset=frame.stream_offset,
                                     correlation_id=hdr.correlation_id, api_key=hdr.api_key,
                                     api_version=hdr.api_version))
            queue.append(p)
        self.pending_count += 1
        if self._overflow is not None:
            self._overflow.append(p)
        if self.pending_count > ctx.max_pending:
            out.append(self._evict_oldest_pending())
        return out

    def _evict_oldest_pending(self) -> Exchange:
        order = self._overflow
        if order is None:
            # entering overflow: order the waiting requests once by arrival
            order = self._overflow = deque(sorted(
                (p for queue in self.pending.values() for p in queue), key=lambda p: p.seq))
        p = order.popleft()
        while not p.waiting:
            p = order.popleft()
        p.waiting = False
        corr = p.header.correlation_id
        queue = self.pending[corr]
        queue.remove(p)         # the head of its FIFO (the oldest with that correlation_id)
        if not queue:
            del self.pending[corr]
        self.pending_count -= 1
        return self._unanswered(p, Severity.WARNING,
                                f"more than {self.ctx.max_pending} requests waiting on this "
                                f"connection: the oldest is given up",
                                kind=IssueKind.PENDING_OVERFLOW)

    def _unanswered(self, p: _Pending, severity: str, why: str,
                    kind: str = IssueKind.UNANSWERED_REQUEST) -> Exchange:
        h = p.header
        p.issues.append(self.issue(kind, f"{self.ctx.defs.api_name(h.api_key)} "
                                   f"v{h.api_version} correlation_id {h.correlation_id}: {why}",
                                   severity=severity, ts_ns=p.message.last_ts_ns,
                                   direction=self.client_dir, correlation_id=h.correlation_id,
                                   api_key=h.api_key, api_version=h.api_version))
        self.unanswered += 1
        return self._exchange(p, None, None, UNANSWERED, [])

    def _on_response(self, frame: Frame) -> list:
        corr = peek_correlation_id(frame.payload)
        if corr is None:
            return [self.issue(IssueKind.HEADER_DECODE_ERROR,
                               f"response frame of {frame.size} bytes has no room for a "
                               f"correlation_id", ts_ns=frame.first_ts_ns,
                               direction=1 - self.client_dir, stream_offset=frame.stream_offset)]
        queue = self.pending.get(corr)
        if queue is None:
            p = self.acks0.pop(corr, None)
            if p is None:
                return self._release_acks0(None) + [self._orphan(frame, corr)]
            p.issues.append(self.issue(
                IssueKind.SPEC_DEPARTURE, f"the broker answered a Produce request sent with "
                f"acks=0 (correlation_id {corr}); Kafka sends no response to acks=0",
                ts_ns=frame.first_ts_ns, direction=1 - self.client_dir, correlation_id=corr,
                api_key=PRODUCE, api_version=p.header.api_version))
            return self._release_acks0(None) + self._pair(p, frame, corr)
        p = queue.pop(0)
        p.waiting = False
        if not queue:
            del self.pending[corr]
        self.pending_count -= 1
        if self._overflow is not None and self.pending_count <= self.ctx.max_pending // 2:
            self._overflow = None
        out = self._release_acks0(None) if self.acks0 else []
        return out + self._pair(p, frame, corr)

    def _release_acks0(self, older_than_ns: int | None) -> list:
        """acks=0 Produce requests that can no longer be answered -> no_response_expected.

        Responses come in request order, so once a later request is answered (or the
        connection ends: ``older_than_ns=None``) earlier acks=0 requests never will be.
        """
        out = []
        while self.acks0:
            corr = next(iter(self.acks0))
            p = self.acks0[corr]
            if older_than_ns is not None and p.message.last_ts_ns > older_than_ns:
                break
            del self.acks0[corr]
            out.append(self._exchange(p, None, None, NO_RESPONSE_EXPECTED, []))
        return out

    def _pair(self, p: _Pending, frame: Frame, corr: int) -> list:
        h = p.header
        hv = response_header_version(self.ctx.defs, h.api_key, h.api_version)
        rdir = 1 - self.client_dir
        issues: list = []
        try:
            _, body_offset, tagged = decode_response_header(frame.payload, hv)
        except DecodeError as exc:
            issues.append(self.issue(IssueKind.HEADER_DECODE_ERROR, f"response header: {exc}",
                                     ts_ns=frame.first_ts_ns, direction=rdir,
                                     stream_offset=frame.stream_offset, correlation_id=corr,
                                     api_key=h.api_key, api_version=h.api_version))
            msg = self._message(frame, {"correlation_id": corr}, None, 4, frame.payload,
                                h.api_key)
            return [self._exchange(p, msg, None, PAIRED, issues)]
        header = {"correlation_id": corr}
        if tagged:
            header["_unknown_tagged_fields"] = tagged
        result = self.ctx.decoder.decode(h.api_key, h.api_version, True, frame.payload,
                                         body_offset)
        records, located = None, ()
        if result.value is not None:
            extra, records, located = self.ctx.postprocess(
                h.api_key, result.layout_version, True, result.value,
                p.result.value if p.result is not None else None,
                mechanism=self.sasl.mechanism if self.sasl else None)
            result.issues.extend(extra)
            if self.sasl is not None and h.api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
                self.sasl.observe(h.api_key, h.api_version, True, result.value)
        issues.extend(self._body_issues(result, frame, rdir, corr, h.api_key, h.api_version))
        msg = self._message(frame, header, result, body_offset, frame.payload, h.api_key)
        return [self._exchange(p, msg, result, PAIRED, issues, records, located)]

    def _orphan(self, frame: Frame, corr: int) -> Exchange:
        ctx = self.ctx
        defs = ctx.defs
        fits: dict[int, list[tuple[int, int, dict]]] = {}
        payload = frame.payload
        tried = ctx.infer_orphans and not frame.missing_bytes and \
            self.orphans < MAX_INFERRED_ORPHANS
        if tried:
            # response header v0 ends at 4; v1 adds a tagged-field section
            try:
                _, v1_offset, _ = decode_response_header(payload, 1)
            except DecodeError:
                v1_offset = -1
            size = len(payload)
            for hv, fn, aliases in ctx.orphan_candidates():
                body_offset = 4 if hv == 0 else v1_offset
                if body_offset < 0:
                    continue
                try:
                    value, end = fn(payload, body_offset)
                except STRICT_ERRORS:
                    continue
                if end != size:
                    continue
                for api_key, version in aliases:
                    fits.setdefault(api_key, []).append((version, body_offset, value))
        rdir = 1 - self.client_dir
        sev = Severity.INFO if self.mid_stream else Severity.WARNING
        self.orphans += 1
        if len(fits) == 1:
            api_key, candidates = next(iter(fits.items()))
            version, body_offset, value = max(candidates, key=lambda c: c[0])
            versions = sorted(c[0] for c in candidates)
            vtext = f"v{versions[0]}" if len(versions) == 1 else f"v{versions[0]}-v{versions[-1]}"
            issue = self.issue(IssueKind.ORPHAN_RESPONSE,
                               f"response correlation_id {corr} has no captured request; "
                               f"inferred as {defs.api_name(api_key)} {vtext} (the only API "
                               f"whose response layout fits the frame)", severity=sev,
                               ts_ns=frame.first_ts_ns, direction=rdir,
                               stream_offset=frame.stream_offset, correlation_id=corr,
                               api_key=api_key, api_version=version)
            extra, records, located = ctx.postprocess(api_key, version, True, value)
            result = BodyResult(value, True, extra, version, None, len(payload))
            issues = [issue] + self._body_issues(result, frame, rdir, corr, api_key, version)
            msg = self._message(frame, {"correlation_id": corr}, result, body_offset, payload,
                                api_key)
            return self._build(api_key, version, corr, None, None, msg, None, result,
                               ORPHAN_RESPONSE, issues, inferred=True, records=records,
                               record_fields=located)
        why = ("inference skipped (too many orphans on this connection)" if not tried else
               "no API's response layout fits the frame" if not fits else
               f"{len(fits)} APIs' response layouts fit the frame "
               f"({', '.join(defs.api_name(k) for k in list(fits)[:5])})")
        issue = self.issue(IssueKind.ORPHAN_RESPONSE,
                           f"response correlation_id {corr} has no captured request; body "
                           f"kept raw: {why}", severity=sev, ts_ns=frame.first_ts_ns,
                           direction=rdir, stream_offset=frame.stream_offset, correlation_id=corr)
        msg = self._message(frame, {"correlation_id": corr}, None, 4, payload)
        return self._build(-1, -1, corr, None, None, msg, None, None, ORPHAN_RESPONSE, [issue])

    def _exchange(self, p: _Pending, response: Message | None, rresult: BodyResult | None,
                  status: str, issues: list, records: RecordsSummary | None = None,
                  located: tuple = ()) -> Exchange:
        h = p.header
        return self._build(h.api_key, h.api_version, h.correlation_id, h.client_id, p.message,
                           response, p.result, rresult, status, p.issues + issues,
                           records=p.records or records,
                           record_fields=p.record_fields + tuple(located))

    def _build(self, api_key: int, api_version: int, corr: int, client_id: str | None,
               request: Message | None, response: Message | None, qresult: BodyResult | None,
               rresult: BodyResult | None, status: str, issues: list,
               inferred: bool = False, records: RecordsSummary | None = None,
               record_fields: tuple = ()) -> Exchange:
        ctx = self.ctx
        defs = ctx.defs
        info = defs.apis.get(api_key)
        errors: tuple = ()
        throttle = None
        topics: tuple = ()
        wire_topics: tuple = ()
        topic_ids: tuple = ()
        assumed = None
        if info is not None:
            qplan = rplan = None
            if qresult is not None and qresult.value is not None:
                qplan = defs.plan(info.request, qresult.layout_version)
                assumed = qresult.assumed_version
            if rresult is not None and rresult.value is not None:
                rplan = defs.plan(info.response, rresult.layout_version)
                assumed = assumed if assumed is not None else rresult.assumed_version
            summary = ctx.summarizer.summarize(
                qplan, qresult.value if qplan else None, rplan, rresult.value if rplan else None)
            errors, throttle, topics = summary.errors, summary.throttle_time_ms, summary.topics
            wire_topics, topic_ids = summary.wire_topics, summary.topic_ids
            if api_key in GROUP_APIS:
                more = tuple(embedded_topics(qresult.value if qplan else None) +
                             embedded_topics(rresult.value if rplan else None))
                if more:
                    topics = tuple(dict.fromkeys(topics + more))
                    wire_topics = tuple(dict.fromkeys(wire_topics + more))
        latency = None
        if request is not None and response is not None:
            latency = response.first_ts_ns - request.last_ts_ns
        self.exchanges += 1
        return Exchange(self.tcp.conn_id, self.client, self.broker, status, api_key,
                        defs.api_name(api_key) if api_key >= 0 else "Unknown", api_version, corr,
                        client_id, request, response, latency, errors, throttle, topics,
                        inferred, assumed, tuple(issues), records, record_fields, wire_topics,
                        topic_ids)
