"""The lenient path of ``BodyDecoder``: truncation at every byte, spec departures, trailing
bytes, unknown api keys and versions, the ApiVersions UNSUPPORTED_VERSION answer, and random
bytes that must never make the decoder raise."""

from __future__ import annotations

import re
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkasniff.issues import IssueKind
from kafkasniff.protocol.decoder import BodyDecoder, BodyResult
from kafkasniff.protocol.lenient import BodyIssue
from kafkasniff.protocol.schema import load_definitions

from .encoder import (UNKNOWN_TAGS_KEY, encode, example_value, field_offsets, uuid_to_str,
                      write_uvarint)

DEFS = load_definitions()
DECODER = BodyDecoder(DEFS)
FETCH, PRODUCE, METADATA, API_VERSIONS = 1, 0, 3, 18
HDR = b"HDR!"  # stands for a request/response header: offsets are frame-payload offsets
START = len(HDR)

BODY_DECODE_ERROR = IssueKind.BODY_DECODE_ERROR
SPEC_DEPARTURE = IssueKind.SPEC_DEPARTURE

# (api_key, version, is_response, message name)
REAL_LAYOUTS = [
    (FETCH, 12, True, "FetchResponse"),
    (PRODUCE, 9, False, "ProduceRequest"),
    (PRODUCE, 3, False, "ProduceRequest"),
    (METADATA, 1, True, "MetadataResponse"),
    (METADATA, 12, True, "MetadataResponse"),
    (API_VERSIONS, 3, True, "ApiVersionsResponse"),
]
LAYOUT_IDS = [f"{name}-v{v}" for _, v, _, name in REAL_LAYOUTS]


def _example(name: str, version: int, **kw) -> tuple:
    plan = DEFS.plan(name, version)
    value = example_value(plan, **kw)
    return plan, value, encode(plan, value)


def kinds(res: BodyResult) -> list[str]:
    return [i.kind for i in res.issues]


