"""The lenient interpreter: decode what can be decoded and say exactly where it went wrong.

Used when the compiled strict decoder (:mod:`.codegen`) rejects a frame. It walks the same
plan, keeps a field path, and:

- on a truncation (or a count/length larger than the bytes left) stops, keeping every field
  decoded so far, and reports ``body_decode_error`` with the field path and frame offset;
- on a null in a non-nullable field, invalid UTF-8, tags out of order, or a tagged value that
  does not fill its declared size, records a ``spec_departure`` and goes on (real peers break
  the spec; DESIGN.md asks to decode what can be decoded).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kafkasniff.frozen import fast_init
from kafkasniff.issues import IssueKind
from kafkasniff.protocol.codegen import UNKNOWN_TAGS_KEY
from kafkasniff.protocol.primitives import RawRecords, read_uvarint, uuid_to_str
from kafkasniff.protocol.plans import FIXED_SIZES, STRUCT_CODES, FieldPlan, StructPlan

_UNPACK = {k: struct.Struct(">" + c).unpack_from for k, c in STRUCT_CODES.items()}


@fast_init
@dataclass(frozen=True, slots=True)
class BodyIssue:
    """A departure found while decoding a body.

    Attributes:
        kind: ``body_decode_error`` (decoding stopped) or ``spec_departure`` (went on).
        message: what was expected and what was found.
        field_path: dotted snake_case path with array indexes, e.g. ``topics[0].partitions[1].records``.
        offset: byte offset in the buffer where the problem starts.
        count: issues this one stands for (a closing ``budget_exhausted`` issue counts the
            departures not listed).
    """

    kind: str
    message: str
    field_path: str
    offset: int
    count: int = 1


class _Stop(Exception):
    def __init__(self, path: str, offset: int, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.offset = offset
        self.message = message


#: spec departures listed per body; the rest are counted in one closing issue (a body of
#: a million zero-length tagged fields held a million issues before any budget applied)
MAX_DEPARTURES = 1000


class _Walker:
    __slots__ = ("buf", "end", "issues", "spans", "unlisted")

    def __init__(self, buf: bytes, end: int, spans: dict | None = None) -> None:
        self.buf = buf
        self.end = end
        self.issues: list[BodyIssue] = []
        self.spans = spans
        self.unlisted = 0

    def close(self) -> list[BodyIssue]:
        if self.unlisted:
            self.issues.append(BodyIssue(
                IssueKind.BUDGET_EXHAUSTED, f"{self.unlisted} more spec departures in this "
                f"body are not listed (at most {MAX_DEPARTURES} per body)", "", self.end,
                self.unlisted))
            self.unlisted = 0
        return self.issues

    def need(self, pos: int, n: int, path: str, what: str) -> None:
        if n < 0 or pos + n > self.end:
            raise _Stop(path, pos, f"{what}: need {n} bytes, {max(self.end - pos, 0)} left")

    def uvarint(self, pos: int, path: str) -> tuple[int, int]:
        try:
            v, p = read_uvarint(self.buf, pos)
        except (IndexError, ValueError):
            raise _Stop(path, pos, "truncated or overlong varint") from None
        if p > self.end:
            raise _Stop(path, pos, "truncated varint")
        return v, p

    def length(self, pos: int, f: FieldPlan, path: str, width: int) -> tuple[int, int]:
        if f.compact:
            v, pos = self.uvarint(pos, path)
            return v - 1, pos
        self.need(pos, width, path, "length")
        fmt = "int16" if width == 2 else "int32"
        return _UNPACK[fmt](self.buf, pos)[0], pos + width

    def depart(self, path: str, pos: int, message: str) -> None:
        if len(self.issues) >= MAX_DEPARTURES:
            self.unlisted += 1
            return
        self.issues.append(BodyIssue(IssueKind.SPEC_DEPARTURE, message, path, pos))

    def value(self, f: FieldPlan, pos: int, path: str, kind: str | None = None,
              nullable: bool | None = None):
        kind = kind or f.kind
        nullable = f.nullable if nullable is None else nullable
        buf = self.buf
        if kind in FIXED_SIZES:
            size = FIXED_SIZES[kind]
            self.need(pos, size, path, kind)
            v = _UNPACK[kind](buf, pos)[0]
            return (uuid_to_str(v) if kind == "uuid" else v), pos + size
        if kind in ("string", "bytes", "records"):
            start = pos
            n, pos = self.length(pos, f, path, 2 if kind == "string" else 4)
            if n < 0:
                if not nullable:
                    self.depart(path, start, f"null in non-nullable {kind} field")
                return None, pos
            self.need(pos, n, path, kind)
            raw = buf[pos:pos + n]
            if kind == "string":
                try:
                    return raw.decode(), pos + n
                except UnicodeDecodeError as exc:
                    self.depart(path, pos, f"invalid UTF-8 in string: {exc.reason}")
                    return raw.decode("utf-8", "backslashreplace"), pos + n
            if kind == "records":
                return RawRecords(raw, pos), pos + n
            return raw, pos + n
        if kind == "struct":
            holder: dict = {}
            pos = self.struct_field_into(f, pos, path, holder, "v")
            return holder["v"], pos
        if kind == "array":
            holder: dict = {}
            pos = self.array_into(f, pos, path, holder, "v")
            return holder["v"], pos
        raise _Stop(path, pos, f"unknown field kind {kind}")

    def struct_field_into(self, f: FieldPlan, pos: int, path: str, holder: dict,
                          key: str) -> int:
        """Decode a (nullable) struct field into ``holder[key]``, attaching the dict before
        filling it (a decode that stops inside keeps what was read)."""
        if f.nullable:
            if f.tag is not None:
                marker, pos = self.uvarint(pos, path)
                present = marker > 0
            else:
                self.need(pos, 1, path, "nullable struct marker")
                present = self.buf[pos] < 128
                pos += 1
            if not present:
                holder[key] = None
                return pos
        d: dict = {}
        holder[key] = d
        return self.struct_into(f.struct, pos, path, d)

    def array_into(self, f: FieldPlan, pos: int, path: str, holder: dict, key: str) -> int:
        """Decode an array into ``holder[key]``, attaching the list before filling it."""
        start = pos
        n, pos = self.length(pos, f, path, 4)
        if n < 0:
            if not f.nullable:
                self.depart(path, start, "null in non-nullable array")
            holder[key] = None
            return pos
        if n > self.end - pos:
            raise _Stop(path, start, f"array count {n} exceeds the {self.end - pos} bytes left")
        lst: list = []
        holder[key] = lst
        spans = self.spans
        for i in range(n):
            ipath = f"{path}[{i}]"
            start = pos
            if f.items == "struct":
                d: dict = {}
                lst.append(d)
                pos = self.struct_into(f.struct, pos, ipath, d)
            else:
                v, pos = self.value(f, pos, ipath, kind=f.items, nullable=False)
                lst.append(v)
            if spans is not None:
                spans[ipath] = (start, pos)
        return pos

    def struct_into(self, plan: StructPlan, pos: int, path: str, d: dict) -> int:
        spans = self.spans
        for f in plan.fields:
            fpath = f"{path}.{f.key}" if path else f.key
            start = pos
            if f.kind == "array":
                pos = self.array_into(f, pos, fpath, d, f.key)
            elif f.kind == "struct":
                pos = self.struct_field_into(f, pos, fpath, d, f.key)
            else:
                d[f.key], pos = self.value(f, pos, fpath)
            if spans is not None:
                spans[fpath] = (start, pos)
        if plan.flexible:
            tpath = f"{path}._tagged_fields" if path else "_tagged_fields"
            count, pos = self.uvarint(pos, tpath)
            if count > self.end - pos:
                raise _Stop(tpath, pos, f"tagged field count {count} exceeds the bytes left")
            last = -1
            for _ in range(count):
                tag, pos = self.uvarint(pos, tpath)
                size, pos = self.uvarint(pos, tpath)
                if tag <= last:
                    self.depart(tpath, pos, f"tag {tag} after tag {last}: tags must ascend")
                last = tag
                self.need(pos, size, tpath, f"tagged field {tag}")
                tend = pos + size
                tf = plan.tagged.get(tag)
                if tf is None:
                    d.setdefault(UNKNOWN_TAGS_KEY, []).append({"tag": tag, "data": self.buf[pos:tend]})
                else:
                    fpath = f"{path}.{tf.key}" if path else tf.key
                    saved_end = self.end
                    self.end = tend
                    if self.spans is not None:
                        self.spans[fpath] = (pos, tend)
                    try:
                        d[tf.key], p = self.value(tf, pos, fpath)
                        if p != tend:
                            self.depart(fpath, p, f"tagged field {tag} used {p - pos} of its "
                                                  f"{size} bytes")
                    except _Stop as stop:
                        self.depart(stop.path, stop.offset, f"tagged field {tag}: {stop.message}")
                    finally:
                        self.end = saved_end
                pos = tend
        return pos


@dataclass(slots=True)
class LenientResult:
    """What the lenient interpreter got out of a buffer.

    Attributes:
        value: the decoded dict (partial when ``complete`` is False).
        end: offset after the last byte consumed.
        complete: False when decoding had to stop (a ``body_decode_error`` is in ``issues``).
        issues: departures found, in order.
    """

    value: dict
    end: int
    complete: bool
    issues: list[BodyIssue]


def decode_lenient(plan: StructPlan, buf: bytes, pos: int = 0, end: int | None = None,
                   spans: dict | None = None) -> LenientResult:
    """Decode ``buf[pos:end]`` with ``plan`` as far as possible; never raises on bad data.

    ``spans``: when a dict is given, it is filled with ``field_path -> (start, end)`` byte
    ranges of every field and array element decoded (used to highlight a field's bytes).
    """
    w = _Walker(buf, len(buf) if end is None else end, spans)
    d: dict = {}
    try:
        p = w.struct_into(plan, pos, "", d)
        return LenientResult(d, p, True, w.close())
    except _Stop as stop:
        w.close().append(BodyIssue(IssueKind.BODY_DECODE_ERROR, stop.message, stop.path,
                                   stop.offset))
        return LenientResult(d, stop.offset, False, w.issues)
    except RecursionError:
        w.close().append(BodyIssue(IssueKind.BODY_DECODE_ERROR, "structure nested too deeply",
                                   "", pos))
        return LenientResult(d, pos, False, w.issues)
