"""Kafka 0.7 (pre-0.8) wire protocol: request/response bodies, message sets, detection.

Sans-IO. Kafka 0.7 has no api version, no correlation id and no client id; a broker answers
requests in the order they arrive, and sends nothing back for PRODUCE and MULTIPRODUCE.

Layouts (Kafka 0.7 ``kafka.api.*Request``, ``kafka.message.Message``, the "Writing a Driver
for Kafka" wiki page; all integers big-endian and signed, strings ``int16 length`` + bytes)::

    request   = int32 size, int16 request_type, body
      PRODUCE(0)      topic, int32 partition (-1: broker picks), int32 messages_size, message set
      FETCH(1)        topic, int32 partition, int64 offset (a byte offset), int32 max_size
      MULTIFETCH(2)   int16 count, count x FETCH body
      MULTIPRODUCE(3) int16 count, count x PRODUCE body
      OFFSETS(4)      topic, int32 partition, int64 time (-1 latest, -2 earliest),
                      int32 max_number
    response  = int32 size, int16 error_code, payload
      FETCH           message set (the last message may be cut by max_size: normal)
      MULTIFETCH      (error_code is 0) for each fetch of the request, in order:
                      int32 size, int16 error_code, message set (size - 2 bytes)
      OFFSETS         int32 count, count x int64 offset
    message set = repeated (int32 size, message of ``size`` bytes)
    message     = int8 magic, [magic 1: int8 attributes (bits 0-1: 0 none, 1 gzip,
                  2 snappy)], uint32 crc (CRC32 of the payload), payload
                  (a compressed message's payload decompresses to a message set)

Decoded shapes (dicts, keys in snake_case):

- requests: PRODUCE ``{topic, partition, messages_size, messages}``; FETCH ``{topic,
  partition, offset, max_size}``; MULTIFETCH ``{fetches: [FETCH ...]}``; MULTIPRODUCE
  ``{produces: [PRODUCE ...]}``; OFFSETS ``{topic, partition, time, max_number}``.
- responses: always ``error_code``; FETCH adds ``messages`` (and ``partial_tail_bytes`` when
  the last message was cut); MULTIFETCH ``fetches: [{topic, partition, error_code, messages,
  ...}]``; OFFSETS ``offsets``.
- messages: ``{offset, size, magic, attributes, compression, crc, crc_ok, payload}`` plus
  ``messages`` (the nested set, ``None`` when it could not be decompressed) for compressed
  ones. ``offset`` is the byte offset of the message's size prefix in its message set (in
  0.7 a message's Kafka offset is the fetch offset plus this); nested messages count from the
  start of the decompressed set.

Decoding never raises on bad bytes: what can be read is returned, and each problem is a
:class:`~kafkasniff.protocol.lenient.BodyIssue` whose ``offset`` is relative to the buffer
given (problems inside a decompressed set are placed at their wrapper message).
"""

from __future__ import annotations

import struct
import zlib

from kafkasniff.issues import IssueKind
from kafkasniff.protocol.compression import (DEFAULT_MAX_BYTES, DecompressionError,
                                             DecompressionLimit, decompress)
from kafkasniff.protocol.detect import HUNT_MAX_REQUEST_BYTES
from kafkasniff.protocol.framing import ACCEPT, NEED_MORE, REJECT, Validator
from kafkasniff.protocol.lenient import BodyIssue
from kafkasniff.protocol.lenient import _Stop  # where a decode stopped: path, offset, why

PRODUCE, FETCH, MULTIFETCH, MULTIPRODUCE, OFFSETS = 0, 1, 2, 3, 4
REQUEST_TYPES = {PRODUCE: "PRODUCE", FETCH: "FETCH", MULTIFETCH: "MULTIFETCH",
                 MULTIPRODUCE: "MULTIPRODUCE", OFFSETS: "OFFSETS"}
NO_RESPONSE_TYPES = frozenset({PRODUCE, MULTIPRODUCE})
"""Request types a 0.7 broker never answers."""

