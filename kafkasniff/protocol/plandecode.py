"""A compiled body decoder: one typed loop that reads a body along its plan's table of fields.

The strict decoders of :mod:`.codegen` are straight-line Python, one function per struct of
each (api_key, version, direction) layout, generated ahead of time
(:mod:`kafkasniff.protocol.prebuilt`). Compiling those to C was measured and set aside
(docs/compiled.md: ~130 KB of C per decoder, half an hour of C compiling per install). This
module is the other way round: the layouts stay data (:class:`Program`, built once from a
:class:`~.plans.StructPlan`) and a single interpreter, compiled once by Cython
(``setup.py``'s ``COMPILED``), walks them over the bytes: fixed-size integers read in C,
lengths and varints as C integers, strings decoded straight from the buffer.

:class:`PlanDecoder` has the strict decoder's signature, ``decode(buf, pos) -> (dict,
end)``, and gives the same value: the generated decoder of the same plan is its *reference*.
The interpreter reads the same bytes in the same order as the reference, so:

- a body that departs from the layout (truncation, a length or count beyond the bytes left,
  a null where none is allowed, invalid UTF-8, tags out of order, a tagged value that does not
  fill its size) fails at the same point in both: the interpreter raises
  :class:`~.codegen.StrictDecodeFailure` itself (the reference may raise another of
  :data:`kafkasniff.protocol.decoder.STRICT_ERRORS` there: callers catch them all, and only
  whether a body fits is used);
- what the interpreter is not sure of stops it, and the reference decodes the same bytes
  from the start: a buffer that is not ``bytes``, a varint of ten bytes (the reference reads
  up to 70 bits), or any exception other than ``StrictDecodeFailure``.

:meth:`kafkasniff.protocol.schema.Definitions.compiled` hands out a ``PlanDecoder`` only
when this module runs compiled; as plain Python (no C compiler, ``KAFKASNIFF_PURE_PYTHON``)
the generated decoders are faster and are used as they are.
"""

from __future__ import annotations

try:
    import cython
except ImportError:     # plain Python
    from kafkasniff.cythonstub import cython

import struct
from typing import Callable

from kafkasniff.protocol.codegen import UNKNOWN_TAGS_KEY as _UNKNOWN_TAGS
from kafkasniff.protocol.codegen import StrictDecodeFailure as _Fail
from kafkasniff.protocol.plans import FIXED_SIZES, FieldPlan, StructPlan
from kafkasniff.protocol.primitives import RawRecords, uuid_to_str

__all__ = ["PlanDecoder", "Program", "compiled"]

# field kinds (Op.kind, Op.items); 0: none
K_INT8 = 1
K_INT16 = 2
K_INT32 = 3
K_INT64 = 4
K_UINT16 = 5
K_UINT32 = 6
K_FLOAT64 = 7
K_BOOL = 8
K_UUID = 9
K_STRING = 10
K_BYTES = 11
K_RECORDS = 12
K_STRUCT = 13
K_ARRAY = 14
_KINDS = {"int8": K_INT8, "int16": K_INT16, "int32": K_INT32, "int64": K_INT64,
          "uint16": K_UINT16, "uint32": K_UINT32, "float64": K_FLOAT64, "bool": K_BOOL,
          "uuid": K_UUID, "string": K_STRING, "bytes": K_BYTES, "records": K_RECORDS,
          "struct": K_STRUCT, "array": K_ARRAY}
#: bytes of each fixed-size kind (plans.FIXED_SIZES, by kind code)
_SIZES = {_KINDS[k]: n for k, n in FIXED_SIZES.items() if k in _KINDS}


def compiled() -> bool:
    """Whether this module runs compiled (then :meth:`Definitions.compiled
    <kafkasniff.protocol.schema.Definitions.compiled>` hands out :class:`PlanDecoder`)."""
    return cython.compiled


