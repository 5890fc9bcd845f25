"""Per-connection Kafka (0.8+) pairing: requests with responses, by correlation_id.

Sans-IO: a :class:`KafkaConnection` is fed the stream events of one TCP connection whose
client side is known, and returns :class:`~kafkasniff.model.Exchange` and
:class:`~kafkasniff.model.DecodeIssue` records. What a frame holds is decoded by the content
decoder (:class:`~kafkasniff.content.frames.ContentDecoder`); this module decides which
frames belong together.

Pairing rules (Kafka protocol guide, "Network"): a client may pipeline requests; the broker
answers them in order, each response carrying the request's correlation_id; a Produce with
``acks=0`` gets no response. A response is decoded with the api_key and api_version of the
request it answers. Requests still waiting when the connection closes or the capture ends are
``unanswered``; a response with no waiting request is an ``orphan_response`` whose layout is
inferred when exactly one API's response layout fits the whole frame. After a SaslHandshake
v0 (KIP-43) both directions carry raw SASL tokens for a while: each client token is paired
with the broker's next one (pseudo api_key ``SASL_TOKEN``, named ``SaslToken``).
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass

from kafkasniff.content import redaction
from kafkasniff.content.frames import DecodedFrame
from kafkasniff.content.sasl import SaslSession
from kafkasniff.issues import IssueKind, Severity
from kafkasniff.model import Exchange, ExchangeStatus, Message
from kafkasniff.pairing.base import PairingConnection, PairingContext
from kafkasniff.protocol.apis import PRODUCE, SASL_AUTHENTICATE, SASL_HANDSHAKE, SASL_TOKEN
from kafkasniff.protocol.detect import response_validator
from kafkasniff.protocol.framing import ACCEPT, Frame, Framer
from kafkasniff.protocol.headers import peek_correlation_id, peek_request_ids
from kafkasniff.tcp.types import TcpConnection

__all__ = ["KafkaConnection", "PairingContext"]

_SIZE = struct.Struct(">i")
MAX_INFERRED_ORPHANS = 64       # per connection; later orphans are kept raw without trying
ACKS0_HOLD_NS = 1_000_000_000   # how long an acks=0 Produce waits for an (unexpected) answer
ACKS0_MAX_HELD = 256


@dataclass(slots=True)
class _Pending:
    """A request waiting for its response (or held, for acks=0)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    message: Message
    frame: DecodedFrame
    issues: list
    seq: int = 0
    waiting: bool = True        # False once answered, given up or flushed
    nbytes: int = 0             # frame bytes (counted in the context's pending_bytes)