ERRORS_07 = {-1: "Unknown", 0: "NoError", 1: "OffsetOutOfRange", 2: "InvalidMessage",
             3: "WrongPartition", 4: "InvalidFetchSize"}
"""Kafka 0.7 error codes (``kafka.common.ErrorMapping``) -> names."""

MAX_TOPIC_BYTES = 255          # detection only: longer topics are not believed
MAX_NESTING = 8                # compressed wrappers inside compressed wrappers
MAGIC0_HEADER = 5              # magic + crc
MAGIC1_HEADER = 6              # magic + attributes + crc

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_i16 = _I16.unpack_from
_i32 = _I32.unpack_from
_i64 = _I64.unpack_from


def request_type_name(request_type: int) -> str:
    """``"FETCH"`` ... or ``"UNKNOWN(7)"``."""
    return REQUEST_TYPES.get(request_type, f"UNKNOWN({request_type})")


def error_name(code: int) -> str:
    """The 0.7 name of an error code, ``"UnknownErrorCode(9)"`` when not a 0.7 code."""
    return ERRORS_07.get(code, f"UnknownErrorCode({code})")


# =========================================================================== reading helpers

class _Reader:
    __slots__ = ("buf", "pos", "end", "issues")

    def __init__(self, buf: bytes, pos: int, end: int) -> None:
        self.buf = buf
        self.pos = pos
        self.end = end
        self.issues: list[BodyIssue] = []

    def need(self, n: int, path: str, what: str) -> None:
        if self.pos + n > self.end:
            left = max(self.end - self.pos, 0)
            raise _Stop(path, self.pos, f"{what}: need {n} bytes, {left} left")

    def i16(self, path: str) -> int:
        self.need(2, path, "int16")
        v = _i16(self.buf, self.pos)[0]
        self.pos += 2
        return v

    def i32(self, path: str) -> int:
        self.need(4, path, "int32")
        v = _i32(self.buf, self.pos)[0]
        self.pos += 4
        return v

    def i64(self, path: str) -> int:
        self.need(8, path, "int64")
        v = _i64(self.buf, self.pos)[0]
        self.pos += 8
        return v

    def string(self, path: str) -> str | None:
        start = self.pos
        n = self.i16(path)
        if n < 0:
            self.issues.append(BodyIssue(IssueKind.SPEC_DEPARTURE, f"null topic (length {n})",
                                         path, start))
            return None
        self.need(n, path, "string")
        raw = self.buf[self.pos:self.pos + n]
        self.pos += n
        try:
            return raw.decode()
        except UnicodeDecodeError as exc:
            self.issues.append(BodyIssue(IssueKind.SPEC_DEPARTURE,
                                         f"invalid UTF-8 in string: {exc.reason}", path, start + 2))
            return raw.decode("utf-8", "backslashreplace")


# =========================================================================== message sets

class _Budget:
    __slots__ = ("left",)

    def __init__(self, left: int) -> None:
        self.left = left