class _Stop(Exception):
    """The interpreter is not sure: the reference decoder decodes the body (never escapes;
    a body that does not fit raises ``_Fail``, :class:`~.codegen.StrictDecodeFailure`)."""


def _first(unpack_from):
    """``unpack_from``'s single value (the plain-Python reads below)."""
    return lambda buf, pos: unpack_from(buf, pos)[0]


if not cython.compiled:
    # big-endian reads at buf[pos:] (the caller checked that the bytes are there); compiled,
    # these are inline C in plandecode.pxd
    _i16 = _first(struct.Struct(">h").unpack_from)
    _i32 = _first(struct.Struct(">i").unpack_from)
    _i64 = _first(struct.Struct(">q").unpack_from)
    _u16 = _first(struct.Struct(">H").unpack_from)
    _u32 = _first(struct.Struct(">I").unpack_from)
    _f64 = _first(struct.Struct(">d").unpack_from)


class Op:
    """One field of a :class:`Program`: ``key`` (the dict key), ``kind`` and ``items``
    (``K_*``), ``size`` (bytes of a fixed-size kind or item, else 0), ``compact``,
    ``nullable``, ``tagged`` (a tagged field: a nullable struct has a uvarint marker),
    ``program`` (of a struct or of an array's struct items, else ``None``)."""

    __slots__ = ("key", "kind", "items", "size", "compact", "nullable", "tagged", "program")

    def __init__(self, f: FieldPlan, program) -> None:
        self.key = f.key
        # a kind the interpreter does not know (a newer plans.FIXED_SIZES): 0, which stops
        # it, and the reference decodes
        self.kind = _KINDS.get(f.kind, 0)
        self.items = _KINDS.get(f.items, 0) if f.items is not None else 0
        self.size = _SIZES.get(self.items if self.kind == K_ARRAY else self.kind, 0)
        self.compact = f.compact
        self.nullable = f.nullable
        self.tagged = f.tag is not None
        self.program = program


class Program:
    """A struct plan as the interpreter's table: ``ops`` (the untagged fields in wire
    order), ``tags`` (tag number -> :class:`Op`), ``flexible``, ``name``. A field of a kind
    the interpreter does not know stops it where it meets one (the reference decodes)."""

    __slots__ = ("name", "ops", "tags", "flexible")

    def __init__(self, plan: StructPlan, memo: dict | None = None) -> None:
        if memo is None:
            memo = {}
        memo[id(plan)] = self
        self.name = plan.name
        self.flexible = plan.flexible
        self.ops = tuple(Op(f, _program(f.struct, memo)) for f in plan.fields)
        self.tags = {tag: Op(f, _program(f.struct, memo)) for tag, f in plan.tagged.items()}


def _program(plan: StructPlan | None, memo: dict):
    if plan is None:
        return None
    hit = memo.get(id(plan))
    return hit if hit is not None else Program(plan, memo)


class _State:
    """One decode: the buffer, its length and the position reached (made by :func:`_state`)."""

    __slots__ = ("buf", "end", "pos")


@cython.locals(st=_State)
def _state(buf: bytes, pos: int) -> _State:
    st = _State.__new__(_State)     # compiled: the type's tp_new, no __init__ call
    st.buf = buf
    st.end = len(buf)
    st.pos = pos
    return st


@cython.locals(buf=bytes, pos=cython.Py_ssize_t, b=cython.long, shift=cython.int,
               value=cython.longlong)
def _uvarint(st: _State):
    """An unsigned varint at ``st.pos`` (advanced), up to 9 bytes (63 bits); longer:
    :class:`_Stop`."""
    buf = st.buf
    pos = st.pos
    if pos >= st.end:
        raise _Fail
    b = buf[pos]
    pos += 1
    if b < 0x80:
        st.pos = pos
        return b
    value = b & 0x7F
    shift = 7
    while True:
        if shift > 56:
            raise _Stop     # a tenth byte: the reference reads up to 70 bits
        if pos >= st.end:
            raise _Fail("varint cut by the end")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            st.pos = pos
            return value
        shift += 7


