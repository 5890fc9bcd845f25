"""Kafka framing: a TCP byte stream -> size-prefixed frames (sans-IO, per direction).

Every Kafka request and response is ``int32 size`` followed by ``size`` bytes. A
:class:`Framer` is fed the in-order bytes and the gaps of one direction of one connection and
returns :class:`Frame` objects and :class:`FramerIssue` records.

Synchronisation:

- ``SYNCED``: frame boundaries are known. A frame with an implausible size (below the
  minimum, or above ``max_frame_bytes``, default 100 MiB like Kafka's
  ``socket.request.max.bytes``) loses sync.
- ``TENTATIVE``: the stream was joined mid-way (capture started on an open connection). The
  first bytes are tried as a frame boundary with the validator; if that fails the framer hunts.
- ``HUNTING``: after a gap or lost sync, scan for an offset the validator accepts (a plausible
  request header on the client side, a response whose correlation_id matches a pending request
  on the broker side). Skipped bytes are counted and reported (``resync``). The scan runs in
  linear time in C: a regular expression (:class:`Prefilter`) finds the next offset that could
  be accepted, and only those offsets are checked in Python; the outcome is the same as
  checking every offset.
- ``SKIPPING``: passing the captured rest of a frame a gap damaged; then ``SYNCED`` again.

A gap entirely inside a frame whose size is known does not lose sync: the frame is emitted
when its end is reached, with ``missing_bytes`` the bytes never captured and its payload the
bytes before the first gap (the bytes captured after it are counted, not decoded: nothing
re-aligns a body after lost bytes); framing resumes at the next frame boundary. A stream that
ends inside a frame emits that frame the same way with a ``frame_truncated`` issue.

Every byte fed ends in exactly one of the framer's counters: :attr:`Framer.framed_bytes`
(frames, size prefix included, as far as captured before a gap), :attr:`~Framer.resync_bytes`
(skipped looking for a frame boundary), :attr:`~Framer.after_gap_bytes` (captured after a gap
inside a frame) and :attr:`~Framer.truncated_bytes` (a size prefix the stream ended inside).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, NamedTuple

from kafkasniff.issues import IssueKind

try:
    import cython
except ImportError:     # plain Python (Cython is only needed to compile: docs/compiled.md)
    from kafkasniff.cythonstub import cython

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024

SYNCED = 0
TENTATIVE = 1
HUNTING = 2
SKIPPING = 3

ACCEPT = 1
REJECT = 0
NEED_MORE = -1

Validator = Callable[[bytes, int, bool], int]
"""``validator(buf, pos, tentative) -> ACCEPT | REJECT | NEED_MORE``: is ``buf[pos:]`` a frame
start? ``tentative`` is True for the first candidate of a stream joined mid-way (a weaker
check may be enough there), False while hunting after lost sync."""

_SIZE = struct.Struct(">i")
_size_at = _SIZE.unpack_from


class Prefilter(NamedTuple):
    """Where a validator could accept, as a regular expression over the hunted bytes.

    A validator may carry a ``prefilter`` attribute: a zero-argument callable returning a
    ``Prefilter`` (or None for no prefilter). Contract, for every offset ``p`` with at least
    ``window`` bytes from ``p`` to the end of the buffer:

    - if ``pattern`` is None, the validator rejects ``p``;
    - else, if ``pattern`` does not match at ``p + lead``, the validator rejects ``p`` (it
      never answers NEED_MORE there).

    The framer hands the last ``window - 1`` offsets of its buffer to the validator one by
    one, so the result is identical to calling the validator at every offset.
    """

    pattern: re.Pattern | None
    lead: int = 0
    window: int = 4
    #: True when ``pattern`` never matches where its first 4 bytes are zero: long runs of
    #: zeros (zero-filled garbage) are then skipped with a memory search, not matched at
    #: every offset. Requires matches no longer than ``ZERO_RUN`` bytes.
    zero_free: bool = False


ZERO_RUN = 64
_ZEROS = bytes(ZERO_RUN)
_NONZERO = re.compile(b"[^\x00]")


def _search(pf: Prefilter, buf: bytearray, start: int) -> re.Match | None:
    """The first match of ``pf.pattern`` at or after ``start``."""
    pattern = pf.pattern
    if not pf.zero_free:
        return pattern.search(buf, start)
    n = len(buf)
    while True:
        z = buf.find(_ZEROS, start)
        if z < 0:
            return pattern.search(buf, start)
        # matches starting before the run end inside it; none starts in its first 61 bytes
        m = pattern.search(buf, start, min(n, z + ZERO_RUN))
        if m is not None:
            return m
        nz = _NONZERO.search(buf, z + ZERO_RUN)
        if nz is None:
            return None
        start = nz.start() - 3


def uint32_range(lo: int, hi: int) -> bytes:
    """Regular-expression source matching exactly the 4-byte big-endian integers in
    ``[lo, hi]`` (``0 <= lo <= hi <= 2**32 - 1``)."""
    return _range(lo.to_bytes(4, "big"), hi.to_bytes(4, "big"))


def _byte_class(lo: int, hi: int) -> bytes:
    if lo == hi:
        return re.escape(bytes([lo]))
    return b"[" + re.escape(bytes([lo])) + b"-" + re.escape(bytes([hi])) + b"]"


def _range(lo: bytes, hi: bytes) -> bytes:
    n = len(lo)
    if n == 0:
        return b""
    if lo == bytes(n) and hi == b"\xff" * n:
        return b"[\x00-\xff]{%d}" % n if n > 1 else b"[\x00-\xff]"
    a, b = lo[0], hi[0]
    if a == b:
        return _byte_class(a, a) + _range(lo[1:], hi[1:])
    parts = [_byte_class(a, a) + _range(lo[1:], b"\xff" * (n - 1))]
    if b - a > 1:
        parts.append(_byte_class(a + 1, b - 1) + _range(bytes(n - 1), b"\xff" * (n - 1)))
    parts.append(_byte_class(b, b) + _range(bytes(n - 1), hi[1:]))
    return b"(?:" + b"|".join(parts) + b")"


def literal_trie(keys: list[bytes]) -> bytes:
    """Regular-expression source matching exactly the byte strings ``keys`` (all of one
    length), branching one byte at a time so a match costs O(length), not O(len(keys))."""
    if not keys or not keys[0]:
        return b""
    groups: dict[int, list[bytes]] = {}
    for k in keys:
        groups.setdefault(k[0], []).append(k[1:])
    parts = [re.escape(bytes([b])) + literal_trie(sorted(set(rest)))
             for b, rest in sorted(groups.items())]
    return parts[0] if len(parts) == 1 else b"(?:" + b"|".join(parts) + b")"


@lru_cache(maxsize=64)
def _size_prefilter(lo: int, hi: int) -> Prefilter:
    """The framer's own check: a size prefix outside ``[lo, hi]`` is rejected unseen."""
    lo, hi = max(lo, 0), min(hi, 0x7FFFFFFF)
    if lo > hi:
        return Prefilter(None)
    return Prefilter(re.compile(uint32_range(lo, hi)), zero_free=lo > 0)


