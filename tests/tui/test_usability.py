"""TUI defects found by trying the app by hand (issue 15, part 4), driven with Textual's Pilot
on real captures (and one real ``kafkasniff tui`` process on a pseudo-terminal)."""

from __future__ import annotations

import sys

import pytest
from textual import events

from tests.support.pty_run import PtyProcess

from .conftest import ERR, make_app, pane, rows_of_view, screen_text, wait_for, wait_loaded

SIZE = (120, 40)


def _send_key(app, key, char):
    """A key as the terminal driver delivers it, without waiting for it to be handled
    (``pilot.press`` waits: keys typed quickly are queued together)."""
    ev = events.Key(key, char)
    ev.set_sender(app)
    app._driver.send_message(ev)


async def settle(pilot, app) -> None:
    p = pane(app)
    await wait_for(pilot, lambda: not p._busy)
    await pilot.pause()


# ------------------------------------------------------------------ 1. dialogs, exit code

@pytest.mark.parametrize("key", ["f", "s", "w", "question_mark"])
async def test_enter_twice_quickly_in_a_dialog(tmp_path, key):
    """Two Enter keys queued before the dialog is gone (typed quickly): one dismissal, no
    ScreenStackError, the result used once."""
    app = make_app(ERR, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        await pilot.press(key)
        await pilot.pause()
        assert len(app.screen_stack) == 2
        close = "escape" if key == "question_mark" else "enter"
        for _ in range(2):                       # both queued before either is handled
            _send_key(app, close, "\r" if close == "enter" else None)
        await pilot.pause(0.2)
        await settle(pilot, app)
        assert len(app.screen_stack) == 1
        if key == "w":
            await wait_for(pilot, lambda: app.last_saved is not None)
            assert len(list(tmp_path.glob("*.jsonl"))) == 1
    assert app.return_code in (None, 0)


async def test_escape_twice_quickly_in_the_detail():
    app = make_app(ERR)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        await pilot.press("enter")
        await pilot.pause()
        for _ in range(2):
            _send_key(app, "escape", None)
        await pilot.pause(0.2)
        assert len(app.screen_stack) == 1
    assert app.return_code in (None, 0)


_CRASHING = """
import sys
from kafkasniff.tui.app import KafkaSniffApp
def boom(self):
    raise RuntimeError("injected crash")
KafkaSniffApp.action_help = boom
from kafkasniff.cli import main
sys.argv = ["kafkasniff", "tui", sys.argv[1]]
main()
"""


def _run_on_pty(args: list[str], keys: bytes, ready: bytes, timeout: float = 60) -> tuple:
    """Run ``args`` on a pseudo-terminal (80x24), type ``keys`` once ``ready`` is on screen;
    (exit code, the screen's text without escape sequences)."""
    p = PtyProcess(args, columns=100, lines=30)
    p.wait_for_text(ready.decode(), timeout)
    p.type(keys)
    return p.wait(25), p.text()


def test_a_crash_of_the_app_exits_non_zero():
    """A real ``kafkasniff tui`` process whose UI raises (an injected bug in a key's action):
    the process exits non-zero with the traceback and one line saying so."""
    code, text = _run_on_pty([sys.executable, "-c", _CRASHING, str(ERR)], b"?", b"done")
    assert "injected crash" in text
    assert code == 1, text[-2000:]
    assert "the terminal UI stopped on an unexpected error" in text


def test_quitting_normally_exits_zero():
    code, text = _run_on_pty([sys.executable, "-m", "kafkasniff.cli", "tui", str(ERR)], b"q",
                             b"done")
    assert code == 0, text[-2000:]


# ------------------------------------------------------------------ 2. errors get the width

def _widths(table, width: int) -> dict[str, int]:
    return {c.key: w for c, w, _ in table._layout(width)}


async def test_errors_get_the_spare_width_at_260_columns():
    app = make_app(ERR)
    async with app.run_test(size=(260, 50)) as pilot:
        await wait_loaded(pilot)
        ex = pane(app).table
        w = _widths(ex, ex.scrollable_content_region.width)
        assert w["errors"] >= 40 and w["errors"] > w["topics"], w
        await pilot.press("1")
        await pilot.pause(0.2)
        text = screen_text(app)
        apis = app.query_one("#ov-apis")
        w = _widths(apis, apis.scrollable_content_region.width)
        assert w["key"] <= 40 and w["error_names"] >= 80, w
        # NAME×count, and the count of exchanges with errors in a column of its own
        assert "NOT_LEADER_OR_FOLLOWER×2" in text and "UNSUPPORTED_VERSION×11" in text
        line = next(ln for ln in text.splitlines() if ln.strip().startswith("ApiVersions"))
        assert line.split()[3] == "11", line           # API, count, rate, Err
        brokers = app.query_one("#ov-brokers")
        assert "Err" in [c.label for c, _, _ in brokers._layout(100)]
        await pilot.press("5")
        await pilot.pause(0.2)
        topics = app.query_one("#topics-table")
        w = _widths(topics, topics.scrollable_content_region.width)
        assert w["topic"] <= 40 and w["partition_errors"] >= 80, w


def test_spare_width_is_shared_by_weight_and_capped():
    from kafkasniff.tui.widgets import Column, share_spare

    cols = [Column("a", "A", 10, flex=1, max_width=15), Column("b", "B", 5),
            Column("c", "C", 10, flex=3)]
    assert share_spare(cols, 8) == [12, 5, 16]
    assert share_spare(cols, 40) == [15, 5, 45]            # a is capped, c takes the rest
    assert share_spare([Column("a", "A", 3), Column("b", "B", 4)], 5) == [3, 9]


# ------------------------------------------------------------------ 6. one status vocabulary

async def test_status_is_the_exchange_status_and_errors_show_as_errors():
    from kafkasniff.output.filters import STATUSES

    app = make_app(ERR)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        p = pane(app)
        model = p.table.model
        status_col = [c.key for c in p.table.columns].index("status")
        seen = set()
        for i in range(len(model)):
            info = app.store.row(p.view[i])
            text, style = model.cells(i)[status_col]
            if info.long_poll:                 # marked (docs/long-polls.md), dimmed
                assert text == info.status + " lp" and info.status == "paired"
                assert style == ("error" if info.errors else "dim")
                continue
            assert text == info.status and text in STATUSES
            assert style == ("error" if info.errors else "" if text == "paired" else "warning")
            seen.add((text, bool(info.errors)))
        assert ("paired", True) in seen and ("paired", False) in seen
        assert " ok " not in screen_text(app)


# ------------------------------------------------------------------ 3. Tab, follow mode

async def test_tab_in_the_detail_reaches_the_hex_view():
    from textual.widgets import Tree

    from kafkasniff.tui.screens import DetailScreen
    from kafkasniff.tui.widgets import HexView

    app = make_app(ERR)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen)
                       and app.screen.detail is not None)
        await pilot.pause()
        assert isinstance(app.focused, Tree)
        await pilot.press("tab")
        assert isinstance(app.focused, HexView)
        await pilot.press("tab")
        assert isinstance(app.focused, Tree)
        await pilot.press("shift+tab")
        assert isinstance(app.focused, HexView)


