# C types of kafkasniff/protocol/framing.py when Cython compiles it (docs/compiled.md); the
# .py file runs unchanged as plain Python. Sizes and stream offsets fit a 64-bit integer.


# _new: object.__new__(cls) in one C call; set_slot: a store at a slot's byte offset
from kafkasniff.slotstore cimport new_object as _new, set_slot, slot_offset

# the byte offsets of Frame's slots that the setters below store into
# (kafkasniff/slotstore.pxd), read at import by the .py file
cdef Py_ssize_t _f_o_size, _f_o_payload, _f_o_offset, _f_o_first_ts, _f_o_last_ts
cdef Py_ssize_t _f_o_missing

# the fast path's Frame slot setters (the .py file defines them only as plain Python)
cdef inline int _f_size(object o, object v) except -1:
    return set_slot(o, _f_o_size, "size", v)
cdef inline int _f_payload(object o, object v) except -1:
    return set_slot(o, _f_o_payload, "payload", v)
cdef inline int _f_offset(object o, object v) except -1:
    return set_slot(o, _f_o_offset, "stream_offset", v)
cdef inline int _f_first_ts(object o, object v) except -1:
    return set_slot(o, _f_o_first_ts, "first_ts_ns", v)
cdef inline int _f_last_ts(object o, object v) except -1:
    return set_slot(o, _f_o_last_ts, "last_ts_ns", v)
cdef inline int _f_missing(object o, object v) except -1:
    return set_slot(o, _f_o_missing, "missing_bytes", v)

cdef class Framer:
    cdef public object validator
    cdef public long long min_frame_bytes
    cdef public long long max_frame_bytes
    cdef public int state
    cdef public bytearray buf
    cdef public list parts
    cdef public long long parts_len
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
