# C types of kafkasniff/protocol/recordloop.py when Cython compiles it (docs/compiled.md);
# the .py file runs unchanged as plain Python. The loop's own locals are typed by its
# @cython.locals; positions and lengths fit a Py_ssize_t, varints are checked to 32 bits.

from cpython.object cimport PyObject_GenericSetAttr

cdef object _new

# a Record's slots, set on an instance made by object.__new__ (the frozen dataclass's
# __setattr__ refuses; its __init__ sets each field through object.__setattr__)
cdef inline int _set_record(object r, object offset, object timestamp_ms, object key,
                            object value, object headers, object attributes) except -1:
    PyObject_GenericSetAttr(r, "offset", offset)
    PyObject_GenericSetAttr(r, "timestamp_ms", timestamp_ms)
    PyObject_GenericSetAttr(r, "key", key)
    PyObject_GenericSetAttr(r, "value", value)
    PyObject_GenericSetAttr(r, "headers", headers)
    PyObject_GenericSetAttr(r, "attributes", attributes)
    return PyObject_GenericSetAttr(r, "control", None)