@cython.locals(n=cython.longlong, pos=cython.Py_ssize_t)
def _length(st: _State, compact: cython.bint, wide: cython.bint):
    """A length or count: compact (uvarint - 1), else int32 (``wide``) or int16."""
    if compact:
        return _uvarint(st) - 1
    pos = st.pos
    if wide:
        if pos + 4 > st.end:
            raise _Fail
        n = _i32(st.buf, pos)
        st.pos = pos + 4
    else:
        if pos + 2 > st.end:
            raise _Fail
        n = _i16(st.buf, pos)
        st.pos = pos + 2
    return n


@cython.locals(buf=bytes, pos=cython.Py_ssize_t, b=cython.long)
def _fixed(st: _State, kind: cython.int, size: cython.Py_ssize_t):
    """A fixed-size value of ``kind`` (``size`` bytes) at ``st.pos`` (advanced)."""
    buf = st.buf
    pos = st.pos
    if pos + size > st.end:
        raise _Fail
    st.pos = pos + size
    if kind == K_INT32:
        return _i32(buf, pos)
    if kind == K_INT16:
        return _i16(buf, pos)
    if kind == K_INT64:
        return _i64(buf, pos)
    if kind == K_INT8 or kind == K_BOOL:
        b = buf[pos]
        if kind == K_BOOL:
            return b != 0
        return b - 256 if b >= 128 else b
    if kind == K_UUID:
        return uuid_to_str(buf[pos:pos + 16])
    if kind == K_UINT16:
        return _u16(buf, pos)
    if kind == K_UINT32:
        return _u32(buf, pos)
    if kind == K_FLOAT64:
        return _f64(buf, pos)
    raise _Stop


@cython.locals(buf=bytes, pos=cython.Py_ssize_t, e=cython.Py_ssize_t, n=cython.longlong,
               m=cython.longlong, i=cython.Py_ssize_t, size=cython.Py_ssize_t, items=list,
               sub=Program)
def _value(st: _State, op: Op, kind: cython.int, nullable: cython.bint):
    """The value of ``op`` (of ``kind``: the field's, or its array's items') at ``st.pos``
    (advanced), as the reference decodes it."""
    if kind <= K_UUID:
        return _fixed(st, kind, op.size)
    if kind == K_STRUCT:
        sub = op.program
        if not nullable:
            return _struct(st, sub)
        if op.tagged:
            m = _uvarint(st)
            if m <= 0:
                return None
            return _struct(st, sub)
        pos = st.pos
        if pos >= st.end:
            raise _Fail
        m = st.buf[pos]
        st.pos = pos + 1
        if m >= 128:
            return None
        return _struct(st, sub)
    if kind == K_ARRAY:
        n = _length(st, op.compact, True)
        if n < 0:
            if nullable:
                return None
            raise _Fail
        size = op.size if op.size > 0 else 1
        # n * size > bytes left, without the product (n may be near 2**63)
        if n > (st.end - st.pos) // size:
            raise _Fail
        items = []
        kind = op.items
        if kind == K_STRUCT:
            sub = op.program
            for i in range(n):
                items.append(_struct(st, sub))
        else:
            for i in range(n):
                items.append(_value(st, op, kind, False))
        return items
    # string, bytes, records
    n = _length(st, op.compact, kind != K_STRING)
    if n < 0:
        if nullable:
            return None
        raise _Fail
    pos = st.pos
    if n > st.end - pos:    # compared before the sum: n may be near 2**63
        raise _Fail
    e = pos + n
    buf = st.buf
    st.pos = e
    if kind == K_STRING:
        try:
            return buf[pos:e].decode("utf-8")
        except UnicodeDecodeError:
            raise _Fail("invalid UTF-8") from None
    if kind == K_BYTES:
        return buf[pos:e]
    return RawRecords(buf[pos:e], pos)


