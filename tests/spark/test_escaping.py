"""Names off the wire in ``spark report``'s printed tables (issue 45 item 1): client_ids,
topics, group ids ... are written as visible escapes through
:func:`kafkasniff.text.escape_text`, one row per line; the report's Parquet keeps them exact."""

from __future__ import annotations

import pyarrow.parquet as pq

from kafkasniff.export.writer import export_captures
from kafkasniff.spark.report import render_rows, run_report
from kafkasniff.text import escape_text
from tests.support.terminal import (
    HOSTILE_NAMES,
    VISIBLE_ESCAPES,
    assert_terminal_safe,
    craft_regressions,
)


def test_render_rows_escapes_names():
    text = render_rows("t", ["client_id", "topics", "n"],
                       [{"client_id": "a\x1b]0;x\x07\nb", "topics": ["t\r", "\x9b"], "n": 1}])
    assert_terminal_safe(text)
    assert text.splitlines()[-1] == r"a\x1b]0;x\x07\nb  t\r,\x9b  1"


def test_spark_report_text_escapes_names(spark, tmp_path):
    export_captures([HOSTILE_NAMES], tmp_path)
    printed: list[str] = []
    run_report(spark, tmp_path, top=50, echo=printed.append)
    out = "\n".join(printed)
    assert_terminal_safe(out)
    for escaped in VISIBLE_ESCAPES:
        assert escaped in out, escaped
    names = craft_regressions().HOSTILE
    lines = out.splitlines()
    for key in ("client_id", "consumer_client_id", "group_id"):
        assert any(escape_text(names[key]) in line for line in lines), key
    # the written report keeps the exact names
    rows = pq.read_table(tmp_path / "report" / "top_client_ids").to_pylist()
    assert {r["client_id"] for r in rows} == {names["client_id"], names["consumer_client_id"]}
