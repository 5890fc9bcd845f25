# C types of kafkasniff/capture/pcapfile.py when Cython compiles it (docs/compiled.md); the
# .py file runs unchanged as plain Python.

from cpython.object cimport PyObject_GenericSetAttr

cdef object _new

# the pcap record loop's CapturedPacket slot setters (the .py file defines them only as plain
# Python)
cdef inline int _p_ts(object o, object v) except -1:
    return PyObject_GenericSetAttr(o, "ts_ns", v)
cdef inline int _p_link(object o, object v) except -1:
    return PyObject_GenericSetAttr(o, "link_type", v)
cdef inline int _p_data(object o, object v) except -1:
    return PyObject_GenericSetAttr(o, "data", v)
cdef inline int _p_orig(object o, object v) except -1:
    return PyObject_GenericSetAttr(o, "orig_len", v)
cdef inline int _p_iface(object o, object v) except -1:
    return PyObject_GenericSetAttr(o, "interface_id", v)
