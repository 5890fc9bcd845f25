"""Kafka request and response headers, with the version rules in one table.

Request header (``RequestHeader.json``):
  v0: api_key int16, api_version int16, correlation_id int32  (only ControlledShutdown v0)
  v1: v0 + client_id (int16-length nullable string)            (non-flexible requests)
  v2: v1 + tagged fields; client_id keeps its int16 length     (flexible requests, KIP-482)
Response header (``ResponseHeader.json``):
  v0: correlation_id int32                                     (non-flexible responses)
  v1: v0 + tagged fields                                       (flexible responses)
  ApiVersions responses always use v0, whatever the version (KIP-511), so that a client
  that does not know the broker's versions can still read the answer.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kafkasniff.errors import DecodeError
from kafkasniff.frozen import fast_init
from kafkasniff.protocol.primitives import read_uvarint
from kafkasniff.protocol.schema import Definitions

API_VERSIONS = 18
CONTROLLED_SHUTDOWN = 7

_REQ_FIXED = struct.Struct(">hhi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


@fast_init
@dataclass(frozen=True, slots=True)
class RequestHeader:
    """A decoded request header.

    Attributes:
        api_key, api_version, correlation_id: as on the wire (signed).
        client_id: the client id, ``None`` when null or absent (header v0).
        header_version: 0, 1 or 2.
        size: header length in bytes (the body starts at this offset of the frame payload).
        tagged_fields: unknown tagged fields of a v2 header, ``[{"tag", "data"}]`` or ``None``.
        client_id_offset: frame offset of the client_id's bytes when they are not valid
            UTF-8 (then shown with ``\\x`` escapes; a spec departure), else -1.
    """

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int
    size: int
    tagged_fields: list | None = None
    client_id_offset: int = -1


def request_header_version(defs: Definitions, api_key: int, api_version: int) -> int:
    """Header version a request of ``(api_key, api_version)`` uses: 0 for ControlledShutdown v0,
    2 for flexible versions (KIP-482), else 1 (also for unknown keys)."""
    if api_key == CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    info = defs.apis.get(api_key)
    if info is not None and info.is_flexible(api_version):
        return 2
    return 1


def response_header_version(defs: Definitions, api_key: int, api_version: int) -> int:
    """Header version a response to ``(api_key, api_version)`` uses: 1 for flexible versions
    (KIP-482), else 0; ApiVersions responses always 0 (KIP-511)."""
    if api_key == API_VERSIONS:
        return 0
    info = defs.apis.get(api_key)
    if info is not None and info.is_flexible(api_version):
        return 1
    return 0


def _tagged_section(payload: bytes, pos: int) -> tuple[list | None, int]:
    if payload[pos] == 0:       # no tagged field: nearly every flexible header
        return None, pos + 1
    count, pos = read_uvarint(payload, pos)
    if count > len(payload) - pos:
        raise DecodeError("tagged field count exceeds the frame", field_path="header._tagged_fields",
                          offset=pos)
    fields = None
    for _ in range(count):
        tag, pos = read_uvarint(payload, pos)
        size, pos = read_uvarint(payload, pos)
        if pos + size > len(payload):
            raise DecodeError("tagged field runs past the frame", field_path="header._tagged_fields",
                              offset=pos)
        if fields is None:
            fields = []
        fields.append({"tag": tag, "data": payload[pos:pos + size]})
        pos += size
    return fields, pos


def decode_request_header(defs: Definitions, payload: bytes) -> RequestHeader:
    """Decode the header at the start of a request frame payload.

    Raises DecodeError (with field path and offset) when the payload is too short or the
    client_id runs past the frame.
    """
    if len(payload) < 8:
        raise DecodeError("request header needs 8 bytes", field_path="header", offset=0,
                          expected=">= 8 bytes", actual=f"{len(payload)} bytes")
    api_key, api_version, correlation_id = _REQ_FIXED.unpack_from(payload, 0)
    hv = request_header_version(defs, api_key, api_version)
    if hv == 0:
        return RequestHeader(api_key, api_version, correlation_id, None, 0, 8)
    if len(payload) < 10:
        raise DecodeError("request header v1 needs a client_id length", field_path="header.client_id",
                          offset=8, expected="2 bytes", actual=f"{len(payload) - 8} bytes")
    n = _I16.unpack_from(payload, 8)[0]
    pos = 10
    client_id = None
    bad_offset = -1
    if n >= 0:
        if pos + n > len(payload):
            raise DecodeError("client_id runs past the frame", field_path="header.client_id",
                              offset=8, expected=f"{n} bytes", actual=f"{len(payload) - pos} bytes")
        raw = payload[pos:pos + n]
        try:
            client_id = raw.decode()
        except UnicodeDecodeError:
            client_id = raw.decode("utf-8", "backslashreplace")
            bad_offset = pos
        pos += n
    tagged = None
    if hv == 2:
        try:
            tagged, pos = _tagged_section(payload, pos)
        except (IndexError, ValueError) as exc:
            raise DecodeError(f"bad tagged fields: {exc}", field_path="header._tagged_fields",
                              offset=pos) from None
    return RequestHeader(api_key, api_version, correlation_id, client_id, hv, pos, tagged,
                         bad_offset)


def decode_response_header(payload: bytes, header_version: int) -> tuple[int, int, list | None]:
    """Decode a response header: returns ``(correlation_id, body_offset, tagged_fields)``.

    Raises DecodeError when the payload is shorter than the header.
    """
    if len(payload) < 4:
        raise DecodeError("response header needs 4 bytes", field_path="header.correlation_id",
                          offset=0, expected="4 bytes", actual=f"{len(payload)} bytes")
    correlation_id = _I32.unpack_from(payload, 0)[0]
    if header_version == 0:
        return correlation_id, 4, None
    try:
        tagged, pos = _tagged_section(payload, 4)
    except (IndexError, ValueError) as exc:
        raise DecodeError(f"bad tagged fields: {exc}", field_path="header._tagged_fields",
                          offset=4) from None
    return correlation_id, pos, tagged


def peek_request_ids(payload: bytes) -> tuple[int, int, int]:
    """``(api_key, api_version, correlation_id)`` of a request payload (signed ints).

    Raises ``struct.error`` when the payload is shorter than 8 bytes.
    """
    return _REQ_FIXED.unpack_from(payload, 0)


def peek_correlation_id(payload: bytes) -> int | None:
    """The correlation_id of a response payload (first 4 bytes), ``None`` if too short."""
    if len(payload) < 4:
        return None
    return _I32.unpack_from(payload, 0)[0]
