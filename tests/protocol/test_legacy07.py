"""Kafka 0.7 wire format: request/response bodies, message sets, detection.

The frames are built by a small test-only encoder below, written with ``struct`` from the
0.7 layouts (kafka.api.*Request / kafka.message.Message of Kafka 0.7, the "Writing a Driver
for Kafka" wiki page), independent of :mod:`kafkasniff.protocol.legacy07`.
"""

from __future__ import annotations

import gzip
import json
import random
import struct
import zlib
from pathlib import Path

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkasniff.issues import IssueKind
from kafkasniff.protocol.framing import ACCEPT, NEED_MORE, REJECT
from kafkasniff.protocol.legacy07 import (ERRORS_07, FETCH, MULTIFETCH, MULTIPRODUCE, OFFSETS,
                                          PRODUCE, REQUEST_TYPES, decode_messages_07,
                                          decode_request_07, decode_response_07,
                                          looks_like_07_request_stream, request_validator_07,
                                          response_fits, response_validator_07)

from ..pairing.frames import i16, i32, i64

ROOT = Path(__file__).resolve().parents[2]

# =========================================================================== test-only encoder


def short_string(s: str) -> bytes:
    b = s.encode()
    return i16(len(b)) + b


def message(payload: bytes, *, magic: int = 1, codec: int = 0, attributes: int | None = None,
            crc: int | None = None) -> bytes:
    """One message set entry: int32 size, magic, [attributes], crc32(payload), payload."""
    if crc is None:
        crc = zlib.crc32(payload)
    head = bytes([magic])
    if magic == 1:
        head += bytes([codec if attributes is None else attributes])
    body = head + struct.pack(">I", crc) + payload
    return i32(len(body)) + body


def message_set(*msgs: bytes) -> bytes:
    return b"".join(msgs)


def xerial_snappy(data: bytes) -> bytes:
    """snappy-java's stream framing, as Kafka 0.7's SnappyOutputStream writes it."""
    block = bytes(cramjam.snappy.compress_raw(data))
    return b"\x82SNAPPY\x00" + i32(1) + i32(1) + i32(len(block)) + block


def compressed(codec: int, inner: bytes, *, raw_snappy: bool = False) -> bytes:
    """A magic-1 wrapper message whose payload is ``inner`` (a message set) compressed."""
    if codec == 1:
        data = gzip.compress(inner)
    elif raw_snappy:
        data = bytes(cramjam.snappy.compress_raw(inner))
    else:
        data = xerial_snappy(inner)
    return message(data, magic=1, codec=codec)


def produce_body(topic: str, partition: int, mset: bytes) -> bytes:
    return short_string(topic) + i32(partition) + i32(len(mset)) + mset


def fetch_body(topic: str, partition: int, offset: int, max_size: int) -> bytes:
    return short_string(topic) + i32(partition) + i64(offset) + i32(max_size)


def request(rtype: int, body: bytes) -> bytes:
    payload = i16(rtype) + body
    return i32(len(payload)) + payload


def produce(topic: str, partition: int, mset: bytes) -> bytes:
    return request(PRODUCE, produce_body(topic, partition, mset))


def fetch(topic: str, partition: int, offset: int, max_size: int = 300 * 1024) -> bytes:
    return request(FETCH, fetch_body(topic, partition, offset, max_size))


def multifetch(*fetches: tuple[str, int, int, int]) -> bytes:
    return request(MULTIFETCH, i16(len(fetches)) + b"".join(fetch_body(*f) for f in fetches))


def multiproduce(*produces: tuple[str, int, bytes]) -> bytes:
    return request(MULTIPRODUCE, i16(len(produces)) + b"".join(produce_body(*p) for p in produces))


def offsets(topic: str, partition: int, time: int, max_number: int) -> bytes:
    return request(OFFSETS, short_string(topic) + i32(partition) + i64(time) + i32(max_number))


