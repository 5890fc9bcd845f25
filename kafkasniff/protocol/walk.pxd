# C types of kafkasniff/protocol/walk.py when Cython compiles it (docs/compiled.md); the
# .py file runs unchanged as plain Python.

import cython

# the .py function, compiled as a C function (static: the C compiler inlines it)
@cython.locals(v=object)
cdef object _field_or(dict d, object key, object default)

cdef class Node:
    cdef public tuple entries
    cdef public object topic_key
    cdef public object topic_id_key
    cdef public object partition_key
    cdef public bint in_topic
    cdef public bint partition_struct

cdef class PlanWalker:
    cdef public object select
    cdef public bint partition_structs
    cdef public dict _trees
    cdef public dict _in_topic

    cdef object _walk(self, Node node, dict d, object visit, object topic, object topic_id,
                      object partition, str path, bint paths)
    cdef object _gather(self, Node node, dict d, tuple tags, dict counts, dict names,
                        list ids, list pairs)
    cdef object _partitions(self, Node node, dict d, list out, object topic,
                            object topic_id)