async def test_moving_up_leaves_follow_mode_until_end():
    from kafkasniff.tui.app import KafkaSniffApp
    from tests.tui.test_source import ReplaySource, decode_capture

    exchanges = decode_capture(ERR).exchanges
    src = ReplaySource(exchanges, steps=4)
    app = KafkaSniffApp(src)
    async with app.run_test(size=SIZE) as pilot:
        p = pane(app)
        assert p.follow
        src.go.release()
        await wait_for(pilot, lambda: len(app.store) >= 29)
        await pilot.pause()
        assert p.table.cursor == len(p.view) - 1
        await pilot.press("up", "up")
        here = p.table.cursor
        assert here == len(p.view) - 3 and not p.follow
        assert "FOLLOW" not in str(app.query_one("#ex-bar").render())
        src.go.release()                              # more rows: the cursor stays put
        await wait_for(pilot, lambda: len(app.store) >= 58)
        await pilot.pause()
        assert p.table.cursor == here and not p.follow
        await pilot.press("end")                      # back to the newest: following again
        assert p.follow and p.table.cursor == len(p.view) - 1
        src.go.release()
        await wait_for(pilot, lambda: len(app.store) >= 87)
        await pilot.pause()
        assert p.table.cursor == len(p.view) - 1
        for _ in range(2):
            src.go.release()
        await wait_for(pilot, lambda: len(app.store) == len(exchanges))


# ------------------------------------------------------------------ 4. 80x24

