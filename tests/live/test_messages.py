"""The inter-process messages: frozen, slotted, unchanged across a process boundary."""

from __future__ import annotations

import multiprocessing as mp


def _echo(inq, outq, n):
    for _ in range(n):
        outq.put(inq.get(timeout=10))


def test_messages_are_frozen_and_cross_processes():
    """Every inter-process message is a frozen, slotted dataclass that a multiprocessing
    queue carries unchanged (pickled both ways through a child process)."""
    import dataclasses

    import pytest

    from kafkasniff.live import messages

    samples = [
        messages.DecoderOutput(1, [("e", "line")], [("id", "orders", 5)], [("c", None)],
                               {"packets": 3}),
        messages.DetailReply(7, None), messages.DecoderFed(2),
        messages.KeptExchanges(0, []), messages.DecoderDone(1, {"packets": 3}),
        messages.DecoderFailed(0, "ValueError: x", "Traceback ..."),
        messages.TopicIdsLearned([("id", "orders", 5)]), messages.AllFed(),
        messages.DetailRequest(7, (1_000_000_001, 4, 123)),
        messages.CaptureFailed("OSError: y", "Traceback ..."),
    ]
    assert {type(m).__name__ for m in samples} == set(messages.__all__)
    for msg in samples:
        assert not hasattr(msg, "__dict__")
        if dataclasses.fields(msg):
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(msg, dataclasses.fields(msg)[0].name, None)
    ctx = mp.get_context("fork")
    inq, outq = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=_echo, args=(inq, outq, len(samples)))
    p.start()
    for msg in samples:
        inq.put(msg)
    back = [outq.get(timeout=10) for _ in samples]
    p.join(10)
    assert [type(m) for m in back] == [type(m) for m in samples] and back == samples