def _decode_set(buf: bytes, start: int, end: int, path: str, issues: list[BodyIssue],
                budget: _Budget, depth: int, partial_tail_ok: bool,
                at: int | None) -> tuple[list[dict], int]:
    """Decode the message set ``buf[start:end]``; returns (messages, bytes of a cut tail).

    ``at``: when not None (nested sets), the offset every issue is reported at.
    """
    out: list[dict] = []
    pos = start
    while pos < end:
        left = end - pos
        mpath = f"{path}[{len(out)}]"
        where = pos if at is None else at
        if left < 4:
            if partial_tail_ok:
                return out, left
            issues.append(BodyIssue(IssueKind.BODY_DECODE_ERROR,
                                    f"message set ends inside a message size ({left} of 4 "
                                    f"bytes)", mpath, where))
            return out, 0
        size = _i32(buf, pos)[0]
        if size < MAGIC0_HEADER:
            issues.append(BodyIssue(IssueKind.BODY_DECODE_ERROR,
                                    f"message size {size} is below the {MAGIC0_HEADER}-byte "
                                    f"minimum: the rest of the set ({left} bytes) is not "
                                    f"decoded", mpath, where))
            return out, 0
        if size > left - 4:
            if partial_tail_ok:
                return out, left
            issues.append(BodyIssue(IssueKind.BODY_DECODE_ERROR,
                                    f"message of {size} bytes runs past the end of its set "
                                    f"({left - 4} bytes left)", mpath, where))
            return out, 0
        body = pos + 4
        mend = body + size
        magic = buf[body]
        msg: dict = {"offset": pos - start, "size": size, "magic": magic}
        out.append(msg)
        if magic == 0:
            attributes, crc_at = None, body + 1
        elif magic == 1:
            if size < MAGIC1_HEADER:
                issues.append(BodyIssue(IssueKind.BODY_DECODE_ERROR,
                                        f"magic 1 message of {size} bytes is below the "
                                        f"{MAGIC1_HEADER}-byte minimum", mpath, where))
                msg.update(attributes=None, compression=None, crc=None, crc_ok=None,
                           payload=bytes(buf[body + 1:mend]))
                pos = mend
                continue
            attributes, crc_at = buf[body + 1], body + 2
        else:
            issues.append(BodyIssue(IssueKind.SPEC_DEPARTURE,
                                    f"unknown message magic {magic} (0.7 knows 0 and 1): "
                                    f"message kept raw", f"{mpath}.magic", where if at is not None
                                    else body))
            msg.update(attributes=None, compression=None, crc=None, crc_ok=None,
                       payload=bytes(buf[body + 1:mend]))
            pos = mend
            continue
        crc = _U32.unpack_from(buf, crc_at)[0]
        payload = bytes(buf[crc_at + 4:mend])
        actual = zlib.crc32(payload)
        codec = attributes & 0x03 if attributes is not None else 0
        msg.update(attributes=attributes, compression=codec, crc=crc, crc_ok=actual == crc,
                   payload=payload)
        if actual != crc:
            issues.append(BodyIssue(IssueKind.CRC_MISMATCH, f"message CRC32 is 0x{crc:08x}, "
                                    f"the payload's is 0x{actual:08x}", f"{mpath}.crc",
                                    where if at is not None else crc_at))
        if codec:
            msg["messages"] = _nested(payload, codec, mpath, where, issues, budget, depth)
        pos = mend
    return out, 0


def _nested(payload: bytes, codec: int, mpath: str, where: int, issues: list[BodyIssue],
            budget: _Budget, depth: int) -> list[dict] | None:
    if codec == 3:
        issues.append(BodyIssue(IssueKind.DECOMPRESSION_ERROR, "compression codec 3 is not "
                                "defined in Kafka 0.7 (attributes bits 0-1)",
                                f"{mpath}.attributes", where))
        return None
    if depth >= MAX_NESTING:
        issues.append(BodyIssue(IssueKind.DECOMPRESSION_ERROR, f"compressed messages nested "
                                f"more than {MAX_NESTING} deep: not decompressed", mpath, where))
        return None
    try:
        data = decompress(codec, payload, max(budget.left, 0))
    except DecompressionLimit as exc:
        issues.append(BodyIssue(IssueKind.DECOMPRESSION_ERROR, f"{exc} (the decompression "
                                f"budget for this frame is spent)", f"{mpath}.payload", where))
        return None
    except DecompressionError as exc:
        issues.append(BodyIssue(IssueKind.DECOMPRESSION_ERROR, str(exc), f"{mpath}.payload", where))
        return None
    budget.left -= len(data)
    inner, _ = _decode_set(data, 0, len(data), f"{mpath}.messages", issues, budget, depth + 1,
                           False, where)
    return inner


