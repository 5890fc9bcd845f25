"""The record loop of magic 2 record batches (KIP-98): one batch's records section ->
:class:`~kafkasniff.protocol.records.Record` objects, one at a time.

Compiled by Cython when the package is installed (docs/compiled.md): ``@cython.locals``
types the loop's positions, lengths and bytes as C integers and the section as ``bytes``,
and the ``.pxd`` beside this file sets a record's slots in C; the same file runs as plain
Python, with the same records and the same errors, when nothing was compiled.
:mod:`kafkasniff.protocol.records` holds the record format, the batch headers and everything
around this loop.
"""

from __future__ import annotations

try:
    import cython
except ImportError:     # plain Python
    from kafkasniff.cythonstub import cython

from kafkasniff.protocol.primitives import read_varint

_INT32_MIN, _INT32_MAX = -(2 ** 31), 2 ** 31 - 1
_NO_HEADERS: tuple = ()
if not cython.compiled:
    _new = object.__new__   # compiled: slotstore.new_object, in the .pxd


class Bad(Exception):
    """A record section departs from the format: ``message``, and ``pos``, the byte where
    it was found. Internal to the record decoding (callers of
    :func:`~kafkasniff.protocol.records.decode_records` get a ``RecordIssue``)."""

    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos


def slow_varint(buf, pos: int, i: int, what: str, bits: int = 32) -> tuple[int, int]:
    """A zig-zag varint of 3+ bytes (the record loop inlines 1 and 2 bytes); must fit a
    signed ``bits``-bit integer. Raises Bad."""
    try:
        value, end = read_varint(buf, pos)
    except ValueError:
        raise Bad(f"record {i}: {what}: varint longer than 10 bytes", pos) from None
    if bits == 32 and (value < _INT32_MIN or value > _INT32_MAX):
        raise Bad(f"record {i}: {what}: varint {value} overflows int32", pos)
    return value, end


# The record loop below inlines zig-zag varint decoding: for one byte ``b < 0x80`` the raw
# value is ``b``; for two bytes (``c = next byte < 0x80``) it is ``(b & 0x7f) | c << 7``;
# then ``(raw >> 1) ^ -(raw & 1)``. Longer ones (rare: large deltas) call slow_varint.


@cython.locals(data=bytes, pos=cython.Py_ssize_t, end=cython.Py_ssize_t,
               count=cython.Py_ssize_t, i=cython.Py_ssize_t, b=cython.long, c=cython.long,
               length=cython.Py_ssize_t, rend=cython.Py_ssize_t, n=cython.Py_ssize_t,
               hcount=cython.Py_ssize_t, offset_delta=cython.long, attributes=cython.long)
