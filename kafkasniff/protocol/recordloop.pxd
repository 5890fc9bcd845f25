# C types of kafkasniff/protocol/recordloop.py when Cython compiles it (docs/compiled.md);
# the .py file runs unchanged as plain Python. The loop's own locals are typed by its
# @cython.locals; positions and lengths fit a Py_ssize_t, varints are checked to 32 bits.

# _new: object.__new__(cls) in one C call; set_slot: a store at a slot's byte offset
from kafkasniff.slotstore cimport new_object as _new, set_slot, slot_offset

# the class whose slots' byte offsets are below (kafkasniff/slotstore.pxd): v2_records calls
# _record_slots before each record, which reads them only when the class differs from the
# last one
cdef object _r_cls
cdef Py_ssize_t _r_o_offset, _r_o_ts, _r_o_key, _r_o_value, _r_o_headers, _r_o_attributes
cdef Py_ssize_t _r_o_control

cdef inline int _record_slots(object cls) except -1:
    global _r_cls, _r_o_offset, _r_o_ts, _r_o_key, _r_o_value, _r_o_headers
    global _r_o_attributes, _r_o_control
    if cls is _r_cls:
        return 0
    _r_o_offset = slot_offset(cls, "offset")
    _r_o_ts = slot_offset(cls, "timestamp_ms")
    _r_o_key = slot_offset(cls, "key")
    _r_o_value = slot_offset(cls, "value")
    _r_o_headers = slot_offset(cls, "headers")
    _r_o_attributes = slot_offset(cls, "attributes")
    _r_o_control = slot_offset(cls, "control")
    _r_cls = cls
    return 0

# a Record's slots, set on an instance of the class last given to _record_slots, made by
# object.__new__ (the frozen dataclass's __setattr__ refuses; its __init__ sets each field
# through object.__setattr__)
cdef inline int _set_record(object r, object offset, object timestamp_ms, object key,
                            object value, object headers, object attributes) except -1:
    set_slot(r, _r_o_offset, "offset", offset)
    set_slot(r, _r_o_ts, "timestamp_ms", timestamp_ms)
    set_slot(r, _r_o_key, "key", key)
    set_slot(r, _r_o_value, "value", value)
    set_slot(r, _r_o_headers, "headers", headers)
    set_slot(r, _r_o_attributes, "attributes", attributes)
    return set_slot(r, _r_o_control, "control", None)
