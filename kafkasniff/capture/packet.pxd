# C types of kafkasniff/capture/packet.py when Cython compiles it (docs/compiled.md); the .py
# file runs unchanged as plain Python. Header fields and frame offsets fit a C long.

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.object cimport PyObject_GenericSetAttr

cdef object _new

cdef object _fast_eth_ipv4_tcp(bytes data, Py_ssize_t caplen, object ts_ns)

# data[start:end] of a bytes object, copied from its buffer (0 <= start <= end <= len(data))
cdef inline bytes _sub(bytes data, Py_ssize_t start, Py_ssize_t end):
    return PyBytes_FromStringAndSize(PyBytes_AS_STRING(data) + start, end - start)

# the fast path's TcpSegment slot setters (the .py file defines them only as plain Python)
cdef inline int _s_ts(object o, object v) except -1:
    return PyObject_GenericSetAttr(o, "ts_ns", v)
cdef inline int _s_src_ip(object o, object v) except -1:
    return PyObject_GenericSetAttr(o, "src_ip", v)
cdef inline int _s_src_port(object o, object v) except -1:
    return PyObject_GenericSetAttr(o, "src_port", v)
cdef inline int _s_dst_ip(object o, object v) except -1:
    return PyObject_GenericSetAttr(o, "dst_ip", v)
cdef inline int _s_dst_port(object o, object v) except -1:
    return PyObject_GenericSetAttr(o, "dst_port", v)
cdef inline int _s_seq(object o, object v) except -1:
    return PyObject_GenericSetAttr(o, "seq", v)
cdef inline int _s_ack(object o, object v) except -1:
    return PyObject_GenericSetAttr(o, "ack", v)
cdef inline int _s_flags(object o, object v) except -1:
    return PyObject_GenericSetAttr(o, "flags", v)
cdef inline int _s_payload(object o, object v) except -1:
    return PyObject_GenericSetAttr(o, "payload", v)
cdef inline int _s_missing(object o, object v) except -1:
    return PyObject_GenericSetAttr(o, "missing_bytes", v)