async def test_80x24_hex_text_column_status_column_and_status_bar():
    from kafkasniff.tui.screens import DetailScreen
    from kafkasniff.tui.widgets import HexView

    from .conftest import COMPRESSION, SASL

    app = make_app([ERR, COMPRESSION, SASL])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_loaded(pilot)
        text = screen_text(app)
        status = text.splitlines()[0]
        # several files: the title gives way, the progress and counters stay
        assert "done" in status and f"{len(app.store):,} exchanges" in status, status
        assert "issues" in status and "+2 files" in status, status
        header = text.splitlines()[4]
        assert "Status" in header and "Errors" in header, header
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen)
                       and app.screen.detail is not None)
        await pilot.pause(0.2)
        hexv = app.screen.query_one(HexView)
        dump_lines = [ln for ln in screen_text(app).splitlines() if "|" in ln and "│" in ln]
        first = hexv.dump(hexv.per_line).splitlines()[0]      # whole, text column closed
        assert any(first in ln for ln in dump_lines), (first, dump_lines[:3])
        assert first.endswith("|") and first.count("|") == 2
        assert hexv.line_width(hexv.per_line) <= hexv.scrollable_content_region.width


# ------------------------------------------------------------------ 5. keyboard for the mouse-only

async def test_overview_histogram_axis_by_keyboard_at_47_rows():
    app = make_app(ERR)
    async with app.run_test(size=(120, 47)) as pilot:
        await wait_loaded(pilot)
        await pilot.press("1")
        await pilot.pause(0.2)
        assert "latency ≥" not in screen_text(app)          # below the fold
        await pilot.press("h")
        await pilot.pause(0.2)
        text = screen_text(app)
        assert "latency ≥" in text and "178ms" in text      # the time axis and its ticks
        assert app.focused.id == "ov-apis"                  # the cursor still picks the API
        await pilot.press("ctrl+home")
        await pilot.pause(0.2)
        assert "latency ≥" not in screen_text(app)
        await pilot.press("ctrl+end")
        await pilot.pause(0.2)
        assert "latency ≥" in screen_text(app)


async def _sorted_by_keyboard(pilot, app, table, column_label: str) -> list:
    from textual.widgets import OptionList

    await pilot.press("s")
    await pilot.pause()
    ol = app.screen.query_one(OptionList)
    labels = [ol.get_option_at_index(i).prompt for i in range(ol.option_count)]
    ol.highlighted = labels.index(column_label)
    await pilot.press("enter")
    await pilot.pause()
    return [table.model.cells(i) for i in range(len(table.model))]


@pytest.mark.parametrize("view,table_id,column,key", [
    ("1", "ov-apis", "Count", "count"), ("3", "connections-table", "Exch", "exchanges"),
    ("4", "clients-table", "Count", "count"), ("5", "topics-table", "Exch", "exchanges")])
async def test_sorting_the_snapshot_tables_by_keyboard(view, table_id, column, key):
    app = make_app(ERR)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        await pilot.press(view)
        await pilot.pause(0.2)
        table = app.query_one(f"#{table_id}")
        assert app.focused is table
        table.move_to(len(table.model) - 1)
        rows = await _sorted_by_keyboard(pilot, app, table, column)
        assert table.sort_key == key and table.sort_reverse
        k = [c.key for c in table.columns].index(key)
        values = [int(r[k].replace(",", "")) for r in rows]
        assert values == sorted(values, reverse=True)
        assert table.cursor == 0 and round(table.scroll_y) == 0    # the top rows are shown
        await pilot.press("r")
        await pilot.pause()
        values = [int(table.model.cells(i)[k].replace(",", "")) for i in range(len(values))]
        assert values == sorted(values) and not table.sort_reverse


async def test_enter_on_a_broker_or_a_client_of_the_overview():
    app = make_app(ERR)
    async with app.run_test(size=(120, 50)) as pilot:
        await wait_loaded(pilot)
        await pilot.press("1")
        await pilot.pause(0.2)
        for table_id, field in (("ov-brokers", "broker"), ("ov-clients", "client_id")):
            await pilot.press("1")
            await pilot.pause()
            table = app.query_one(f"#{table_id}")
            table.focus()
            table.move_to(1)
            key = table.model.rows[1].key
            await pilot.press("enter")
            await settle(pilot, app)
            assert app.query_one("TabbedContent").active == "exchanges"
            rows = rows_of_view(app)
            assert rows and all(getattr(r, field) == key for r in rows), (field, key)
            assert len(rows) == table.model.rows[1].count


