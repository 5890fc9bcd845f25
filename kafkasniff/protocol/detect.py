"""Recognising Kafka frames in unknown bytes: detection on any port, and resync validators.

A plausible *request* frame start: a size in range, a known api_key, a version between 0 and
a little above the highest known one, a non-negative correlation_id, and (header v1/v2) a
client_id that is null or short printable text. A plausible *response* frame start while
hunting: a correlation_id that matches a request still waiting for its answer.
"""

from __future__ import annotations

import re
import struct
from typing import Callable, Container

from kafkasniff.protocol.framing import (
    ACCEPT,
    NEED_MORE,
    REJECT,
    Prefilter,
    Validator,
    literal_trie,
    uint32_range,
)
from kafkasniff.protocol.headers import request_header_version
from kafkasniff.protocol.schema import Definitions

_HDR = struct.Struct(">ihhi")   # size, api_key, api_version, correlation_id
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_II = struct.Struct(">ii")      # a response's size and correlation_id

MAX_CLIENT_ID = 512
FUTURE_VERSION_SLACK = 4
# While hunting for a request boundary, larger candidate sizes are rejected: a false start
# inside record data would otherwise swallow that many bytes. (Produce requests above it are
# only missed while resynchronising, never once in sync.)
HUNT_MAX_REQUEST_BYTES = 8 * 1024 * 1024


def request_validator(defs: Definitions) -> Validator:
    """A framer validator accepting offsets that start a plausible Kafka request frame."""
    apis = defs.apis

    def validate(buf: bytes, pos: int, tentative: bool = False) -> int:
        if len(buf) - pos < 14:
            return NEED_MORE
        size, api_key, version, corr = _HDR.unpack_from(buf, pos)
        info = apis.get(api_key)
        if info is None or version < 0 or version > info.max_version + FUTURE_VERSION_SLACK:
            return REJECT
        if corr < 0 or size < 8 or size > HUNT_MAX_REQUEST_BYTES:
            return REJECT
        if request_header_version(defs, api_key, version) == 0:
            return ACCEPT
        n = _I16.unpack_from(buf, pos + 12)[0]
        if n == -1:
            return ACCEPT
        if n < 0 or n > MAX_CLIENT_ID or n > size - 10:
            return REJECT
        if len(buf) - pos < 14 + n:
            return NEED_MORE
        for b in buf[pos + 14:pos + 14 + n]:
            if b < 0x20 or b == 0x7F:
                return REJECT
        return ACCEPT

    # Where validate can accept: a size in [8, HUNT_MAX_REQUEST_BYTES], a known api_key,
    # a version below 256, a non-negative correlation_id (it needs 14 bytes to reject).
    keys = bytes(sorted(k for k in apis if 0 <= k <= 255))
    pattern = re.compile(uint32_range(8, HUNT_MAX_REQUEST_BYTES) + b"\x00["
                         + b"".join(re.escape(bytes([k])) for k in keys)
                         + b"]\x00[\x00-\xff][\x00-\x7f]")
    prefilter = Prefilter(pattern, 0, 14, zero_free=True)
    validate.prefilter = lambda: prefilter  # type: ignore[attr-defined]
    return validate


def response_validator(pending: Container[int]) -> Validator:
    """A framer validator accepting offsets whose correlation_id is in ``pending``.

    While TENTATIVE (stream joined mid-way, requests before the capture are unknown) any
    frame with a plausible size and a non-negative correlation_id is accepted: the frame is
    then decoded as an orphan response.
    """
    return ResponseValidator(pending)


class ResponseValidator:
    """:func:`response_validator`'s validator: one small object per connection (every open
    Kafka connection has one; as two closures, their cells, a function dictionary and a cache
    list it took about 750 bytes, a seventh of an open connection's state)."""

    __slots__ = ("pending", "_ids", "_prefilter")

    def __init__(self, pending: Container[int]) -> None:
        self.pending = pending
        self._ids: frozenset | None = None      # the pending ids of the cached prefilter
        self._prefilter: Prefilter | None = None

    def __call__(self, buf: bytes, pos: int, tentative: bool = False) -> int:
        if len(buf) - pos < 8:
            return NEED_MORE
        corr = _I32.unpack_from(buf, pos + 4)[0]
        if corr in self.pending:
            return ACCEPT
        if tentative and corr >= 0:
            return ACCEPT
        return REJECT

    def prefilter(self) -> Prefilter:
        """Where the validator can accept while hunting: a pending correlation_id at offset
        4."""
        ids = frozenset(self.pending)  # type: ignore[arg-type]
        if self._ids != ids:
            keys = sorted(c.to_bytes(4, "big", signed=True) for c in ids)
            self._ids = ids
            self._prefilter = Prefilter(re.compile(literal_trie(keys)) if keys else None, 4, 8)
        return self._prefilter


def request_stream_score(defs: Definitions, data: bytes, other: bytes = b"",
                         frames: int = 8) -> tuple[int, int, int, int]:
    """How likely ``data`` is a connection's request stream and ``other`` its response
    stream, from their first ``frames`` frames each, to tell the client's side of a
    connection joined mid-stream when both directions parse as requests (a response's
    correlation_id read as api_key and api_version can look like a request: a replica's
    Fetch responses read as "Produce v14, v15, ...").

    Returns ``(requests answered in other, requests with a defined api_version (not one of
    the future versions the validator tolerates), requests with a non-empty client_id,
    distinct correlation_ids)``; compare tuples, higher is likelier. The first is decisive
    once a request sent after the capture began is answered: a response's correlation_id
    (at offset 4 of its frame) equals its request's (offset 8).
    """
    apis = defs.apis
    answered = set()
    pos = 0
    for _ in range(frames):
        if len(other) - pos < 8:
            break
        size, corr = _II.unpack_from(other, pos)
        if size < 4:
            break
        answered.add(corr)
        pos += 4 + size
    paired = defined = named = 0
    corrs = set()
    pos = 0
    for _ in range(frames):
        if len(data) - pos < 14:
            break
        size, api_key, version, corr = _HDR.unpack_from(data, pos)
        info = apis.get(api_key)
        if info is None or size < 8:
            break
        paired += corr in answered
        defined += version <= info.max_version
        named += _I16.unpack_from(data, pos + 12)[0] > 0
        corrs.add(corr)
        pos += 4 + size
    return paired, defined, named, len(corrs)


def looks_like_request_stream(defs: Definitions, data: bytes,
                              validator: Callable | None = None) -> int:
    """Is ``data`` (the first bytes of one direction) the start of a Kafka request stream?

    Returns ACCEPT when the first frame (and the next one, if its header is already present)
    is a plausible request, REJECT when not, NEED_MORE when more bytes are needed to tell.
    """
    validate = validator or request_validator(defs)
    verdict = validate(data, 0, False)
    if verdict != ACCEPT:
        return verdict
    size = _I32.unpack_from(data, 0)[0]
    nxt = 4 + size
    if len(data) >= nxt + 14:
        return validate(data, nxt, False)
    return ACCEPT
