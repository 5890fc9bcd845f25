"""Round trip for every (api_key, version, request|response) in the definitions.

Random valid values (``encoder.value_strategy``) are encoded with the test-only encoder and
decoded with the compiled strict decoder, the lenient interpreter and the ``BodyDecoder``
facade; all must give back exactly the value (types included), consume exactly the bytes, and
report no issue. DESIGN.md convention 6. Versions whose body layout an earlier (api_key, version) of
the same direction already has (250 of the 736) share its decoder code (checked): hypothesis round
trips each distinct layout (486), and each such version gets one deterministic value.

Examples per case: the ``kafkasniff-roundtrip`` hypothesis profile (override with
``KAFKASNIFF_ROUNDTRIP_EXAMPLES=200`` for a deeper run).
"""

from __future__ import annotations

import os
import struct
import zlib
from functools import lru_cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkasniff.protocol.codegen import compile_plan
from kafkasniff.protocol.decoder import UNSUPPORTED_VERSION_CODE, BodyDecoder
from kafkasniff.protocol.headers import API_VERSIONS
from kafkasniff.protocol.lenient import decode_lenient
from kafkasniff.protocol.plandecode import PlanDecoder
from kafkasniff.protocol.primitives import RawRecords
from kafkasniff.protocol.plans import FieldPlan, StructPlan
from kafkasniff.protocol.schema import load_definitions

from .encoder import UNKNOWN_TAGS_KEY, encode, example_value, value_strategy

settings.register_profile(
    "kafkasniff-roundtrip",
    max_examples=int(os.environ.get("KAFKASNIFF_ROUNDTRIP_EXAMPLES", "20")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much],
    print_blob=True,
)
ROUNDTRIP = settings.get_profile("kafkasniff-roundtrip")

DEFS = load_definitions()
DECODER = BodyDecoder(DEFS)


def _cases() -> tuple[list, list]:
    """``(cases, aliases)``: the first (api_key, version, direction) of each distinct body
    layout, and every other one with the ``(api_key, version)`` of the first with its
    layout (the same decoder code: hypothesis round trips it once)."""
    cases, aliases = [], []
    first: dict = {}
    for api_key in sorted(DEFS.apis):
        info = DEFS.apis[api_key]
        for is_response, name in ((False, info.request), (True, info.response)):
            for version in DEFS.message_versions(name):
                layout = (is_response, DECODER.strict_decoder(api_key, version,
                                                              is_response)._layout)
                case_id = f"{name}-v{version}"
                if layout in first:
                    aliases.append(pytest.param(api_key, version, is_response, first[layout],
                                                id=case_id))
                else:
                    first[layout] = (api_key, version)
                    cases.append(pytest.param(api_key, version, is_response, id=case_id))
    return cases, aliases


CASES, ALIASES = _cases()


def test_every_api_and_version_is_covered():
    # 95 API keys, each request and response at every version the definitions describe.
    assert len(DEFS.apis) == 95
    assert len(CASES) + len(ALIASES) == 736
    assert len(CASES) == 486        # distinct layouts
    assert {c.values[0] for c in CASES + ALIASES} == set(range(95))


@lru_cache(maxsize=None)
def _plan_and_strategy(api_key: int, version: int, is_response: bool):
    info = DEFS.apis[api_key]
    plan = DEFS.plan(info.response if is_response else info.request, version)
    return plan, value_strategy(plan)


def canon(v):
    """A type-exact, key-order-insensitive form (``True`` != ``1``, ``-0.0`` != ``0.0``)."""
    if isinstance(v, dict):
        return ("dict", tuple(sorted((k, canon(x)) for k, x in v.items())))
    if isinstance(v, list):
        return ("list", tuple(canon(x) for x in v))
    if isinstance(v, float):
        return ("float", repr(v))
    if isinstance(v, RawRecords):
        return ("records", type(v.data).__name__, v.data)
    return (type(v).__name__, v)


def check_key_order(plan: StructPlan, d: dict, path: str = "") -> None:
    """Untagged keys first, in wire order; then tagged keys in ascending tag order."""
    keys = list(d)
    plain = [f.key for f in plan.fields]
    assert keys[:len(plain)] == plain, path
    by_key = {f.key: tag for tag, f in plan.tagged.items()}
    rest = [k for k in keys[len(plain):] if k != UNKNOWN_TAGS_KEY]
    assert all(k in by_key for k in rest), (path, rest)
    assert [by_key[k] for k in rest] == sorted(by_key[k] for k in rest), path
    if UNKNOWN_TAGS_KEY in d:
        tags = [u["tag"] for u in d[UNKNOWN_TAGS_KEY]]
        assert tags == sorted(tags) and len(set(tags)) == len(tags), path
    fields = list(plan.fields) + list(plan.tagged.values())
    for f in fields:
        if f.struct is None or d.get(f.key) is None:
            continue
        if f.kind == "struct":
            check_key_order(f.struct, d[f.key], f"{path}.{f.key}")
        else:
            for i, item in enumerate(d[f.key]):
                check_key_order(f.struct, item, f"{path}.{f.key}[{i}]")


