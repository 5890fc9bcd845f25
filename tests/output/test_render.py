"""Console rendering helpers (kafkasniff.output.render)."""

from __future__ import annotations

from kafkasniff.output.render import format_ms, format_ts


def test_format_ts():
    assert format_ts(0) == "-" * 27
    assert format_ts(1_714_564_800_123_456_789) == "2024-05-01T12:00:00.123456Z"
    assert format_ts(-1) == "1969-12-31T23:59:59.999999Z"


def test_format_ts_out_of_range_does_not_raise():
    # record timestamps are whatever the producer wrote: int64 milliseconds, in ns here
    huge = (2**63 - 1) * 1_000_000
    assert format_ts(huge) == f"{huge}ns"
    assert format_ts(-huge) == f"{-huge}ns"


def test_format_ms():
    assert format_ms(None) == "-"
    assert format_ms(1_234_567) == "1.235ms"
