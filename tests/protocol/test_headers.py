"""Request and response headers (RequestHeader.json / ResponseHeader.json, KIP-482, KIP-511)."""

from __future__ import annotations

import struct

import pytest

from kafkasniff.errors import DecodeError, KafkaSniffError
from kafkasniff.protocol.codegen import compile_plan
from kafkasniff.protocol.headers import (
    RequestHeader,
    decode_request_header,
    decode_response_header,
    peek_correlation_id,
    request_header_version,
    response_header_version,
)
from kafkasniff.protocol.schema import load_definitions

DEFS = load_definitions()
PRODUCE, FETCH, METADATA, CONTROLLED_SHUTDOWN, API_VERSIONS = 0, 1, 3, 7, 18
BODY = b"\xde\xad\xbe\xef"


def _fixed(api_key: int, version: int, correlation_id: int) -> bytes:
    return struct.pack(">hhi", api_key, version, correlation_id)


def _client_id(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


# --------------------------------------------------------------------------- version table

def test_request_header_version_table():
    assert request_header_version(DEFS, CONTROLLED_SHUTDOWN, 0) == 0
    assert request_header_version(DEFS, CONTROLLED_SHUTDOWN, 1) == 1
    assert request_header_version(DEFS, METADATA, 8) == 1
    assert request_header_version(DEFS, METADATA, 9) == 2   # Metadata is flexible from v9
    assert request_header_version(DEFS, PRODUCE, 8) == 1
    assert request_header_version(DEFS, PRODUCE, 9) == 2
    assert request_header_version(DEFS, API_VERSIONS, 2) == 1
    assert request_header_version(DEFS, API_VERSIONS, 3) == 2
    assert request_header_version(DEFS, 9999, 0) == 1       # unknown key: v1


def test_response_header_version_table():
    assert response_header_version(DEFS, API_VERSIONS, 3) == 0  # KIP-511: always v0
    assert response_header_version(DEFS, API_VERSIONS, 4) == 0
    assert response_header_version(DEFS, API_VERSIONS, 0) == 0
    assert response_header_version(DEFS, METADATA, 8) == 0
    assert response_header_version(DEFS, METADATA, 9) == 1
    assert response_header_version(DEFS, FETCH, 12) == 1
    assert response_header_version(DEFS, FETCH, 11) == 0
    assert response_header_version(DEFS, 9999, 0) == 0


def test_header_versions_follow_flexible_versions_for_every_api():
    for api_key, info in DEFS.apis.items():
        for v in range(info.min_version, info.max_version + 1):
            flexible = info.flexible_from is not None and v >= info.flexible_from
            expected_req = 0 if (api_key, v) == (CONTROLLED_SHUTDOWN, 0) else (2 if flexible else 1)
            assert request_header_version(DEFS, api_key, v) == expected_req, (info.name, v)
            expected_resp = 1 if flexible and api_key != API_VERSIONS else 0
            assert response_header_version(DEFS, api_key, v) == expected_resp, (info.name, v)


# --------------------------------------------------------------------------- request headers

def test_request_header_v0_controlled_shutdown():
    payload = _fixed(CONTROLLED_SHUTDOWN, 0, 77) + BODY
    h = decode_request_header(DEFS, payload)
    assert h == RequestHeader(CONTROLLED_SHUTDOWN, 0, 77, None, 0, 8, None)
    assert payload[h.size:] == BODY


def test_request_header_v1():
    payload = _fixed(METADATA, 1, -5) + _client_id("producer-ü1") + BODY
    h = decode_request_header(DEFS, payload)
    assert (h.api_key, h.api_version, h.correlation_id) == (METADATA, 1, -5)
    assert h.client_id == "producer-ü1"
    assert h.header_version == 1 and h.tagged_fields is None
    assert payload[h.size:] == BODY


def test_request_header_v2_client_id_keeps_int16_length():
    cid = "c" * 130  # > 127: a compact length would need two varint bytes, int16 never does
    payload = _fixed(METADATA, 12, 2 ** 31 - 1) + _client_id(cid) + b"\x00" + BODY
    h = decode_request_header(DEFS, payload)
    assert h.client_id == cid and h.header_version == 2
    assert h.size == 8 + 2 + 130 + 1
    assert h.tagged_fields is None
    assert payload[h.size:] == BODY


def test_request_header_v2_with_tagged_fields():
    tags = b"\x02" + b"\x01\x02ab" + b"\x81\x01\x00"  # tag 1 "ab", tag 129 empty
    payload = _fixed(FETCH, 12, 1) + _client_id("x") + tags + BODY
    h = decode_request_header(DEFS, payload)
    assert h.tagged_fields == [{"tag": 1, "data": b"ab"}, {"tag": 129, "data": b""}]
    assert payload[h.size:] == BODY


@pytest.mark.parametrize("api_key, version, hv", [(METADATA, 1, 1), (METADATA, 12, 2)])
def test_request_header_null_client_id(api_key, version, hv):
    payload = _fixed(api_key, version, 3) + _client_id(None) + (b"\x00" if hv == 2 else b"") + BODY
    h = decode_request_header(DEFS, payload)
    assert h.client_id is None and h.header_version == hv
    assert payload[h.size:] == BODY


def test_request_header_empty_client_id_is_not_null():
    h = decode_request_header(DEFS, _fixed(METADATA, 1, 3) + _client_id(""))
    assert h.client_id == ""


@pytest.mark.parametrize("version, client_id, tags", [
    (12, "cli", b"\x00"),
    (12, None, b"\x00"),
    (12, "cli", b"\x01\x05\x02zz"),
])
def test_request_header_agrees_with_the_generated_definition(version, client_id, tags):
    # RequestHeader.json compiled like any body: client_id is not compact even in v2.
    payload = _fixed(METADATA, version, 9) + _client_id(client_id) + tags
    value, end = compile_plan(DEFS.plan("RequestHeader", 2))(payload, 0)
    h = decode_request_header(DEFS, payload)
    assert end == h.size == len(payload)
    assert (value["request_api_key"], value["request_api_version"], value["correlation_id"],
            value["client_id"]) == (h.api_key, h.api_version, h.correlation_id, h.client_id)
    assert value.get("_unknown_tagged_fields") == h.tagged_fields


@pytest.mark.parametrize("payload, path, offset", [
    (b"", "header", 0),
    (_fixed(METADATA, 1, 1)[:7], "header", 0),
    (_fixed(METADATA, 1, 1), "header.client_id", 8),
    (_fixed(METADATA, 1, 1) + b"\x00", "header.client_id", 8),
    (_fixed(METADATA, 1, 1) + b"\x00\x05abc", "header.client_id", 8),
    (_fixed(METADATA, 12, 1) + _client_id("abc"), "header._tagged_fields", 13),
    (_fixed(METADATA, 12, 1) + _client_id("abc") + b"\x05", "header._tagged_fields", 14),
    (_fixed(METADATA, 12, 1) + _client_id("abc") + b"\x01\x01\x05ab", "header._tagged_fields", None),
])
def test_truncated_request_headers_raise(payload, path, offset):
    with pytest.raises(DecodeError) as ei:
        decode_request_header(DEFS, payload)
    assert isinstance(ei.value, KafkaSniffError)
    assert ei.value.field_path == path
    if offset is not None:
        assert ei.value.offset == offset
    assert path in str(ei.value)


def test_request_header_truncated_at_every_byte():
    full = _fixed(METADATA, 12, 1) + _client_id("abc") + b"\x01\x01\x02ab"
    assert decode_request_header(DEFS, full).size == len(full)
    for cut in range(len(full)):
        with pytest.raises(DecodeError) as ei:
            decode_request_header(DEFS, full[:cut])
        assert ei.value.field_path.startswith("header"), cut
        assert 0 <= ei.value.offset <= cut, cut


# --------------------------------------------------------------------------- response headers

def test_response_header_v0():
    payload = struct.pack(">i", -123) + BODY
    assert decode_response_header(payload, 0) == (-123, 4, None)
    assert peek_correlation_id(payload) == -123


def test_response_header_v1():
    assert decode_response_header(struct.pack(">i", 5) + b"\x00" + BODY, 1) == (5, 5, None)
    payload = struct.pack(">i", 5) + b"\x01\x00\x03xyz" + BODY
    assert decode_response_header(payload, 1) == (5, 10, [{"tag": 0, "data": b"xyz"}])


def test_api_versions_response_header_is_v0_even_when_flexible():
    # An ApiVersions v3 response: correlation id, then directly the body (error_code int16).
    hv = response_header_version(DEFS, API_VERSIONS, 3)
    payload = struct.pack(">i", 8) + b"\x00\x00" + b"\x01"
    assert decode_response_header(payload, hv) == (8, 4, None)


@pytest.mark.parametrize("payload, hv, path", [
    (b"", 0, "header.correlation_id"),
    (b"\x00\x00\x01", 0, "header.correlation_id"),
    (b"\x00\x00\x00\x01", 1, "header._tagged_fields"),
    (b"\x00\x00\x00\x01\x01\x00\x05ab", 1, "header._tagged_fields"),
    (b"\x00\x00\x00\x01\x05", 1, "header._tagged_fields"),
])
def test_truncated_response_headers_raise(payload, hv, path):
    with pytest.raises(DecodeError) as ei:
        decode_response_header(payload, hv)
    assert ei.value.field_path == path
    assert ei.value.offset >= 0
    assert (peek_correlation_id(payload) is None) == (len(payload) < 4)
