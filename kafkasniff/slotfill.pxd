# C types of kafkasniff/slotfill.py when Cython compiles it (docs/compiled.md); the .py file
# runs unchanged as plain Python.

from cpython.object cimport PyObject_GenericSetAttr

from kafkasniff.slotstore cimport set_slot, slot_offset

# the store of one field by name (the .py file defines it only as plain Python:
# object.__setattr__)
cdef inline int _set(object o, object name, object v) except -1:
    return PyObject_GenericSetAttr(o, name, v)

# the byte offset of the writable object slot name of cls, -1 for any other attribute (the
# .py file: -1, no offsets as plain Python)
cdef inline Py_ssize_t _slot_offset(object cls, object name) except? -2:
    return slot_offset(cls, name)

# the store into a slot by its offset (kafkasniff/slotstore.pxd)
cdef inline int _store_at(object obj, Py_ssize_t offset, object v) except -1:
    return set_slot(obj, offset, None, v)

cdef class SlotLayout:
    cdef readonly object cls
    cdef readonly tuple names
    cdef readonly object offsets