@dataclass(frozen=True, slots=True)
class Frame:
    """One Kafka frame (request or response) of one direction.

    Attributes:
        size: the size prefix (payload length in bytes; the frame is ``size + 4`` on the wire).
        payload: the payload bytes; shorter than ``size`` when ``missing_bytes > 0``.
        stream_offset: stream offset of the size prefix.
        first_ts_ns / last_ts_ns: capture time of the first and the last byte.
        missing_bytes: payload bytes never captured (gap or end of stream inside the frame).
    """

    size: int
    payload: bytes
    stream_offset: int
    first_ts_ns: int
    last_ts_ns: int
    missing_bytes: int = 0


# Frame is a frozen slotted dataclass: its generated __init__ sets each field through
# object.__setattr__. The fast path of Framer.feed fills the slots directly instead (the same
# object): through the slot descriptors' setters in Python, through inline C functions of
# framing.pxd when compiled.
_FRAME_SLOTS = ("size", "payload", "stream_offset", "first_ts_ns", "last_ts_ns", "missing_bytes")
if not cython.compiled:
    _new = object.__new__   # compiled: slotstore.new_object, in the .pxd
    _f_size, _f_payload, _f_offset, _f_first_ts, _f_last_ts, _f_missing = (
        getattr(Frame, _f).__set__ for _f in _FRAME_SLOTS)
