# C types of kafkasniff/feeding.py when Cython compiles it (docs/compiled.md). The .py file
# stays the source of truth and runs unchanged as plain Python; this file makes the feeder
# an extension type with C fields and adds the counter stores of its fast path.

# _sg: a read of a slot at its byte offset; set_slot: a store (kafkasniff/slotstore.pxd)
from kafkasniff.slotstore cimport get_slot as _sg, set_slot, slot_offset

# the byte offsets of the CapturedPacket, StreamData and TcpConnection slots the fast path
# reads, read at import by the .py file
cdef Py_ssize_t _pk_o_ts, _pk_o_link, _pk_o_data, _pk_o_orig
cdef Py_ssize_t _sd_o_conn, _sd_o_direction, _sd_o_offset, _sd_o_data, _sd_o_ts
cdef Py_ssize_t _tc_o_conn_id

cdef class PacketFeeder:
    cdef readonly object stats
    cdef readonly object reassembler
    cdef readonly dict connections
    cdef readonly dict closed
    cdef readonly object account
    cdef readonly object dispatch
    cdef readonly object expire
    cdef readonly object next_expire_ns
    # the counters' slots are stored at their offsets (stats is of the class they were
    # read from: the feeder's own, checked once)
    cdef readonly bint fast
    cdef Py_ssize_t o_packets, o_packet_bytes, o_first_ts, o_last_ts, o_segments, o_headers

# one packet of n captured bytes at ts: the stats' packets, packet_bytes, first_ts_ns (the
# first packet's) and last_ts_ns
cdef inline int _count_packet(PacketFeeder f, object st, Py_ssize_t n, object ts) except -1:
    set_slot(st, f.o_packets, "packets", _sg(st, f.o_packets, "packets") + 1)
    set_slot(st, f.o_packet_bytes, "packet_bytes",
             _sg(st, f.o_packet_bytes, "packet_bytes") + n)
    if not _sg(st, f.o_first_ts, "first_ts_ns"):
        set_slot(st, f.o_first_ts, "first_ts_ns", ts)
    set_slot(st, f.o_last_ts, "last_ts_ns", ts)
    return 0

# one TCP segment with h bytes of link, IP and TCP headers: the stats' tcp_segments and the
# header bytes not yet in the ledger
cdef inline int _count_segment(PacketFeeder f, object st, Py_ssize_t h) except -1:
    set_slot(st, f.o_segments, "tcp_segments", _sg(st, f.o_segments, "tcp_segments") + 1)
    set_slot(st, f.o_headers, "pending_header_bytes",
             _sg(st, f.o_headers, "pending_header_bytes") + h)
    return 0
