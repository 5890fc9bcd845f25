"""Storing the fields of a frozen, slotted dataclass instance in one call (the constructors
:func:`kafkasniff.frozen.fast_init` generates).

Compiled by Cython when the package is installed (docs/compiled.md). Then :func:`fill` is a
C loop calling ``PyObject_GenericSetAttr`` per field (the store ``object.__setattr__``
makes, without a Python call per field), and :func:`fill_slots` stores straight into the
slots of a :class:`SlotLayout` resolved once per class: what a slot's member descriptor does
(``PyMember_SetOne`` for ``T_OBJECT_EX``), without the attribute look-up by name that costs
``PyObject_GenericSetAttr`` about 150 instructions a field. As plain Python :func:`fill` is a
loop over ``object.__setattr__`` and :func:`fill_slots` calls it, which
:func:`~kafkasniff.frozen.fast_init` does not use: :data:`COMPILED` tells it which
constructor to generate.
"""

from __future__ import annotations

try:
    import cython
except ImportError:     # plain Python (Cython is only needed to compile: docs/compiled.md)
    from kafkasniff.cythonstub import cython

__all__ = ["COMPILED", "SlotLayout", "fill", "fill_slots"]

#: this module runs compiled (then :func:`fill_slots` is the fastest way to build a frozen
#: value)
COMPILED: bool = cython.compiled

if not cython.compiled:
    _set = object.__setattr__

    def _slot_offset(cls: type, name: str) -> int:
        """The byte offset of the writable object slot ``name`` of ``cls`` (the compiled
        module reads it from the slot's member descriptor, kafkasniff/slotstore.pxd); -1 as
        plain Python."""
        return -1

    def _store_at(obj: object, offset: int, value: object) -> None:
        raise AssertionError("no slot offsets as plain Python")


class SlotLayout:
    """The slots ``names`` of instances of exactly ``cls``, resolved once for
    :func:`fill_slots`.

    Attributes:
        cls: the class whose instances are filled (the stores by offset apply to instances
            of exactly this class; others are stored by name).
        names: the attribute names, in the order of the values :func:`fill_slots` takes.
        offsets: each slot's byte offset in the instance, or ``None`` when any name is not a
            writable object slot of ``cls`` (or this module runs as plain Python): then
            :func:`fill_slots` stores by name, as :func:`fill` does.
    """

    def __init__(self, cls: type, names: tuple) -> None:
        self.cls = cls
        self.names = tuple(names)
        offsets = tuple(_slot_offset(cls, name) for name in self.names)
        self.offsets = None if -1 in offsets else offsets


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


# layout typed: its fields read from the extension type's struct, not looked up by name
@cython.locals(layout=SlotLayout, names=tuple, values=tuple, offsets=tuple,
               i=cython.Py_ssize_t, n=cython.Py_ssize_t)
def fill_slots(obj: object, layout: SlotLayout, values: tuple) -> None:
    """:func:`fill` of ``layout.names``: the same stores, made through the slots' offsets
    when ``obj`` is an instance of exactly ``layout.cls`` and the module runs compiled.

    Raises ValueError when ``values`` and ``layout.names`` differ in length (nothing
    stored), and what :func:`fill` raises for a store by name."""
    names = layout.names
    n = len(names)
    if len(values) != n:
        raise ValueError(f"{n} names, {len(values)} values")
    offsets = layout.offsets
    if offsets is not None and type(obj) is layout.cls:
        for i in range(n):
            _store_at(obj, offsets[i], values[i])
    else:
        for i in range(n):
            _set(obj, names[i], values[i])