def decode_messages_07(data: bytes, *, max_uncompressed_bytes: int = DEFAULT_MAX_BYTES,
                       partial_tail_ok: bool = False) -> tuple[list[dict], list[BodyIssue]]:
    """Decode a 0.7 message set (``int32 size`` + message, repeated).

    Args:
        data: the message set bytes.
        max_uncompressed_bytes: total bytes all compressed messages may decompress to (a
            bomb is reported as ``decompression_error``, never allocated).
        partial_tail_ok: a message cut at the end of ``data`` is normal (Fetch responses:
            ``max_size`` cuts the last message) and is dropped silently; otherwise it is a
            ``body_decode_error``.

    Returns:
        ``(messages, issues)``; see the module docstring for the message shape. Issue kinds:
        ``body_decode_error`` (a size that does not fit: decoding stops), ``spec_departure``
        (unknown magic), ``crc_mismatch``, ``decompression_error``.
    """
    issues: list[BodyIssue] = []
    msgs, _ = _decode_set(data, 0, len(data), "messages", issues,
                          _Budget(max_uncompressed_bytes), 0, partial_tail_ok, None)
    return msgs, issues


# =========================================================================== requests

def _item_into(d: dict, r: _Reader, rtype: int, path: str, budget: _Budget) -> None:
    """Decode one PRODUCE or FETCH body (top level or a MULTI* item) into ``d``; ``d`` keeps
    the fields decoded before a truncation."""
    p = f"{path}." if path else ""
    d["topic"] = r.string(f"{p}topic")
    d["partition"] = r.i32(f"{p}partition")
    if rtype in (FETCH, MULTIFETCH):
        d["offset"] = r.i64(f"{p}offset")
        d["max_size"] = r.i32(f"{p}max_size")
        return
    start = r.pos
    n = r.i32(f"{p}messages_size")
    d["messages_size"] = n
    if n < 0:
        raise _Stop(f"{p}messages_size", start, f"negative message set size {n}")
    avail = min(n, r.end - r.pos)
    d["messages"], _ = _decode_set(r.buf, r.pos, r.pos + avail, f"{p}messages", r.issues,
                                   budget, 0, False, None)
    if avail < n:
        raise _Stop(f"{p}messages", r.pos, f"message set of {n} bytes: only {avail} left")
    r.pos += n


def decode_request_07(payload: bytes, *,
                      max_uncompressed_bytes: int = DEFAULT_MAX_BYTES
                      ) -> tuple[int, dict, list[BodyIssue]]:
    """Decode a 0.7 request frame payload (the bytes after the size prefix).

    Returns ``(request_type, body, issues)``; ``request_type`` is -1 when the payload is too
    short to hold one. On a truncation the body holds what was decoded before it and a
    ``body_decode_error`` says where; bytes after the body are a ``trailing_bytes`` issue.
    ``max_uncompressed_bytes`` bounds the decompressed size of the whole request.
    """
    if len(payload) < 2:
        return -1, {}, [BodyIssue(IssueKind.BODY_DECODE_ERROR,
                                  f"request of {len(payload)} bytes has no room for a "
                                  f"request_type", "request_type", 0)]
    rtype = _i16(payload, 0)[0]
    body: dict = {}
    if rtype not in REQUEST_TYPES:
        return rtype, body, [BodyIssue(IssueKind.BODY_DECODE_ERROR,
                                       f"unknown 0.7 request type {rtype} (0-4 exist)",
                                       "request_type", 0)]
    r = _Reader(payload, 2, len(payload))
    budget = _Budget(max_uncompressed_bytes)
    try:
        if rtype == OFFSETS:
            body["topic"] = r.string("topic")
            body["partition"] = r.i32("partition")
            body["time"] = r.i64("time")
            body["max_number"] = r.i32("max_number")
        elif rtype in (PRODUCE, FETCH):
            _item_into(body, r, rtype, "", budget)
        else:
            key = "fetches" if rtype == MULTIFETCH else "produces"
            start = r.pos
            count = r.i16("count")
            if count < 0:
                raise _Stop("count", start, f"negative count {count}")
            items: list = []
            body[key] = items
            for i in range(count):
                sub: dict = {}
                items.append(sub)
                _item_into(sub, r, rtype, f"{key}[{i}]", budget)
    except _Stop as stop:
        r.issues.append(BodyIssue(IssueKind.BODY_DECODE_ERROR, stop.message, stop.path,
                                  stop.offset))
        return rtype, body, r.issues
    if r.pos < len(payload):
        r.issues.append(BodyIssue(IssueKind.TRAILING_BYTES,
                                  f"{len(payload) - r.pos} bytes after the "
                                  f"{REQUEST_TYPES[rtype]} body", "", r.pos))
    return rtype, body, r.issues


