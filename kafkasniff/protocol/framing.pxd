# C types of kafkasniff/protocol/framing.py when Cython compiles it (docs/compiled.md); the
# .py file runs unchanged as plain Python. Sizes and stream offsets fit a 64-bit integer.

from cpython.object cimport PyObject_GenericSetAttr

cdef object _new

# the fast path's Frame slot setters (the .py file defines them only as plain Python)
cdef inline int _f_size(object o, object v) except -1:
    return PyObject_GenericSetAttr(o, "size", v)
cdef inline int _f_payload(object o, object v) except -1:
    return PyObject_GenericSetAttr(o, "payload", v)
cdef inline int _f_offset(object o, object v) except -1:
    return PyObject_GenericSetAttr(o, "stream_offset", v)
cdef inline int _f_first_ts(object o, object v) except -1:
    return PyObject_GenericSetAttr(o, "first_ts_ns", v)
cdef inline int _f_last_ts(object o, object v) except -1:
    return PyObject_GenericSetAttr(o, "last_ts_ns", v)
cdef inline int _f_missing(object o, object v) except -1:
    return PyObject_GenericSetAttr(o, "missing_bytes", v)

cdef class Framer:
    cdef public object validator
    cdef public long long min_frame_bytes
    cdef public long long max_frame_bytes
    cdef public int state
    cdef public bytearray buf
    cdef public long long base
    cdef public list marks
    cdef public long long skip
    cdef public long long skipped
    cdef public long long skip_start
    cdef public object skip_ts
    cdef public bint closed
    cdef public object damaged
    cdef public long long framed_bytes
    cdef public long long resync_bytes
    cdef public long long after_gap_bytes
    cdef public long long truncated_bytes