def response(error_code: int, payload: bytes = b"") -> bytes:
    return i32(2 + len(payload)) + i16(error_code) + payload


def fetch_response(error_code: int, mset: bytes = b"") -> bytes:
    return response(error_code, mset)


def multifetch_response(*sets: tuple[int, bytes]) -> bytes:
    return response(0, b"".join(i32(2 + len(m)) + i16(e) + m for e, m in sets))


def offsets_response(error_code: int, values: list[int]) -> bytes:
    return response(error_code, i32(len(values)) + b"".join(i64(v) for v in values))


def payload_of(frame: bytes) -> bytes:
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    return frame[4:]


def kinds(issues) -> list[str]:
    return [str(i.kind) for i in issues]


M1 = message(b"hello", magic=0)
M2 = message(b"world", magic=1)
M3 = message(b"", magic=1)
SET = message_set(M1, M2, M3)

ALL_REQUESTS = {
    "produce": produce("orders", 3, SET),
    "produce_random_partition": produce("orders", -1, message(b"x")),
    "produce_empty": produce("orders", 0, b""),
    "fetch": fetch("orders", 1, 1234, 1024),
    "multifetch": multifetch(("orders", 0, 0, 1000), ("payments", 2, 77, 2000)),
    "multiproduce": multiproduce(("orders", 0, SET), ("payments", 1, message(b"p"))),
    "offsets_latest": offsets("orders", 0, -1, 1),
    "offsets_earliest": offsets("orders", 0, -2, 10),
    "offsets_time": offsets("orders", 0, 1_300_000_000_000, 5),
    "produce_gzip": produce("orders", 0, compressed(1, SET)),
    "produce_snappy": produce("orders", 0, compressed(2, SET)),
}

# =========================================================================== requests


def test_produce_request():
    rtype, body, issues = decode_request_07(payload_of(produce("orders", 3, SET)))
    assert rtype == PRODUCE and issues == []
    assert body["topic"] == "orders" and body["partition"] == 3
    assert body["messages_size"] == len(SET)
    msgs = body["messages"]
    assert [m["payload"] for m in msgs] == [b"hello", b"world", b""]
    assert [m["magic"] for m in msgs] == [0, 1, 1]
    # byte offsets of each entry inside the set
    assert [m["offset"] for m in msgs] == [0, len(M1), len(M1) + len(M2)]
    assert [m["size"] for m in msgs] == [len(M1) - 4, len(M2) - 4, len(M3) - 4]
    assert msgs[0]["attributes"] is None and msgs[1]["attributes"] == 0
    assert all(m["crc_ok"] and m["compression"] == 0 for m in msgs)
    assert all("messages" not in m for m in msgs)
    assert msgs[0]["crc"] == zlib.crc32(b"hello")


def test_produce_random_partition():
    rtype, body, issues = decode_request_07(payload_of(produce("t", -1, message(b"x"))))
    assert (rtype, body["partition"], issues) == (PRODUCE, -1, [])


def test_fetch_request():
    rtype, body, issues = decode_request_07(payload_of(fetch("orders", 1, 2**40, 4096)))
    assert (rtype, issues) == (FETCH, [])
    assert body == {"topic": "orders", "partition": 1, "offset": 2**40, "max_size": 4096}


def test_multifetch_request():
    frame = multifetch(("orders", 0, 0, 1000), ("payments", 2, 77, 2000))
    rtype, body, issues = decode_request_07(payload_of(frame))
    assert (rtype, issues) == (MULTIFETCH, [])
    assert body == {"fetches": [
        {"topic": "orders", "partition": 0, "offset": 0, "max_size": 1000},
        {"topic": "payments", "partition": 2, "offset": 77, "max_size": 2000}]}


def test_multiproduce_request():
    frame = multiproduce(("orders", 0, SET), ("payments", 1, message(b"p")))
    rtype, body, issues = decode_request_07(payload_of(frame))
    assert (rtype, issues) == (MULTIPRODUCE, [])
    a, b = body["produces"]
    assert (a["topic"], a["partition"], len(a["messages"])) == ("orders", 0, 3)
    assert (b["topic"], b["partition"], b["messages"][0]["payload"]) == ("payments", 1, b"p")


