# Stores into the slots of slotted instances by byte offset, for the compiled modules
# (docs/compiled.md): what a slot's member descriptor does for a T_OBJECT_EX member
# (PyMember_SetOne), without PyObject_GenericSetAttr's look-up of the attribute by name in
# the type (about 150 instructions a store). Inline C only: no module is imported at run
# time. The offsets are read once, at import, from the class's member descriptors; a name
# that is not a writable object slot gives -1, and set_slot then stores by name.

from cpython.object cimport PyObject, PyObject_GenericSetAttr, PyTypeObject, Py_TYPE
from cpython.ref cimport Py_INCREF, Py_XDECREF

cdef extern from "structmember.h":
    ctypedef struct PyMemberDef:
        int type
        Py_ssize_t offset
        int flags
    int T_OBJECT_EX
    int READONLY

cdef extern from "Python.h":
    ctypedef struct PyMemberDescrObject:
        PyMemberDef* d_member
    PyTypeObject PyMemberDescr_Type
    PyTypeObject PyBaseObject_Type

# object.__new__(cls) for a class whose instances object's own tp_new makes (a Python
# class without __new__ of its own: the frozen dataclasses the fast paths fill), called in
# C: object.__new__ called as a Python method goes through _PyObject_MakeTpCall and
# tp_new_wrapper's checks first (about 370 instructions more a call, measured)
cdef inline object new_object(type cls):
    cdef tuple no_args = ()
    return PyBaseObject_Type.tp_new(cls, <PyObject*>no_args, NULL)

# the byte offset of the writable object slot behind member descriptor desc; -1 for any
# other object (another descriptor, None) or member kind
cdef inline Py_ssize_t member_offset(object desc):
    cdef PyMemberDef* m
    if Py_TYPE(desc) is not &PyMemberDescr_Type:
        return -1
    m = (<PyMemberDescrObject*>desc).d_member
    if m.type != T_OBJECT_EX or m.flags & READONLY:
        return -1
    return m.offset

# the offset of slot name in instances of exactly cls (its descriptor found along the MRO,
# as attribute look-up finds it); -1 when it is not a writable object slot
cdef inline Py_ssize_t slot_offset(object cls, object name) except? -2:
    for k in cls.__mro__:
        if name in k.__dict__:
            return member_offset(k.__dict__[name])
    return -1

# store v in the slot at offset of obj (an instance of exactly the class the offset was read
# from: the caller's promise), the new reference in and the old one out; by name (the
# generic store) when offset is -1
cdef inline int set_slot(object obj, Py_ssize_t offset, object name, object v) except -1:
    cdef PyObject** addr
    cdef PyObject* old
    if offset < 0:
        return PyObject_GenericSetAttr(obj, name, v)
    addr = <PyObject**>((<char*><PyObject*>obj) + offset)
    old = addr[0]
    Py_INCREF(v)
    addr[0] = <PyObject*>v
    Py_XDECREF(old)
    return 0

# the object in the slot at offset of obj (an instance of exactly the class the offset was
# read from: the caller's promise), a new reference; by name when offset is -1 or the slot
# is empty (the generic look-up then raises AttributeError)
cdef inline object get_slot(object obj, Py_ssize_t offset, object name):
    cdef PyObject* v
    if offset >= 0:
        v = (<PyObject**>((<char*><PyObject*>obj) + offset))[0]
        if v is not NULL:
            return <object>v
    return getattr(obj, name)