class KafkaConnection(PairingConnection):
    """Kafka 0.8+ framing and pairing for one TCP connection.

    Args:
        ctx: the shared :class:`~kafkasniff.pairing.base.PairingContext`.
        tcp: the TCP connection (endpoints, counters).
        client_dir: which stream direction (0 or 1) carries requests.
        mid_stream: the capture began after the connection opened (framers start TENTATIVE).

    Attributes (besides the base's counters): ``sasl``, the connection's
    :class:`~kafkasniff.content.sasl.SaslSession` once a SASL request was seen.
    """

    __slots__ = ("pending", "pending_count", "pending_bytes", "acks0", "sasl", "sasl_tokens",
                 "_overflow")

    def __init__(self, ctx: PairingContext, tcp: TcpConnection, client_dir: int,
                 mid_stream: bool) -> None:
        super().__init__(ctx, tcp, client_dir, mid_stream)
        self.pending: dict[int, list[_Pending]] = {}  # FIFO per correlation_id
        self.pending_count = 0
        self.pending_bytes = 0      # frame bytes of the waiting requests
        # while over max_pending: every waiting request in arrival order (answered ones are
        # skipped when reached), so that giving up the oldest costs O(1), not a scan
        self._overflow: deque | None = None
        # Produce requests with acks=0, held briefly: Kafka sends no response, but some
        # peers (librdkafka's mock cluster) do; such an answer is paired and flagged. Made
        # at the first one (None before: most connections never send one)
        self.acks0: dict[int, _Pending] | None = None
        self.sasl: SaslSession | None = None           # created at the first SASL request
        # raw client tokens awaiting an answer, made at the first (None before)
        self.sasl_tokens: list[Message] | None = None

    # ------------------------------------------------------------------ base hooks
    def _new_framer(self, is_request: bool) -> Framer:
        # minimum size 0: raw SASL tokens (KIP-43) may be empty; shorter-than-header Kafka
        # frames are then reported by the header decoders (hunting still uses validators)
        ctx = self.ctx
        validator = ctx.request_validator() if is_request else response_validator(self.pending)
        return Framer(validator, min_frame_bytes=0, max_frame_bytes=ctx.max_frame_bytes,
                      synced=not self.mid_stream)

    def _redaction_reason(self, decoded: DecodedFrame, guessed: bool,
                          orphan: bool) -> str | None:
        return redaction.reason(decoded, sasl_connection=self.sasl is not None,
                                guessed=guessed, orphan=orphan)

    def _on_frame(self, direction: int, is_request: bool, frame: Frame) -> list:
        sasl = self.sasl
        if sasl is not None and sasl.raw_phase:
            if is_request and sasl.raw_client:
                if not self._looks_like_request(frame):
                    return self._raw_token(frame, True)
                sasl.end_raw_phase()
            elif not is_request and sasl.server_frame_is_raw(frame.payload, self.pending):
                return self._raw_token(frame, False)
        return self._on_request(frame) if is_request else self._on_response(frame)

    def _release_held(self) -> list:
        return self._release_acks0(None)

    def _frame_ids(self, is_request: bool, frame: Frame) -> dict:
        p = frame.payload
        if is_request:
            if len(p) < 8:
                return {}
            api_key, api_version, corr = peek_request_ids(p)
            return {"correlation_id": corr, "api_key": api_key, "api_version": api_version}
        corr = peek_correlation_id(p)
        return {} if corr is None else {"correlation_id": corr}

    def _give_up_all(self, severity: str, why: str) -> list:
        out = [self._sasl_exchange(tok, None, ExchangeStatus.UNANSWERED)
               for tok in self.sasl_tokens or ()]
        self.sasl_tokens = None
        for queue in self.pending.values():
            for p in queue:
                out.append(self._unanswered(p, severity, why))
        self.pending.clear()
        self.pending_count = 0
        self.ctx.pending_bytes -= self.pending_bytes
        self.pending_bytes = 0
        self._overflow = None
        return out

    # ------------------------------------------------------------------ raw SASL tokens
    def _looks_like_request(self, frame: Frame) -> bool:
        head = _SIZE.pack(frame.size) + frame.payload[:600]
        return self.ctx.request_validator()(head, 0, False) == ACCEPT

    def _raw_token(self, frame: Frame, from_client: bool) -> list:
        """A raw SASL token frame (after SaslHandshake v0): client tokens wait for the
        broker's next token, which completes the exchange (api_key -2, ``SaslToken``)."""
        desc = self.sasl.raw_token(from_client, frame.payload, self.ctx.content.show_secrets)
        d = self.client_dir if from_client else 1 - self.client_dir
        msg = self._message(frame, DecodedFrame({}, desc, None, True, 0, []), d)
        if from_client:
            if self.sasl_tokens is None:
                self.sasl_tokens = []
            self.sasl_tokens.append(msg)
            if len(self.sasl_tokens) > self.ctx.max_pending:  # bounded, like requests
                return [self._sasl_exchange(self.sasl_tokens.pop(0), None,
                                            ExchangeStatus.UNANSWERED)]
            return []
        request = self.sasl_tokens.pop(0) if self.sasl_tokens else None
        return [self._sasl_exchange(request, msg, ExchangeStatus.PAIRED if request
                                    else ExchangeStatus.ORPHAN_RESPONSE)]

    def _sasl_exchange(self, request: Message | None, response: Message | None,
                       status: str) -> Exchange:
        return self._exchange(status, SASL_TOKEN, "SaslToken", -1, -1, None, request, response,
                              [])

    # ------------------------------------------------------------------ requests
    def _on_request(self, frame: Frame) -> list:
        ctx = self.ctx
        sasl = self.sasl
        d = ctx.content.decode_request(frame.payload,
                                       mechanism=sasl.mechanism if sasl is not None else None)
        exc = d.header_error
        h = d.header
        header_issue = None
        if exc is not None:
            # a header damaged after its api_key, api_version and correlation_id (a gap, a
            # client_id or tagged fields running past the frame) still names its request:
            # it is kept so that its response pairs, with the issue (it was a lone issue
            # and the response an orphan, Wireshark #17811's pattern)
            keep = "api_key" in h and h["api_key"] in ctx.defs.apis
            header_issue = self.issue(
                IssueKind.HEADER_DECODE_ERROR, f"request header: {exc}",
                ts_ns=frame.first_ts_ns, direction=self.client_dir,
                stream_offset=frame.stream_offset, length_bytes=frame.size + 4,
                field_path=exc.field_path, frame_offset=exc.offset,
                **({"correlation_id": h["correlation_id"], "api_key": h["api_key"],
                    "api_version": h["api_version"]} if keep else {}))
            if not keep:
                return [header_issue]
        api_key, api_version, corr = h["api_key"], h["api_version"], h["correlation_id"]
        if d.plan is not None:
            if sasl is None and api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
                sasl = self.sasl = SaslSession()
            if sasl is not None:
                sasl.observe(api_key, api_version, False, d.body)
        issues = self._body_issues(d.issues, frame, self.client_dir, corr, api_key,
                                   api_version)
        if header_issue is not None:
            issues.insert(0, header_issue)
        msg = self._message(frame, d, self.client_dir)
        self.requests += 1
        p = _Pending(api_key, api_version, corr, h["client_id"], msg, d, issues, self.requests)
        out: list = self._release_acks0(frame.first_ts_ns - ACKS0_HOLD_NS) if self.acks0 else []
        if api_key == PRODUCE and d.plan is not None and d.body.get("acks") == 0:
            if self.acks0 is None:
                self.acks0 = {}
            elif corr in self.acks0:
                out.extend(self._release_acks0(None))
            self.acks0[corr] = p
            if len(self.acks0) > ACKS0_MAX_HELD:
                first = next(iter(self.acks0))
                out.append(self._answered(self.acks0.pop(first), None, None,
                                          ExchangeStatus.NO_RESPONSE_EXPECTED, []))
            return out
        queue = self.pending.get(corr)
        if queue is None:
            self.pending[corr] = [p]
        else:
            issues.append(self.issue(IssueKind.DUPLICATE_CORRELATION_ID,
                                     f"correlation_id {corr} reused while {len(queue)} "
                                     f"request(s) with it still wait for a response",
                                     ts_ns=frame.first_ts_ns, direction=self.client_dir,
                                     stream_offset=frame.stream_offset, correlation_id=corr,
                                     api_key=api_key, api_version=api_version))
            queue.append(p)
        self.pending_count += 1
        p.nbytes = frame.size + 4
        self.pending_bytes += p.nbytes
        ctx.pending_bytes += p.nbytes
        if self._overflow is not None:
            self._overflow.append(p)
        if self.pending_count > ctx.max_pending:
            out.append(self._evict_oldest_pending(
                f"more than {ctx.max_pending} requests waiting on this connection"))
        if ctx.pending_bytes > ctx.max_pending_bytes:
            limit = ctx.max_pending_bytes
            while ctx.pending_bytes > limit and self.pending_count > 1:
                out.append(self._evict_oldest_pending(
                    f"requests waiting for a response hold more than the pending_bytes "
                    f"budget ({limit} bytes, all connections together)"))
                ctx.content.meter.skipped["pending_bytes"] += 1
        return out

    def _evict_oldest_pending(self, why: str) -> Exchange:
        order = self._overflow
        if order is None:
            # entering overflow: order the waiting requests once by arrival
            order = self._overflow = deque(sorted(
                (p for queue in self.pending.values() for p in queue), key=lambda p: p.seq))
        p = order.popleft()
        while not p.waiting:
            p = order.popleft()
        p.waiting = False
        corr = p.correlation_id
        queue = self.pending[corr]
        queue.remove(p)         # the head of its FIFO (the oldest with that correlation_id)
        if not queue:
            del self.pending[corr]
        self.pending_count -= 1
        self.pending_bytes -= p.nbytes
        self.ctx.pending_bytes -= p.nbytes
        return self._unanswered(p, Severity.WARNING, f"{why}: the oldest is given up",
                                kind=IssueKind.PENDING_OVERFLOW)

    def _unanswered(self, p: _Pending, severity: str, why: str,
                    kind: str = IssueKind.UNANSWERED_REQUEST) -> Exchange:
        p.issues.append(self.issue(kind, f"{self.ctx.defs.api_name(p.api_key)} "
                                   f"v{p.api_version} correlation_id {p.correlation_id}: {why}",
                                   severity=severity, ts_ns=p.message.last_ts_ns,
                                   direction=self.client_dir, correlation_id=p.correlation_id,
                                   api_key=p.api_key, api_version=p.api_version))
        self.unanswered += 1
        return self._answered(p, None, None, ExchangeStatus.UNANSWERED, [])

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
            out.append(self._answered(p, None, None, ExchangeStatus.NO_RESPONSE_EXPECTED, []))
        return out

    # ------------------------------------------------------------------ responses
    def _on_response(self, frame: Frame) -> list:
        corr = peek_correlation_id(frame.payload)
        if corr is None:
            return [self.issue(IssueKind.HEADER_DECODE_ERROR,
                               f"response frame of {frame.size} bytes has no room for a "
                               f"correlation_id", ts_ns=frame.first_ts_ns,
                               direction=1 - self.client_dir, stream_offset=frame.stream_offset,
                               length_bytes=frame.size + 4)]
        queue = self.pending.get(corr)
        if queue is None:
            p = self.acks0.pop(corr, None) if self.acks0 else None
            if p is None:
                return self._release_acks0(None) + [self._orphan(frame, corr)]
            p.issues.append(self.issue(
                IssueKind.SPEC_DEPARTURE, f"the broker answered a Produce request sent with "
                f"acks=0 (correlation_id {corr}); Kafka sends no response to acks=0",
                ts_ns=frame.first_ts_ns, direction=1 - self.client_dir, correlation_id=corr,
                api_key=PRODUCE, api_version=p.api_version))
            return self._release_acks0(None) + self._pair(p, frame, corr)
        p = queue.pop(0)
        p.waiting = False
        if not queue:
            del self.pending[corr]
        self.pending_count -= 1
        self.pending_bytes -= p.nbytes
        self.ctx.pending_bytes -= p.nbytes
        if self._overflow is not None and self.pending_count <= self.ctx.max_pending // 2:
            self._overflow = None
        out = self._release_acks0(None) if self.acks0 else []
        return out + self._pair(p, frame, corr)

    def _pair(self, p: _Pending, frame: Frame, corr: int) -> list:
        rdir = 1 - self.client_dir
        sasl = self.sasl
        d = self.ctx.content.decode_response(
            frame.payload, p.api_key, p.api_version, request_body=p.frame.layout_body,
            mechanism=sasl.mechanism if sasl is not None else None)
        if d.header_error is not None:
            exc = d.header_error
            issue = self.issue(IssueKind.HEADER_DECODE_ERROR, f"response header: {exc}",
                               ts_ns=frame.first_ts_ns, direction=rdir,
                               stream_offset=frame.stream_offset,
                               length_bytes=frame.size + 4, field_path=exc.field_path,
                               frame_offset=exc.offset, correlation_id=corr,
                               api_key=p.api_key, api_version=p.api_version)
            return [self._answered(p, self._message(frame, d, rdir), None,
                                   ExchangeStatus.PAIRED, [issue])]
        if d.plan is not None and sasl is not None and \
                p.api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
            sasl.observe(p.api_key, p.api_version, True, d.body)
        issues = self._body_issues(d.issues, frame, rdir, corr, p.api_key, p.api_version)
        return [self._answered(p, self._message(frame, d, rdir), d, ExchangeStatus.PAIRED,
                               issues)]

    def _orphan(self, frame: Frame, corr: int) -> Exchange:
        ctx = self.ctx
        defs = ctx.defs
        content = ctx.content
        tried = ctx.infer_orphans and not frame.missing_bytes and \
            self.orphans < MAX_INFERRED_ORPHANS
        guess = content.guess_response(frame.payload) if tried else None
        rdir = 1 - self.client_dir
        sev = Severity.INFO if self.mid_stream else Severity.WARNING
        self.orphans += 1
        if guess is not None and guess.inferred:
            d = guess.frame
            versions = guess.versions
            vtext = f"v{versions[0]}" if len(versions) == 1 else f"v{versions[0]}-v{versions[-1]}"
            issue = self.issue(IssueKind.ORPHAN_RESPONSE,
                               f"response correlation_id {corr} has no captured request; "
                               f"inferred as {defs.api_name(d.api_key)} {vtext} (the only API "
                               f"whose response layout fits the frame)", severity=sev,
                               ts_ns=frame.first_ts_ns, direction=rdir,
                               stream_offset=frame.stream_offset, correlation_id=corr,
                               api_key=d.api_key, api_version=d.api_version)
            issues = [issue] + self._body_issues(d.issues, frame, rdir, corr, d.api_key,
                                                 d.api_version)
            summary = content.summarize(d.api_key, None, d)
            return self._exchange(ExchangeStatus.ORPHAN_RESPONSE, d.api_key,
                                  defs.api_name(d.api_key), d.api_version, corr, None, None,
                                  self._message(frame, d, rdir, guessed=True), issues,
                                  errors=summary.errors, throttle_time_ms=summary.throttle_time_ms,
                                  topics=summary.topics, inferred=True,
                                  records=d.records, record_fields=d.located,
                                  wire_topics=summary.wire_topics, topic_ids=summary.topic_ids)
        fits = guess.fitting_apis if guess is not None else ()
        why = ("inference skipped (too many orphans on this connection)" if not tried else
               "no API's response layout fits the frame" if not fits else
               f"{len(fits)} APIs' response layouts fit the frame "
               f"({', '.join(defs.api_name(k) for k in fits[:5])})")
        issue = self.issue(IssueKind.ORPHAN_RESPONSE,
                           f"response correlation_id {corr} has no captured request; body "
                           f"kept raw: {why}", severity=sev, ts_ns=frame.first_ts_ns,
                           direction=rdir, stream_offset=frame.stream_offset, correlation_id=corr)
        d = guess.frame if guess is not None else content.raw_response(frame.payload)
        return self._exchange(ExchangeStatus.ORPHAN_RESPONSE, -1, "Unknown", -1, corr, None,
                              None, self._message(frame, d, rdir, orphan=True), [issue])

    def _answered(self, p: _Pending, response: Message | None, rframe: DecodedFrame | None,
                  status: str, issues: list) -> Exchange:
        """The exchange of a request that got its response (or never will)."""
        q = p.frame
        summary = self.ctx.content.summarize(p.api_key, q, rframe)
        assumed = q.assumed_version if q.plan is not None else None
        if assumed is None and rframe is not None and rframe.plan is not None:
            assumed = rframe.assumed_version
        records = q.records
        located = q.located
        if rframe is not None:
            records = records or rframe.records
            located = located + rframe.located
        return self._exchange(status, p.api_key, self.ctx.defs.api_name(p.api_key)
                              if p.api_key >= 0 else "Unknown", p.api_version, p.correlation_id,
                              p.client_id, p.message, response, p.issues + issues,
                              errors=summary.errors, throttle_time_ms=summary.throttle_time_ms,
                              topics=summary.topics, assumed_version=assumed, records=records,
                              record_fields=located, wire_topics=summary.wire_topics,
                              topic_ids=summary.topic_ids)
