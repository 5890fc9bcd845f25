"""Full decode of one exchange on demand, from the bytes of its frames.

A data source finds the request and response frames again (files:
:mod:`kafkasniff.capture.frames`; a live source: its own packet buffer) and calls
:func:`decode_exchange`, which decodes them with the project's decoders exactly as the
pipeline did (header tables, compiled body decoders with the lenient fallback, then
:meth:`~kafkasniff.pairing.connection.PairingContext.postprocess`: secrets redacted unless
``show_secrets``, consumer protocol, record batches *and every record*), and returns a
:class:`Detail`: the rebuilt :class:`~kafkasniff.pairing.exchange.Exchange` and, per frame,
the byte span of every field (``decode_lenient(..., spans=)``) for the hex view.

Secrets never reach the UI as bytes either: the bytes of every redacted field (or of its
nearest enclosing field with a known span; the whole body when none) are zeroed in
:attr:`FrameView.data` and listed in :attr:`FrameView.masked`; raw SASL token frames are
masked whole, and so is the undecoded rest of a secret-bearing body.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kafkasniff.errors import DecodeError
from kafkasniff.issues import DecodeIssue
from kafkasniff.pairing.connection import PairingContext
from kafkasniff.pairing.exchange import PAIRED, Exchange, Message
from kafkasniff.pairing.record_data import summarize
from kafkasniff.pairing.sasl import REDACTED_APIS, Redacted, is_secret_api, parse_token
from kafkasniff.protocol.headers import (decode_request_header, decode_response_header,
                                         peek_request_ids, response_header_version)
from kafkasniff.protocol.lenient import decode_lenient

SASL_TOKEN = -2


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
    """What decoding one frame gave."""

    def __init__(self) -> None:
        self.header: dict = {}
        self.body: dict | None = None
        self.raw_body: bytes | None = None
        self.complete = False
        self.body_offset = 0
        self.located: tuple = ()
        self.spans: dict[str, tuple[int, int]] = {}
        self.masked: list[tuple[int, int]] = []
        self.stopped: int | None = None   # where the span walker stopped (payload offset)


def _body_spans(side: _Side, prefix: str, plan, payload: bytes, body_offset: int) -> int:
    """Fill field spans from the lenient walker; returns where it stopped (payload offset)."""
    sp: dict = {}
    res = decode_lenient(plan, payload, body_offset, spans=sp)
    for k, (a, b) in sp.items():
        side.spans[f"{prefix}.body.{k}"] = (a + 4, b + 4)
    return res.end


def _record_spans(side: _Side, prefix: str) -> None:
    for loc in side.located:
        raw = loc.records
        if raw.decoded is None or raw.offset < 0:
            continue
        for i, b in enumerate(raw.decoded.batches):
            start = 4 + raw.offset + b.wire_offset
            side.spans[f"{prefix}.body.{loc.field_path}.batches[{i}]"] = \
                (start, start + b.batch_bytes)


def _secret_masks(side: _Side, prefix: str, api_key: int, size: int,
                  stopped: int | None) -> None:
    """Mask every redacted field (or its nearest enclosing span, else the whole body)."""
    body_start = 4 + side.body_offset
    for p in redacted_paths(side.body):
        q = p
        while q and f"{prefix}.body.{q}" not in side.spans:
            q = parent_path(q)
        side.masked.append(side.spans[f"{prefix}.body.{q}"] if q else (body_start, size))
    if (api_key in REDACTED_APIS or is_secret_api(api_key)) and \
            (not side.complete or stopped is None or stopped + 4 < size):
        # undecoded rest of a secret-bearing body
        start = body_start if stopped is None else max(body_start, stopped + 4)
        side.masked.append((start, size))


def _decode_body(ctx: PairingContext, s: _Side, side: str, api_key: int, version: int,
                 payload: bytes, request_body: dict | None, mech: str | None) -> None:
    """Decode the body at ``s.body_offset`` of ``payload`` (frame without its size prefix)
    as the pipeline does, then its field and record batch spans (``s.stopped``: where the
    span walker stopped; ``None`` when the body could not be decoded and is kept raw)."""
    is_response = side == "response"
    result = ctx.decoder.decode(api_key, version, is_response, payload, s.body_offset)
    s.complete = result.complete
    if result.value is None:
        s.raw_body = bytes(payload[s.body_offset:])
        return
    _, _, s.located = ctx.postprocess(api_key, result.layout_version, is_response,
                                      result.value, request_body, mechanism=mech)
    s.body = result.value
    info = ctx.defs.apis.get(api_key)
    plan = ctx.defs.plan(info.response if is_response else info.request, result.layout_version)
    s.stopped = _body_spans(s, side, plan, payload, s.body_offset)
    _record_spans(s, side)


def _hide_secrets(ctx: PairingContext, s: _Side, side: str, api_key: int, size: int) -> None:
    """Unless ``show_secrets``: an undecoded secret-bearing body (headers that cannot be
    decoded included) becomes a redacted value, and the bytes of every secret are masked."""
    if ctx.show_secrets:
        return
    if s.raw_body is not None and is_secret_api(api_key):
        s.body = {"_raw_body": Redacted("undecoded body of a secret-bearing API",
                                        len(s.raw_body))}
        s.raw_body = None
    _secret_masks(s, side, api_key, size, s.stopped)


def _decode_request(ctx: PairingContext, api_key: int, data: bytes, mech: str | None) -> _Side:
    defs = ctx.defs
    s = _Side()
    payload = data[4:]
    s.spans["request.size"] = (0, 4)
    try:
        hdr = decode_request_header(defs, payload)
    except DecodeError:
        if len(payload) >= 8:
            k, v, corr = peek_request_ids(payload)
            s.header = {"api_key": k, "api_version": v, "correlation_id": corr, "client_id": None}
        s.raw_body = bytes(payload[8:]) if len(payload) > 8 else b""
        s.body_offset = min(8, len(payload))
        return s
    s.header = {"api_key": hdr.api_key, "api_version": hdr.api_version,
                "correlation_id": hdr.correlation_id, "client_id": hdr.client_id}
    if hdr.tagged_fields:
        s.header["_unknown_tagged_fields"] = hdr.tagged_fields
    s.spans.update({"request.header.api_key": (4, 6), "request.header.api_version": (6, 8),
                    "request.header.correlation_id": (8, 12)})
    if hdr.header_version >= 1:
        n = int.from_bytes(payload[8:10], "big", signed=True)
        cend = 10 + max(n, 0)
        s.spans["request.header.client_id"] = (12, 4 + cend)
        if hdr.header_version == 2:
            s.spans["request.header._tagged_fields"] = (4 + cend, 4 + hdr.size)
    s.body_offset = hdr.size
    _decode_body(ctx, s, "request", hdr.api_key, hdr.api_version, payload, None, mech)
    return s


def _decode_response(ctx: PairingContext, api_key: int, version: int, data: bytes,
                     request_body: dict | None, mech: str | None) -> _Side:
    defs = ctx.defs
    s = _Side()
    payload = data[4:]
    s.spans["response.size"] = (0, 4)
    info = defs.apis.get(api_key)
    hv = response_header_version(defs, api_key, version) if info is not None else 0
    try:
        corr, body_offset, tagged = decode_response_header(payload, hv)
    except DecodeError:
        s.raw_body = bytes(payload)
        return s
    s.header = {"correlation_id": corr}
    if tagged:
        s.header["_unknown_tagged_fields"] = tagged
    s.spans["response.header.correlation_id"] = (4, 8)
    if hv == 1:
        s.spans["response.header._tagged_fields"] = (8, 4 + body_offset)
    s.body_offset = body_offset
    if info is None:
        s.raw_body = bytes(payload[body_offset:])
        return s
    _decode_body(ctx, s, "response", api_key, version, payload, request_body, mech)
    return s


def _decode_sasl_token(ctx: PairingContext, side: str, data: bytes, mech: str | None) -> _Side:
    s = _Side()
    s.spans[f"{side}.size"] = (0, 4)
    s.body = parse_token(mech, data[4:], side == "request", ctx.show_secrets)
    s.complete = True
    if not ctx.show_secrets and len(data) > 4:
        s.masked.append((4, len(data)))       # the token as a whole: never shown as bytes
    return s


def _decode_07(ctx: PairingContext, side: str, data: bytes, request_type: int,
               request_body: dict | None) -> _Side:
    from kafkasniff.protocol.legacy07 import decode_request_07, decode_response_07

    s = _Side()
    payload = data[4:]
    s.spans[f"{side}.size"] = (0, 4)
    s.body_offset = 2
    if side == "request":
        rtype, body, issues = decode_request_07(payload,
                                                max_uncompressed_bytes=ctx.max_uncompressed_bytes)
        s.header = {"request_type": rtype}
        s.spans["request.header.request_type"] = (4, 6)
    else:
        body, issues = decode_response_07(request_type, payload, request_body,
                                          max_uncompressed_bytes=ctx.max_uncompressed_bytes)
        s.header = {"error_code": body.get("error_code")}
        s.spans["response.header.error_code"] = (4, 6)
    s.body = body
    s.complete = not any(i.kind == "body_decode_error" for i in issues)
    return s


def decode_exchange(ctx: PairingContext, info, request: bytes | None, response: bytes | None,
                    issues: list[DecodeIssue] | tuple = (), *,
                    request_missing: list[tuple[int, int]] | None = None,
                    response_missing: list[tuple[int, int]] | None = None,
                    response_last_ts_ns: int = 0) -> Detail:
    """Decode an exchange from its frames' bytes (size prefix included).

    Args:
        ctx: a pairing context (``with_records=True`` to decode every record;
            ``show_secrets`` as the user asked).
        info: the exchange's :class:`~kafkasniff.tui.store.RowInfo` (API, version, times,
            summary fields the pipeline computed with the whole capture's context: errors,
            topics with resolved ids, throttle time).
        request / response: the frames' bytes, ``None`` when not captured or not found.
        issues: the exchange's issues (from the summary store).
        request_missing / response_missing: byte ranges of the frames never captured.
        response_last_ts_ns: capture time of the response's last byte when known (else the
            first byte's time is used).
    """
    api_key, version = info.api_key, info.api_version
    mech = info.extra.get("sasl_mechanism")
    legacy = info.api_name.endswith("(0.7)")
    req_side = resp_side = None
    if request is not None and len(request) >= 4:
        if api_key == SASL_TOKEN:
            req_side = _decode_sasl_token(ctx, "request", request, mech)
        elif legacy:
            req_side = _decode_07(ctx, "request", request, api_key, None)
        else:
            req_side = _decode_request(ctx, api_key, request, mech)
            _hide_secrets(ctx, req_side, "request", api_key, len(request))
    if response is not None and len(response) >= 4:
        if api_key == SASL_TOKEN:
            resp_side = _decode_sasl_token(ctx, "response", response, mech)
        elif legacy:
            resp_side = _decode_07(ctx, "response", response, api_key,
                                   req_side.body if req_side else None)
        else:
            resp_side = _decode_response(ctx, api_key, version, response,
                                         req_side.body if req_side else None, mech)
            _hide_secrets(ctx, resp_side, "response", api_key, len(response))
    latency = info.latency_ns
    req_msg = resp_msg = None
    if req_side is not None:
        last = info.resp_ts - latency if latency is not None and info.resp_ts else info.req_ts
        req_msg = Message(len(request), info.req_ts, last, info.req_offset, req_side.header,
                          req_side.body,
                          req_side.raw_body, req_side.complete and not info.req_missing,
                          sum(b - a for a, b in request_missing or ()), req_side.body_offset,
                          info.req_seq)
    if resp_side is not None:
        resp_msg = Message(len(response), info.resp_ts, response_last_ts_ns or info.resp_ts,
                           info.resp_offset,
                           resp_side.header,
                           resp_side.body, resp_side.raw_body,
                           resp_side.complete and not info.resp_missing,
                           sum(b - a for a, b in response_missing or ()),
                           resp_side.body_offset, info.resp_seq)
    located = (req_side.located if req_side else ()) + (resp_side.located if resp_side else ())
    ex = Exchange(info.conn_id, info.client, info.broker, info.status, api_key, info.api_name,
                  version, info.correlation_id, info.client_id, req_msg, resp_msg,
                  latency if info.status == PAIRED else None, info.errors,
                  info.throttle_time_ms, info.topics, info.inferred,
                  info.extra.get("assumed_version"), tuple(issues), summarize(list(located)),
                  located)
    frames = {}
    for name, side, data, missing in (("request", req_side, request, request_missing),
                                      ("response", resp_side, response, response_missing)):
        if side is None:
            continue
        buf = bytearray(data)
        masked = _merge(side.masked)
        _mask(buf, masked)
        frames[name] = FrameView(name, bytes(buf), side.spans, masked, list(missing or ()))
    return Detail(ex, frames)


def kept_detail(ex: Exchange, note: str) -> Detail:
    """A :class:`Detail` for an exchange kept whole by the data source (no frame bytes)."""
    return Detail(ex, {}, note)
