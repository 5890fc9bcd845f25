"""Recognising Kafka frame starts in unknown bytes: request/response validators, stream detection."""

from __future__ import annotations

import ssl

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkasniff.protocol.detect import (FUTURE_VERSION_SLACK, HUNT_MAX_REQUEST_BYTES,
                                        MAX_CLIENT_ID, looks_like_request_stream,
                                        request_validator, response_validator)
from kafkasniff.protocol.framing import ACCEPT, NEED_MORE, REJECT
from kafkasniff.protocol.schema import load_definitions

from tests.pairing.frames import (API_VERSIONS, HEARTBEAT, METADATA, api_versions_v3_request_body, frame, i16,
                     i32, request, request_header, request_stream, response)

DEFS = load_definitions()
VALID = request_validator(DEFS)
KNOWN_KEYS = sorted(DEFS.apis)
UNKNOWN_KEYS = [k for k in range(-5, 400) if k not in DEFS.apis]


def tls_client_hello() -> bytes:
    """A real TLS ClientHello, as Python's ssl module writes it."""
    ctx = ssl.create_default_context()
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname="broker.example")
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    hello = out.read()
    assert hello[0] == 0x16  # handshake record
    return hello


# --------------------------------------------------------------------------- accepted

@pytest.mark.parametrize("tentative", [False, True])
def test_real_request_starts_are_accepted(tentative):
    frames = request_stream(10)
    data = b"".join(frames)
    pos = 0
    for f in frames:
        assert VALID(f, 0, tentative) == ACCEPT
        assert VALID(data, pos, tentative) == ACCEPT
        assert VALID(bytearray(data), pos, tentative) == ACCEPT
        pos += len(f)


@pytest.mark.parametrize("frame_bytes", [
    request(API_VERSIONS, 0, 1, client_id=None),                       # null client_id
    request(API_VERSIONS, 0, 1, client_id=""),                         # empty client_id
    request(API_VERSIONS, 0, 1, client_id="producer-é-1"),             # UTF-8 client_id
    request(API_VERSIONS, 3, 7, api_versions_v3_request_body(), flexible=True),  # header v2
    request(METADATA, 12, 0, b"\x01\x01\x00\x00\x00", flexible=True),
    frame(i16(7) + i16(0) + i32(5) + i32(1)),                          # ControlledShutdown v0: header v0
])
def test_other_plausible_headers_are_accepted(frame_bytes):
    assert VALID(frame_bytes, 0, False) == ACCEPT


def test_every_known_api_key_and_version_is_accepted():
    for key in KNOWN_KEYS:
        info = DEFS.apis[key]
        for version in range(info.min_version, info.max_version + 2):
            f = request(key, version, 3, b"\x00" * 8)
            assert VALID(f, 0, False) == ACCEPT, (key, version)


# --------------------------------------------------------------------------- need more

def test_short_buffers_need_more():
    f = request(HEARTBEAT, 0, 1)
    for n in range(14):
        assert VALID(f[:n], 0, False) == NEED_MORE
    assert VALID(b"xx" + f[:13], 2, False) == NEED_MORE


def test_client_id_not_yet_complete_needs_more():
    f = request(HEARTBEAT, 0, 1, client_id="a-rather-long-client-id")
    assert VALID(f[:20], 0, False) == NEED_MORE
    assert VALID(f, 0, False) == ACCEPT


# --------------------------------------------------------------------------- rejected