async def test_after_a_sort_the_exchanges_view_shows_its_top_rows():
    app = make_app(ERR)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        p = pane(app)
        await pilot.press("end")
        assert p.table.cursor == len(p.view) - 1 and p.table.scroll_y > 0
        p.sort_by("latency", True)
        await settle(pilot, app)
        assert p.table.cursor == 0 and round(p.table.scroll_y) == 0
        lat = [app.store.row(r).latency_ns or -1 for r in p.view]
        assert lat[0] == max(lat)


# ------------------------------------------------------------------ 6. record highlight, search

async def test_a_record_of_an_uncompressed_batch_highlights_its_own_bytes():
    from textual.widgets import Tree

    from kafkasniff.tui.screens import DetailScreen
    from kafkasniff.tui.widgets import HexView

    app = make_app(ERR)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        p = pane(app)
        rows = rows_of_view(app)
        k = next(i for i, r in enumerate(rows) if r.api_name == "Produce"
                 and r.records is not None and r.records >= 2 and not r.rec_info)
        p.table.move_to(k)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen)
                       and app.screen.detail is not None)
        await pilot.pause()
        screen = app.screen
        tree = screen.query_one(Tree)
        node = tree.root
        for name in ("Request", "body", "topic_data", "[0]", "partition_data", "[0]",
                     "records", "batch[0]"):
            node = next(c for c in node.children if c.label.plain.startswith(name))
            node.expand()
            await pilot.pause()
        hexv = screen.query_one(HexView)
        tree.move_cursor(node)
        await pilot.pause()
        batch = hexv.highlighted_bytes()
        recs = next(c for c in node.children if c.label.plain.startswith("records"))
        recs.expand()
        await pilot.pause()
        batch_obj = node.data.value
        seen = []
        for j, rnode in enumerate(recs.children):
            tree.move_cursor(rnode)
            await pilot.pause()
            got = hexv.highlighted_bytes()
            rec = batch_obj.records[j]
            assert 0 < len(got) < len(batch) and got in batch
            assert rec.value is None or got.endswith(rec.value + b"\x00") or rec.value in got
            seen.append(got)
        assert len(seen) == batch_obj.record_count >= 2 and len(set(seen)) == len(seen)
        # consecutive records, the last one ending the batch
        assert batch.endswith(b"".join(seen))


def test_record_spans_stop_at_bad_lengths():
    from kafkasniff.tui.detail import record_spans

    assert record_spans(bytes([4, 1, 2]) + bytes([2, 7]), 0, 5, 5) == [(0, 3), (3, 5)]
    assert record_spans(bytes([40, 1, 2]), 0, 3, 1) == []           # longer than the batch
    assert record_spans(bytes([1]), 0, 1, 1) == []                  # negative length
    assert record_spans(bytes([0x80, 0x80]), 0, 2, 1) == []         # varint cut short
    assert record_spans(bytes([4, 1, 2, 4, 1, 2]), 0, 6, 1) == [(0, 3)]   # only count


async def test_search_matches_the_api_label_shown():
    app = make_app(ERR)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        p = pane(app)
        rows = rows_of_view(app)
        # the first ApiVersions row is v3, the first v0 comes after it
        want = next(i for i, r in enumerate(rows)
                    if r.api_name == "ApiVersions" and r.api_version == 0)
        assert rows[0].api_name == "ApiVersions" and want > 0
        label = "ApiVersions v0"
        await pilot.press("slash")
        await pilot.press(*label)
        await pilot.press("enter")
        await pilot.pause()
        assert p.table.cursor == want, (label, p.table.cursor)
        assert f"search: '{label}'" in screen_text(app)
        matcher = app.store.search_matcher("produce v")
        assert {r.api_name for r in rows if matcher(r.row)} == {"Produce"}
        assert not any(app.store.search_matcher("metadata v99")(r.row) for r in rows)


# ------------------------------------------------------------------ 6. bars from zero, time axis