else:
    # the byte offsets of the slots the setters of the .pxd store into
    (
        _f_o_size, _f_o_payload, _f_o_offset, _f_o_first_ts, _f_o_last_ts, _f_o_missing
    ) = (slot_offset(Frame, _f) for _f in _FRAME_SLOTS)  # noqa: F821 - in the .pxd


@dataclass(frozen=True, slots=True)
class FramerIssue:
    """A framing problem: ``kind`` (an IssueKind value), ``message``, ``stream_offset``,
    ``length_bytes`` (bytes skipped/lost), ``ts_ns``."""

    kind: str
    message: str
    stream_offset: int
    length_bytes: int
    ts_ns: int


class Framer:
    """Splits one direction of a TCP stream into Kafka frames.

    Args:
        validator: checks a candidate frame start while TENTATIVE or HUNTING (see
            :data:`Validator`); may be changed later through the ``validator`` attribute.
        min_frame_bytes: smallest plausible payload size (8 for requests, 4 for responses).
        max_frame_bytes: largest accepted payload size.
        synced: start SYNCED (the handshake was seen) or TENTATIVE (joined mid-stream).
        start_offset: stream offset of the first byte that will be fed.

    ``feed``/``gap``/``close`` return a list of :class:`Frame` and :class:`FramerIssue`.
    Memory: at most one frame (<= max_frame_bytes) plus a few bytes while hunting.
    """

    __slots__ = ("validator", "min_frame_bytes", "max_frame_bytes", "state", "buf", "parts",
                 "parts_len", "base", "marks", "skip", "skipped", "skip_start", "skip_ts",
                 "closed", "damaged", "framed_bytes", "resync_bytes", "after_gap_bytes",
                 "truncated_bytes")

    def __init__(self, validator: Validator | None = None, *, min_frame_bytes: int = 4,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, synced: bool = True,
                 start_offset: int = 0) -> None:
        self.validator = validator
        self.min_frame_bytes = min_frame_bytes
        self.max_frame_bytes = max_frame_bytes
        self.state = SYNCED if synced else TENTATIVE
        self.buf = bytearray()
        # SYNCED inside a frame of a plausible size that began in buf: its later chunks, kept
        # as they came (not copied into buf) until its last byte, and their length in bytes
        # (None until needed: an open connection's state is what a full connection table
        # holds 50,000 times, and most framers never buffer a chunk)
        self.parts: list[bytes] | None = None
        self.parts_len = 0
        self.base = start_offset          # stream offset of buf[0]
        # (end stream offset, ts_ns) of buffered chunks; None until the first
        self.marks: list[tuple[int, int]] | None = None
        self.skip = 0                     # SKIPPING: bytes still to drop
        self.skipped = 0                  # HUNTING: bytes dropped so far in this hunt
        self.skip_start = -1
        self.skip_ts = 0
        self.closed = False
        # SKIPPING: the damaged frame being passed, [size, payload before the gap, stream
        # offset, first ts, first gap offset, bytes not captured, bytes captured after the gap]
        self.damaged: list | None = None
        self.framed_bytes = 0
        self.resync_bytes = 0
        self.after_gap_bytes = 0
        self.truncated_bytes = 0

    # ------------------------------------------------------------------ feeding
    @cython.locals(n=cython.Py_ssize_t, p=cython.Py_ssize_t, end=cython.Py_ssize_t,
                   base=cython.longlong, maxf=cython.longlong, minf=cython.longlong,
                   size=cython.longlong, expected=cython.longlong)
    def feed(self, data: bytes, offset: int, ts_ns: int) -> list:
        """Feed in-order bytes starting at stream ``offset``. Returns frames and issues."""
        out: list = []
        expected = self.base + len(self.buf) + self.parts_len
        if offset != expected:
            if offset > expected:
                out.extend(self.gap(expected, offset - expected, ts_ns))
            else:  # overlap with what we have: keep only the new tail
                cut = expected - offset
                self.resync_bytes += min(cut, len(data))   # seen before: not framed again
                if cut >= len(data):
                    return out
                data = data[cut:]
                offset = expected
        if self.state == SKIPPING:
            take = min(len(data), self.skip)
            self.skip -= take
            self.base += take
            self.after_gap_bytes += take
            self.damaged[6] += take
            if self.skip:
                return out
            self._emit_damaged(out, ts_ns)
            self.state = SYNCED
            data = data[take:]
            if not data:
                return out
        if self.state == SYNCED and not self.buf:
            # Fast path: frames parsed straight from the segment, no copy into the buffer.
            n = len(data)
            p = 0
            base = self.base
            maxf = self.max_frame_bytes
            minf = self.min_frame_bytes
            while n - p >= 4:
                size = _size_at(data, p)[0]
                if size < minf or size > maxf:
                    break
                end = p + 4 + size
                if end > n:
                    break
                frame = _new(Frame)
                _f_size(frame, size)
                _f_payload(frame, data[p + 4:end])
                _f_offset(frame, base + p)
                _f_first_ts(frame, ts_ns)
                _f_last_ts(frame, ts_ns)
                _f_missing(frame, 0)
                out.append(frame)
                p = end
            else:
                self.framed_bytes += p
                if p < n:
                    self.buf += data[p:] if p else data
                    if self.marks is None:
                        self.marks = [(base + n, ts_ns)]
                    else:
                        self.marks.append((base + n, ts_ns))
                self.base = base + p
                return out
            # implausible size or incomplete frame: buffer the rest and use the slow path
            self.framed_bytes += p
            self.base = base + p
            self.buf += data[p:]
            if self.marks is None:
                self.marks = [(base + n, ts_ns)]
            else:
                self.marks.append((base + n, ts_ns))
        else:
            buf = self.buf
            n = len(data)
            if self.marks is None:
                self.marks = [(offset + n, ts_ns)]
            else:
                self.marks.append((offset + n, ts_ns))
            if self.state == SYNCED and len(buf) >= 4:
                # inside a frame of a plausible size (a large one spans hundreds of segments):
                # its chunks are kept as they come, not appended to buf (each append could
                # copy all of it again), and joined once, at its last byte
                size = _size_at(buf, 0)[0]
                if self.min_frame_bytes <= size <= self.max_frame_bytes:
                    expected = 4 + size - len(buf) - self.parts_len    # bytes still missing
                    if n < expected:
                        if self.parts is None:
                            self.parts = [data]
                        else:
                            self.parts.append(data)
                        self.parts_len += n
                        return out
                    if self.parts:
                        self._complete(out, size, data, expected)
                        return out
                buf += data     # the frame ends in data, or its size is not plausible
            else:
                buf += data
                if self.state == SYNCED and len(buf) >= 4:
                    # the size prefix is whole now: nothing to do before the frame's last
                    # byte if its size is plausible; else _drain decides
                    size = _size_at(buf, 0)[0]
                    if (self.min_frame_bytes <= size <= self.max_frame_bytes
                            and len(buf) < 4 + size):
                        return out
        self._drain(out)
        return out

    @cython.locals(size=cython.longlong, k=cython.Py_ssize_t, base=cython.longlong)
    def _complete(self, out: list, size: int, data: bytes, k: int) -> None:
        """The frame at ``buf[0]``, its later chunks in ``parts``, ends ``k`` bytes into
        ``data``: its payload made in one copy, then the rest of ``data`` framed as usual."""
        buf = self.buf
        parts = self.parts
        parts.insert(0, buf[4:])
        parts.append(data[:k] if k < len(data) else data)
        payload = b"".join(parts)
        self.parts = None
        self.parts_len = 0
        base = self.base
        out.append(Frame(size, payload, base, self._ts_at(base), self._ts_at(base + 3 + size)))
        self.framed_bytes += 4 + size
        buf.clear()
        self._consume(4 + size)     # the base moved past the frame, its marks dropped
        if k < len(data):
            buf += data[k:]
            self._drain(out)

    def _join_parts(self) -> None:
        """Append the chunks kept in ``parts`` to ``buf`` (before a gap or the end)."""
        self.buf += b"".join(self.parts)
        self.parts = None
        self.parts_len = 0

    def _ts_at(self, offset: int) -> int:
        marks = self.marks
        if not marks:
            return 0
        for end, ts in marks:
            if offset < end:
                return ts
        return marks[-1][1]

    def _consume(self, n: int) -> None:
        del self.buf[:n]
        self.base += n
        marks = self.marks
        if not marks:
            return
        i = 0
        while i < len(marks) and marks[i][0] <= self.base:
            i += 1
        if i:
            del marks[:i]

    @cython.locals(size=cython.longlong)
    def _drain(self, out: list) -> None:
        buf = self.buf
        while True:
            if self.state == HUNTING or self.state == TENTATIVE:
                if not self._hunt(out):
                    return
                continue
            if len(buf) < 4:
                return
            size = _size_at(buf, 0)[0]
            if size < self.min_frame_bytes or size > self.max_frame_bytes:
                if size > self.max_frame_bytes:  # a too-small size shows in the resync issue
                    out.append(FramerIssue(IssueKind.FRAME_TOO_LARGE,
                                           f"frame size {size} exceeds the maximum "
                                           f"{self.max_frame_bytes}: sync lost", self.base, 0,
                                           self._ts_at(self.base)))
                self.state = HUNTING
                continue
            if len(buf) < 4 + size:
                return
            first_ts = self._ts_at(self.base)
            last_ts = self._ts_at(self.base + 3 + size)
            out.append(Frame(size, bytes(buf[4:4 + size]), self.base, first_ts, last_ts))
            self.framed_bytes += 4 + size
            self._consume(4 + size)

    def _prefilter(self) -> Prefilter:
        own = getattr(self.validator, "prefilter", None)
        pf = own() if own is not None else None
        return pf if pf is not None else _size_prefilter(self.min_frame_bytes,
                                                         self.max_frame_bytes)

    def _hunt(self, out: list) -> bool:
        """Scan for a frame start; True when sync was (re)gained and the buffer trimmed."""
        buf = self.buf
        validator = self.validator
        tentative = self.state == TENTATIVE
        pos = 0
        n = len(buf)
        pf = None if tentative else self._prefilter()
        while pos + 4 <= n:
            if pf is not None:
                last = n - pf.window      # offsets past it are judged one by one
                if pos <= last:
                    m = None if pf.pattern is None else _search(pf, buf, pos + pf.lead)
                    if m is None or m.start() - pf.lead > last:
                        pos = last + 1
                        if pos + 4 > n:
                            break
                    else:
                        pos = m.start() - pf.lead
            size = _size_at(buf, pos)[0]
            verdict = REJECT
            if self.min_frame_bytes <= size <= self.max_frame_bytes:
                verdict = ACCEPT if validator is None else validator(buf, pos, tentative)
            if verdict == NEED_MORE:
                break
            if verdict == ACCEPT:
                if pos or self.skipped:
                    self._note_skip(pos)
                    out.append(FramerIssue(IssueKind.RESYNC,
                                           f"skipped {self.skipped} bytes to find a frame boundary",
                                           self.skip_start, self.skipped, self.skip_ts))
                self.skipped = 0
                self.skip_start = -1
                self._consume(pos)
                self.state = SYNCED
                return True
            if tentative:
                self.state = HUNTING
                tentative = False
                pf = self._prefilter()
            pos += 1
        # keep only the bytes still needed to judge the next candidates
        if pos:
            self._note_skip(pos)
            self._consume(pos)
        return False

    def _note_skip(self, n: int) -> None:
        if n <= 0:
            return
        if self.skip_start < 0:
            self.skip_start = self.base
            self.skip_ts = self._ts_at(self.base)
        self.skipped += n
        self.resync_bytes += n

    # ------------------------------------------------------------------ gaps and end
    def gap(self, offset: int, length: int, ts_ns: int) -> list:
        """Bytes ``[offset, offset+length)`` were never captured."""
        out: list = []
        if self.parts:
            self._join_parts()
        expected = self.base + len(self.buf)
        if offset > expected:  # defensive: an implicit gap before this one
            length += offset - expected
            offset = expected
        elif offset < expected:
            cut = expected - offset
            if cut >= length:
                return out
            length -= cut
            offset = expected
        if self.state == SKIPPING:
            lost = min(length, self.skip)
            self.damaged[5] += lost
            self.skip -= lost
            self.base += lost
            if self.skip:
                return out
            self._emit_damaged(out, ts_ns)
            rest = length - lost
            if rest == 0:
                self.state = SYNCED
                return out
            self.state = HUNTING
            self.base += rest
            self._note_skip_gap(self.base - rest, rest, ts_ns, count=False)
            return out
        if self.state == SYNCED and len(self.buf) >= 4:
            size = _size_at(self.buf, 0)[0]
            frame_end = self.base + 4 + size
            gap_end = offset + length
            payload = bytes(self.buf[4:])
            self.framed_bytes += len(self.buf)
            self.damaged = [size, payload, self.base, self._ts_at(self.base), offset,
                            min(gap_end, frame_end) - offset, 0]
            self.buf.clear()
            self.marks = None
            if gap_end < frame_end:
                self.base = gap_end
                self.skip = frame_end - gap_end
                self.state = SKIPPING
                return out
            self._emit_damaged(out, ts_ns)
            self.base = gap_end
            if gap_end == frame_end:
                self.state = SYNCED
                return out
            self.state = HUNTING
            self._note_skip_gap(frame_end, gap_end - frame_end, ts_ns, count=False)
            return out
        # between frames (or a partial size prefix): the next boundary is unknown
        dropped = len(self.buf)
        self.buf.clear()
        self.marks = None
        self.base = offset + length
        self.state = HUNTING
        if dropped:
            self._note_skip_gap(offset - dropped, dropped, ts_ns)
        elif self.skip_start < 0:
            self.skip_start = self.base
            self.skip_ts = ts_ns
        return out

    def _note_skip_gap(self, offset: int, n: int, ts_ns: int, count: bool = True) -> None:
        """A hunt starts at ``offset``; ``count``: the ``n`` bytes dropped there were
        captured (else they are the gap's, never captured)."""
        if self.skip_start < 0:
            self.skip_start = offset
            self.skip_ts = ts_ns
        if count:
            self.skipped += n
            self.resync_bytes += n

    def _emit_damaged(self, out: list, ts_ns: int) -> None:
        """The damaged frame being passed is over: the frame (payload: the bytes before its
        first gap) and its frame_damaged issue."""
        size, payload, base, first_ts, gap_offset, missing, after = self.damaged
        self.damaged = None
        out.append(Frame(size, payload, base, first_ts, ts_ns, missing_bytes=missing))
        tail = f"; the {after} bytes captured after the gap are not decoded" if after else ""
        out.append(FramerIssue(IssueKind.FRAME_DAMAGED,
                               f"{missing} bytes of a {size}-byte frame were not captured{tail}",
                               gap_offset, missing, ts_ns))

    def close(self, ts_ns: int) -> list:
        """The stream ended: report a partial frame and bytes skipped while hunting."""
        out: list = []
        if self.closed:
            return out
        self.closed = True
        if self.parts:
            self._join_parts()
        if self.state == SKIPPING:
            size, payload, base, first_ts, _gap, missing, after = self.damaged
            self.damaged = None
            missing += self.skip
            out.append(Frame(size, payload, base, first_ts, ts_ns, missing_bytes=missing))
            out.append(FramerIssue(IssueKind.FRAME_TRUNCATED,
                                   f"stream ended {self.skip} bytes before the end of a "
                                   f"{size}-byte frame damaged by a gap ({missing} bytes not "
                                   f"captured in all; {after} captured after the gap are not "
                                   f"decoded)", base, missing, ts_ns))
            self.skip = 0
        elif self.state == SYNCED and self.buf:
            if len(self.buf) >= 4:
                size = _size_at(self.buf, 0)[0]
                missing = 4 + size - len(self.buf)
                out.append(Frame(size, bytes(self.buf[4:]), self.base, self._ts_at(self.base),
                                 self._ts_at(self.base + len(self.buf) - 1), missing_bytes=missing))
                self.framed_bytes += len(self.buf)
                out.append(FramerIssue(IssueKind.FRAME_TRUNCATED,
                                       f"stream ended {missing} bytes before the end of a "
                                       f"{size}-byte frame", self.base, missing, ts_ns))
            else:
                self.truncated_bytes += len(self.buf)
                out.append(FramerIssue(IssueKind.FRAME_TRUNCATED,
                                       f"stream ended inside a frame size prefix "
                                       f"({len(self.buf)} of 4 bytes)", self.base, len(self.buf),
                                       ts_ns))
        elif self.state in (HUNTING, TENTATIVE):
            self._note_skip(len(self.buf))
            if self.skipped:
                out.append(FramerIssue(IssueKind.RESYNC,
                                       f"skipped {self.skipped} bytes without finding a frame "
                                       f"boundary before the stream ended", self.skip_start,
                                       self.skipped, self.skip_ts or ts_ns))
        self.buf.clear()
        self.marks = None
        self.skipped = 0
        return out