@pytest.mark.parametrize("api_key, version, is_response", CASES)
@ROUNDTRIP
@given(data=st.data(), prefix=st.binary(max_size=3))
def test_roundtrip(api_key, version, is_response, data, prefix):
    plan, strategy = _plan_and_strategy(api_key, version, is_response)
    _check_roundtrip(api_key, version, is_response, plan, data.draw(strategy, label="value"),
                     prefix)


@pytest.mark.parametrize("api_key, version, is_response, first", ALIASES)
def test_a_version_whose_layout_an_earlier_one_has(api_key, version, is_response, first):
    """Its decoder runs the code of the first version with that layout (round tripped by
    hypothesis above); one deterministic value through its own plan, decoders and facade."""
    strict = DECODER.strict_decoder(api_key, version, is_response)
    first_strict = DECODER.strict_decoder(first[0], first[1], is_response)
    # the generated code (the compiled interpreter's reference when it is installed)
    assert getattr(strict, "reference", strict).__code__ is \
        getattr(first_strict, "reference", first_strict).__code__
    info = DEFS.apis[api_key]
    plan = DEFS.plan(info.response if is_response else info.request, version)
    _check_roundtrip(api_key, version, is_response, plan, example_value(plan), b"\x07")


def _check_roundtrip(api_key, version, is_response, plan, value, prefix) -> None:
    """``value`` encoded after ``prefix`` comes back exactly from the strict decoder, the
    lenient interpreter and the facade, every byte consumed, no issue."""
    body = encode(plan, value)
    buf = prefix + body
    start = len(prefix)

    strict = DECODER.strict_decoder(api_key, version, is_response)
    got, end = strict(buf, start)
    assert end == len(buf), f"strict decoder consumed {end - start} of {len(body)} bytes"
    assert canon(got) == canon(value)
    check_key_order(plan, got)
    if isinstance(strict, PlanDecoder):     # the compiled interpreter decoded it, by itself
        alone = strict.interpret(buf, start)
        assert alone is not None, "the interpreter stopped on a valid body"
        assert repr(alone) == repr((got, end))

    lenient = decode_lenient(plan, buf, start)
    assert lenient.issues == []
    assert lenient.complete
    assert lenient.end == len(buf)
    assert canon(lenient.value) == canon(value)
    assert repr(lenient.value) == repr(got)  # same key order and types as the fast path

    if is_response and api_key == API_VERSIONS and version > 0 \
            and value["error_code"] == UNSUPPORTED_VERSION_CODE:
        return  # the facade decodes this one with the v0 layout (tested in test_lenient)
    res = DECODER.decode(api_key, version, is_response, buf, start)
    assert res.issues == []
    assert res.complete and res.end == len(buf)
    assert res.layout_version == version and res.assumed_version is None
    assert canon(res.value) == canon(value)


# --------------------------------------------------------------------------- independent references
# Bytes hand-built from the BNF of the 0.10-era protocol guide
# (/work/shared/seeds/000_fbdf74251d223c60.txt), not from the JSON specs.

def _string(s: str) -> bytes:  # STRING / NULLABLE_STRING: int16 length (-1 null)
    raw = s.encode()
    return struct.pack(">h", len(raw)) + raw


def _message_set_v0(key: bytes, value: bytes) -> bytes:
    body = b"\x00\x00" + struct.pack(">i", len(key)) + key + struct.pack(">i", len(value)) + value
    message = struct.pack(">I", zlib.crc32(body)) + body  # crc magic=0 attributes=0 key value
    return struct.pack(">qi", 0, len(message)) + message


RECORD_SET = _message_set_v0(b"k", b"hello")


def _produce_v2_body() -> bytes:
    # Produce Request (Version: 2) => acks timeout [topic_data]
    #   topic_data => topic [data];  data => partition record_set (BYTES)
    return (struct.pack(">hi", -1, 30000) + struct.pack(">i", 1) + _string("events")
            + struct.pack(">i", 1) + struct.pack(">i", 3)
            + struct.pack(">i", len(RECORD_SET)) + RECORD_SET)


