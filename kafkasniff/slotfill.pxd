# C types of kafkasniff/slotfill.py when Cython compiles it (docs/compiled.md); the .py file
# runs unchanged as plain Python.

from cpython.object cimport PyObject_GenericSetAttr

# the store of one field (the .py file defines it only as plain Python: object.__setattr__)
cdef inline int _set(object o, object name, object v) except -1:
    return PyObject_GenericSetAttr(o, name, v)