def request_topics(request_type: int, body: dict | None) -> tuple[str, ...]:
    """Distinct topic names of a decoded 0.7 request, in order of appearance."""
    if not body:
        return ()
    items = body.get("fetches") if request_type == MULTIFETCH else \
        body.get("produces") if request_type == MULTIPRODUCE else [body]
    seen: dict[str, None] = {}
    for it in items or ():
        t = it.get("topic")
        if isinstance(t, str):
            seen.setdefault(t, None)
    return tuple(seen)


# =========================================================================== responses

def decode_response_07(request_type: int, payload: bytes, request_body: dict | None, *,
                       max_uncompressed_bytes: int = DEFAULT_MAX_BYTES
                       ) -> tuple[dict, list[BodyIssue]]:
    """Decode a 0.7 response frame payload (after the size prefix) answering a request.

    Args:
        request_type: of the request answered.
        payload: ``int16 error_code`` and the rest.
        request_body: the request's decoded body (MULTIFETCH needs its ``fetches``: how many
            message sets follow, and their topic/partition). When it is missing, MULTIFETCH
            sets are read until the payload ends.

    Returns ``(body, issues)``; the body always has ``error_code`` when the payload has 2
    bytes. A PRODUCE/MULTIPRODUCE "response" is a ``spec_departure`` (0.7 sends none).
    """
    issues: list[BodyIssue] = []
    if len(payload) < 2:
        return {}, [BodyIssue(IssueKind.BODY_DECODE_ERROR, f"response of {len(payload)} bytes "
                              f"has no room for an error_code", "error_code", 0)]
    body: dict = {"error_code": _i16(payload, 0)[0]}
    n = len(payload)
    budget = _Budget(max_uncompressed_bytes)
    if request_type == FETCH:
        msgs, tail = _decode_set(payload, 2, n, "messages", issues, budget, 0, True, None)
        body["messages"] = msgs
        if tail:
            body["partial_tail_bytes"] = tail
        return body, issues
    if request_type == OFFSETS:
        if n == 2 and body["error_code"] != 0:
            return body, issues   # an error answer may carry no offset array
        r = _Reader(payload, 2, n)
        try:
            start = r.pos
            count = r.i32("offsets")
            if count < 0:
                raise _Stop("offsets", start, f"negative offset count {count}")
            if count > (n - r.pos) // 8:
                raise _Stop("offsets", start, f"{count} offsets need {count * 8} bytes, "
                                              f"{n - r.pos} left")
            body["offsets"] = [_i64(payload, r.pos + 8 * i)[0] for i in range(count)]
            r.pos += 8 * count
        except _Stop as stop:
            issues.append(BodyIssue(IssueKind.BODY_DECODE_ERROR, stop.message, stop.path,
                                    stop.offset))
            return body, issues
        if r.pos < n:
            issues.append(BodyIssue(IssueKind.TRAILING_BYTES, f"{n - r.pos} bytes after the "
                                    f"offsets", "", r.pos))
        return body, issues
    if request_type == MULTIFETCH:
        fetches = request_body.get("fetches") if isinstance(request_body, dict) else None
        expected = len(fetches) if isinstance(fetches, list) else None
        if body["error_code"] != 0:
            issues.append(BodyIssue(IssueKind.SPEC_DEPARTURE, f"MULTIFETCH response error_code "
                                    f"{body['error_code']} (0.7 brokers always send 0 here)",
                                    "error_code", 0))
        out: list[dict] = []
        body["fetches"] = out
        pos = 2
        i = 0
        while (expected is None and pos < n) or (expected is not None and i < expected):
            path = f"fetches[{i}]"
            if n - pos < 6:
                issues.append(BodyIssue(IssueKind.BODY_DECODE_ERROR,
                                        f"message set header needs 6 bytes, {n - pos} left"
                                        + (f" ({expected - i} of {expected} sets missing)"
                                           if expected is not None else ""), path, pos))
                return body, issues
            size = _i32(payload, pos)[0]
            item: dict = {}
            if fetches is not None and isinstance(fetches[i], dict):
                item["topic"] = fetches[i].get("topic")
                item["partition"] = fetches[i].get("partition")
            item["error_code"] = _i16(payload, pos + 4)[0]
            out.append(item)
            if size < 2:
                issues.append(BodyIssue(IssueKind.BODY_DECODE_ERROR, f"message set size {size} "
                                        f"is below 2 (the error_code)", f"{path}.size", pos))
                return body, issues
            mend = pos + 4 + size
            cut = mend > n
            msgs, tail = _decode_set(payload, pos + 6, min(mend, n), f"{path}.messages", issues,
                                     budget, 0, True, None)
            item["messages"] = msgs
            if tail:
                item["partial_tail_bytes"] = tail
            if cut:
                issues.append(BodyIssue(IssueKind.BODY_DECODE_ERROR, f"message set of {size - 2} "
                                        f"bytes runs past the end of the response ({n - pos - 6} "
                                        f"left)", f"{path}.messages", pos + 6))
                return body, issues
            pos = mend
            i += 1
        if pos < n:
            issues.append(BodyIssue(IssueKind.TRAILING_BYTES, f"{n - pos} bytes after the "
                                    f"{i} message sets of the MULTIFETCH response", "", pos))
        return body, issues
    if request_type in NO_RESPONSE_TYPES:
        issues.append(BodyIssue(IssueKind.SPEC_DEPARTURE, f"{request_type_name(request_type)} "
                                f"got a response; Kafka 0.7 sends none", "", 0))
    else:
        issues.append(BodyIssue(IssueKind.BODY_DECODE_ERROR, f"no response layout for request "
                                f"type {request_type}", "", 2))
    if n > 2:
        body["raw"] = bytes(payload[2:])
    return body, issues


