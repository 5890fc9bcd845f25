"""Full decode of one exchange on demand, from the bytes of its frames.

A data source finds the request and response frames again (files:
:mod:`kafkasniff.capture.frames`; a live source: its own packet buffer) and calls
:func:`decode_exchange`, which decodes them through the same content decoder the pipeline
uses (:class:`~kafkasniff.content.frames.ContentDecoder`: header tables, compiled body
decoders with the lenient fallback, secrets redacted unless ``show_secrets``, consumer
protocol, record batches *and every record*), so the detail shows what ``read --json
--records`` shows, and returns a :class:`Detail`: the rebuilt
:class:`~kafkasniff.model.Exchange` and, per frame, the byte span of every field
(``decode_lenient(..., spans=)``) for the hex view.

Secrets never reach the UI as bytes either: the bytes of every redacted field (or of its
nearest enclosing field with a known span; the whole body when none) are zeroed in
:attr:`FrameView.data` and listed in :attr:`FrameView.masked`; raw SASL token frames are
masked whole, and so is the undecoded rest of a secret-bearing body.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kafkasniff.content import redaction
from kafkasniff.content.frames import ContentDecoder, DecodedFrame
from kafkasniff.content.records import summarize
from kafkasniff.content.redaction import redacted_body
from kafkasniff.content.sasl import REDACTED_APIS, Redacted, is_secret_api
from kafkasniff.content.waits import WAIT_APIS, long_poll_rule
from kafkasniff.model import DecodeIssue, Exchange, ExchangeStatus, Message, WireFormat
from kafkasniff.protocol.apis import SASL_TOKEN
from kafkasniff.protocol.headers import request_header_version, response_header_version
from kafkasniff.protocol.lenient import decode_lenient


@dataclass
class FrameView:
    """One frame for the hex view.

    Attributes:
        side: ``"request"`` or ``"response"``.
        data: the frame's bytes (size prefix included) with secret bytes zeroed, or ``None``
            when the frame could not be found (``note`` says why).
        spans: tree path (``"request.body.topics[0].name"``) -> ``(start, end)`` offsets in
            ``data``.
        masked: ranges of ``data`` hidden because they hold secrets.
        missing: ranges never captured (shown as ``??``).
    """

    side: str
    data: bytes | None
    spans: dict[str, tuple[int, int]] = field(default_factory=dict)
    masked: list[tuple[int, int]] = field(default_factory=list)
    missing: list[tuple[int, int]] = field(default_factory=list)
    note: str = ""


@dataclass
class Detail:
    """An exchange decoded in full, and its frames.

    Attributes:
        exchange: the rebuilt exchange (``None`` when nothing could be decoded).
        frames: ``"request"`` / ``"response"`` -> :class:`FrameView` (present when captured).
        note: why something is missing (frames not found, ...), else ``""``.
    """

    exchange: Exchange | None
    frames: dict[str, FrameView] = field(default_factory=dict)
    note: str = ""


_PATH_STEP = re.compile(r"(\.[^.\[]+|\[\d+\])$")


def parent_path(path: str) -> str:
    """``a.b[2].c`` -> ``a.b[2]`` -> ``a.b`` -> ``a`` -> ``""``."""
    m = _PATH_STEP.search(path)
    if m is None:
        return ""
    return path[:m.start()]


def redacted_paths(value, path: str = ""):
    """Paths (``auth_bytes.password``) of every :class:`Redacted` value in a decoded tree."""
    t = type(value)
    if t is Redacted:
        yield path
    elif t is dict:
        for k, v in value.items():
            yield from redacted_paths(v, f"{path}.{k}" if path else k)
    elif t is list:
        for i, v in enumerate(value):
            yield from redacted_paths(v, f"{path}[{i}]")


def _mask(data: bytearray, ranges: list[tuple[int, int]]) -> None:
    for a, b in ranges:
        data[a:b] = bytes(max(0, min(b, len(data)) - a))


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


class _Side:
    """One decoded frame and what the hex view needs of it."""

    def __init__(self, frame: DecodedFrame, name: str) -> None:
        self.frame = frame
        self.name = name                  # "request" / "response"
        self.spans: dict[str, tuple[int, int]] = {f"{name}.size": (0, 4)}
        self.masked: list[tuple[int, int]] = []
        self.stopped: int | None = None   # where the span walker stopped (payload offset)


def _body_spans(side: _Side, payload: bytes) -> None:
    """Field spans from the lenient walker over the body's plan, then record batch spans
    and, in uncompressed magic 2 batches, record spans (records inside compressed data have
    no bytes of their own in the frame: they highlight their batch); ``side.stopped`` is
    where the walker stopped (payload offset)."""
    d = side.frame
    if d.plan is None:
        return
    sp: dict = {}
    res = decode_lenient(d.plan, payload, d.body_offset, spans=sp)
    prefix = side.name
    for k, (a, b) in sp.items():
        side.spans[f"{prefix}.body.{k}"] = (a + 4, b + 4)
    side.stopped = res.end
    for loc in d.located:
        raw = loc.records
        if raw.decoded is None or raw.offset < 0:
            continue
        for i, b in enumerate(raw.decoded.batches):
            start = 4 + raw.offset + b.wire_offset
            bpath = f"{prefix}.body.{loc.field_path}.batches[{i}]"
            side.spans[bpath] = (start, start + b.batch_bytes)
            if b.magic == 2 and b.codec == "none" and b.records:
                at = raw.offset + b.wire_offset          # in the payload (frame - 4)
                for j, (a, z) in enumerate(record_spans(payload, at + V2_RECORDS_AT,
                                                        at + b.batch_bytes,
                                                        len(b.records))):
                    side.spans[f"{bpath}.records[{j}]"] = (a + 4, z + 4)


#: where the records of a magic 2 batch begin, from the batch's first byte: baseOffset 8,
#: batchLength 4, partitionLeaderEpoch 4, magic 1, crc 4, attributes 2, lastOffsetDelta 4,
#: baseTimestamp 8, maxTimestamp 8, producerId 8, producerEpoch 2, baseSequence 4,
#: records count 4 (the RecordBatch layout of the Kafka protocol guide, KIP-98)
V2_RECORDS_AT = 61


def record_spans(data, pos: int, end: int, count: int) -> list[tuple[int, int]]:
    """The ``(start, end)`` byte spans in ``data`` of the first ``count`` records of an
    uncompressed magic 2 batch whose records begin at ``pos`` (and the batch ends at
    ``end``): each record is a zigzag varint length (included in its span) and that many
    bytes. Stops early, without raising, at a length that does not fit the batch."""
    out: list[tuple[int, int]] = []
    while len(out) < count and pos < end:
        start = pos
        shift = value = 0
        while True:
            if pos >= end or shift > 28:
                return out
            b = data[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        length = (value >> 1) ^ -(value & 1)
        if length < 0 or pos + length > end:
            return out
        pos += length
        out.append((start, pos))
    return out


def _secret_masks(side: _Side, api_key: int, size: int) -> None:
    """Mask every redacted field (or its nearest enclosing span, else the whole body), and
    the undecoded rest of a secret-bearing body."""
    d = side.frame
    prefix = side.name
    body_start = 4 + d.body_offset
    for p in redacted_paths(d.body):
        q = p
        while q and f"{prefix}.body.{q}" not in side.spans:
            q = parent_path(q)
        side.masked.append(side.spans[f"{prefix}.body.{q}"] if q else (body_start, size))
    stopped = side.stopped
    if (api_key in REDACTED_APIS or is_secret_api(api_key)) and \
            (not d.complete or stopped is None or stopped + 4 < size):
        start = body_start if stopped is None else max(body_start, stopped + 4)
        side.masked.append((start, size))


def _redacted_side(side: _Side, size: int, info, is_response: bool) -> _Side:
    """A side whose body the pipeline redacted whole (:mod:`kafkasniff.content.redaction`):
    the body is the marker (with the rule's reason, found again from the frame), its bytes
    are masked, nothing decoded from it is kept."""
    d = side.frame
    orphan = is_response and info.status == ExchangeStatus.ORPHAN_RESPONSE
    if info.wire_format is WireFormat.KAFKA07 and not orphan:
        why = redaction.SASL_LIKE_07
    else:
        rule = {"guessed": orphan and info.inferred, "orphan": orphan and not info.inferred}
        why = redaction.reason(d, **rule) or redaction.reason(d, sasl_connection=True, **rule) \
            or "body redacted (docs/json.md)"
    marker = redacted_body(why, max(size - 4 - d.body_offset, 0))
    out = _Side(DecodedFrame(d.header, marker, None, d.complete, d.body_offset, [],
                             d.api_key, d.api_version), side.name)
    out.spans = {k: v for k, v in side.spans.items()
                 if not k.startswith(f"{side.name}.body.")}
    out.masked = [(4 + d.body_offset, size)]
    return out


def _request_side(content: ContentDecoder, data: bytes, mech: str | None) -> _Side:
    payload = data[4:]
    d = content.decode_request(payload, mechanism=mech)
    side = _Side(d, "request")
    if d.header_error is None:
        h = d.header
        side.spans.update({"request.header.api_key": (4, 6),
                           "request.header.api_version": (6, 8),
                           "request.header.correlation_id": (8, 12)})
        hv = request_header_version(content.defs, h["api_key"], h["api_version"])
        if hv >= 1:
            n = int.from_bytes(payload[8:10], "big", signed=True)
            cend = 10 + max(n, 0)
            side.spans["request.header.client_id"] = (12, 4 + cend)
            if hv == 2:
                side.spans["request.header._tagged_fields"] = (4 + cend, 4 + d.body_offset)
        _body_spans(side, payload)
    if not content.show_secrets:
        _secret_masks(side, d.api_key, len(data))
    return side


def _response_side(content: ContentDecoder, info, data: bytes, request_body: dict | None,
                   mech: str | None) -> _Side:
    payload = data[4:]
    if info.status == ExchangeStatus.ORPHAN_RESPONSE:
        # as the pipeline decoded it: by the layout guess, or raw
        d = content.guess_response(payload).frame if info.inferred else \
            content.raw_response(payload)
    else:
        d = content.decode_response(payload, info.api_key, info.api_version,
                                    request_body=request_body, mechanism=mech)
    side = _Side(d, "response")
    if d.header_error is None:
        side.spans["response.header.correlation_id"] = (4, 8)
        if response_header_version(content.defs, d.api_key, d.api_version) == 1 and \
                d.body_offset > 4:
            side.spans["response.header._tagged_fields"] = (8, 4 + d.body_offset)
        _body_spans(side, payload)
    if not content.show_secrets:
        _secret_masks(side, d.api_key, len(data))
    return side


def _sasl_token_side(content: ContentDecoder, name: str, data: bytes,
                     mech: str | None) -> _Side:
    side = _Side(content.decode_sasl_token(data[4:], name == "request", mech), name)
    if not content.show_secrets and len(data) > 4:
        side.masked.append((4, len(data)))       # the token as a whole: never shown as bytes
    return side


def _side_07(content: ContentDecoder, name: str, data: bytes, request_type: int,
             request_body: dict | None) -> _Side:
    payload = data[4:]
    if name == "request":
        side = _Side(content.decode_request_07(payload), name)
        side.spans["request.header.request_type"] = (4, 6)
    else:
        side = _Side(content.decode_response_07(payload, request_type, request_body), name)
        side.spans["response.header.error_code"] = (4, 6)
    return side


def decode_exchange(content: ContentDecoder, info, request: bytes | None,
                    response: bytes | None, issues: list[DecodeIssue] | tuple = (), *,
                    request_missing: list[tuple[int, int]] | None = None,
                    response_missing: list[tuple[int, int]] | None = None,
                    request_last_ts_ns: int = 0, response_last_ts_ns: int = 0) -> Detail:
    """Decode an exchange from its frames' bytes (size prefix included).

    Args:
        content: a content decoder (``with_records=True`` to decode every record;
            ``show_secrets`` as the user asked; the pipeline's topic registry to resolve ids).
        info: the exchange's :class:`~kafkasniff.tui.store.RowInfo` (API, version, times,
            summary fields the pipeline computed with the whole capture's context: errors,
            topics with resolved ids, throttle time).
        request / response: the frames' bytes, ``None`` when not captured or not found.
        issues: the exchange's issues (from the summary store).
        request_missing / response_missing: byte ranges of the frames never captured. As the
            pipeline's framer does, a frame is decoded from its bytes before the first range
            (the bytes after a gap are shown in the hex view, not decoded).
        request_last_ts_ns / response_last_ts_ns: capture time of the last packet holding
            bytes of each frame when known (else derived from the latency, or the first
            byte's time).
    """
    api_key, version = info.api_key, info.api_version
    mech = info.extra.get("sasl_mechanism")
    legacy = info.wire_format is WireFormat.KAFKA07
    req_side = resp_side = None
    whole_request, whole_response = request, response
    request = _captured_prefix(request, request_missing)
    response = _captured_prefix(response, response_missing)
    if request is not None and len(request) >= 4:
        if api_key == SASL_TOKEN:
            req_side = _sasl_token_side(content, "request", request, mech)
        elif legacy:
            req_side = _side_07(content, "request", request, api_key, None)
        else:
            req_side = _request_side(content, request, mech)
    if response is not None and len(response) >= 4:
        if api_key == SASL_TOKEN:
            resp_side = _sasl_token_side(content, "response", response, mech)
        elif legacy:
            resp_side = _side_07(content, "response", response, api_key,
                                 req_side.frame.body if req_side else None)
        else:
            resp_side = _response_side(content, info, response,
                                       req_side.frame.layout_body if req_side else None, mech)
    if not content.show_secrets:    # the pipeline's redaction rule, as it applied it
        if req_side is not None and info.req_redacted:
            req_side = _redacted_side(req_side, len(request), info, False)
        if resp_side is not None and info.resp_redacted:
            resp_side = _redacted_side(resp_side, len(response), info, True)
    latency = info.latency_ns
    req_msg = resp_msg = None
    if req_side is not None:
        last = request_last_ts_ns or (info.resp_ts - latency if latency is not None and
                                      info.resp_ts else info.req_ts)
        q = req_side.frame
        req_msg = Message(len(whole_request), info.req_ts, last, info.req_offset, q.header,
                          q.body, q.raw_body, q.complete and not info.req_missing,
                          sum(b - a for a, b in request_missing or ()), q.body_offset,
                          info.req_seq)
    if resp_side is not None:
        r = resp_side.frame
        resp_msg = Message(len(whole_response), info.resp_ts,
                           response_last_ts_ns or info.resp_ts, info.resp_offset, r.header,
                           r.body, r.raw_body, r.complete and not info.resp_missing,
                           sum(b - a for a, b in response_missing or ()), r.body_offset,
                           info.resp_seq)
    located = (req_side.frame.located if req_side else ()) + \
        (resp_side.frame.located if resp_side else ())
    records = summarize(list(located))
    paired_latency = latency if info.status == ExchangeStatus.PAIRED else None
    # the same rule as when the exchange was first paired, on the bodies decoded again
    rule = None
    if req_msg is not None and resp_msg is not None and api_key in WAIT_APIS:
        rule = long_poll_rule(api_key, req_msg.body, resp_msg.body, paired_latency, records)
    ex = Exchange(info.conn_id, info.client, info.broker, info.status, api_key, info.api_name,
                  version, info.correlation_id, info.client_id, req_msg, resp_msg,
                  paired_latency, info.errors,
                  info.throttle_time_ms, info.topics, info.inferred,
                  info.extra.get("assumed_version"), tuple(issues), records,
                  located, wire_format=info.wire_format, long_poll=rule is not None,
                  long_poll_rule=rule)
    frames = {}
    for name, side, data, missing in (("request", req_side, whole_request, request_missing),
                                      ("response", resp_side, whole_response,
                                       response_missing)):
        if side is None:
            continue
        buf = bytearray(data)
        masked = _merge(side.masked)
        _mask(buf, masked)
        frames[name] = FrameView(name, bytes(buf), side.spans, masked, list(missing or ()))
    return Detail(ex, frames)


def _captured_prefix(data: bytes | None, missing) -> bytes | None:
    """A frame's bytes up to its first range never captured (what the framer decodes)."""
    if data is None or not missing:
        return data
    return data[:min(a for a, _ in missing)]


def kept_detail(ex: Exchange, note: str) -> Detail:
    """A :class:`Detail` for an exchange kept whole by the data source (no frame bytes)."""
    return Detail(ex, {}, note)
