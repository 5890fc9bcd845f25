"""kafkasniff.classify: what a connection carries, from its first bytes (sans-IO).

Every incremental input is fed whole, byte by byte, and with trailing data (DESIGN convention
5): the verdict must be the same and must come as soon as the bytes that decide it are there.
Kafka frames come from tests/pairing/frames.py, the TLS ClientHello from Python's ssl module
(MemoryBIO, no sockets), Kafka 0.7 requests from a small struct-built encoder below.
"""

from __future__ import annotations

import ssl

import pytest

from kafkasniff.classify import (
    DETECT_WINDOW_BYTES,
    OTHER,
    UNDECIDED_MAX_BYTES,
    Classifier,
    FirstBytes,
    Verdict,
)
from kafkasniff.model import ConnectionKind
from kafkasniff.protocol.detect import request_validator
from kafkasniff.protocol.schema import load_definitions
from tests.pairing.frames import (
    api_versions_v0_response_body,
    i16,
    i32,
    i64,
    metadata_v1_request,
    request,
    request_stream,
    response,
)

DEFS = load_definitions()
VALIDATOR = request_validator(DEFS)
BROKER_PORT = 9092
CLIENT_PORT = 40000
OTHER_PORT = 7777

KAFKA = ConnectionKind.KAFKA
KAFKA07 = ConnectionKind.KAFKA07
TLS = ConnectionKind.TLS

GARBAGE = bytes(range(0xC0, 0x100)) * 4   # no request header, no TLS record, no 0.7 request


def classifier(**kw) -> Classifier:
    return Classifier(DEFS, VALIDATOR, **kw)


def watch(mid_stream: bool = False, **kw) -> FirstBytes:
    """The FirstBytes of a connection between two ports that are not broker ports."""
    first = classifier(**kw).start(CLIENT_PORT, OTHER_PORT, mid_stream)
    assert type(first) is FirstBytes
    return first


def feed_bytewise(first: FirstBytes, direction: int, data: bytes, start: int = 0
                  ) -> tuple[Verdict | None, int]:
    """Feed ``data`` one byte at a time: (verdict, bytes fed when it came) or (None, len)."""
    for i in range(len(data)):
        v = first.on_data(direction, start + i, data[i:i + 1])
        if v is not None:
            return v, i + 1
    return None, len(data)


def tls_client_hello() -> bytes:
    """A real TLS ClientHello (Python's ssl module, in memory)."""
    ctx = ssl.create_default_context()
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname="broker1.kafka.test")
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    hello = out.read()
    assert hello[:2] == b"\x16\x03"
    return hello


# Kafka 0.7 requests: int32 size, int16 request type, body (kafka.api.*Request of 0.7)
def short_string(s: str) -> bytes:
    return i16(len(s)) + s.encode()


def req07(rtype: int, body: bytes) -> bytes:
    return i32(2 + len(body)) + i16(rtype) + body


def fetch07(topic: str, partition: int, offset: int, max_size: int = 300 * 1024) -> bytes:
    return req07(1, short_string(topic) + i32(partition) + i64(offset) + i32(max_size))


def offsets07(topic: str, partition: int, time: int, max_number: int) -> bytes:
    return req07(4, short_string(topic) + i32(partition) + i64(time) + i32(max_number))


KAFKA_STREAM = b"".join(request_stream(5))
FIRST_HEADER_BYTES = 4 + 2 + 2 + 4 + 2 + len("client-1")  # size, key, version, corr, client_id
STREAM_07 = fetch07("orders", 0, 1234) + offsets07("orders", 0, -1, 1) + fetch07("pay", 2, 0)
FIRST_07_BYTES = len(fetch07("orders", 0, 1234))


# --------------------------------------------------------------------------- Kafka 0.8+

def test_kafka_request_stream_whole():
    """A stream of well-formed requests from A is Kafka with A (direction 0) the client."""
    assert watch().on_data(0, 0, KAFKA_STREAM) == Verdict(KAFKA, 0)


def test_kafka_request_stream_byte_by_byte_decides_at_the_first_header():
    """Fed byte by byte, the verdict is the same and comes with the first header's last
    byte (the end of its client_id): no earlier, no later."""
    v, at = feed_bytewise(watch(), 0, KAFKA_STREAM)
    assert v == Verdict(KAFKA, 0)
    assert at == FIRST_HEADER_BYTES == 22


def test_kafka_request_stream_with_trailing_data():
    """Bytes after the frames (garbage) do not change the verdict."""
    assert watch().on_data(0, 0, KAFKA_STREAM + GARBAGE) == Verdict(KAFKA, 0)
    v, at = feed_bytewise(watch(), 0, KAFKA_STREAM + GARBAGE)
    assert (v, at) == (Verdict(KAFKA, 0), FIRST_HEADER_BYTES)