def response_errors(body: dict | None) -> tuple[str, ...]:
    """Distinct names of the non-zero error codes of a decoded response, in order."""
    if not body:
        return ()
    seen: dict[str, None] = {}
    codes = [body.get("error_code")] + [f.get("error_code") for f in body.get("fetches") or ()]
    for c in codes:
        if isinstance(c, int) and c != 0:
            seen.setdefault(error_name(c), None)
    return tuple(seen)


# =========================================================================== detection

def _printable_topic(buf: bytes, pos: int, n: int) -> bool:
    for b in buf[pos:pos + n]:
        if b <= 0x20 or b >= 0x7F:
            return False
    return True


def _check_topic(buf: bytes, p: int, end: int) -> int:
    """Offset after a plausible topic at ``p``; -1 reject, -2 need more."""
    if len(buf) < p + 2:
        return -2
    n = _i16(buf, p)[0]
    if n < 1 or n > MAX_TOPIC_BYTES or p + 2 + n > end:
        return -1
    if len(buf) < p + 2 + n:
        return -2
    return p + 2 + n if _printable_topic(buf, p + 2, n) else -1


def _check_fetch(buf: bytes, p: int, end: int) -> int:
    q = _check_topic(buf, p, end)
    if q < 0:
        return q
    if q + 16 > end:
        return -1
    if len(buf) < q + 16:
        return -2
    partition = _i32(buf, q)[0]
    offset = _i64(buf, q + 4)[0]
    max_size = _i32(buf, q + 12)[0]
    if partition < 0 or offset < 0 or max_size < 0:
        return -1
    return q + 16


