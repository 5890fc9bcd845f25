"""kafkasniff.frozen.fast_init: the same constructor as the dataclass's, faster."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field

import pytest

from kafkasniff import model, slotfill
from kafkasniff.frozen import fast_init


def _pair(one_call: bool = False, **options):
    """A class with every kind of field, once with the dataclass __init__, once fast (its
    fields stored with one slotfill call, or one descriptor call each)."""
    def make():
        @dataclass(frozen=True, slots=True, **options)
        class Value:
            a: int
            b: str = "b"
            c: list = field(default_factory=list)
            d: int = field(default=7, init=False)
            e: tuple = field(default=(), kw_only=True)
            seen: list = field(default_factory=list, init=False, compare=False)

            def __post_init__(self):
                self.seen.append(self.a)
        return Value
    return make(), fast_init(make(), one_call=one_call)


@pytest.mark.parametrize("one_call", [False, True], ids=["per-field", "one-call"])
@pytest.mark.parametrize("args,kwargs", [
    ((1,), {}), ((1, "x"), {}), ((1, "x", [2]), {"e": (3,)}), ((), {"a": 5, "c": [1]}),
])
def test_same_values_as_the_dataclass_init(args, kwargs, one_call):
    plain, fast = _pair(one_call)
    want, got = plain(*args, **kwargs), fast(*args, **kwargs)
    assert dataclasses.astuple(got) == dataclasses.astuple(want)
    assert got.seen == [got.a]                       # __post_init__ ran once
    assert got.c is not fast(1).c                     # a fresh default per instance
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.a = 2


@pytest.mark.parametrize("one_call", [False, True], ids=["per-field", "one-call"])
def test_same_signature_and_errors(one_call):
    plain, fast = _pair(one_call)
    assert str(inspect.signature(fast)) == str(inspect.signature(plain))
    for args, kwargs in (((), {}), ((1, 2, 3, 4), {}), ((1,), {"d": 1}), ((1,), {"z": 1})):
        with pytest.raises(TypeError):
            plain(*args, **kwargs)
        with pytest.raises(TypeError):
            fast(*args, **kwargs)


def test_refuses_what_it_cannot_copy():
    @dataclass(frozen=True)
    class NoSlots:
        a: int
    with pytest.raises(TypeError, match="slotted"):
        fast_init(NoSlots)

    @dataclass(frozen=True, slots=True)
    class WithInitVar:
        a: int
        scale: dataclasses.InitVar[int] = 1
    with pytest.raises(TypeError, match="InitVar"):
        fast_init(WithInitVar)


def test_the_model_uses_it():
    """Message and Exchange are built once or twice per Kafka frame."""
    for cls in (model.Message, model.Exchange, model.DecodeIssue):
        assert cls.__init__.__module__ == cls.__module__
        names = cls.__init__.__code__.co_names
        assert "__dataclass_builtins_object__" not in names    # the dataclass's own __init__
        if slotfill.COMPILED:
            assert "_fill" in names and "_s_" not in " ".join(names)
            # every field stored through its slot's byte offset
            layout = cls.__init__.__globals__["_slots"]
            assert layout.cls is cls and layout.offsets is not None
            assert len(layout.offsets) == len(layout.names) == len(dataclasses.fields(cls))
        else:
            assert "_s_" in " ".join(names) and "_fill" not in names


def _undecorated(cls):
    """A fresh frozen slotted dataclass with ``cls``'s fields and its own constructor."""
    fields = dataclasses.fields(cls)
    return dataclass(frozen=True, slots=True)(
        type(cls.__name__, (), {"__annotations__": {f.name: f.type for f in fields},
                                **{f.name: f for f in fields}}))


@pytest.mark.parametrize("one_call", [False, True], ids=["per-field", "one-call"])
def test_the_model_values_equal_the_dataclass_constructors(one_call):
    """Every value type of the model, built by either constructor: the same fields as the
    dataclass's own constructor gives (a fresh, undecorated copy of the class)."""
    for cls in (model.Message, model.Exchange, model.DecodeIssue):
        fields = dataclasses.fields(cls)
        plain, fast = _undecorated(cls), fast_init(_undecorated(cls), one_call=one_call)
        required = [f for f in fields if f.init and f.default is dataclasses.MISSING
                    and f.default_factory is dataclasses.MISSING]
        args = [object() for _ in required]
        want, got = plain(*args), fast(*args)
        values = [(getattr(got, f.name), getattr(want, f.name)) for f in fields]
        assert all(a is b or a == b for a, b in values)
        assert [a for a, _ in values][:len(args)] == args


def test_fill_stores_in_order_and_checks_lengths():
    @dataclass(frozen=True, slots=True)
    class V:
        a: int
        b: int
    v = V(1, 2)
    slotfill.fill(v, ("a", "b"), (3, 4))
    assert (v.a, v.b) == (3, 4)
    with pytest.raises(ValueError):
        slotfill.fill(v, ("a", "b"), (5,))
    assert (v.a, v.b) == (3, 4)                       # nothing stored
    with pytest.raises(AttributeError):
        slotfill.fill(v, ("c",), (1,))
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.a = 1


def test_fill_slots_stores_through_the_offsets_like_fill():
    """fill_slots: the same stores as fill, through the slots' byte offsets when compiled,
    for instances of exactly the layout's class; by name otherwise."""
    import gc
    import weakref

    @dataclass(frozen=True, slots=True)
    class V:
        a: object
        b: object

    class Sub(V):
        __slots__ = ()

    layout = slotfill.SlotLayout(V, ("b", "a"))
    assert layout.names == ("b", "a")
    if slotfill.COMPILED:
        offsets = layout.offsets
        assert offsets is not None and len(set(offsets)) == 2 and min(offsets) > 0
    else:
        assert layout.offsets is None

    class Token:
        pass

    old, new = Token(), Token()
    gone = weakref.ref(old)
    for cls in (V, Sub):        # Sub: stored by name (not exactly the layout's class)
        v = cls(1, 2)
        slotfill.fill_slots(v, layout, (3, old))
        assert (v.a, v.b) == (old, 3)
        with pytest.raises(ValueError):
            slotfill.fill_slots(v, layout, (5,))
        assert (v.a, v.b) == (old, 3)                 # nothing stored
        slotfill.fill_slots(v, layout, (4, new))     # the old value's reference is let go
        assert (v.a, v.b) == (new, 4)
        with pytest.raises(dataclasses.FrozenInstanceError):
            v.a = 1
        del v
    del old
    gc.collect()
    assert gone() is None
    # a name that is no slot of the class: no offsets, and the store by name refuses it
    bad = slotfill.SlotLayout(V, ("a", "c"))
    assert bad.offsets is None
    with pytest.raises(AttributeError):
        slotfill.fill_slots(V(1, 2), bad, (1, 2))