@pytest.mark.parametrize("time", [-1, -2, 1_300_000_000_000])
def test_offsets_request(time):
    rtype, body, issues = decode_request_07(payload_of(offsets("orders", 4, time, 7)))
    assert (rtype, issues) == (OFFSETS, [])
    assert body == {"topic": "orders", "partition": 4, "time": time, "max_number": 7}


def test_unknown_request_type():
    rtype, body, issues = decode_request_07(i16(9) + b"abc")
    assert rtype == 9 and body == {}
    assert kinds(issues) == [IssueKind.BODY_DECODE_ERROR]


def test_too_short_for_request_type():
    rtype, body, issues = decode_request_07(b"\x00")
    assert rtype == -1 and kinds(issues) == [IssueKind.BODY_DECODE_ERROR]


def test_trailing_bytes_after_request():
    payload = payload_of(fetch("orders", 1, 0, 10)) + b"\x00\x01\x02"
    rtype, body, issues = decode_request_07(payload)
    assert body["max_size"] == 10
    assert kinds(issues) == [IssueKind.TRAILING_BYTES]
    assert issues[0].offset == len(payload) - 3


@pytest.mark.parametrize("name", sorted(ALL_REQUESTS))
def test_truncation_at_every_byte(name):
    payload = payload_of(ALL_REQUESTS[name])
    full_type, full_body, full_issues = decode_request_07(payload)
    assert full_issues == []
    for cut in range(len(payload)):
        rtype, body, issues = decode_request_07(payload[:cut])
        assert IssueKind.BODY_DECODE_ERROR in kinds(issues), cut
        if cut >= 2:
            assert rtype == full_type
            # what was decoded is a prefix of the full decode
            for k, v in body.items():
                if not isinstance(v, list):
                    assert full_body[k] == v
        for i in issues:
            assert 0 <= i.offset <= cut


def test_truncated_message_set_keeps_whole_messages():
    payload = payload_of(produce("orders", 0, SET))
    cut = len(payload) - 3            # inside M3
    _, body, issues = decode_request_07(payload[:cut])
    assert [m["payload"] for m in body["messages"]] == [b"hello", b"world"]
    assert kinds(issues) == [IssueKind.BODY_DECODE_ERROR, IssueKind.BODY_DECODE_ERROR]
    assert issues[0].field_path == "messages[2]"


def test_partial_multi_request_keeps_items():
    frame = multifetch(("orders", 0, 0, 1000), ("payments", 2, 77, 2000))
    payload = payload_of(frame)
    _, body, issues = decode_request_07(payload[:-6])
    assert body["fetches"][0]["max_size"] == 1000
    assert body["fetches"][1] == {"topic": "payments", "partition": 2}
    assert issues[-1].field_path == "fetches[1].offset"


def test_invalid_utf8_topic_is_a_departure():
    payload = i16(FETCH) + i16(2) + b"\xff\xfe" + i32(0) + i64(0) + i32(1)
    _, body, issues = decode_request_07(payload)
    assert kinds(issues) == [IssueKind.SPEC_DEPARTURE]
    assert body["topic"] == "\\xff\\xfe"


def test_negative_counts_and_sizes():
    _, _, issues = decode_request_07(i16(MULTIFETCH) + i16(-1))
    assert kinds(issues) == [IssueKind.BODY_DECODE_ERROR]
    _, _, issues = decode_request_07(i16(PRODUCE) + short_string("t") + i32(0) + i32(-5))
    assert kinds(issues) == [IssueKind.BODY_DECODE_ERROR]


# =========================================================================== messages


def test_magic0_and_magic1():
    msgs, issues = decode_messages_07(message_set(message(b"a", magic=0), message(b"b")))
    assert issues == []
    assert [(m["magic"], m["attributes"], m["payload"]) for m in msgs] == \
        [(0, None, b"a"), (1, 0, b"b")]