PRODUCE_V2_VALUE = {"acks": -1, "timeout_ms": 30000, "topic_data": [
    {"name": "events", "partition_data": [{"index": 3, "records": RawRecords(RECORD_SET)}]}]}


@pytest.mark.parametrize("version", [2, 3])
def test_produce_request_from_the_protocol_guide(version):
    body = _produce_v2_body()
    expected = dict(PRODUCE_V2_VALUE)
    if version == 3:  # v3 (KIP-98, after the guide) puts transactional_id NULLABLE_STRING first
        body = struct.pack(">h", -1) + body
        expected = {"transactional_id": None, **PRODUCE_V2_VALUE}
    res = DECODER.decode(0, version, False, body, 0)
    assert res.issues == [] and res.complete
    assert res.value == expected
    assert list(res.value) == list(expected)
    assert res.value["topic_data"][0]["partition_data"][0]["records"].data == RECORD_SET
    assert encode(DEFS.plan("ProduceRequest", version), expected) == body


@pytest.mark.parametrize("topics, expected", [
    (["orders", "pay-ü"], [{"name": "orders"}, {"name": "pay-ü"}]),
    ([], []),
    (None, None),  # v1: a null array asks for all topics
])
def test_metadata_v1_request_from_the_protocol_guide(topics, expected):
    # Metadata Request (Version: 1) => [topics];  topics => STRING
    if topics is None:
        body = struct.pack(">i", -1)
    else:
        body = struct.pack(">i", len(topics)) + b"".join(_string(t) for t in topics)
    res = DECODER.decode(3, 1, False, body, 0)
    assert res.issues == [] and res.value == {"topics": expected}


def test_metadata_v1_response_from_the_protocol_guide():
    # Metadata Response (Version: 1) => [brokers] controller_id [topic_metadata]
    #   brokers => node_id host port rack(NULLABLE_STRING)
    #   topic_metadata => topic_error_code topic is_internal [partition_metadata]
    #   partition_metadata => partition_error_code partition_id leader [replicas] [isr]
    body = (struct.pack(">i", 2)
            + struct.pack(">i", 1) + _string("b1.example") + struct.pack(">i", 9092) + _string("r1")
            + struct.pack(">i", 2) + _string("b2.example") + struct.pack(">i", 9093)
            + struct.pack(">h", -1)
            + struct.pack(">i", 2)
            + struct.pack(">i", 1) + struct.pack(">h", 0) + _string("events") + b"\x01"
            + struct.pack(">i", 1) + struct.pack(">hii", 6, 0, -1)
            + struct.pack(">iii", 2, 1, 2) + struct.pack(">ii", 1, 1))
    res = DECODER.decode(3, 1, True, body, 0)
    assert res.issues == []
    assert res.value == {
        "brokers": [{"node_id": 1, "host": "b1.example", "port": 9092, "rack": "r1"},
                    {"node_id": 2, "host": "b2.example", "port": 9093, "rack": None}],
        "controller_id": 2,
        "topics": [{"error_code": 0, "name": "events", "is_internal": True, "partitions": [
            {"error_code": 6, "partition_index": 0, "leader_id": -1, "replica_nodes": [1, 2],
             "isr_nodes": [1]}]}],
    }
    assert res.value["topics"][0]["is_internal"] is True


# --------------------------------------------------------------------------- synthetic layouts
# Every kind x nullable x compact x tagged combination, including ones no current Kafka message
# uses (uint32, a tagged nullable struct, records in an array-free tagged field, known tags with
# gaps so unknown tags fall between them), so a newer spec cannot meet an untested path.

_FIXED_KINDS = ["int8", "int16", "int32", "int64", "uint16", "uint32", "float64", "bool", "uuid"]


def _fp(key, kind, *, items=None, struct_plan=None, compact=False, nullable=False, tag=None):
    return FieldPlan(key=key, kind=kind, items=items, struct=struct_plan,
                     compact=compact or tag is not None, nullable=nullable, tag=tag,
                     entity_type=None)


