# C types of kafkasniff/capture/pcapfile.py when Cython compiles it (docs/compiled.md); the
# .py file runs unchanged as plain Python.

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from libc.string cimport memcpy

# _new: object.__new__(cls) in one C call; set_slot: a store at a slot's byte offset
from kafkasniff.slotstore cimport new_object as _new, set_slot, slot_offset

# the byte offsets of CapturedPacket's slots that _packet stores into
# (kafkasniff/slotstore.pxd), read at import by the .py file
cdef Py_ssize_t _p_o_ts, _p_o_link, _p_o_data, _p_o_orig, _p_o_iface

# cls(ts_ns, link_type, data, orig_len, interface_id) for cls CapturedPacket, its slots
# filled at their offsets: how every packet loop of the module makes its packets (the .py
# file defines it only as plain Python)
cdef inline object _packet(type cls, object ts_ns, object link_type, object data,
                           object orig_len, object interface_id):
    cdef object pkt = _new(cls)
    set_slot(pkt, _p_o_ts, "ts_ns", ts_ns)
    set_slot(pkt, _p_o_link, "link_type", link_type)
    set_slot(pkt, _p_o_data, "data", data)
    set_slot(pkt, _p_o_orig, "orig_len", orig_len)
    set_slot(pkt, _p_o_iface, "interface_id", interface_id)
    return pkt

# integers read in place from the bytes of a record header (the .py file defines them for
# plain Python)
cdef inline long long _le32(const unsigned char* p, Py_ssize_t o):
    return p[o] | p[o + 1] << 8 | p[o + 2] << 16 | <long long>p[o + 3] << 24
cdef inline long long _be32(const unsigned char* p, Py_ssize_t o):
    return <long long>p[o] << 24 | p[o + 1] << 16 | p[o + 2] << 8 | p[o + 3]
# a pcap record header read in place: (ts_sec, ts_frac, caplen, origlen), in the file's byte
# order (the record loops of _iter_pcap and _pack_pcap)
cdef inline (long long, long long, long long, long long) _rec_header(
        const unsigned char* p, Py_ssize_t o, bint big):
    if big:
        return _be32(p, o), _be32(p, o + 4), _be32(p, o + 8), _be32(p, o + 12)
    return _le32(p, o), _le32(p, o + 4), _le32(p, o + 8), _le32(p, o + 12)
cdef inline unsigned long long _le64(const unsigned char* p, Py_ssize_t o):
    cdef unsigned long long v = 0
    cdef int i
    for i in range(7, -1, -1):
        v = v << 8 | p[o + i]
    return v
cdef inline void _w32(unsigned char* q, unsigned long long v):
    q[0] = v & 0xFF
    q[1] = (v >> 8) & 0xFF
    q[2] = (v >> 16) & 0xFF
    q[3] = (v >> 24) & 0xFF
cdef inline void _w64(unsigned char* q, unsigned long long v):
    _w32(q, v & 0xFFFFFFFF)
    _w32(q + 4, v >> 32)

# one PACKED_RECORD and its frame appended to a batch in place (pack_records)
cdef inline int _put(bytearray b, long long ts, Py_ssize_t n, long long orig, long long kind,
                     long long idx, bytes src, Py_ssize_t start) except -1:
    cdef Py_ssize_t at = PyByteArray_GET_SIZE(b)
    cdef const unsigned char* s = src
    cdef unsigned char* q
    if start < 0 or n < 0 or start + n > len(src):
        raise ValueError("a packed record's frame lies outside its source")
    PyByteArray_Resize(b, at + 28 + n)
    q = <unsigned char*>PyByteArray_AS_STRING(b) + at
    _w64(q, <unsigned long long>ts)
    _w32(q + 8, <unsigned long long>n)
    _w32(q + 12, <unsigned long long>orig)
    _w32(q + 16, <unsigned long long>kind)
    _w64(q + 20, <unsigned long long>idx)
    if n:
        memcpy(q + 28, s + start, n)
    return 0

# a PacketSource's counts of packets yielded and their bytes, added to in C by the loops
cdef class _Tally:
    cdef public long long packets
    cdef public long long nbytes