@pytest.mark.parametrize("codec,raw", [(1, False), (2, False), (2, True)])
def test_compressed_wrapper(codec, raw):
    inner = message_set(message(b"one", magic=0), message(b"two"), message(b"three"))
    data = message_set(message(b"before", magic=0), compressed(codec, inner, raw_snappy=raw))
    msgs, issues = decode_messages_07(data)
    assert issues == []
    assert msgs[0]["payload"] == b"before"
    w = msgs[1]
    assert (w["magic"], w["compression"], w["crc_ok"]) == (1, codec, True)
    assert [m["payload"] for m in w["messages"]] == [b"one", b"two", b"three"]
    assert [m["offset"] for m in w["messages"]] == [0, 4 + 5 + 3, (4 + 5 + 3) + (4 + 6 + 3)]


def test_nested_compression():
    innermost = message_set(message(b"deep"))
    middle = message_set(compressed(2, innermost), message(b"mid"))
    data = compressed(1, middle)
    msgs, issues = decode_messages_07(data)
    assert issues == []
    [outer] = msgs
    snappy, mid = outer["messages"]
    assert snappy["compression"] == 2 and snappy["messages"][0]["payload"] == b"deep"
    assert mid["payload"] == b"mid"


def test_crc_mismatch():
    data = message_set(message(b"ok"), message(b"bad", crc=zlib.crc32(b"bad") ^ 1))
    msgs, issues = decode_messages_07(data)
    assert [m["crc_ok"] for m in msgs] == [True, False]
    assert msgs[1]["payload"] == b"bad"
    assert kinds(issues) == ["crc_mismatch"]
    assert issues[0].field_path == "messages[1].crc"
    assert issues[0].offset == len(message(b"ok")) + 6   # size + magic + attributes


def test_crc_mismatch_inside_compressed_set():
    inner = message_set(message(b"x", crc=0))
    wrapper = compressed(1, inner)
    msgs, issues = decode_messages_07(message_set(message(b"a"), wrapper))
    assert kinds(issues) == ["crc_mismatch"]
    assert issues[0].field_path == "messages[1].messages[0].crc"
    assert issues[0].offset == len(message(b"a"))     # placed at the wrapper
    assert msgs[1]["messages"][0]["crc_ok"] is False


def test_crc_mismatch_on_wrapper_still_decompresses():
    inner = message_set(message(b"x"))
    data = gzip.compress(inner)
    msgs, issues = decode_messages_07(message(data, codec=1, crc=123))
    assert kinds(issues) == ["crc_mismatch"]
    assert msgs[0]["messages"][0]["payload"] == b"x"


def test_damaged_compressed_payload():
    msgs, issues = decode_messages_07(message(b"not gzip at all", codec=1))
    assert kinds(issues) == ["decompression_error"]
    assert msgs[0]["messages"] is None and msgs[0]["payload"] == b"not gzip at all"


def test_decompression_bound():
    inner = message_set(message(b"z" * 100_000))
    data = compressed(1, inner)
    msgs, issues = decode_messages_07(data, max_uncompressed_bytes=50_000)
    assert kinds(issues) == ["decompression_error"]
    assert msgs[0]["messages"] is None
    msgs, issues = decode_messages_07(data, max_uncompressed_bytes=200_000)
    assert issues == [] and len(msgs[0]["messages"][0]["payload"]) == 100_000


def test_decompression_budget_is_shared_by_the_whole_set():
    inner = message_set(message(b"z" * 30_000))
    data = message_set(compressed(1, inner), compressed(1, inner))
    msgs, issues = decode_messages_07(data, max_uncompressed_bytes=50_000)
    assert msgs[0]["messages"] is not None and msgs[1]["messages"] is None
    assert kinds(issues) == ["decompression_error"]