def _check_offsets(buf: bytes, p: int, end: int) -> int:
    q = _check_topic(buf, p, end)
    if q < 0:
        return q
    if q + 16 > end:
        return -1
    if len(buf) < q + 16:
        return -2
    partition = _i32(buf, q)[0]
    time = _i64(buf, q + 4)[0]
    max_number = _i32(buf, q + 12)[0]
    if partition < 0 or time < -2 or max_number < 0:
        return -1
    return q + 16


def _check_produce(buf: bytes, p: int, end: int) -> int:
    q = _check_topic(buf, p, end)
    if q < 0:
        return q
    if q + 8 > end:
        return -1
    if len(buf) < q + 8:
        return -2
    partition = _i32(buf, q)[0]
    msize = _i32(buf, q + 4)[0]
    m = q + 8
    if partition < -1 or msize < 0 or m + msize > end:
        return -1
    if msize:
        # the first message: a plausible size and magic 0 or 1
        if msize < 4 + MAGIC0_HEADER:
            return -1
        if len(buf) < m + 5:
            return -2
        size = _i32(buf, m)[0]
        if size < MAGIC0_HEADER or 4 + size > msize or buf[m + 4] > 1:
            return -1
    return m + msize


_CHECKS = {PRODUCE: _check_produce, FETCH: _check_fetch, OFFSETS: _check_offsets,
           MULTIFETCH: _check_fetch, MULTIPRODUCE: _check_produce}


def _validate_request(buf: bytes, pos: int) -> int:
    if len(buf) - pos < 6:
        return NEED_MORE
    size = _i32(buf, pos)[0]
    rtype = _i16(buf, pos + 4)[0]
    if rtype not in REQUEST_TYPES or size < 2 or size > HUNT_MAX_REQUEST_BYTES:
        return REJECT
    end = pos + 4 + size
    check = _CHECKS[rtype]
    if rtype in (PRODUCE, FETCH, OFFSETS):
        q = check(buf, pos + 6, end)
        if q == -2:
            return NEED_MORE
        return ACCEPT if q == end else REJECT
    # MULTIFETCH / MULTIPRODUCE: the first item must be there; the others are checked as far
    # as the buffer goes, and the items must fill the frame exactly when all are present.
    if len(buf) - pos < 8:
        return NEED_MORE
    count = _i16(buf, pos + 6)[0]
    min_item = 19 if rtype == MULTIFETCH else 11   # topic of 1 byte, empty message set
    if count < 1 or 4 + count * min_item > size:
        return REJECT
    q = pos + 8
    for i in range(count):
        nxt = check(buf, q, end)
        if nxt == -1:
            return REJECT
        if nxt == -2:
            return NEED_MORE if i == 0 else ACCEPT
        q = nxt
    return ACCEPT if q == end else REJECT


def request_validator_07() -> Validator:
    """A framer validator accepting offsets that start a plausible Kafka 0.7 request.

    Plausible: ``size`` between 2 and 8 MiB, a request type 0-4, a printable ASCII topic of
    1-255 bytes, partition/offset/time/max sizes in range, a first message (PRODUCE) with
    magic 0 or 1, and sizes that add up exactly to the frame size (for MULTIFETCH and
    MULTIPRODUCE: the items present in the buffer fit and, when all are present, fill the
    frame). Needs at most the header of the first item (about 300 bytes).
    """

    def validate(buf: bytes, pos: int, tentative: bool = False) -> int:
        return _validate_request(buf, pos)

    return validate


def looks_like_07_request_stream(data: bytes) -> int:
    """Is ``data`` (the first bytes of one direction) the start of a Kafka 0.7 request stream?

    ACCEPT when the first frame (and the next one, when its header is already in ``data``) is
    a plausible 0.7 request, REJECT when not, NEED_MORE when more bytes are needed. 0.8+
    request streams are rejected: their ``api_version`` would be a 0.7 topic length and their
    ``correlation_id`` its (unprintable or size-inconsistent) first bytes.
    """
    verdict = _validate_request(data, 0)
    if verdict != ACCEPT:
        return verdict
    nxt = 4 + _i32(data, 0)[0]
    if len(data) >= nxt + 6:
        verdict = _validate_request(data, nxt)
        return ACCEPT if verdict == NEED_MORE else verdict
    return ACCEPT