def synthetic_plan(flexible: bool) -> StructPlan:
    leaf_tagged = {7: _fp("leaf_tag", "int64", tag=7)} if flexible else {}
    leaf = StructPlan("Leaf", (_fp("a", "int32"),
                               _fp("s", "string", compact=flexible, nullable=True)),
                      leaf_tagged, flexible)
    compacts = sorted({False, flexible})
    fields = [_fp(k, k) for k in _FIXED_KINDS]
    for kind in ("string", "bytes", "records"):
        for nullable in (False, True):
            for compact in compacts:
                fields.append(_fp(f"{kind}_n{int(nullable)}_c{int(compact)}", kind,
                                  compact=compact, nullable=nullable))
    for items in _FIXED_KINDS + ["string", "bytes", "struct"]:
        for nullable in (False, True):
            for compact in compacts:
                fields.append(_fp(f"array_{items}_n{int(nullable)}_c{int(compact)}", "array",
                                  items=items, compact=compact, nullable=nullable,
                                  struct_plan=leaf if items == "struct" else None))
    fields.append(_fp("struct", "struct", struct_plan=leaf))
    fields.append(_fp("nullable_struct", "struct", struct_plan=leaf, nullable=True))
    tagged = {}
    if flexible:
        for f in [
            _fp("t_int32", "int32", tag=1),
            _fp("t_string", "string", nullable=True, tag=3),
            _fp("t_uuid", "uuid", tag=4),
            _fp("t_nullable_struct", "struct", struct_plan=leaf, nullable=True, tag=6),
            _fp("t_struct", "struct", struct_plan=leaf, tag=8),
            _fp("t_array_struct", "array", items="struct", struct_plan=leaf, nullable=True, tag=10),
            _fp("t_array_uuid", "array", items="uuid", tag=12),
            _fp("t_bytes", "bytes", tag=13),
            _fp("t_bool", "bool", tag=14),
            _fp("t_uint32", "uint32", tag=200),
            _fp("t_records", "records", nullable=True, tag=300),
            _fp("t_float64", "float64", tag=301),
            _fp("t_array_string", "array", items="string", nullable=True, tag=302),
        ]:
            tagged[f.tag] = f
    return StructPlan("Synthetic", tuple(fields), tagged, flexible)


SYNTHETIC = {flexible: synthetic_plan(flexible) for flexible in (False, True)}
SYNTHETIC_DECODERS = {flexible: compile_plan(plan) for flexible, plan in SYNTHETIC.items()}
#: the compiled interpreter over the same plans (tests/protocol/test_plandecode.py)
SYNTHETIC_INTERPRETERS = {flexible: PlanDecoder(plan, SYNTHETIC_DECODERS[flexible])
                          for flexible, plan in SYNTHETIC.items()}
SYNTHETIC_STRATEGIES = {flexible: value_strategy(plan) for flexible, plan in SYNTHETIC.items()}


@pytest.mark.parametrize("flexible", [False, True], ids=["classic", "flexible"])
@settings(ROUNDTRIP, max_examples=max(ROUNDTRIP.max_examples * 10, 200))
@given(data=st.data())
def test_roundtrip_synthetic_layouts(flexible, data):
    plan = SYNTHETIC[flexible]
    value = data.draw(SYNTHETIC_STRATEGIES[flexible], label="value")
    body = encode(plan, value)
    got, end = SYNTHETIC_DECODERS[flexible](body, 0)
    assert end == len(body)
    assert canon(got) == canon(value)
    check_key_order(plan, got)
    alone = SYNTHETIC_INTERPRETERS[flexible].interpret(body, 0)   # every field kind
    assert alone is not None and repr(alone) == repr((got, end))
    lenient = decode_lenient(plan, body)
    assert lenient.issues == [] and lenient.complete and lenient.end == len(body)
    assert repr(lenient.value) == repr(got)


def test_synthetic_tagged_nullable_struct_marker():
    # A tagged nullable struct starts with a uvarint marker: 0 null, 1 present.
    plan = SYNTHETIC[True]
    value = example_value(plan, unknown_tags=False)
    untagged = {f.key: value[f.key] for f in plan.fields}
    null_body = encode(plan, dict(untagged, t_nullable_struct=None))
    assert null_body.endswith(b"\x01" + b"\x06\x01" + b"\x00")  # 1 field: tag 6, size 1, null
    leaf = {"a": 5, "s": None}
    present = encode(plan, dict(untagged, t_nullable_struct=leaf))
    # marker 1, a = 5, s = null (compact 0), empty tagged section
    assert present.endswith(b"\x01" + b"\x06\x07" + b"\x01\x00\x00\x00\x05\x00\x00")
    for body, expected in ((null_body, None), (present, leaf)):
        got, end = SYNTHETIC_DECODERS[True](body, 0)
        assert end == len(body) and got["t_nullable_struct"] == expected
        assert decode_lenient(plan, body).value["t_nullable_struct"] == expected
