"""kafkasniff.text: the one escaping of names off the wire, and the property of issue 45 (Done
when): random bytes, control characters and very long strings as client_id, topic, group,
member and SNI, fed through a capture into every text output, never reach the terminal raw."""

from __future__ import annotations

import io

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkasniff.text import escape_optional, escape_text
from tests.support.terminal import assert_terminal_safe, craft_regressions

#: characters a terminal acts on, and the backslash (escaped too)
CONTROLS = ([chr(i) for i in range(0x20)] + ["\x7f"] + [chr(i) for i in range(0x80, 0xA0)]
            + ["\u202e", "\u2066", "\u200b", "\u2028", "\u2029", "\ufeff", "\\", "\x1b[",
               "\x1b]0;", "\x1b]52;c;", "\x07"])
control_text = st.lists(st.sampled_from(CONTROLS + ["a", "é", "-", " ", "中"]),
                        max_size=40).map("".join)
long_text = st.builds(lambda s, n: (s * n)[:n], st.sampled_from(["\x1b]0;x\x07", "\n", "\x9b",
                                                                "ab\r", "\u202e\\"]),
                      st.integers(1_000, 6_000))
#: a name as text
texts = st.text(max_size=60) | control_text | long_text


def unescape(escaped: str) -> str:
    """The text :func:`escape_text` was given (its escapes are Python's)."""
    return escaped.encode("latin-1", "backslashreplace").decode("unicode_escape")


@settings(max_examples=300, deadline=None)
@given(texts)
def test_escape_text_contract(text):
    out = escape_text(text)
    assert out.isprintable()                      # no C0, DEL, C1, Cf, Zl, Zp ...
    assert unescape(out) == text                  # nothing lost, nothing ambiguous
    if text.isprintable() and "\\" not in text:
        assert out is text                        # real names: unchanged, not copied
    assert escape_text(text) == out               # the cache gives the same answer


def test_escape_text_examples():
    assert escape_text("a\x1b]0;t\x07\r\n\t\\b") == r"a\x1b]0;t\x07\r\n\t\\b"
    assert escape_text("\x7f\x9b\u202e\u2028") == r"\x7f\x9b\u202e\u2028"
    assert escape_text("café-中") == "café-中"
    assert escape_optional(None) == "-" and escape_optional(None, "(none)") == "(none)"
    assert escape_optional("\n") == r"\n"


# --------------------------------------------------------------------------- every text output

#: a Kafka string name: text (UTF-8), or any bytes (not UTF-8, perhaps)
wire_names = texts | st.binary(max_size=60)
KEYS = ("client_id", "consumer_client_id", "topic", "topic2", "group_id", "member_id",
        "group_instance_id", "assignor", "group_state", "client_host", "coordinator_host")


@st.composite
def hostile_names(draw):
    names = {k: draw(wire_names) for k in KEYS}
    names["header_key"] = draw(texts)
    names["record_value"] = draw(texts)
    names["record_json"] = draw(st.sampled_from(['{"m": "%s"}', '["%s"]'])) % draw(
        control_text).replace("\\", "\\\\").replace('"', '\\"')
    return names


sni = st.binary(max_size=200) | st.builds(lambda s, n: (s * n)[:n],
                                          st.sampled_from([b"\x1b]0;x\x07", b"\r\n", b"\x7f"]),
                                          st.integers(500, 3_000))


def text_outputs(capture: bytes) -> dict[str, str]:
    """Every text output of ``capture``, rendered by the functions the commands use: ``read``
    lines (with records) and issue lines (``live --no-tui`` renders with the same functions),
    the summary line, ``stats``, ``groups``, and a ``spark report`` table of the names."""
    from kafkasniff.groups import GroupAnalyzer
    from kafkasniff.groups.report import render_groups
    from kafkasniff.model import Exchange
    from kafkasniff.output.render import issue_line, write_exchange
    from kafkasniff.pipeline import Pipeline, PipelineOptions, analyze
    from kafkasniff.spark.report import render_rows
    from kafkasniff.stats.aggregate import Aggregator
    from kafkasniff.stats.report import render_report

    pipe = Pipeline(PipelineOptions(with_records=True))
    agg = Aggregator()
    groups = GroupAnalyzer(pipe.defs)
    read = io.StringIO()
    rows = []
    for rec in analyze([io.BytesIO(capture)], pipeline=pipe):
        if type(rec) is Exchange:
            one = io.StringIO()
            write_exchange(rec, one, as_json=False, with_records=True)
            records = sum(len(b.records or ()) for loc in rec.record_fields
                          if loc.records.decoded is not None for b in loc.records.decoded.batches)
            # one line per exchange and one per record: a line feed in a name adds none
            # (checked without pytest's comparison of long texts, which takes minutes)
            lines = one.getvalue().count("\n")
            if lines != 1 + records:
                raise AssertionError(f"{lines} lines for an exchange with {records} records")
            read.write(one.getvalue())
            agg.add(rec)
            groups.add(rec)
            rows.append({"client_id": rec.client_id, "topics": list(rec.topics),
                         "n": rec.correlation_id})
        else:
            line = issue_line(rec)
            if "\n" in line:
                raise AssertionError(f"an issue on several lines: {line[:200]!r}")
            read.write(line + "\n")
            agg.add_issue(rec)
    from kafkasniff.cli.read import summary_line

    stats = pipe.stats
    return {"read": read.getvalue() + summary_line(stats),
            "stats": render_report(agg.to_dict(), stats.to_dict()),
            "groups": render_groups(groups.finish(pipe.topics.names)),
            "spark report": render_rows("t", ["client_id", "topics", "n"], rows)}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.data_too_large])
@given(hostile_names(), sni)
def test_no_control_character_reaches_any_text_output(names, server_name):
    capture = craft_regressions().hostile_names_capture(names, server_name)
    for what, text in text_outputs(capture).items():
        try:
            assert_terminal_safe(text)
        except AssertionError as exc:
            raise AssertionError(f"{what}: {exc}") from None