@cython.locals(d=dict, op=Op, pos=cython.Py_ssize_t, nt=cython.longlong,
               last=cython.longlong, tag=cython.longlong, size=cython.longlong,
               te=cython.Py_ssize_t, i=cython.Py_ssize_t, kind=cython.int)
def _struct(st: _State, p: Program):
    """The dict of one struct of ``p`` at ``st.pos`` (advanced): the untagged fields in wire
    order, then the tagged ones present, as the reference builds it."""
    d = {}
    for op in p.ops:
        kind = op.kind
        if kind <= K_UUID:
            d[op.key] = _fixed(st, kind, op.size)
        else:
            d[op.key] = _value(st, op, kind, op.nullable)
    if p.flexible:
        nt = _uvarint(st)
        if nt:
            if nt > st.end - st.pos:
                raise _Fail
            last = -1
            for i in range(nt):
                tag = _uvarint(st)
                size = _uvarint(st)
                if tag <= last:
                    raise _Fail
                last = tag
                if size > st.end - st.pos:      # before the sum, as for lengths
                    raise _Fail
                te = st.pos + size
                op = p.tags.get(tag)
                if op is not None:
                    v = _value(st, op, op.kind, op.nullable)
                    if st.pos != te:
                        raise _Fail
                    d[op.key] = v
                    continue
                pos = st.pos
                d.setdefault(_UNKNOWN_TAGS, []).append({"tag": tag, "data": st.buf[pos:te]})
                st.pos = te
    return d


@cython.locals(st=_State)
def _interpret(program: Program, buf, pos: int):
    """``(dict, end)`` of ``program`` over ``buf`` from ``pos``, ``None`` where the
    interpreter stops (``_Stop`` or any exception but ``_Fail``, which propagates)."""
    if type(buf) is not bytes or pos < 0:
        return None
    st = _state(buf, pos)
    try:
        value = _struct(st, program)
    except _Fail:
        raise
    except Exception:  # noqa: BLE001 - _Stop, or anything else: the reference decides
        return None
    return value, st.pos


class PlanDecoder:
    """A strict body decoder run by the compiled interpreter: ``decoder(buf, pos) -> (dict,
    end)`` for a body laid out as Kafka's protocol guide and message specs describe it
    (compact lengths and tagged fields of flexible versions: KIP-482), the value and errors
    of ``reference`` (the generated decoder of the same plan,
    :func:`.codegen.compile_plan` or :mod:`kafkasniff.protocol.prebuilt`).

    Args:
        plan: the struct plan of the body.
        reference: its generated strict decoder; decodes every body the interpreter stops
            on (see the module docstring).

    Calling it raises :class:`~.codegen.StrictDecodeFailure` for a body that does not fit
    the layout, or what the reference raises (one of
    :data:`kafkasniff.protocol.decoder.STRICT_ERRORS`).

    Attributes: ``program`` (:class:`Program`), ``reference``, ``_layout`` (the reference's
    layout digest, :attr:`.codegen.DecoderSource.layout`).
    """

    __slots__ = ("program", "reference", "_layout")

    def __init__(self, plan: StructPlan, reference: Callable) -> None:
        self.program = Program(plan)
        self.reference = reference
        self._layout = getattr(reference, "_layout", None)

    def __call__(self, buf, pos: int):
        result = _interpret(self.program, buf, pos)
        return result if result is not None else self.reference(buf, pos)

    def interpret(self, buf, pos: int):
        """The interpreter alone: ``(dict, end)``; ``None`` where it stops (calling the
        decoder then runs the reference). Raises :class:`~.codegen.StrictDecodeFailure` for
        a body that does not fit the layout."""
        return _interpret(self.program, buf, pos)

    def __repr__(self) -> str:
        return f"<PlanDecoder {self.program.name}>"