def test_codec_3_is_undefined_in_07():
    msgs, issues = decode_messages_07(message(b"abc", codec=3))
    assert kinds(issues) == ["decompression_error"]
    assert msgs[0]["compression"] == 3 and msgs[0]["messages"] is None


def test_only_bits_0_1_select_the_codec():
    msgs, issues = decode_messages_07(message(b"abc", attributes=0x04))
    assert issues == [] and msgs[0]["compression"] == 0 and msgs[0]["attributes"] == 4


def test_unknown_magic_is_kept_raw_and_decoding_goes_on():
    odd = i32(7) + bytes([2]) + b"abcdef"
    msgs, issues = decode_messages_07(message_set(odd, message(b"next")))
    assert kinds(issues) == [IssueKind.SPEC_DEPARTURE]
    assert msgs[0]["magic"] == 2 and msgs[0]["payload"] == b"abcdef"
    assert msgs[1]["payload"] == b"next"


def test_implausible_message_size_stops():
    msgs, issues = decode_messages_07(message(b"a") + i32(2) + b"\x00\x00")
    assert len(msgs) == 1 and kinds(issues) == [IssueKind.BODY_DECODE_ERROR]


def test_partial_tail():
    data = message_set(message(b"a"), message(b"bbbbbb"))
    for cut in range(len(message(b"a")) + 1, len(data)):
        msgs, issues = decode_messages_07(data[:cut], partial_tail_ok=True)
        assert issues == [] and len(msgs) == 1
        msgs, issues = decode_messages_07(data[:cut])
        assert len(msgs) == 1 and kinds(issues) == [IssueKind.BODY_DECODE_ERROR]


# =========================================================================== responses


def test_fetch_response():
    mset = message_set(message(b"a"), compressed(2, message_set(message(b"b"))))
    body, issues = decode_response_07(FETCH, payload_of(fetch_response(0, mset)), {})
    assert issues == []
    assert body["error_code"] == 0
    assert body["messages"][0]["payload"] == b"a"
    assert body["messages"][1]["messages"][0]["payload"] == b"b"
    assert "partial_tail_bytes" not in body


def test_fetch_response_cut_by_max_size_is_normal():
    mset = message_set(message(b"a"), message(b"bbbbbbbbbb"))
    payload = payload_of(fetch_response(0, mset[:-4]))
    body, issues = decode_response_07(FETCH, payload, {})
    assert issues == [] and len(body["messages"]) == 1
    assert body["partial_tail_bytes"] == len(message(b"bbbbbbbbbb")) - 4


@pytest.mark.parametrize("code", sorted(ERRORS_07))
def test_fetch_error_response(code):
    body, issues = decode_response_07(FETCH, payload_of(fetch_response(code)), {})
    assert body == {"error_code": code, "messages": []} and issues == []


def test_multifetch_response():
    req = {"fetches": [{"topic": "a", "partition": 0}, {"topic": "b", "partition": 5}]}
    frame = multifetch_response((0, message(b"x")), (1, b""))
    body, issues = decode_response_07(MULTIFETCH, payload_of(frame), req)
    assert issues == []
    assert body["error_code"] == 0
    a, b = body["fetches"]
    assert (a["topic"], a["partition"], a["error_code"], a["messages"][0]["payload"]) == \
        ("a", 0, 0, b"x")
    assert (b["topic"], b["partition"], b["error_code"], b["messages"]) == ("b", 5, 1, [])


def test_multifetch_response_without_request_body():
    frame = multifetch_response((0, message(b"x")), (4, b""))
    body, issues = decode_response_07(MULTIFETCH, payload_of(frame), None)
    assert issues == [] and [f["error_code"] for f in body["fetches"]] == [0, 4]


