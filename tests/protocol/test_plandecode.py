"""The compiled body interpreter (kafkasniff.protocol.plandecode): on every body it decodes by
itself, the value its reference (the generated strict decoder of the same plan) gives; it
fails (StrictDecodeFailure) exactly where the reference fails; where it stops, the reference
decodes.

Round trips of every (api_key, version, direction) and of every field kind of the synthetic
layouts through the interpreter alone are in test_codegen.py (``_check_roundtrip`` when the
module is compiled; the synthetic ones both ways); here: damaged bodies of every layout, and
where it stops or fails. The module runs as plain Python too (slower than the generated
decoders, so not used then), and these tests run it both ways.
"""

from __future__ import annotations

import random

import pytest

from kafkasniff.protocol.codegen import StrictDecodeFailure, compile_plan
from kafkasniff.protocol.decoder import STRICT_ERRORS
from kafkasniff.protocol.plandecode import Op, PlanDecoder
from kafkasniff.protocol.plans import FieldPlan, StructPlan
from kafkasniff.protocol.primitives import RawRecords

from .encoder import encode, example_value
from .test_codegen import CASES, DEFS


def _outcome(fn, buf, pos=0):
    """``("value", repr)`` of what ``fn`` returns, or ``("error",)`` for a strict decoder's
    error (which one is not compared: callers catch them all)."""
    try:
        value = fn(buf, pos)
    except STRICT_ERRORS:
        return ("error",)
    return "value", repr(value)


def _damaged(body: bytes, rng: random.Random) -> list[bytes]:
    out = [body[:n] for n in sorted({0, 1, len(body) // 3, len(body) // 2, len(body) - 1})
           if n < len(body)]
    for _ in range(6 if body else 0):
        m = bytearray(body)
        for _ in range(rng.randint(1, 3)):
            m[rng.randrange(len(m))] = rng.randrange(256)
        out.append(bytes(m))
    out.append(body + b"\x00")
    out.append(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 24))))
    return out


def test_damaged_bodies_of_every_layout_give_what_the_reference_gives():
    """Truncated, flipped, extended and random bodies of each distinct layout: the same value
    as the generated decoder, or an error where it has one; the interpreter alone fails
    only where the reference fails."""
    rng = random.Random(14)
    alone = failed = 0
    for case in CASES:
        api_key, version, is_response = case.values
        info = DEFS.apis[api_key]
        plan = DEFS.plan(info.response if is_response else info.request, version)
        reference = compile_plan(plan)
        dec = PlanDecoder(plan, reference)
        body = encode(plan, example_value(plan, array_len=1))
        assert dec.interpret(body, 0) is not None, case.id
        for buf in _damaged(body, rng):
            want = _outcome(reference, buf)
            assert _outcome(dec, buf) == want, (case.id, buf.hex())
            try:
                got = dec.interpret(buf, 0)
            except StrictDecodeFailure:
                assert want == ("error",), (case.id, buf.hex())
                failed += 1
            else:
                assert got is not None and ("value", repr(got)) == want, (case.id, buf.hex())
                alone += 1
    assert alone > len(CASES) and failed > len(CASES)   # both kinds met, many times


def _plan(*fields: FieldPlan, flexible: bool = True, tagged=None) -> StructPlan:
    return StructPlan("T", tuple(fields), tagged or {}, flexible)


def _field(key: str, kind: str, **kw) -> FieldPlan:
    base = dict(items=None, struct=None, compact=True, nullable=False, tag=None,
                entity_type=None)
    base.update(kw)
    return FieldPlan(key=key, kind=kind, **base)


def test_a_buffer_that_is_not_bytes_goes_to_the_reference():
    plan = _plan(_field("name", "string"), _field("data", "records", nullable=True))
    body = b"\x04abc\x04RRR\x00"
    dec = PlanDecoder(plan, compile_plan(plan))
    buf = bytearray(body)
    assert dec.interpret(buf, 0) is None
    value, end = dec(buf, 0)
    assert end == len(body) and value["name"] == "abc"
    assert isinstance(value["data"], RawRecords) and value["data"].data == bytearray(b"RRR")
    assert dec.interpret(body, -1) is None


def test_a_ten_byte_varint_goes_to_the_reference():
    """Nine bytes (63 bits) are read in C; the tenth byte is left to the reference, which
    accepts it (and here fails on the length it gives)."""
    plan = _plan(_field("name", "string"))
    nine = b"\x81" + b"\x80" * 7 + b"\x00"         # 1, in nine bytes
    dec = PlanDecoder(plan, compile_plan(plan))
    assert dec.interpret(b"\x81\x80\x00" + b"\x00", 0) == ({"name": ""}, 4)
    assert dec.interpret(nine + b"\x00", 0) == ({"name": ""}, 10)
    ten = b"\x81" + b"\x80" * 8 + b"\x00"
    assert dec.interpret(ten + b"\x00", 0) is None
    with pytest.raises(StrictDecodeFailure):
        dec(b"\x81" + b"\x80" * 8 + b"\x01" + b"\x00", 0)