def test_kafka_client_in_direction_1():
    """The client is whichever direction carries requests, even when the other one spoke
    first."""
    first = watch()
    assert first.on_data(0, 0, response(1, api_versions_v0_response_body())[:3]) is None
    assert first.on_data(1, 0, KAFKA_STREAM) == Verdict(KAFKA, 1)


def test_bad_second_frame_rejects_the_stream():
    """When the next frame's header is present it must be plausible too."""
    first_frame = metadata_v1_request(1)
    assert watch().on_data(0, 0, first_frame + b"\xff" * 14) is None
    first = watch()
    first.on_data(0, 0, first_frame + b"\xff" * 14)
    assert first.on_close() == OTHER


# --------------------------------------------------------------------------- TLS

def test_tls_client_hello_whole_and_byte_by_byte():
    """A ClientHello is TLS; byte by byte the verdict comes with the 5-byte record header."""
    hello = tls_client_hello()
    assert watch().on_data(0, 0, hello) == Verdict(TLS, -1)
    v, at = feed_bytewise(watch(), 0, hello + GARBAGE)
    assert (v, at) == (Verdict(TLS, -1), 5)


def test_tls_on_a_broker_port_knows_the_client():
    """On a broker port the client side is the endpoint not on the port."""
    first = classifier().start(CLIENT_PORT, BROKER_PORT, False)
    assert first.on_data(0, 0, tls_client_hello()) == Verdict(TLS, 0)
    first = classifier().start(BROKER_PORT, CLIENT_PORT, False)
    assert first.on_data(1, 0, tls_client_hello()) == Verdict(TLS, 1)


def test_tls_application_data_only_counts_when_joined_mid_stream():
    """A bare TLS record (application data, type 23) is TLS only for a mid-stream join."""
    record = b"\x17\x03\x03\x00\x40" + bytes(64)
    assert watch(mid_stream=True).on_data(0, 0, record) == Verdict(TLS, -1)
    first = watch(mid_stream=False)
    assert first.on_data(0, 0, record) is None
    assert first.on_close() == OTHER


# --------------------------------------------------------------------------- Kafka 0.7

def test_kafka07_stream_whole_and_byte_by_byte():
    """0.7 requests are Kafka 0.7; byte by byte the verdict comes with the first request's
    last byte (a 0.7 FETCH is checked to fill its frame exactly)."""
    assert watch().on_data(0, 0, STREAM_07) == Verdict(KAFKA07, 0)
    v, at = feed_bytewise(watch(), 0, STREAM_07)
    assert (v, at) == (Verdict(KAFKA07, 0), FIRST_07_BYTES)
    assert FIRST_07_BYTES == 4 + 2 + 2 + len("orders") + 16


def test_kafka07_with_trailing_data():
    v, at = feed_bytewise(watch(), 1, STREAM_07 + GARBAGE)
    assert (v, at) == (Verdict(KAFKA07, 1), FIRST_07_BYTES)


# --------------------------------------------------------------------------- wire formats

def test_wire_format_modern_ignores_kafka07():
    """With wire_format "modern" a 0.7 stream is not Kafka: something else at the end."""
    first = watch(wire_format="modern")
    assert first.on_data(0, 0, STREAM_07) is None
    assert first.on_close() == OTHER
    assert watch(wire_format="modern").on_data(0, 0, KAFKA_STREAM) == Verdict(KAFKA, 0)


def test_wire_format_07_ignores_modern_kafka():
    """With wire_format "0.7" a 0.8+ stream is not Kafka; a 0.7 stream still is."""
    first = watch(wire_format="0.7")
    assert first.on_data(0, 0, KAFKA_STREAM) is None
    assert first.on_close() == OTHER
    assert watch(wire_format="0.7").on_data(0, 0, STREAM_07) == Verdict(KAFKA07, 0)


def test_unknown_wire_format_raises():
    with pytest.raises(ValueError, match="wire format"):
        classifier(wire_format="0.8")
    with pytest.raises(ValueError):
        classifier(wire_format="")


# --------------------------------------------------------------------------- other