def response_fits(request_type: int, payload: bytes, request_body: dict | None) -> bool:
    """Does a response frame payload have the layout of an answer to ``request_type``?

    FETCH: any error code -1..4; OFFSETS: the offset array fills the frame exactly (or an
    error code alone); MULTIFETCH: the message sets (as many as the request asked for, when
    known) fill the frame exactly. A cut frame is judged on what it has.
    """
    n = len(payload)
    if n < 2:
        return False
    err = _i16(payload, 0)[0]
    if err not in ERRORS_07:
        return False
    if request_type == FETCH:
        return True
    if request_type == OFFSETS:
        if n == 2:
            return err != 0
        return n >= 6 and _i32(payload, 2)[0] >= 0 and n == 6 + 8 * _i32(payload, 2)[0]
    if request_type == MULTIFETCH:
        fetches = request_body.get("fetches") if isinstance(request_body, dict) else None
        expected = len(fetches) if isinstance(fetches, list) else None
        pos, i = 2, 0
        while pos < n and (expected is None or i < expected):
            if n - pos < 6:
                return False
            size = _i32(payload, pos)[0]
            if size < 2 or _i16(payload, pos + 4)[0] not in ERRORS_07:
                return False
            pos += 4 + size
            i += 1
        return pos == n and (expected is None or i == expected)
    return False


def _plausible_response(buf: bytes, pos: int, rtype: int | None) -> int:
    """Validator body for response frame starts; ``rtype`` None: any 0.7 response layout."""
    if len(buf) - pos < 6:
        return NEED_MORE
    size = _i32(buf, pos)[0]
    err = _i16(buf, pos + 4)[0]
    if err not in ERRORS_07 or size < 2 or size > HUNT_MAX_REQUEST_BYTES:
        return REJECT
    end = pos + 4 + size
    have = min(len(buf), end)
    types = (FETCH, OFFSETS, MULTIFETCH) if rtype is None else (rtype,)
    need_more = False
    for t in types:
        if t == OFFSETS:
            if size == 2 and err != 0:
                return ACCEPT
            if size >= 6:
                if have < pos + 10:
                    need_more = True
                    continue
                if size == 6 + 8 * _i32(buf, pos + 6)[0]:
                    return ACCEPT
        elif t == FETCH:
            if size == 2:
                return ACCEPT
            if size < 2 + 4 + MAGIC0_HEADER:
                continue   # a cut message is possible but too weak a signal while hunting
            if have < pos + 11:
                need_more = True
                continue
            msize = _i32(buf, pos + 6)[0]
            if msize >= MAGIC0_HEADER and buf[pos + 10] <= 1:
                return ACCEPT
        elif t == MULTIFETCH:
            if err != 0 or size < 8:
                continue
            if have < pos + 12:
                need_more = True
                continue
            sub = _i32(buf, pos + 6)[0]
            if sub >= 2 and 6 + 4 + sub <= 4 + size and _i16(buf, pos + 10)[0] in ERRORS_07:
                return ACCEPT
    return NEED_MORE if need_more else REJECT


def response_validator_07(expected_type=None) -> Validator:
    """A framer validator for 0.7 response frame starts (broker side, while hunting).

    ``expected_type``: a callable returning the request type of the oldest request waiting
    for an answer, or None when none waits (then any 0.7 response layout is accepted).
    Plausible: an error code -1..4 and, for that layout, an OFFSETS array filling the frame,
    a FETCH message set whose first message has a plausible size and magic 0/1 (or an empty
    set), or MULTIFETCH message sets whose first header fits.
    """

    def validate(buf: bytes, pos: int, tentative: bool = False) -> int:
        return _plausible_response(buf, pos, expected_type() if expected_type else None)

    return validate
