# C types of kafkasniff/export/rows.py when Cython compiles it (docs/compiled.md); the .py
# file runs unchanged as plain Python. Only the loops over partition structs and their
# values are typed: dict locals become C calls of the dict API (PyDict_Next for .items(),
# PyDict_GetItem for look-ups) instead of generic attribute and method calls.

import cython

@cython.locals(structs=list, entry=dict, vals=dict, struct=dict)
cpdef _walk_partitions(object plan, object body, str side, dict out)

@cython.locals(found=dict, by_partition=dict, entry=dict, q=dict, r=dict, row=dict,
               template=dict, rows=list, vals=dict, index=dict, locs=list)
cpdef list partition_rows(object ex, dict base, object defs)
