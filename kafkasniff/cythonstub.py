"""What the compiled modules use of the ``cython`` module, when they run as plain Python.

The hot-path modules (``setup.py``'s ``COMPILED``, docs/compiled.md) are plain Python whose
C types are given by the ``.pxd`` file beside each and by ``@cython.locals`` decorators. They
start with::

    try:
        import cython
    except ImportError:     # plain Python without Cython installed
        from kafkasniff.cythonstub import cython

When Cython compiles the module, ``import cython`` is its compile-time directive module and
this file is never used. When the module runs as Python, Cython is usually not installed (it
is only needed to build): then this stand-in makes every declaration a no-op, so the code runs
unchanged.
"""

from __future__ import annotations

import types

__all__ = ["cython"]


def _locals(**_types):
    """``@cython.locals(name=type, ...)``: no-op."""
    return lambda func: func


def _cast(_type, value, typecheck: bool = False):  # noqa: ARG001
    return value


def _declare(_type=None, value=None, **_kwargs):
    return value


cython = types.SimpleNamespace(
    compiled=False,
    locals=_locals,
    cast=_cast,
    declare=_declare,
    # C types named in @cython.locals: placeholders (never used as Python values)
    bint=bool,
    int=int,
    long=int,
    longlong=int,
    ulonglong=int,
    Py_ssize_t=int,
    size_t=int,
    uint=int,
    uchar=int,
    p_uchar=bytes,
    double=float,
)
