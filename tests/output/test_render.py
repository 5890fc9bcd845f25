"""Console rendering helpers (kafkasniff.output.render)."""

from __future__ import annotations

import io
import json

import pytest

from kafkasniff.output.render import (STREAM_CHUNK, StreamedRecords, format_ms, format_ts,
                                      json_default, record_to_dict, write_json)
from kafkasniff.protocol.records import Record


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


@pytest.mark.parametrize("n", [0, 1, STREAM_CHUNK - 1, STREAM_CHUNK, STREAM_CHUNK + 1,
                               2 * STREAM_CHUNK + 7])
def test_streamed_records_are_written_as_json_dumps_writes_them(n):
    """``write_json`` renders a large batch's records ``STREAM_CHUNK`` at a time: the line is
    the one ``json.dumps`` makes of the whole list, whatever the count."""
    records = [Record(i, 1_700_000_000_000 + i, None if i % 3 else b"k%d" % i,
                      f"välue {i}".encode() if i % 2 else b"\x00\xff", ((f"h{i}", b"v"),), 0,
                      {"type": 1, "type_name": "COMMIT"} if i % 5 == 0 else None)
               for i in range(n)]
    obj = {"before": [1, "ü"], "records": StreamedRecords(records, 64), "after": None}
    default = json_default()
    out = io.StringIO()
    write_json(obj, out, default, True)
    assert out.getvalue() == json.dumps(obj, ensure_ascii=False, default=default)
    assert json.loads(out.getvalue())["records"][n - 1:] == \
        ([record_to_dict(records[-1], 64)] if n else [])


@pytest.mark.parametrize("n", [0, 1, STREAM_CHUNK - 1, STREAM_CHUNK, STREAM_CHUNK + 1,
                               2 * STREAM_CHUNK + 7])
def test_record_lines_are_written_in_chunks_as_one_by_one(n, monkeypatch):
    """``read --records`` writes a batch's record lines ``STREAM_CHUNK`` at a time: the text
    is the exchange's line, then each record's line after a newline, then a newline."""
    from kafkasniff.output import render

    lines = [f"    t[0] @{i} key=k{i} välue" for i in range(n)]
    monkeypatch.setattr(render, "exchange_line", lambda ex, color: "EXCHANGE")
    monkeypatch.setattr(render, "record_lines", lambda ex, value_bytes: iter(lines))
    out = io.StringIO()
    render.write_exchange(object(), out, as_json=False, with_records=True)
    assert out.getvalue() == "EXCHANGE" + "".join("\n" + line for line in lines) + "\n"