async def test_overview_bars_start_at_zero_and_have_a_time_axis():
    from kafkasniff.tui.models import fmt_time

    app = make_app(ERR)
    async with app.run_test(size=(120, 50)) as pilot:
        await wait_loaded(pilot)
        await pilot.press("1")
        await pilot.pause(0.2)
        tl = app.snapshot.timeline
        text = screen_text(app)
        start = fmt_time(tl[0].start_ns)[:12]                  # HH:MM:SS.mmm
        end = fmt_time(tl[-1].start_ns + tl[-1].width_ns)[:12]
        assert text.count(start) == 2 and text.count(end) == 2, (start, end)
        # every bucket with requests has a visible bar, scaled from zero: the smallest count
        # is drawn in proportion to the largest, not as the lowest bar
        counts = [b.count for b in tl]
        bars = app.query_one("#sp-rate")
        lines = bars.render().plain.splitlines()
        assert len(lines) == 3
        w = bars.size.width
        lo = counts.index(min(c for c in counts if c))
        col = -(-lo * w // len(counts))                       # its first column
        filled = sum(" ▁▂▃▄▅▆▇█".index(line[col]) for line in lines[:2])
        assert filled == max(1, round(min(c for c in counts if c) / max(counts) * 16))


def test_bars_from_zero():
    from kafkasniff.tui.widgets import bar_rows, time_axis

    assert bar_rows([10, 11, 12], 3, 2) == ["▅▇█", "███"]     # 13/16, 15/16, 16/16
    assert bar_rows([0, 1, 1000], 3, 1) == [" ▁█"]            # non-zero: never empty
    assert bar_rows([1, 5, 2, 8], 2, 1) == ["▅█"]              # max per column
    axis = time_axis(0, 60_000_000_000, 40)
    assert axis.startswith("00:00:00") and axis.endswith("00:01:00") and "00:00:30" in axis


# ------------------------------------------------------------------ 7. time range

async def test_time_range_typed_in_the_exchanges_view():
    from kafkasniff.tui.models import fmt_time

    app = make_app(ERR)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        p = pane(app)
        ts = sorted(app.store.row(r).ts_ns for r in p.view)
        lo, hi = ts[20], ts[60]
        await pilot.press("t")
        await pilot.pause()
        await pilot.press(*"noon..later", "enter")
        await pilot.pause()
        assert "not a time" in screen_text(app) and len(app.screen_stack) == 2
        inp = app.screen.query_one("#t-range")
        inp.value = f"{fmt_time(lo)}..{fmt_time(hi)}"
        await pilot.press("enter")
        await settle(pilot, app)
        got = sorted(app.store.row(r).ts_ns for r in p.view)
        assert got == [t for t in ts if lo <= t < hi] and len(got) == 40
        assert f"time: {fmt_time(lo)}..{fmt_time(hi)}" in screen_text(app)
        await pilot.press("e")                            # a filter on top of the range
        await settle(pilot, app)
        assert all(lo <= app.store.row(r).ts_ns < hi and app.store.row(r).errors
                   for r in p.view)
        await pilot.press("c")
        await settle(pilot, app)
        assert len(p.view) == len(ts) and "time:" not in screen_text(app)


async def test_time_range_from_the_overview_timeline():
    app = make_app(ERR)
    async with app.run_test(size=(120, 50)) as pilot:
        await wait_loaded(pilot)
        await pilot.press("1")
        await pilot.pause(0.2)
        tl = app.snapshot.timeline
        # keyboard: Tab to the request bars, → to the third bucket, Enter
        app.query_one("#sp-rate").focus()
        await pilot.press("home", "right", "right", "enter")
        await settle(pilot, app)
        p = pane(app)
        b = tl[2]
        assert app.query_one("TabbedContent").active == "exchanges"
        assert len(p.view) == b.count > 0
        assert all(b.start_ns <= app.store.row(r).ts_ns < b.start_ns + b.width_ns
                   for r in p.view)
        # mouse: a click on the first bucket's bars
        await pilot.press("1")
        await pilot.pause(0.2)
        await pilot.click("#sp-p99", offset=(0, 0))
        await settle(pilot, app)
        assert len(p.view) == tl[0].count


def test_parse_time_range():
    from kafkasniff.tui.models import fmt_time_range, parse_time_range

    ref = 1_795_222_577_123_000_000                    # 2026-11-21 00:56:17.123 UTC
    day = ref - ref % 86_400_000_000_000
    assert parse_time_range("", ref) is None
    lo, hi = parse_time_range("00:56:17..00:56:18.5", ref)
    assert (lo - day, hi - day) == (3377 * 10**9, 3378_500_000_000)
    assert fmt_time_range((lo, hi)) == "00:56:17.000000..00:56:18.500000"
    assert parse_time_range("2026-11-21 00:56:17..", 0) == (day + 3377 * 10**9, 1 << 62)
    assert parse_time_range("..00:01", ref) == (0, day + 60 * 10**9)
    for bad in ("00:56:17", "x..00:56:18", "00:56:18..00:56:17", "25:00..", "00:61.."):
        with pytest.raises(ValueError):
            parse_time_range(bad, ref)


async def test_request_and_response_bytes_side_by_side():
    from textual.widgets import Tree

    from kafkasniff.tui.screens import DetailScreen

    app = make_app(ERR)
    async with app.run_test(size=(200, 40)) as pilot:
        await wait_loaded(pilot)
        p = pane(app)
        k = next(i for i, r in enumerate(rows_of_view(app))
                 if r.api_name == "Produce" and r.status == "paired")
        p.table.move_to(k)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen)
                       and app.screen.detail is not None)
        await pilot.pause()
        screen = app.screen
        frames = screen.detail.frames
        await pilot.press("b")
        await pilot.pause(0.2)
        left, right = screen.query_one("#hex"), screen.query_one("#hex2")
        assert screen.query_one("#hex-box2").display
        assert left.data == frames["request"].data and right.data == frames["response"].data
        text = screen_text(app)
        assert "request frame" in text and "response frame" in text
        # a response field lights its bytes on the right, nothing on the left
        tree = screen.query_one(Tree)
        node = next(c for c in tree.root.children if c.label.plain.startswith("Response"))
        node = next(c for c in node.children if c.label.plain.startswith("header"))
        node = next(c for c in node.children if c.label.plain.startswith("correlation_id"))
        tree.move_cursor(node)
        await pilot.pause()
        corr = app.store.row(p.view[k]).correlation_id
        assert right.highlighted_bytes() == corr.to_bytes(4, "big")
        assert left.highlight is None
        await pilot.press("x")                        # both shown: nothing to switch
        assert left.data == frames["request"].data and right.data == frames["response"].data
        await pilot.press("tab", "tab")
        assert app.focused is right
        await pilot.press("tab")
        assert isinstance(app.focused, Tree)
        await pilot.press("b")                        # one frame again
        await pilot.pause()
        assert not screen.query_one("#hex-box2").display


