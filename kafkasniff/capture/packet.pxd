# C types of kafkasniff/capture/packet.py when Cython compiles it (docs/compiled.md); the .py
# file runs unchanged as plain Python. Header fields and frame offsets fit a C long.

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize

# _new: object.__new__(cls) in one C call; set_slot: a store at a slot's byte offset
from kafkasniff.slotstore cimport new_object as _new, set_slot, slot_offset

cdef object _fast_eth_ipv4_tcp(bytes data, Py_ssize_t caplen, object ts_ns)

# data[start:end] of a bytes object, copied from its buffer (0 <= start <= end <= len(data))
cdef inline bytes _sub(bytes data, Py_ssize_t start, Py_ssize_t end):
    return PyBytes_FromStringAndSize(PyBytes_AS_STRING(data) + start, end - start)

# the byte offsets of TcpSegment's slots that the setters below store into
# (kafkasniff/slotstore.pxd), read at import by the .py file
cdef Py_ssize_t _s_o_ts, _s_o_src_ip, _s_o_src_port, _s_o_dst_ip, _s_o_dst_port, _s_o_seq
cdef Py_ssize_t _s_o_ack, _s_o_flags, _s_o_payload, _s_o_missing

# the fast path's TcpSegment slot setters (the .py file defines them only as plain Python)
cdef inline int _s_ts(object o, object v) except -1:
    return set_slot(o, _s_o_ts, "ts_ns", v)
cdef inline int _s_src_ip(object o, object v) except -1:
    return set_slot(o, _s_o_src_ip, "src_ip", v)
cdef inline int _s_src_port(object o, object v) except -1:
    return set_slot(o, _s_o_src_port, "src_port", v)
cdef inline int _s_dst_ip(object o, object v) except -1:
    return set_slot(o, _s_o_dst_ip, "dst_ip", v)
cdef inline int _s_dst_port(object o, object v) except -1:
    return set_slot(o, _s_o_dst_port, "dst_port", v)
cdef inline int _s_seq(object o, object v) except -1:
    return set_slot(o, _s_o_seq, "seq", v)
cdef inline int _s_ack(object o, object v) except -1:
    return set_slot(o, _s_o_ack, "ack", v)
cdef inline int _s_flags(object o, object v) except -1:
    return set_slot(o, _s_o_flags, "flags", v)
cdef inline int _s_payload(object o, object v) except -1:
    return set_slot(o, _s_o_payload, "payload", v)
cdef inline int _s_missing(object o, object v) except -1:
    return set_slot(o, _s_o_missing, "missing_bytes", v)