def test_unknown_tags_are_kept_with_their_exact_numbers():
    plan = _plan(_field("a", "int8"), tagged={1: _field("t", "int32", tag=1)})
    huge = (1 << 63) - 1                            # nine bytes of 7 bits
    tag = bytearray()
    v = huge
    while v >= 0x80:
        tag.append(v & 0x7F | 0x80)
        v >>= 7
    tag.append(v)
    body = b"\x05" + b"\x02" + b"\x01\x04\x00\x00\x00\x07" + bytes(tag) + b"\x01\xAA"
    dec = PlanDecoder(plan, compile_plan(plan))
    want = ({"a": 5, "t": 7, "_unknown_tagged_fields": [{"tag": huge, "data": b"\xAA"}]},
            len(body))
    assert dec.interpret(body, 0) == want == dec.reference(body, 0)


@pytest.mark.parametrize("body, why", [
    (b"\x03\xff\xfe\x00", "invalid UTF-8"),
    (b"\x00\x00", "a null string where none is allowed"),
    (b"\x01\x02\x02\x01\x00\x01\x01\x00", "tags out of order"),
    (b"\x01\x01\x01\x02\x00\x00", "a tagged value shorter than its size"),
])
def test_departures_fail_in_the_interpreter_as_in_the_reference(body, why):
    plan = _plan(_field("s", "string"), tagged={1: _field("t", "int8", tag=1)})
    dec = PlanDecoder(plan, compile_plan(plan))
    with pytest.raises(StrictDecodeFailure):
        dec.interpret(body, 0)
    with pytest.raises(StrictDecodeFailure):
        dec(body, 0)
    assert _outcome(dec.reference, body) == ("error",), why


@pytest.mark.parametrize("marker", [0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF])
def test_a_nullable_structs_marker_byte_reads_as_the_reference_reads_it(marker):
    """Untagged: any byte from 0x80 is null (Kafka writes -1), any other is present."""
    leaf = StructPlan("Leaf", (_field("a", "int16", compact=False),), {}, False)
    plan = _plan(_field("s", "struct", struct=leaf, nullable=True, compact=False),
                 _field("b", "int8"), flexible=False)
    body = bytes([marker]) + b"\x00\x05" + b"\x07"
    dec = PlanDecoder(plan, compile_plan(plan))
    got = dec.interpret(body, 0)
    assert got is not None and repr(got) == repr(dec.reference(body, 0))
    assert got[0]["s"] == (None if marker >= 0x80 else {"a": 5})


_HUGE = b"\xff" * 8 + b"\x7f"      # a nine-byte uvarint: 2**63 - 1


@pytest.mark.parametrize("fields, body, why", [
    ((_field("s", "string"), _field("x", "int32", compact=False)),
     _HUGE + b"\x00\x00\x00\x07\x00", "a string's length"),
    ((_field("a", "array", items="int64"), _field("x", "int32", compact=False)),
     _HUGE + b"\x00\x00\x00\x07\x00", "an array's count (times the item's size)"),
    ((_field("x", "int32", compact=False),),
     b"\x00\x00\x00\x07" + b"\x01" + b"\x05" + _HUGE + b"\xaa\x00", "a tagged field's size"),
])
def test_lengths_near_two_to_the_63_fail_without_wrapping(fields, body, why):
    """Compared with the bytes left before any sum or product: a position that wrapped
    around would read before the buffer."""
    plan = _plan(*fields)
    dec = PlanDecoder(plan, compile_plan(plan))
    with pytest.raises(StrictDecodeFailure):
        dec.interpret(body, 0)
    assert _outcome(dec, body) == _outcome(dec.reference, body) == ("error",), why


def test_a_kind_it_does_not_know_goes_to_the_reference():
    """A kind a newer ``plans.FIXED_SIZES`` may add: the reference (generated from the same
    table) decodes it; the interpreter stops where it meets one."""
    assert Op(_field("f", "float32"), None).kind == 0     # not in the interpreter's table
    assert Op(_field("f", "array", items="float32"), None).items == 0
    known = _plan(_field("a", "int8"), flexible=False)
    dec = PlanDecoder(known, compile_plan(known))
    dec.program.ops[0].kind = 0         # what Op gave that field
    assert dec.interpret(b"\x05", 0) is None
    assert dec(b"\x05", 0) == ({"a": 5}, 1)
