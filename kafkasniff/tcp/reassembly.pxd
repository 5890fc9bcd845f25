# C types of kafkasniff/tcp/reassembly.py when Cython compiles it (docs/compiled.md).
# The .py file stays the source of truth and runs unchanged as plain Python; this file only
# makes its per-connection state extension types with C fields. Offsets and sequence
# numbers fit a 64-bit signed integer (offsets never reach 2**63; sequence numbers < 2**32).


# _new: object.__new__(cls) in one C call; set_slot: a store at a slot's byte offset
from kafkasniff.slotstore cimport get_slot as _sg, new_object as _new, set_slot, slot_offset

# the byte offsets of StreamData's slots that the setters below store into
# (kafkasniff/slotstore.pxd), read at import by the .py file
cdef Py_ssize_t _sd_o_conn, _sd_o_direction, _sd_o_offset, _sd_o_data, _sd_o_ts

# the fast path's StreamData slot setters (the .py file defines them only as plain Python)
cdef inline int _sd_conn(object o, object v) except -1:
    return set_slot(o, _sd_o_conn, "conn", v)
cdef inline int _sd_direction(object o, object v) except -1:
    return set_slot(o, _sd_o_direction, "direction", v)
cdef inline int _sd_offset(object o, object v) except -1:
    return set_slot(o, _sd_o_offset, "offset", v)
cdef inline int _sd_data(object o, object v) except -1:
    return set_slot(o, _sd_o_data, "data", v)
cdef inline int _sd_ts(object o, object v) except -1:
    return set_slot(o, _sd_o_ts, "ts_ns", v)

# the byte offsets of the TcpSegment slots the fast path of feed reads with _sg (get_slot),
# read at import by the .py file
cdef Py_ssize_t _sg_o_ts, _sg_o_src_ip, _sg_o_src_port, _sg_o_dst_ip, _sg_o_dst_port
cdef Py_ssize_t _sg_o_seq, _sg_o_ack, _sg_o_flags, _sg_o_payload, _sg_o_missing

# the byte offsets of the TcpConnection and ReassemblyStats slots _count stores into, read
# at import by the .py file
cdef Py_ssize_t _tc_o_last_ts, _tc_o_segments, _tc_o_bytes, _rs_o_segments, _rs_o_payload

# the fast path's counts of one segment of direction d with n payload bytes at ts (n 0: a
# pure ACK, its bytes left alone): conn's last_ts_ns, segments[d] and bytes[d], the stats'
# segments and payload_bytes, their slots at their byte offsets (conn and stats are exactly
# TcpConnection and ReassemblyStats: the caller checks)
cdef inline int _count(object conn, object stats, Py_ssize_t d, Py_ssize_t n,
                       object ts) except -1:
    cdef list v
    set_slot(conn, _tc_o_last_ts, "last_ts_ns", ts)
    v = _sg(conn, _tc_o_segments, "segments")
    v[d] += 1
    set_slot(stats, _rs_o_segments, "segments", _sg(stats, _rs_o_segments, "segments") + 1)
    if n:
        v = _sg(conn, _tc_o_bytes, "bytes")
        v[d] += n
        set_slot(stats, _rs_o_payload, "payload_bytes",
                 _sg(stats, _rs_o_payload, "payload_bytes") + n)
    return 0

cdef class _Dir:
    cdef public _Conn st
    cdef public object conn
    cdef public Py_ssize_t d
    cdef public _Dir other
    cdef public bint started
    cdef public long long base
    cdef public long long nseq
    cdef public long long nxt
    cdef public bint fast
    cdef public object fin_off
    cdef public long long syn_isn
    cdef public list starts
    cdef public list ooo
    cdef public long long ooo_bytes
    cdef public list hist
    cdef public long long hist_bytes


cdef class _Conn:
    cdef public object conn
    cdef public tuple dirs
    cdef public _Conn older
    cdef public _Conn newer


cdef class TcpReassembler:
    cdef public object max_ooo_bytes
    cdef public object max_ooo_segments
    cdef public object max_connections
    cdef public object idle_timeout_ns
    cdef public long long max_history_bytes
    cdef public object closed_linger_ns
    cdef public object max_history_total_bytes
    cdef public object stats
    cdef public dict _flows
    cdef public _Conn _oldest
    cdef public _Conn _newest
    cdef public Py_ssize_t _open_count
    cdef public object _closed
    cdef public object _next_id
    cdef public long long hist_total


cdef long long _MASK
cdef long long _HALF
cdef long _CTRL


cdef long long _sdiff(long long a, long long b)

# the open connection st becomes the most recently active one of r (the list of _Conn)
cdef void _touch(TcpReassembler r, _Conn st)