def test_multifetch_response_count_mismatch():
    req = {"fetches": [{"topic": "a", "partition": 0}] * 3}
    frame = multifetch_response((0, b""), (0, b""))
    body, issues = decode_response_07(MULTIFETCH, payload_of(frame), req)
    assert kinds(issues) == [IssueKind.BODY_DECODE_ERROR] and len(body["fetches"]) == 2
    req = {"fetches": [{"topic": "a", "partition": 0}]}
    body, issues = decode_response_07(MULTIFETCH, payload_of(frame), req)
    assert kinds(issues) == [IssueKind.TRAILING_BYTES] and len(body["fetches"]) == 1


def test_multifetch_set_cut_in_a_message_is_normal():
    req = {"fetches": [{"topic": "a", "partition": 0}]}
    mset = message(b"x") + message(b"yyyy")[:-2]
    body, issues = decode_response_07(MULTIFETCH, payload_of(multifetch_response((0, mset))), req)
    assert issues == [] and body["fetches"][0]["partial_tail_bytes"] == len(message(b"yyyy")) - 2


def test_offsets_response():
    body, issues = decode_response_07(OFFSETS, payload_of(offsets_response(0, [300, 0])), {})
    assert (body, issues) == ({"error_code": 0, "offsets": [300, 0]}, [])
    body, issues = decode_response_07(OFFSETS, payload_of(response(3)), {})
    assert (body, issues) == ({"error_code": 3}, [])
    body, issues = decode_response_07(OFFSETS, payload_of(offsets_response(0, [1, 2]))[:-1], {})
    assert kinds(issues) == [IssueKind.BODY_DECODE_ERROR]
    body, issues = decode_response_07(OFFSETS, payload_of(offsets_response(0, [1])) + b"\x00", {})
    assert kinds(issues) == [IssueKind.TRAILING_BYTES] and body["offsets"] == [1]


def test_produce_gets_no_response():
    body, issues = decode_response_07(PRODUCE, payload_of(response(0, b"ab")), {})
    assert body["error_code"] == 0 and body["raw"] == b"ab"
    assert kinds(issues) == [IssueKind.SPEC_DEPARTURE]


def test_response_too_short():
    body, issues = decode_response_07(FETCH, b"\x00", {})
    assert body == {} and kinds(issues) == [IssueKind.BODY_DECODE_ERROR]


def test_response_fits():
    assert response_fits(FETCH, payload_of(fetch_response(1)), None)
    assert not response_fits(FETCH, i16(77), None)
    assert response_fits(OFFSETS, payload_of(offsets_response(0, [1, 2])), None)
    assert not response_fits(OFFSETS, payload_of(offsets_response(0, [1, 2])) + b"\x00", None)
    req = {"fetches": [{}, {}]}
    assert response_fits(MULTIFETCH, payload_of(multifetch_response((0, b""), (1, b""))), req)
    assert not response_fits(MULTIFETCH, payload_of(multifetch_response((0, b""))), req)


# =========================================================================== detection

VALIDATE = request_validator_07()


def stream(*frames: bytes) -> bytes:
    return b"".join(frames)


@pytest.mark.parametrize("name", sorted(ALL_REQUESTS))
def test_07_requests_are_accepted(name):
    frame = ALL_REQUESTS[name]
    assert VALIDATE(frame, 0, False) == ACCEPT
    assert VALIDATE(b"junk" + frame, 4, True) == ACCEPT
    assert looks_like_07_request_stream(frame) == ACCEPT
    assert looks_like_07_request_stream(frame + fetch("orders", 0, 0)) == ACCEPT


@pytest.mark.parametrize("name", sorted(ALL_REQUESTS))
def test_prefixes_are_never_rejected(name):
    """A request start is never rejected for lack of bytes (byte-by-byte hunting)."""
    frame = ALL_REQUESTS[name]
    for cut in range(len(frame)):
        assert VALIDATE(frame[:cut], 0, False) in (ACCEPT, NEED_MORE), cut
        assert looks_like_07_request_stream(frame[:cut]) in (ACCEPT, NEED_MORE), cut
    assert looks_like_07_request_stream(b"") == NEED_MORE


