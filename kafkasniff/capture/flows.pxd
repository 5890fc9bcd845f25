# C types of kafkasniff/capture/flows.py when Cython compiles it (docs/compiled.md); the .py
# file runs unchanged as plain Python.

cdef unsigned long long _GOLDEN, _MIX, _MASK64

cdef long long _route_bytes(bytes d, Py_ssize_t off, unsigned long long n) except? -2
