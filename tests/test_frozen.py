"""kafkasniff.frozen.fast_init: the same constructor as the dataclass's, faster."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field

import pytest

from kafkasniff import model
from kafkasniff.frozen import fast_init


def _pair(**options):
    """A class with every kind of field, once with the dataclass __init__, once fast."""
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
    return make(), fast_init(make())


@pytest.mark.parametrize("args,kwargs", [
    ((1,), {}), ((1, "x"), {}), ((1, "x", [2]), {"e": (3,)}), ((), {"a": 5, "c": [1]}),
])
def test_same_values_as_the_dataclass_init(args, kwargs):
    plain, fast = _pair()
    want, got = plain(*args, **kwargs), fast(*args, **kwargs)
    assert dataclasses.astuple(got) == dataclasses.astuple(want)
    assert got.seen == [got.a]                       # __post_init__ ran once
    assert got.c is not fast(1).c                     # a fresh default per instance
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.a = 2


def test_same_signature_and_errors():
    plain, fast = _pair()
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
        assert "_s_" in " ".join(names)