def test_validator_needs_at_most_the_first_item_header():
    frame = multiproduce(("orders", 0, SET), ("payments", 1, message(b"p")))
    need = 4 + 2 + 2 + 2 + 6 + 4 + 4 + 5   # header, count, topic, partition, size, 1st msg
    assert VALIDATE(frame[:need], 0, False) == ACCEPT
    assert VALIDATE(frame[:need - 1], 0, False) == NEED_MORE


@pytest.mark.parametrize("bad", [
    request(5, short_string("t") + i32(0) + i64(0) + i32(1)),                  # no type 5
    request(FETCH, short_string("t") + i32(0) + i64(0) + i32(1) + b"\x00"),    # size off
    request(FETCH, short_string("") + i32(0) + i64(0) + i32(1)),               # empty topic
    request(FETCH, short_string("a b") + i32(0) + i64(0) + i32(1)),            # space
    request(FETCH, short_string("t") + i32(-1) + i64(0) + i32(1)),             # partition
    request(FETCH, short_string("t") + i32(0) + i64(-5) + i32(1)),             # offset
    request(OFFSETS, short_string("t") + i32(0) + i64(-3) + i32(1)),           # time
    request(PRODUCE, short_string("t") + i32(0) + i32(4) + b"abcd"),            # no message
    request(PRODUCE, produce_body("t", 0, i32(9) + bytes([5]) + bytes(8))),    # magic 5
    request(PRODUCE, produce_body("t", -2, message(b"x"))),                    # partition
    request(MULTIFETCH, i16(0)),                                               # no items
    request(MULTIFETCH, i16(2) + fetch_body("t", 0, 0, 1)),                    # too few bytes
    request(MULTIPRODUCE, i16(1) + produce_body("t", 0, b"") + b"\x00"),       # size off
])
def test_implausible_requests_are_rejected(bad):
    assert VALIDATE(bad, 0, False) == REJECT
    assert looks_like_07_request_stream(bad) == REJECT


def test_second_frame_is_checked():
    data = fetch("orders", 0, 0) + request(9, b"xxxxxxxx")
    assert looks_like_07_request_stream(data) == REJECT


def _client_streams(path: Path, limit: int = 64 * 1024) -> list[bytes]:
    """Client-to-broker byte streams (from offset 0, up to the first gap) of a capture."""
    from kafkasniff.capture import open_capture
    from kafkasniff.capture.packet import decode_packet
    from kafkasniff.capture.types import TcpSegment
    from kafkasniff.tcp.reassembly import TcpReassembler
    from kafkasniff.tcp.types import StreamData, StreamGap

    truth = json.loads(path.with_suffix(".truth.json").read_text())
    ports = set(truth["broker_ports"])
    reasm = TcpReassembler()
    streams: dict[tuple[int, int], bytearray] = {}
    stopped: set[tuple[int, int]] = set()

    def take(events):
        for ev in events:
            if type(ev) is StreamGap:
                stopped.add((ev.conn.conn_id, ev.direction))
            if type(ev) is not StreamData:
                continue
            conn = ev.conn
            broker_port = conn.b_port if ev.direction == 0 else conn.a_port
            if broker_port not in ports:
                continue
            key = (conn.conn_id, ev.direction)
            buf = streams.setdefault(key, bytearray())
            if key in stopped or ev.offset != len(buf) or len(buf) >= limit:
                stopped.add(key)
                continue
            buf += ev.data

    with open_capture(path) as src:
        for pkt in src:
            seg = decode_packet(pkt)
            if isinstance(seg, TcpSegment):
                take(reasm.feed(seg))
    take(reasm.flush())
    return [bytes(b) for b in streams.values() if len(b) >= 14]


def _frames(data: bytes):
    pos = 0
    while pos + 4 <= len(data):
        size = struct.unpack_from(">i", data, pos)[0]
        if size < 0:
            return
        yield pos
        pos += 4 + size


