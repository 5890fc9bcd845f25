# C types of kafkasniff/capture/packet.py when Cython compiles it (docs/compiled.md); the .py
# file runs unchanged as plain Python. Header fields and frame offsets fit a C long.

cdef object _new
cdef object _s_ts, _s_src_ip, _s_src_port, _s_dst_ip, _s_dst_port, _s_seq, _s_ack, _s_flags
cdef object _s_payload, _s_missing