def _error_codes(v, out: list) -> list:
    """Every non-zero ``*error_code`` of a decoded body (dicts and lists)."""
    if isinstance(v, dict):
        for k, x in v.items():
            if k.endswith("error_code") and isinstance(x, int) and x:
                out.append(x)
            else:
                _error_codes(x, out)
    elif isinstance(v, list):
        for x in v:
            _error_codes(x, out)
    return out


async def test_exchanges_show_error_counts():
    """Err: the response's non-zero error codes; Errors: NAME×count when a name repeats
    (checked against the fully decoded response of every exchange with errors)."""
    app = make_app(ERR)
    async with app.run_test(size=(200, 40)) as pilot:
        await wait_loaded(pilot)
        p = pane(app)
        keys = [c.key for c in p.table.columns]
        repeated = 0
        for i, r in enumerate(p.view):
            info = app.store.row(r)
            if not info.errors:
                continue
            cells = p.table.model.cells(i)
            detail = app.decode_row(info)
            body = detail.exchange.response.body
            names = [app.source.pipeline.defs.error_name(c) for c in _error_codes(body, [])]
            # a name the body does not show (an error response decoded another way) counts 1
            per = {name: max(1, names.count(name)) for name in info.errors}
            assert cells[keys.index("err_n")] == (str(sum(per.values())), "error"), info.row
            text = cells[keys.index("errors")][0]
            for name, n in per.items():
                assert (f"{name}×{n}" in text) if n > 1 else (name in text and "×" not in
                                                              text.split(name)[1][:1])
                repeated += n > 1
        assert repeated == 2                     # NOT_LEADER_OR_FOLLOWER×2, NOT_COORDINATOR×3
        text = screen_text(app)
        assert "Err" in text.splitlines()[4]
        p.sort_by("err_n", True)
        await settle(pilot, app)
        assert app.store.columns["err_n"][p.view[0]] == 3