# every committed capture of 0.8+ traffic (the 0.7 one and TLS have no 0.8+ request stream)
CAPTURE_FILES = sorted(p for p in (ROOT / "captures").glob("*.pcap")
                       if "kafka07" not in p.name and "tls" not in p.name)


@pytest.mark.parametrize("path", CAPTURE_FILES, ids=lambda p: p.name)
def test_real_08_request_streams_are_rejected(path):
    streams = _client_streams(path)
    assert streams, "no client stream found"
    for data in streams:
        assert looks_like_07_request_stream(data) == REJECT
        for pos in _frames(data):
            if len(data) - pos >= 300:
                assert VALIDATE(data, pos, False) == REJECT, (path.name, pos, data[pos:pos + 24])
                assert VALIDATE(data, pos, True) == REJECT


def test_real_08_frames_were_checked():
    """Every 0.8+ request frame start of the committed captures is rejected (many frames)."""
    checked = keys = 0
    for path in CAPTURE_FILES:
        for data in _client_streams(path):
            for pos in _frames(data):
                if len(data) - pos >= 14:
                    assert VALIDATE(data, pos, False) == REJECT
                    checked += 1
                    keys += data[pos + 4:pos + 6] in (b"\x00\x00", b"\x00\x01", b"\x00\x02",
                                                      b"\x00\x03")
    assert checked > 200 and keys > 50   # Produce/Fetch/ListOffsets/Metadata among them


def test_response_validator():
    any_response = response_validator_07()
    assert any_response(fetch_response(0, message(b"abc")), 0) == ACCEPT
    assert any_response(fetch_response(1), 0) == ACCEPT
    assert any_response(offsets_response(0, [1, 2, 3]), 0) == ACCEPT
    assert any_response(multifetch_response((0, b""), (1, message(b"a"))), 0) == ACCEPT
    assert any_response(response(9, b"abcdefgh"), 0) == REJECT
    assert any_response(i32(20) + i16(0) + i32(1) + b"\x07" + bytes(13), 0) == REJECT
    assert any_response(b"\x00\x00\x00", 0) == NEED_MORE
    only_offsets = response_validator_07(lambda: OFFSETS)
    assert only_offsets(offsets_response(0, [1]), 0) == ACCEPT
    assert only_offsets(fetch_response(0, message(b"abcdefghijk")), 0) == REJECT
    only_fetch = response_validator_07(lambda: FETCH)
    frame = fetch_response(0, message(b"abc"))
    assert only_fetch(frame[:10], 0) == NEED_MORE
    assert only_fetch(frame, 0) == ACCEPT


# =========================================================================== robustness


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_never_raise(data):
    decode_request_07(data)
    for t in list(REQUEST_TYPES) + [7]:
        decode_response_07(t, data, {"fetches": [{}, {}]})
        decode_response_07(t, data, None)
        response_fits(t, data, None)
    decode_messages_07(data)
    decode_messages_07(data, partial_tail_ok=True)
    looks_like_07_request_stream(data)
    for pos in range(min(len(data), 20)):
        VALIDATE(data, pos, False)
        response_validator_07()(data, pos)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(ALL_REQUESTS)), st.data())
def test_mutated_requests_never_raise(name, data):
    frame = bytearray(ALL_REQUESTS[name])
    for _ in range(data.draw(st.integers(1, 5))):
        i = data.draw(st.integers(0, len(frame) - 1))
        frame[i] = data.draw(st.integers(0, 255))
    decode_request_07(bytes(frame[4:]))
    VALIDATE(bytes(frame), 0, False)
    looks_like_07_request_stream(bytes(frame))


def test_random_compressed_garbage_never_raises():
    rnd = random.Random(7)
    for _ in range(300):
        codec = rnd.choice([1, 2, 3])
        payload = bytes(rnd.randrange(256) for _ in range(rnd.randrange(40)))
        msgs, issues = decode_messages_07(message(payload, codec=codec))
        assert msgs[0]["messages"] is None or isinstance(msgs[0]["messages"], list)
