"""Storing the fields of a frozen, slotted dataclass instance in one call (the constructors
:func:`kafkasniff.frozen.fast_init` generates).

Compiled by Cython when the package is installed (docs/compiled.md): :func:`fill` is then a
C loop calling ``PyObject_GenericSetAttr`` per field (the store ``object.__setattr__`` makes,
without a Python call per field). As plain Python it is a loop over ``object.__setattr__``,
which :func:`~kafkasniff.frozen.fast_init` does not use: :data:`COMPILED` tells it which
constructor to generate.
"""

from __future__ import annotations

try:
    import cython
except ImportError:     # plain Python (Cython is only needed to compile: docs/compiled.md)
    from kafkasniff.cythonstub import cython

__all__ = ["COMPILED", "fill"]

#: this module runs compiled (then :func:`fill` is the fastest way to build a frozen value)
COMPILED: bool = cython.compiled

if not cython.compiled:
    _set = object.__setattr__


@cython.locals(names=tuple, values=tuple, i=cython.Py_ssize_t, n=cython.Py_ssize_t)
def fill(obj: object, names: tuple, values: tuple) -> None:
    """Store ``values[i]`` in the attribute ``names[i]`` of ``obj``, for each name in order,
    through the generic attribute store (a slot's descriptor), not the class's own
    ``__setattr__`` (which a frozen dataclass makes refuse).

    Raises ValueError when ``values`` and ``names`` differ in length (nothing stored), and
    what the store raises (AttributeError for a name that is not a slot of ``obj``)."""
    n = len(names)
    if len(values) != n:
        raise ValueError(f"{n} names, {len(values)} values")
    for i in range(n):
        _set(obj, names[i], values[i])
