"""Compile a decoding plan into a specialised Python function (the fast path).

For each (message, version) the plan is turned into straight-line Python source, compiled
once with ``compile``/``exec`` and cached: runs of fixed-size fields become one precompiled
``struct.Struct.unpack_from``, lengths are read inline, and nested structs become nested
functions. The generated decoder is *strict*: any departure from the layout (truncation, a
null in a non-nullable field, invalid UTF-8, a count larger than the bytes left, a tagged
value that does not fill its size) raises, and the caller falls back to the lenient
interpreter (:mod:`.lenient`) which reports the field path and offset.

Decoded values: dicts keyed by snake_case field names in wire order; ints, bools, floats,
``str``, ``bytes``, uuids as Kafka's text form (``uuid_to_str``), ``records`` as
:class:`RawRecords`, arrays as lists, ``None`` for nulls. Tagged fields appear only when
present on the wire; unknown tagged fields are kept raw under ``_unknown_tagged_fields`` as
``[{"tag": int, "data": bytes}]``.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from typing import Callable

from kafkasniff.errors import DefinitionError
from kafkasniff.protocol.primitives import RawRecords, read_uvarint, uuid_to_str
from kafkasniff.protocol.plans import FIXED_SIZES, STRUCT_CODES, FieldPlan, StructPlan

UNKNOWN_TAGS_KEY = "_unknown_tagged_fields"


class StrictDecodeFailure(Exception):
    """Raised by generated code for a departure that is not a plain truncation."""


StrictDecoder = Callable[[bytes, int], tuple[dict, int]]


class _Gen:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.consts: dict[str, str] = {}      # unpacker name -> struct format
        self.struct_funcs: dict[int, str] = {}
        self.pending: list[tuple[str, StructPlan]] = []
        self.counter = 0

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def unpacker(self, fmt: str) -> str:
        key = "_S_" + "".join(c if c.isalnum() else "_" for c in fmt)
        if key not in self.consts:
            self.consts[key] = ">" + fmt
        return key

    def func_for(self, plan: StructPlan) -> str:
        name = self.struct_funcs.get(id(plan))
        if name is None:
            name = f"_d_{plan.name}_{len(self.struct_funcs)}"
            self.struct_funcs[id(plan)] = name
            self.pending.append((name, plan))
        return name


def _emit_length(g: _Gen, out: list[str], ind: str, var: str, compact: bool, width: str) -> None:
    """Emit code reading a length/count into ``var`` (compact: uvarint minus one)."""
    if compact:
        out.append(f"{ind}{var} = buf[pos]")
        out.append(f"{ind}if {var} < 128:")
        out.append(f"{ind}    pos += 1")
        out.append(f"{ind}else:")
        out.append(f"{ind}    {var}, pos = _uvarint(buf, pos)")
        out.append(f"{ind}{var} -= 1")
    else:
        u = g.unpacker(width)
        size = 2 if width == "h" else 4
        out.append(f"{ind}{var} = {u}(buf, pos)[0]")
        out.append(f"{ind}pos += {size}")


def _emit_length_or_null(g: _Gen, out: list[str], ind: str, f: FieldPlan, target: str,
                         width: str, nullable: bool) -> str:
    """Emit a length/count read and its null branch; returns the length variable. The caller
    continues with ``elif``/``else`` branches for the non-null case."""
    n = g.fresh("n")
    _emit_length(g, out, ind, n, f.compact, width)
    out.append(f"{ind}if {n} < 0:")
    out.append(f"{ind}    {target} = None" if nullable else f"{ind}    raise _Fail({f.key!r})")
    return n


def _emit_value(g: _Gen, out: list[str], ind: str, f: FieldPlan, target: str,
                kind: str | None = None, nullable: bool | None = None) -> None:
    """Emit code decoding one value of field ``f`` into local ``target`` and advancing pos."""
    kind = kind or f.kind
    nullable = f.nullable if nullable is None else nullable
    if kind in FIXED_SIZES:
        u = g.unpacker(STRUCT_CODES[kind])
        if kind == "uuid":
            out.append(f"{ind}{target} = _uuid({u}(buf, pos)[0])")
        else:
            out.append(f"{ind}{target} = {u}(buf, pos)[0]")
        out.append(f"{ind}pos += {FIXED_SIZES[kind]}")
        return
    if kind in ("string", "bytes", "records"):
        n = _emit_length_or_null(g, out, ind, f, target, "h" if kind == "string" else "i",
                                 nullable)
        out.append(f"{ind}else:")
        out.append(f"{ind}    e = pos + {n}")
        out.append(f"{ind}    if e > L:")
        out.append(f"{ind}        raise _Fail({f.key!r})")
        if kind == "string":
            out.append(f"{ind}    {target} = buf[pos:e].decode()")
        elif kind == "bytes":
            out.append(f"{ind}    {target} = buf[pos:e]")
        else:
            out.append(f"{ind}    {target} = _Records(buf[pos:e], pos)")
        out.append(f"{ind}    pos = e")
        return
    if kind == "struct":
        fn = g.func_for(f.struct)
        if nullable:
            m = g.fresh("m")
            if f.tag is not None:
                out.append(f"{ind}{m}, pos = _uvarint(buf, pos)")
                out.append(f"{ind}if {m} <= 0:")
            else:
                out.append(f"{ind}{m} = buf[pos]")
                out.append(f"{ind}pos += 1")
                out.append(f"{ind}if {m} >= 128:")
            out.append(f"{ind}    {target} = None")
            out.append(f"{ind}else:")
            out.append(f"{ind}    {target}, pos = {fn}(buf, pos)")
        else:
            out.append(f"{ind}{target}, pos = {fn}(buf, pos)")
        return
    if kind == "array":
        items = f.items
        # a count the bytes left cannot hold fails before any allocation: fixed-size items
        # need their size each, any other item at least one byte
        size = FIXED_SIZES.get(items, 1)
        n = _emit_length_or_null(g, out, ind, f, target, "i", nullable)
        bound = f"{n} * {size}" if size > 1 else n
        out.append(f"{ind}elif {bound} > L - pos:")
        out.append(f"{ind}    raise _Fail({f.key!r})")
        out.append(f"{ind}else:")
        ind2 = ind + "    "
        if items in FIXED_SIZES:
            code = STRUCT_CODES[items]
            if items == "uuid":  # slices, not a '16s' * n format (n struct codes in memory)
                out.append(f"{ind2}{target} = [_uuid(buf[p:p + 16]) "
                           f"for p in range(pos, pos + 16 * {n}, 16)]")
            else:
                out.append(f"{ind2}{target} = list(_unpack('>%d{code}' % {n}, buf, pos))")
            out.append(f"{ind2}pos += {size} * {n}")
        elif items == "struct":
            fn = g.func_for(f.struct)
            lst = g.fresh("a")
            x = g.fresh("x")
            out.append(f"{ind2}{lst} = []")
            out.append(f"{ind2}for _ in range({n}):")
            out.append(f"{ind2}    {x}, pos = {fn}(buf, pos)")
            out.append(f"{ind2}    {lst}.append({x})")
            out.append(f"{ind2}{target} = {lst}")
        else:  # arrays of strings / bytes: elements are never nullable
            lst = g.fresh("a")
            x = g.fresh("x")
            out.append(f"{ind2}{lst} = []")
            out.append(f"{ind2}for _ in range({n}):")
            _emit_value(g, out, ind2 + "    ", f, x, kind=items, nullable=False)
            out.append(f"{ind2}    {lst}.append({x})")
            out.append(f"{ind2}{target} = {lst}")
        return
    raise DefinitionError(f"{f.key}: cannot compile field kind {kind}")


def _emit_struct(g: _Gen, fname: str, plan: StructPlan) -> list[str]:
    out = [f"def {fname}(buf, pos):", "    L = len(buf)"]
    ind = "    "
    names: list[tuple[str, str]] = []
    fields = plan.fields
    i = 0
    while i < len(fields):
        f = fields[i]
        if f.kind in FIXED_SIZES:
            j = i
            fmt = ""
            size = 0
            run: list[FieldPlan] = []
            while j < len(fields) and fields[j].kind in FIXED_SIZES:
                fmt += STRUCT_CODES[fields[j].kind]
                size += FIXED_SIZES[fields[j].kind]
                run.append(fields[j])
                j += 1
            u = g.unpacker(fmt)
            locs = [g.fresh("v") for _ in run]
            out.append(f"{ind}{', '.join(locs)}{',' if len(locs) == 1 else ''} = {u}(buf, pos)")
            out.append(f"{ind}pos += {size}")
            for loc, rf in zip(locs, run):
                if rf.kind == "uuid":
                    out.append(f"{ind}{loc} = _uuid({loc})")
                names.append((rf.key, loc))
            i = j
            continue
        loc = g.fresh("v")
        _emit_value(g, out, ind, f, loc)
        names.append((f.key, loc))
        i += 1
    body = ", ".join(f"{k!r}: {v}" for k, v in names)
    out.append(f"{ind}d = {{{body}}}")
    if plan.flexible:
        out.append(f"{ind}nt = buf[pos]")
        out.append(f"{ind}if nt < 128:")
        out.append(f"{ind}    pos += 1")
        out.append(f"{ind}else:")
        out.append(f"{ind}    nt, pos = _uvarint(buf, pos)")
        out.append(f"{ind}if nt:")
        out.append(f"{ind}    if nt > L - pos:")
        out.append(f"{ind}        raise _Fail('tagged fields')")
        out.append(f"{ind}    last = -1")
        out.append(f"{ind}    for _ in range(nt):")
        ind2 = ind + "        "
        out.append(f"{ind2}tag, pos = _uvarint(buf, pos)")
        out.append(f"{ind2}size, pos = _uvarint(buf, pos)")
        out.append(f"{ind2}if tag <= last:")
        out.append(f"{ind2}    raise _Fail('tag order')")
        out.append(f"{ind2}last = tag")
        out.append(f"{ind2}te = pos + size")
        out.append(f"{ind2}if te > L:")
        out.append(f"{ind2}    raise _Fail('tagged field size')")
        first = True
        for tag in sorted(plan.tagged):
            tf = plan.tagged[tag]
            out.append(f"{ind2}{'if' if first else 'elif'} tag == {tag}:")
            first = False
            loc = g.fresh("t")
            _emit_value(g, out, ind2 + "    ", tf, loc)
            out.append(f"{ind2}    if pos != te:")
            out.append(f"{ind2}        raise _Fail({tf.key!r})")
            out.append(f"{ind2}    d[{tf.key!r}] = {loc}")
            out.append(f"{ind2}    continue")
        out.append(f"{ind2}d.setdefault({UNKNOWN_TAGS_KEY!r}, []).append("
                   f"{{'tag': tag, 'data': buf[pos:te]}})")
        out.append(f"{ind2}pos = te")
    out.append(f"{ind}return d, pos")
    return out


@dataclass(frozen=True, slots=True)
class DecoderSource:
    """The generated source of one plan's strict decoder (see :func:`decoder_source`).

    Attributes:
        text: the functions, one per struct of the plan, at the left margin.
        top: the name of the function decoding the whole plan.
        unpackers: ``{name: struct format}`` of the precompiled unpackers the text calls
            (``name = struct.Struct(format).unpack_from``).
        layout: a digest of ``text`` and ``unpackers``: two plans with the same one decode
            the same bytes the same way.
    """

    text: str
    top: str
    unpackers: dict[str, str]
    layout: str


#: the names generated code uses besides its own functions and unpackers (what
#: :func:`compile_plan` and the decoder modules generated ahead of time bind them to)
RUNTIME_NAMES = {"_uvarint": read_uvarint, "_uuid": uuid_to_str, "_Records": RawRecords,
                 "_Fail": StrictDecodeFailure, "_unpack": struct.unpack_from}


def decoder_source(plan: StructPlan) -> DecoderSource:
    """The source of ``plan``'s strict decoder (what :func:`compile_plan` compiles; the
    decoders generated ahead of time, :mod:`kafkasniff.protocol.prebuilt`, hold the same).

    Raises DefinitionError for a field kind it does not know.
    """
    g = _Gen()
    top = g.func_for(plan)
    src: list[str] = []
    while g.pending:
        fname, p = g.pending.pop()
        src.extend(_emit_struct(g, fname, p))
        src.append("")
    text = "\n".join(src)
    digest = hashlib.sha256(text.encode())
    for name, fmt in sorted(g.consts.items()):
        digest.update(f"\n{name}={fmt}".encode())
    return DecoderSource(text, top, dict(g.consts), digest.hexdigest()[:32])


def compile_plan(plan: StructPlan) -> StrictDecoder:
    """Compile ``plan`` into ``decode(buf, pos) -> (dict, end_pos)``.

    The returned function raises ``IndexError``, ``struct.error``, ``UnicodeDecodeError``,
    ``ValueError`` or :class:`StrictDecodeFailure` on any departure from the layout; it never
    loops more than the buffer allows (array counts are bounded by the bytes left). Its
    ``_layout`` attribute is :attr:`DecoderSource.layout`.
    Raises DefinitionError (at compile time) for a field kind it does not know.
    """
    source = decoder_source(plan)
    namespace: dict[str, object] = dict(RUNTIME_NAMES)
    for name, fmt in source.unpackers.items():
        namespace[name] = struct.Struct(fmt).unpack_from
    code = compile(source.text, f"<kafkasniff decoder {plan.name}>", "exec")
    exec(code, namespace)  # noqa: S102 - source generated from our own definitions
    fn = namespace[source.top]
    fn.__doc__ = f"Strict decoder for {plan.name} (generated)."
    fn._layout = source.layout  # type: ignore[attr-defined]
    return fn  # type: ignore[return-value]
