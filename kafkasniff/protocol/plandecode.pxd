# C types of kafkasniff/protocol/plandecode.py when Cython compiles it (docs/compiled.md);
# the .py file runs unchanged as plain Python (and is then not used: the generated decoders
# are faster there).

cdef extern from *:
    """
    /* big-endian reads of a bytes object at pos (the caller checked the bounds), with
       Python's values: two's complement sign without implementation-defined casts */
    static CYTHON_INLINE const unsigned char *ks_at(PyObject *b, Py_ssize_t pos) {
        return (const unsigned char *)PyBytes_AS_STRING(b) + pos;
    }
    static CYTHON_INLINE long ks_u16(PyObject *b, Py_ssize_t pos) {
        const unsigned char *p = ks_at(b, pos);
        return ((long)p[0] << 8) | (long)p[1];
    }
    static CYTHON_INLINE long ks_i16(PyObject *b, Py_ssize_t pos) {
        long v = ks_u16(b, pos);
        return v >= 0x8000 ? v - 0x10000 : v;
    }
    static CYTHON_INLINE long long ks_u32(PyObject *b, Py_ssize_t pos) {
        const unsigned char *p = ks_at(b, pos);
        return ((long long)p[0] << 24) | ((long long)p[1] << 16) | ((long long)p[2] << 8)
               | (long long)p[3];
    }
    static CYTHON_INLINE long long ks_i32(PyObject *b, Py_ssize_t pos) {
        long long v = ks_u32(b, pos);
        return v >= 0x80000000LL ? v - 0x100000000LL : v;
    }
    static CYTHON_INLINE unsigned long long ks_u64(PyObject *b, Py_ssize_t pos) {
        return ((unsigned long long)ks_u32(b, pos) << 32)
               | (unsigned long long)ks_u32(b, pos + 4);
    }
    static CYTHON_INLINE long long ks_i64(PyObject *b, Py_ssize_t pos) {
        unsigned long long u = ks_u64(b, pos);
        return u >> 63 ? -(long long)(~u) - 1 : (long long)u;
    }
    static CYTHON_INLINE double ks_f64(PyObject *b, Py_ssize_t pos) {
        unsigned long long u = ks_u64(b, pos);
        double d;
        memcpy(&d, &u, sizeof d);
        return d;
    }
    """
    long _i16 "ks_i16"(bytes b, Py_ssize_t pos)
    long _u16 "ks_u16"(bytes b, Py_ssize_t pos)
    long long _i32 "ks_i32"(bytes b, Py_ssize_t pos)
    long long _u32 "ks_u32"(bytes b, Py_ssize_t pos)
    long long _i64 "ks_i64"(bytes b, Py_ssize_t pos)
    double _f64 "ks_f64"(bytes b, Py_ssize_t pos)

cdef int K_INT8, K_INT16, K_INT32, K_INT64, K_UINT16, K_UINT32, K_FLOAT64, K_BOOL, K_UUID
cdef int K_STRING, K_BYTES, K_RECORDS, K_STRUCT, K_ARRAY

cdef class Program

cdef class Op:
    cdef public object key
    cdef public int kind
    cdef public int items
    cdef public Py_ssize_t size
    cdef public bint compact
    cdef public bint nullable
    cdef public bint tagged
    cdef public Program program

cdef class Program:
    cdef public str name
    cdef public tuple ops
    cdef public dict tags
    cdef public bint flexible

cdef class _State:
    cdef bytes buf
    cdef Py_ssize_t end
    cdef Py_ssize_t pos

cdef class PlanDecoder:
    cdef public Program program
    cdef public object reference
    cdef public object _layout

cdef _State _state(bytes buf, Py_ssize_t pos)
cdef long long _uvarint(_State st) except -1
cdef long long _length(_State st, bint compact, bint wide) except? -3
cdef object _fixed(_State st, int kind, Py_ssize_t size)
cdef object _value(_State st, Op op, int kind, bint nullable)
cdef dict _struct(_State st, Program p)
cdef object _interpret(Program program, object buf, Py_ssize_t pos)