def test_http_is_rejected():
    for text in (b"GET / HTTP/1.1\r\nHost: broker:9092\r\n\r\n",
                 b"POST /topics HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
                 b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"):
        assert VALID(text, 0, False) == REJECT
        assert VALID(text, 0, True) == REJECT
        assert looks_like_request_stream(DEFS, text) == REJECT


def test_tls_client_hello_is_rejected():
    hello = tls_client_hello()
    assert VALID(hello, 0, False) == REJECT
    assert VALID(hello, 0, True) == REJECT
    assert looks_like_request_stream(DEFS, hello) == REJECT


@pytest.mark.parametrize("hello", [
    # TLS 1.2/1.3 record headers with assorted lengths (record len 0x0200 is common)
    bytes.fromhex("160301020001" "0001fc0303") + bytes(40),
    bytes.fromhex("16030100c8" "010000c40303") + bytes(40),
    bytes.fromhex("16030300f1" "010000ed0303") + bytes(40),
])
def test_tls_record_headers_are_rejected(hello):
    assert VALID(hello, 0, False) == REJECT


@pytest.mark.parametrize("bad_id", [b"ab\x00cd", b"\n", b"x\x7f", b"\x01\x02\x03\x04",
                                    b"tab\there"])
def test_non_printable_client_ids_are_rejected(bad_id):
    payload = i16(HEARTBEAT) + i16(0) + i32(1) + i16(len(bad_id)) + bad_id + b"\x00" * 8
    assert VALID(frame(payload), 0, False) == REJECT
    assert VALID(frame(payload), 0, True) == REJECT


@pytest.mark.parametrize("key", [-1, -32768, 32767, 999] + [k for k in range(100) if k not in DEFS.apis][:5])
def test_unknown_api_keys_are_rejected(key):
    assert key not in DEFS.apis
    assert VALID(request(key, 0, 1, b"\x00" * 8), 0, False) == REJECT
    assert VALID(request(key, 0, 1, b"\x00" * 8), 0, True) == REJECT


@pytest.mark.parametrize("version", [-1, -32768, 100, 32767])
def test_absurd_versions_are_rejected(version):
    assert VALID(request(HEARTBEAT, version, 1, b"\x00" * 8), 0, False) == REJECT


def test_versions_far_above_the_newest_are_rejected():
    for key in KNOWN_KEYS:
        top = DEFS.apis[key].max_version
        assert VALID(request(key, top + 20, 1, b"\x00" * 8), 0, False) == REJECT, key


def test_negative_correlation_id_is_rejected():
    assert VALID(request(HEARTBEAT, 0, -1, b"\x00" * 8), 0, False) == REJECT
    assert VALID(request(HEARTBEAT, 0, -(2**31), b"\x00" * 8), 0, True) == REJECT


@pytest.mark.parametrize("n", [-2, -100, 513, 30000])
def test_bad_client_id_lengths_are_rejected(n):
    payload = i16(HEARTBEAT) + i16(0) + i32(1) + i16(n) + b"a" * 600
    assert VALID(frame(payload), 0, False) == REJECT


def test_client_id_longer_than_the_frame_is_rejected():
    # size says 14 bytes of payload: header 10 + client_id of 20 cannot fit
    data = i32(14) + i16(HEARTBEAT) + i16(0) + i32(1) + i16(20) + b"a" * 40
    assert VALID(data, 0, False) == REJECT


def test_tiny_size_is_rejected():
    data = i32(4) + i16(HEARTBEAT) + i16(0) + i32(1) + i16(-1) + b"\x00" * 8
    assert VALID(data, 0, False) == REJECT


@settings(max_examples=300, deadline=None)
@given(size=st.integers(8, 2**31 - 1), key=st.sampled_from(UNKNOWN_KEYS),
       rest=st.binary(min_size=10, max_size=60), tentative=st.booleans())
def test_random_bytes_with_an_unknown_api_key_are_always_rejected(size, key, rest, tentative):
    data = i32(size) + i16(key) + rest
    assert VALID(data, 0, tentative) == REJECT


@settings(max_examples=300, deadline=None)
@given(key=st.sampled_from([k for k in KNOWN_KEYS if k != 7]), corr=st.integers(0, 2**31 - 1),
       head=st.binary(max_size=10), bad=st.integers(0, 0x1F) | st.just(0x7F),
       tail=st.binary(max_size=10), tentative=st.booleans())
def test_random_client_ids_with_a_control_byte_are_always_rejected(key, corr, head, bad, tail,
                                                                   tentative):
    cid = head.replace(b"\x7f", b"a") + bytes([bad]) + tail
    payload = i16(key) + i16(DEFS.apis[key].min_version) + i32(corr) + i16(len(cid)) + cid
    assert VALID(frame(payload + b"\x00" * 4), 0, tentative) == REJECT


@settings(max_examples=200, deadline=None)
@given(data=st.binary(min_size=14, max_size=64), tentative=st.booleans())
def test_random_bytes_accepted_only_when_the_header_is_plausible(data, tentative):
    """Whatever random bytes the validator accepts satisfy every documented condition."""
    verdict = VALID(data, 0, tentative)
    assert verdict in (ACCEPT, REJECT, NEED_MORE)
    if verdict == ACCEPT:
        size = int.from_bytes(data[0:4], "big", signed=True)
        key = int.from_bytes(data[4:6], "big", signed=True)
        version = int.from_bytes(data[6:8], "big", signed=True)
        corr = int.from_bytes(data[8:12], "big", signed=True)
        assert 8 <= size <= HUNT_MAX_REQUEST_BYTES and key in DEFS.apis and corr >= 0
        assert 0 <= version <= DEFS.apis[key].max_version + FUTURE_VERSION_SLACK
        if (key, version) != (7, 0):  # header v1/v2: a null or short printable client_id
            n = int.from_bytes(data[12:14], "big", signed=True)
            assert n == -1 or (0 <= n <= MAX_CLIENT_ID and n <= size - 10 and all(
                0x20 <= b != 0x7F for b in data[14:14 + n]))


# --------------------------------------------------------------------------- responses

def test_response_validator_matches_pending_correlation_ids():
    pending = {5: "x", 9: "y"}
    v = response_validator(pending)
    assert v(response(5, b"\x00\x00"), 0, False) == ACCEPT
    assert v(response(9, b""), 0, False) == ACCEPT
    assert v(response(6, b"\x00\x00"), 0, False) == REJECT
    assert v(response(-1, b"\x00\x00"), 0, False) == REJECT
    assert v(response(5, b"")[:7], 0, False) == NEED_MORE
    # the pending set is read live, not copied
    pending[6] = "z"
    assert v(response(6, b"\x00\x00"), 0, False) == ACCEPT
    del pending[5]
    assert v(response(5, b"\x00\x00"), 0, False) == REJECT


def test_response_validator_tentative_accepts_any_non_negative_correlation_id():
    v = response_validator(set())
    assert v(response(123, b"\x00\x00"), 0, True) == ACCEPT
    assert v(response(0, b"\x00\x00"), 0, True) == ACCEPT
    assert v(response(-5, b"\x00\x00"), 0, True) == REJECT
    assert v(response(123, b"\x00\x00"), 0, False) == REJECT


# --------------------------------------------------------------------------- stream detection

def test_looks_like_request_stream():
    frames = request_stream(3)
    data = b"".join(frames)
    assert looks_like_request_stream(DEFS, data) == ACCEPT
    assert looks_like_request_stream(DEFS, frames[0]) == ACCEPT          # only one frame so far
    assert looks_like_request_stream(DEFS, data[:10]) == NEED_MORE
    # a valid first header followed by garbage where the second frame should start
    assert looks_like_request_stream(DEFS, frames[0] + b"GET / HTTP/1.1\r\n\r\n") == REJECT
    # the second header only partly there: the first decides
    assert looks_like_request_stream(DEFS, frames[0] + frames[1][:6]) == ACCEPT


def test_looks_like_request_stream_rejects_a_response_stream():
    # a broker->client stream: size + correlation_id + body (ApiVersions v0 response)
    data = response(1, i16(0) + i32(1) + i16(18) + i16(0) + i16(3)) * 2
    assert looks_like_request_stream(DEFS, data) == REJECT


def test_looks_like_request_stream_uses_a_given_validator():
    calls = []

    def spy(buf, pos, tentative):
        calls.append(pos)
        return ACCEPT

    frames = request_stream(2)
    assert looks_like_request_stream(DEFS, b"".join(frames), spy) == ACCEPT
    assert calls == [0, len(frames[0])]


def test_request_header_builder_is_what_the_validator_sees():
    # guard for the builders: header bytes as documented in the Kafka protocol guide
    h = request_header(HEARTBEAT, 0, 0x01020304, "ab")
    assert h == b"\x00\x0c\x00\x00\x01\x02\x03\x04\x00\x02ab"