def test_non_kafka_waits_until_the_window_is_full():
    """Unrecognised bytes are undecided until DETECT_WINDOW_BYTES of one direction, then
    OTHER (the window's last byte decides)."""
    data = (GARBAGE * (DETECT_WINDOW_BYTES // len(GARBAGE) + 1))[:DETECT_WINDOW_BYTES]
    first = watch()
    assert first.on_data(0, 0, data[:-1]) is None
    assert first.on_data(0, len(data) - 1, data[-1:]) == OTHER
    # whole, with trailing data
    assert watch().on_data(0, 0, data + GARBAGE) == OTHER


def test_non_kafka_on_close():
    """A short non-Kafka exchange is OTHER when the connection closes."""
    first = watch()
    assert first.on_data(0, 0, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n") is None
    assert first.on_data(1, 0, b"HTTP/1.1 200 OK\r\n\r\n") is None
    assert first.on_close() == OTHER


def test_empty_connection_on_close_is_other():
    assert watch().on_close() == OTHER


def test_short_kafka_prefix_is_other_on_close():
    """A connection closing before a request header is complete is not Kafka."""
    first = watch()
    assert first.on_data(0, 0, KAFKA_STREAM[:FIRST_HEADER_BYTES - 1]) is None
    assert first.on_close() == OTHER


# --------------------------------------------------------------------------- broker ports

@pytest.mark.parametrize("a_port, b_port, client_dir", [
    (CLIENT_PORT, BROKER_PORT, 0),
    (BROKER_PORT, CLIENT_PORT, 1),
])
def test_broker_port_is_kafka_even_for_garbage(a_port, b_port, client_dir):
    """With one endpoint on a broker port the connection is Kafka, the other endpoint the
    client, even when its bytes do not parse: decided as soon as they are rejected (the
    14 bytes of a request header), whole or byte by byte."""
    c = classifier(ports={BROKER_PORT})
    first = c.start(a_port, b_port, False)
    assert type(first) is FirstBytes and first.client_dir == client_dir
    assert first.on_data(client_dir, 0, GARBAGE) == Verdict(KAFKA, client_dir)
    v, at = feed_bytewise(c.start(a_port, b_port, False), client_dir, GARBAGE)
    assert (v, at) == (Verdict(KAFKA, client_dir), 14)


def test_broker_port_incomplete_header_decided_on_close():
    """On a broker port, bytes that may still become a request wait; the close decides."""
    first = classifier().start(CLIENT_PORT, BROKER_PORT, False)
    assert first.on_data(0, 0, KAFKA_STREAM[:10]) is None
    assert first.on_close() == Verdict(KAFKA, 0)


def test_broker_port_with_wire_format_07_is_kafka07():
    first = classifier(wire_format="0.7").start(CLIENT_PORT, BROKER_PORT, False)
    assert first.on_close() == Verdict(KAFKA07, 0)


def test_broker_port_only_reads_the_client_direction():
    """On a broker port the verdict comes from the client's direction: requests in the
    broker's direction are not the client's."""
    first = classifier().start(CLIENT_PORT, BROKER_PORT, False)
    assert first.on_data(1, 0, KAFKA_STREAM) is None
    assert first.on_data(0, 0, KAFKA_STREAM) == Verdict(KAFKA, 0)


def test_both_or_neither_endpoint_on_a_broker_port_detects():
    """Both endpoints on broker ports (or none) is not "one broker": detection decides."""
    c = classifier(ports={9092, 9093})
    first = c.start(9092, 9093, False)
    assert type(first) is FirstBytes and first.client_dir == -1
    assert first.on_data(1, 0, KAFKA_STREAM) == Verdict(KAFKA, 1)


def test_no_detect_and_no_port_is_other_at_once():
    """Without detection a connection on no broker port is OTHER at once."""
    c = classifier(detect=False)
    assert c.start(CLIENT_PORT, OTHER_PORT, False) == OTHER
    assert c.start(CLIENT_PORT, OTHER_PORT, True) == OTHER
    assert type(c.start(CLIENT_PORT, BROKER_PORT, False)) is FirstBytes


def test_ports_are_configurable():
    c = classifier(ports=[19092])
    assert c.ports == frozenset({19092})
    assert c.start(CLIENT_PORT, 19092, False).client_dir == 0
    assert c.start(CLIENT_PORT, 9092, False).client_dir == -1


# --------------------------------------------------------------------------- mid-stream

MID_FRAMES = request_stream(6)
MID_CUT = 7  # the capture starts 7 bytes into the first frame


def test_mid_stream_found_by_two_chained_requests():
    """Joined inside a frame: Kafka once a plausible request is followed by a second one;
    byte by byte the verdict comes with the second request's client_id."""
    data = b"".join(MID_FRAMES)[MID_CUT:]
    first = watch(mid_stream=True)
    assert first.on_data(1, 0, GARBAGE) is None
    second_start = len(MID_FRAMES[0]) - MID_CUT + len(MID_FRAMES[1])
    v, at = feed_bytewise(first, 0, data)
    assert v == Verdict(KAFKA, 0)
    assert at == second_start + FIRST_HEADER_BYTES
    # whole, with trailing data
    first = watch(mid_stream=True)
    first.on_data(1, 0, GARBAGE)
    assert first.on_data(0, 0, data + GARBAGE) == Verdict(KAFKA, 0)


def test_mid_stream_single_direction_decides_on_close():
    first = watch(mid_stream=True)
    assert first.on_data(0, 0, b"".join(MID_FRAMES)[MID_CUT:]) is None
    assert first.on_close() == Verdict(KAFKA, 0)


def test_mid_frame_bytes_without_mid_stream_are_other():
    """The chained-request search is only for connections joined mid-stream."""
    first = watch(mid_stream=False)
    first.on_data(1, 0, GARBAGE)
    assert first.on_data(0, 0, b"".join(MID_FRAMES)[MID_CUT:]) is None
    assert first.on_close() == OTHER


def test_mid_stream_one_request_alone_is_not_enough():
    """A single plausible request inside the window does not make Kafka."""
    one = b"\xee" * 5 + metadata_v1_request(3)
    first = watch(mid_stream=True)
    first.on_data(1, 0, GARBAGE)
    assert first.on_data(0, 0, one) is None
    assert first.on_close() == OTHER


def _replica_fetch_streams(n: int = 3) -> tuple[bytes, bytes]:
    """A replica fetcher's connection joined mid-stream (seen in a real 3-node cluster):
    Fetch v18 requests with correlation_ids 1.. and their flexible responses, the first
    answering request 0 (sent before the capture). Each response's first 12 bytes read as a
    request header "api_key 0 (Produce), api_version <its correlation_id>, correlation_id 0,
    client_id ''": a plausible request too."""
    requests = b"".join(request(1, 18, corr, b"\x00" * 40, client_id="broker-2-fetcher-0",
                                flexible=True) for corr in range(1, n + 1))
    responses = b"".join(response(corr, i32(0) + i16(0) + i32(0) + b"\x00" * 20, flexible=True)
                         for corr in range(0, n))
    return requests, responses


@pytest.mark.parametrize("response_first", [True, False])
def test_mid_stream_response_that_reads_as_a_request_loses_to_the_requests(response_first):
    """Both directions parse as requests: the side whose requests the other side answers
    (equal correlation_ids) is the client, whichever spoke first; the verdict waits for
    that answer."""
    requests, responses = _replica_fetch_streams()
    first = watch(mid_stream=True)
    resp_dir, req_dir = (0, 1) if response_first else (1, 0)
    assert first.on_data(resp_dir, 0, responses[:len(responses) // 3]) is None
    assert first.on_data(req_dir, 0, requests[:len(requests) // 3]) is None   # no answer yet
    v = first.on_data(resp_dir, len(responses) // 3, responses[len(responses) // 3:])
    assert v == Verdict(KAFKA, req_dir)


def test_mid_stream_both_directions_request_like_decides_on_close():
    requests, responses = _replica_fetch_streams(1)   # the only response answers request 0
    first = watch(mid_stream=True)
    assert first.on_data(0, 0, responses) is None
    assert first.on_data(1, 0, requests) is None
    # no answer to tell them apart: defined versions (Produce "v0" and Fetch v18 both are),
    # then non-empty client ids decide
    assert first.on_close() == Verdict(KAFKA, 1)


# --------------------------------------------------------------------------- gaps

def test_gaps_in_both_directions_end_the_wait():
    """A gap in each direction means the window can no longer fill: decide at once."""
    first = watch()
    assert first.on_data(0, 0, KAFKA_STREAM[:10]) is None
    assert first.on_gap(0, 10, 100) is None          # one direction broken: still waiting
    assert first.sizes == [110, 0]
    assert first.on_gap(1, 0, 50) == OTHER            # both broken: decided
    first = classifier().start(CLIENT_PORT, BROKER_PORT, False)
    assert first.on_gap(0, 0, 100) is None
    assert first.on_gap(1, 0, 100) == Verdict(KAFKA, 0)


def test_a_direction_that_carried_undecided_max_bytes_ends_the_wait():
    first = watch()
    assert first.on_gap(0, 0, UNDECIDED_MAX_BYTES - 1) is None
    assert first.on_gap(0, UNDECIDED_MAX_BYTES - 1, 1) == OTHER


def test_window_keeps_at_most_detect_window_bytes():
    """``data`` holds the first bytes only; ``sizes`` counts every byte seen."""
    first = classifier().start(CLIENT_PORT, BROKER_PORT, False)
    first.on_data(1, 0, b"\x00" * 10)
    assert first.on_data(1, 10, b"\x00" * 5) is None
    assert bytes(first.data[1]) == b"\x00" * 15 and first.sizes == [0, 15]


def test_bytes_after_a_gap_are_not_added_to_the_first_bytes():
    """``data`` is contiguous from offset 0: bytes after a gap are counted, not kept."""
    first = watch()
    first.on_data(0, 0, b"A" * 10)
    first.on_gap(0, 10, 5)
    first.on_data(0, 15, b"B" * 10)
    assert first.sizes[0] == 25
    assert bytes(first.data[0]) == b"A" * 10