def v2_records(buf, pos: int, end: int, count: int, base_offset: int, base_ts: int,
               lat_ts: int | None, builder, record_cls):
    """Yield the ``count`` records of ``buf[pos:end]`` (a records section: ``bytes``, or any
    buffer, then copied to ``bytes`` once) as ``record_cls`` instances (``Record``: a
    slotted, frozen dataclass), ``control`` ``None``. As plain Python each is made by
    ``builder(offset, timestamp_ms, key, value, headers, attributes)``, the class's
    non-frozen twin (``records._builder``), and then given the class ``record_cls``;
    compiled, its slots are set in C. Keys, values and header values are ``bytes``.

    Raises Bad at the first departure (the records before it were yielded). The loop runs
    at most ``(end - pos) / 7`` times (a record takes at least 7 bytes).
    """
    if count < 0:
        raise Bad(f"negative record count {count}", pos)
    data = buf if type(buf) is bytes else bytes(buf)
    no_headers = _NO_HEADERS
    slow = slow_varint
    i = 0
    try:
        while i < count:
            if pos >= end:
                raise Bad(f"record {i}: the records section ends after {i} of {count} "
                          f"records", pos)
            # length
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    b = (b & 0x7F) | c << 7
                    length = (b >> 1) ^ -(b & 1)
                    pos += 2
                else:
                    length, pos = slow(data, pos, i, "length")
            rend = pos + length
            if length < 6 or rend > end:
                raise Bad(f"record {i}: length {length} does not fit the {end - pos} bytes "
                          f"left (minimum 6)", pos)
            attributes = data[pos]
            # timestampDelta (varlong)
            b = data[pos + 1]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                pos += 2
            else:
                c = data[pos + 2]
                if c < 0x80:
                    b = (b & 0x7F) | c << 7
                    ts_delta = (b >> 1) ^ -(b & 1)
                    pos += 3
                else:
                    ts_delta, pos = slow(data, pos + 1, i, "timestampDelta", 64)
            # offsetDelta
            b = data[pos]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    b = (b & 0x7F) | c << 7
                    offset_delta = (b >> 1) ^ -(b & 1)
                    pos += 2
                else:
                    offset_delta, pos = slow(data, pos, i, "offsetDelta")
            # key
            b = data[pos]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    b = (b & 0x7F) | c << 7
                    n = (b >> 1) ^ -(b & 1)
                    pos += 2
                else:
                    n, pos = slow(data, pos, i, "key length")
            if n < 0:
                if n != -1:
                    raise Bad(f"record {i}: key length {n}", pos)
                key = None
            else:
                if pos + n > rend:
                    raise Bad(f"record {i}: key length {n} runs past the end of the "
                              f"record ({rend - pos} bytes left)", pos)
                key = data[pos:pos + n]
                pos += n
            # value
            b = data[pos]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    b = (b & 0x7F) | c << 7
                    n = (b >> 1) ^ -(b & 1)
                    pos += 2
                else:
                    n, pos = slow(data, pos, i, "value length")
            if n < 0:
                if n != -1:
                    raise Bad(f"record {i}: value length {n}", pos)
                value = None
            else:
                if pos + n > rend:
                    raise Bad(f"record {i}: value length {n} runs past the end of the "
                              f"record ({rend - pos} bytes left)", pos)
                value = data[pos:pos + n]
                pos += n
            # headers
            b = data[pos]
            if b == 0:
                headers = no_headers
                pos += 1
            else:
                if b < 0x80:
                    hcount = (b >> 1) ^ -(b & 1)
                    pos += 1
                else:
                    hcount, pos = slow(data, pos, i, "header count")
                if hcount < 0 or hcount > (rend - pos) >> 1:
                    raise Bad(f"record {i}: header count {hcount} does not fit the "
                              f"{rend - pos} bytes left", pos)
                hs = []
                for _ in range(hcount):
                    b = data[pos]
                    if b < 0x80:
                        n = (b >> 1) ^ -(b & 1)
                        pos += 1
                    else:
                        n, pos = slow(data, pos, i, "header key length")
                    if n < 0 or pos + n > rend:
                        raise Bad(f"record {i}: header key length {n} does not fit the "
                                  f"{rend - pos} bytes left", pos)
                    hkey = data[pos:pos + n].decode("utf-8", "backslashreplace")
                    pos += n
                    b = data[pos]
                    if b < 0x80:
                        n = (b >> 1) ^ -(b & 1)
                        pos += 1
                    else:
                        c = data[pos + 1]
                        if c < 0x80:
                            b = (b & 0x7F) | c << 7
                            n = (b >> 1) ^ -(b & 1)
                            pos += 2
                        else:
                            n, pos = slow(data, pos, i, "header value length")
                    if n < 0:
                        if n != -1:
                            raise Bad(f"record {i}: header value length {n}", pos)
                        hs.append((hkey, None))
                    else:
                        if pos + n > rend:
                            raise Bad(f"record {i}: header value length {n} runs past the "
                                      f"end of the record ({rend - pos} bytes left)", pos)
                        hs.append((hkey, data[pos:pos + n]))
                        pos += n
                headers = tuple(hs)
            if pos != rend:
                raise Bad(f"record {i}: fields end at byte {pos}, the record length says "
                          f"{rend}", pos)
            if cython.compiled:     # the slots set in C (recordloop.pxd)
                # the offsets of record_cls's slots: read at its first record, then one
                # comparison (another generator may have read another class's since)
                _record_slots(record_cls)  # noqa: F821 - in the .pxd
                r = _new(record_cls)
                _set_record(r, base_offset + offset_delta,  # noqa: F821 - in the .pxd
                            base_ts + ts_delta if lat_ts is None else lat_ts, key, value,
                            headers, attributes if attributes < 128 else attributes - 256)
            else:
                r = builder(base_offset + offset_delta,
                            base_ts + ts_delta if lat_ts is None else lat_ts, key, value,
                            headers, attributes if attributes < 128 else attributes - 256)
                r.__class__ = record_cls
            yield r
            i += 1
    except IndexError:
        raise Bad(f"record {i}: the records section ends inside the record", end) from None
    if pos != end:
        raise Bad(f"{end - pos} bytes after the {count} records", pos)
