"""Dashboard aggregates: the timeline."""

from __future__ import annotations

from tests.conftest import decode_capture
from tests.tui.conftest import ERR


def test_an_exchange_without_a_time_does_not_stretch_the_timeline():
    import dataclasses

    from kafkasniff.tui.aggregates import Aggregates

    exchanges = decode_capture(ERR).exchanges
    plain, with_zero = Aggregates(), Aggregates()
    ex = exchanges[0]
    with_zero.add(dataclasses.replace(ex, request=dataclasses.replace(ex.request, first_ts_ns=0),
                                      response=None))
    for ex in exchanges:
        plain.add(ex)
        with_zero.add(ex)
    assert (with_zero.timeline.start, with_zero.timeline.width) == \
        (plain.timeline.start, plain.timeline.width)
    assert len(with_zero.timeline.counts) == len(plain.timeline.counts) > 2