def first_diff(a: bytes, b: bytes) -> int:
    """First offset where two encodings differ (locates a length prefix)."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def assert_prefix(partial, full, path: str = "") -> None:
    """``partial`` is what a truncated decode kept: every value in it equals the full one."""
    if isinstance(partial, dict):
        assert isinstance(full, dict), path
        assert set(partial) <= set(full), (path, set(partial) - set(full))
        for k, v in partial.items():
            assert_prefix(v, full[k], f"{path}.{k}")
    elif isinstance(partial, list):  # lists are attached first, then filled
        assert isinstance(full, list) and len(partial) <= len(full), path
        for i, (p, f) in enumerate(zip(partial, full)):
            assert_prefix(p, f, f"{path}[{i}]")
    else:
        assert partial == full, path


_STEP = re.compile(r"([a-z0-9_]+)((?:\[\d+\])*)")


def resolve_path(value: dict, path: str):
    """Follow a BodyIssue field path (``topics[0].partitions[1].records``) in ``value``."""
    steps = [s for s in path.split(".") if s != "_tagged_fields"]
    node = value
    for step in steps:
        m = _STEP.fullmatch(step)
        assert m, f"malformed path step {step!r} in {path!r}"
        node = node[m.group(1)]
        for idx in re.findall(r"\[(\d+)\]", m.group(2)):
            node = node[int(idx)]
    return node


# --------------------------------------------------------------------------- truncation

@pytest.mark.parametrize("api_key, version, is_response, name", REAL_LAYOUTS, ids=LAYOUT_IDS)
def test_truncated_at_every_byte(api_key, version, is_response, name):
    plan, full, body = _example(name, version)
    ends = field_offsets(plan, full)
    assert DECODER.try_strict(api_key, version, is_response, HDR + body, START) == full
    for cut in range(len(body)):
        payload = HDR + body[:cut]
        assert DECODER.try_strict(api_key, version, is_response, payload, START) is None, cut
        res = DECODER.decode(api_key, version, is_response, payload, START)
        assert kinds(res) == [BODY_DECODE_ERROR], (cut, res.issues)
        issue = res.issues[0]
        assert issue.field_path, cut
        assert START <= issue.offset <= START + cut, (cut, issue)
        assert res.complete is False
        assert res.layout_version == version
        resolve_path(full, issue.field_path)  # the path names a real field of the message
        assert_prefix(res.value, full)
        for key, _, end in ends:  # every top-level field that fits before the cut is kept
            if end <= cut:
                assert res.value[key] == full[key], (cut, key)


def test_truncation_reports_the_field_being_read():
    plan, full, body = _example("MetadataResponse", 1)
    # brokers: int32 count, then brokers[0] = node_id int32, host (int16 length + bytes) ...
    res = DECODER.decode(METADATA, 1, True, HDR + body[:9], START)
    assert res.issues == [BodyIssue(BODY_DECODE_ERROR, res.issues[0].message, "brokers[0].host",
                                    START + 8)]
    assert res.value == {"brokers": [{"node_id": full["brokers"][0]["node_id"]}]}
    assert "2 bytes" in res.issues[0].message and "1 left" in res.issues[0].message


def test_truncation_keeps_the_elements_decoded_before_it():
    plan, full, body = _example("MetadataResponse", 1)
    topic1_at = len(encode(plan, dict(full, topics=full["topics"][:1])))
    cut = topic1_at + 2 + 2 + 3  # error_code, name length, 3 bytes of the name
    res = DECODER.decode(METADATA, 1, True, HDR + body[:cut], START)
    assert [(i.kind, i.field_path) for i in res.issues] == [(BODY_DECODE_ERROR, "topics[1].name")]
    assert res.value["brokers"] == full["brokers"]
    assert res.value["controller_id"] == full["controller_id"]
    assert res.value["topics"][0] == full["topics"][0]
    assert res.value["topics"][1] == {"error_code": full["topics"][1]["error_code"]}
    assert res.end == res.issues[0].offset == START + cut - 3


def test_empty_body():
    res = DECODER.decode(METADATA, 12, True, HDR, START)
    assert kinds(res) == [BODY_DECODE_ERROR]
    assert res.issues[0].field_path == "throttle_time_ms"
    assert res.issues[0].offset == START
    assert res.value == {}


def test_huge_array_count_stops_without_allocating():
    payload = HDR + struct.pack(">i", 2 ** 31 - 1) + b"\x00\x01a"
    assert DECODER.try_strict(METADATA, 1, False, payload, START) is None
    res = DECODER.decode(METADATA, 1, False, payload, START)
    assert kinds(res) == [BODY_DECODE_ERROR]
    assert res.issues[0].field_path == "topics" and res.issues[0].offset == START


def test_overlong_varint_is_a_decode_error():
    # MetadataRequest v12: compact array count as an 11-byte varint
    payload = HDR + b"\x80" * 10 + b"\x01" + b"\x00" * 4
    res = DECODER.decode(METADATA, 12, False, payload, START)
    assert kinds(res) == [BODY_DECODE_ERROR]
    assert res.issues[0].field_path == "topics"


# --------------------------------------------------------------------------- spec departures

@pytest.mark.parametrize("version", [1, 12])
def test_null_in_non_nullable_string_and_array(version):
    plan = DEFS.plan("MetadataResponse", version)
    full = example_value(plan)
    bad = example_value(plan)
    bad["brokers"][0]["host"] = None
    bad["topics"][1]["partitions"][0]["replica_nodes"] = None
    empty = example_value(plan)
    empty["brokers"][0]["host"] = ""
    empty["topics"][1]["partitions"][0]["replica_nodes"] = []
    body = encode(plan, bad, lax=True)
    host_at = first_diff(body, encode(plan, empty))
    payload = HDR + body
    assert DECODER.try_strict(METADATA, version, True, payload, START) is None
    res = DECODER.decode(METADATA, version, True, payload, START)
    assert kinds(res) == [SPEC_DEPARTURE, SPEC_DEPARTURE]
    assert res.complete and res.end == len(payload)
    assert res.value == bad  # decoding went on: everything after the nulls is there
    assert res.value != full
    host, replicas = res.issues
    assert host.field_path == "brokers[0].host" and host.offset == START + host_at
    assert "null" in host.message
    assert replicas.field_path == "topics[1].partitions[0].replica_nodes"
    assert START + host_at < replicas.offset < len(payload)


@pytest.mark.parametrize("version", [1, 12])
def test_invalid_utf8_is_a_departure_and_stays_visible(version):
    plan = DEFS.plan("MetadataResponse", version)
    bad = example_value(plan)
    bad["topics"][0]["name"] = b"to\xffp\xc3ic"
    body = encode(plan, bad, lax=True)
    payload = HDR + body
    raw_at = body.index(b"to\xffp\xc3ic")
    assert DECODER.try_strict(METADATA, version, True, payload, START) is None
    res = DECODER.decode(METADATA, version, True, payload, START)
    assert kinds(res) == [SPEC_DEPARTURE]
    issue = res.issues[0]
    assert issue.field_path == "topics[0].name"
    assert START + raw_at - 2 <= issue.offset <= START + raw_at
    assert "UTF-8" in issue.message
    assert res.value["topics"][0]["name"] == "to\\xffp\\xc3ic"
    expected = dict(bad)
    expected["topics"] = [dict(bad["topics"][0], name="to\\xffp\\xc3ic"), bad["topics"][1]]
    assert res.value == expected
    assert res.complete and res.end == len(payload)


@pytest.mark.parametrize("api_key, version, is_response, name", REAL_LAYOUTS, ids=LAYOUT_IDS)
def test_trailing_bytes(api_key, version, is_response, name):
    plan, full, body = _example(name, version)
    payload = HDR + body + b"\x00\x07junk"
    res = DECODER.decode(api_key, version, is_response, payload, START)
    assert kinds(res) == [IssueKind.TRAILING_BYTES]
    assert res.issues[0].offset == START + len(body)
    assert "6 trailing bytes" in res.issues[0].message
    assert res.value == full and res.complete and res.end == START + len(body)
    assert DECODER.try_strict(api_key, version, is_response, payload, START) is None


def test_trailing_bytes_after_a_departure():
    plan = DEFS.plan("MetadataResponse", 1)
    bad = example_value(plan)
    bad["brokers"][1]["host"] = None
    body = encode(plan, bad, lax=True)
    res = DECODER.decode(METADATA, 1, True, HDR + body + b"\x01", START)
    assert kinds(res) == [SPEC_DEPARTURE, IssueKind.TRAILING_BYTES]
    assert res.issues[1].offset == START + len(body)
    assert res.value == bad


def _api_versions_v3_with_tags(tags: bytes) -> tuple[dict, bytes]:
    plan = DEFS.plan("ApiVersionsResponse", 3)
    base = {"error_code": 0, "api_keys": [{"api_key": 1, "min_version": 4, "max_version": 18}],
            "throttle_time_ms": 7}
    body = encode(plan, base)
    assert body.endswith(b"\x00")  # the empty top-level tagged section
    return base, body[:-1] + tags


EPOCH_TAG = b"\x01\x08" + struct.pack(">q", 42)  # tag 1 (finalized_features_epoch), size 8
FEATURES_TAG = b"\x00\x08" + b"\x02" + b"\x02x" + b"\x00\x01\x00\x02" + b"\x00"  # tag 0, 1 element
FEATURES = [{"name": "x", "min_version": 1, "max_version": 2}]


def test_tags_out_of_order_are_a_departure():
    base, body = _api_versions_v3_with_tags(b"\x02" + EPOCH_TAG + FEATURES_TAG)
    payload = HDR + body
    assert DECODER.try_strict(API_VERSIONS, 3, True, payload, START) is None
    res = DECODER.decode(API_VERSIONS, 3, True, payload, START)
    assert kinds(res) == [SPEC_DEPARTURE]
    assert res.issues[0].field_path == "_tagged_fields"
    assert "ascend" in res.issues[0].message
    assert res.value == dict(base, finalized_features_epoch=42, supported_features=FEATURES)
    assert res.complete and res.end == len(payload)


def test_tags_in_order_decode_strictly():
    base, body = _api_versions_v3_with_tags(b"\x02" + FEATURES_TAG + EPOCH_TAG)
    res = DECODER.decode(API_VERSIONS, 3, True, HDR + body, START)
    assert res.issues == []
    assert res.value == dict(base, finalized_features_epoch=42, supported_features=FEATURES)


def test_duplicate_tag_is_a_departure():
    base, body = _api_versions_v3_with_tags(b"\x02" + EPOCH_TAG + EPOCH_TAG)
    res = DECODER.decode(API_VERSIONS, 3, True, HDR + body, START)
    assert kinds(res) == [SPEC_DEPARTURE]
    assert res.value["finalized_features_epoch"] == 42


def test_tagged_value_not_filling_its_size_is_a_departure_and_decoding_goes_on():
    long_epoch = b"\x01\x09" + struct.pack(">q", 42) + b"\x00"  # size 9 for an int64
    short_epoch = b"\x01\x04" + b"\x00\x00\x00\x2a"            # size 4 for an int64
    for tag_bytes, epoch in ((long_epoch, 42), (short_epoch, None)):
        base, body = _api_versions_v3_with_tags(b"\x02" + tag_bytes + b"\x03\x01\x01")
        payload = HDR + body
        assert DECODER.try_strict(API_VERSIONS, 3, True, payload, START) is None
        res = DECODER.decode(API_VERSIONS, 3, True, payload, START)
        assert kinds(res) == [SPEC_DEPARTURE], res.issues
        assert res.issues[0].field_path == "finalized_features_epoch"
        assert res.value["zk_migration_ready"] is True  # the tag after it was decoded
        assert res.value.get("finalized_features_epoch") == epoch
        assert res.complete and res.end == len(payload)


def test_unknown_tags_are_kept_raw():
    _, body = _api_versions_v3_with_tags(b"\x02" + b"\x00\x01\x01" + b"\x96\x01\x02ab")
    res = DECODER.decode(API_VERSIONS, 3, True, HDR + body, START)
    # tag 0 is known (supported_features: an empty compact array) ; tag 150 is unknown
    assert res.issues == []
    assert res.value["supported_features"] == []
    assert res.value[UNKNOWN_TAGS_KEY] == [{"tag": 150, "data": b"ab"}]


# --------------------------------------------------------------------------- api key / version

@pytest.mark.parametrize("api_key", [-1, 95, 1000, 32767])
def test_unknown_api_key(api_key):
    res = DECODER.decode(api_key, 0, False, HDR + b"\x00\x01\x02", START)
    assert kinds(res) == [IssueKind.UNKNOWN_API_KEY]
    assert res.value is None and res.complete is False
    assert str(api_key) in res.issues[0].message


@pytest.mark.parametrize("is_response", [False, True])
def test_version_above_max_is_decoded_with_the_newest(is_response):
    info = DEFS.apis[FETCH]
    assert info.max_version == 18
    plan, full, body = _example(info.response if is_response else info.request, 18)
    res = DECODER.decode(FETCH, 99, is_response, HDR + body, START)
    assert kinds(res) == [IssueKind.UNSUPPORTED_VERSION]
    assert res.assumed_version == 18 and res.layout_version == 18
    assert "v99" in res.issues[0].message
    assert res.value == full and res.complete


def test_version_below_min_is_decoded_with_the_oldest():
    info = DEFS.apis[FETCH]
    plan, full, body = _example(info.request, info.min_version)
    res = DECODER.decode(FETCH, -1, False, HDR + body, START)
    assert kinds(res) == [IssueKind.UNSUPPORTED_VERSION]
    assert res.assumed_version == info.min_version
    assert res.value == full


def test_api_versions_unsupported_version_answer_uses_v0_layout():
    v0 = DEFS.plan("ApiVersionsResponse", 0)
    value = {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 3}]}
    payload = HDR + encode(v0, value)
    res = DECODER.decode(API_VERSIONS, 3, True, payload, START)
    assert res.issues == []
    assert res.layout_version == 0 and res.assumed_version is None
    assert res.value == value and res.complete and res.end == len(payload)


def test_api_versions_unsupported_version_in_the_requested_layout_also_decodes():
    # Some peers answer UNSUPPORTED_VERSION in the requested version's own layout.
    plan = DEFS.plan("ApiVersionsResponse", 3)
    value = {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 2}],
             "throttle_time_ms": 0}
    payload = HDR + encode(plan, value)
    res = DECODER.decode(API_VERSIONS, 3, True, payload, START)
    assert res.issues == [] and res.layout_version == 3
    assert res.value == value and res.complete


def test_api_versions_other_errors_use_their_own_layout():
    plan, full, body = _example("ApiVersionsResponse", 3)
    full_error = dict(full, error_code=1)
    body = encode(plan, full_error)
    res = DECODER.decode(API_VERSIONS, 3, True, HDR + body, START)
    assert res.issues == [] and res.layout_version == 3 and res.value == full_error


# --------------------------------------------------------------------------- never raises

ALL_KEYS = sorted(DEFS.apis)
_FUZZ = settings(max_examples=300, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow])


def _check_never_raises(api_key, version, is_response, payload, offset) -> None:
    res = DECODER.decode(api_key, version, is_response, payload, offset)
    assert isinstance(res, BodyResult)
    assert sum(k == BODY_DECODE_ERROR for k in kinds(res)) <= 1
    assert res.complete == (res.value is not None and BODY_DECODE_ERROR not in kinds(res))
    for issue in res.issues:
        assert 0 <= issue.offset <= len(payload), issue
    assert offset <= res.end <= len(payload)


@_FUZZ
@given(api_key=st.sampled_from(ALL_KEYS) | st.integers(-3, 120), version=st.integers(-2, 25),
       is_response=st.booleans(), payload=st.binary(max_size=80), data=st.data())
def test_random_bytes_never_raise(api_key, version, is_response, payload, data):
    offset = data.draw(st.integers(0, len(payload)), label="offset")
    _check_never_raises(api_key, version, is_response, payload, offset)


@_FUZZ
@given(which=st.sampled_from(REAL_LAYOUTS), data=st.data())
def test_damaged_valid_bodies_never_raise(which, data):
    api_key, version, is_response, name = which
    _, _, body = _example(name, version)
    buf = bytearray(HDR + body)
    for _ in range(data.draw(st.integers(1, 4), label="edits")):
        at = data.draw(st.integers(START, len(buf) - 1), label="at")
        op = data.draw(st.sampled_from(["set", "insert", "delete"]), label="op")
        byte = data.draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF]) | st.integers(0, 255))
        if op == "set":
            buf[at] = byte
        elif op == "insert":
            buf.insert(at, byte)
        elif len(buf) > START + 1:
            del buf[at]
    _check_never_raises(api_key, version, is_response, bytes(buf), START)


def test_uuid_text_form():
    # Kafka's Uuid.toString: URL-safe base64, no padding; the decoders give this text back.
    raw = bytes(range(240, 256))
    assert uuid_to_str(raw) == "8PHy8_T19vf4-fr7_P3-_w"
    plan = DEFS.plan("MetadataRequest", 12)
    body = (write_uvarint(2) + raw + write_uvarint(0) + b"\x00"
            + b"\x00" + b"\x00" + b"\x00")
    res = DECODER.decode(METADATA, 12, False, body, 0)
    assert res.issues == [], res.issues
    assert res.value["topics"] == [{"topic_id": "8PHy8_T19vf4-fr7_P3-_w", "name": None}]
    assert encode(plan, res.value) == body


def test_a_decode_stopping_inside_a_nullable_struct_keeps_what_was_read():
    """DescribeTopicPartitions v0 request cut inside its nullable ``cursor`` struct: the
    cursor's topic_name, read before the cut, is kept (as for arrays and plain structs)."""
    body = (write_uvarint(2) + write_uvarint(len(b"orders") + 1) + b"orders" + b"\x00"
            + struct.pack(">i", 100)                               # response_partition_limit
            + b"\x01" + write_uvarint(len(b"orders") + 1) + b"orders"  # cursor: topic_name
            + b"\x00\x00")                                         # partition_index cut
    res = DECODER.decode(75, 0, False, HDR + body, START)
    assert BODY_DECODE_ERROR in kinds(res)
    assert res.value["topics"] == [{"name": "orders"}]
    assert res.value["cursor"] == {"topic_name": "orders"}
