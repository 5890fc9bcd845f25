"""The TUI driven with Textual's Pilot on real captures: what is shown after each action."""

from __future__ import annotations

import json

import pytest
from textual.widgets import Input, OptionList, TabbedContent, Tree

from kafkasniff.tui.app import (
    HELP_DETAIL,
    HELP_EXCHANGES,
    HELP_GLOBAL,
    HELP_OTHER,
    HELP_TABLE,
    KafkaSniffApp,
)
from kafkasniff.tui.panes import ExchangesPane, IssuesPane, OverviewPane
from kafkasniff.tui.screens import DetailScreen, HelpScreen, SaveScreen
from kafkasniff.tui.widgets import HexView, VirtualTable
from tests.conftest import CAPTURES

from .conftest import (
    COMPRESSION,
    ERR,
    make_app,
    pane,
    rows_of_view,
    screen_text,
    wait_for,
    wait_loaded,
)

SIZE = (120, 40)


async def settle(pilot, app) -> None:
    """Wait until the exchanges view is recomputed (filter / sort workers)."""
    p = pane(app)
    await wait_for(pilot, lambda: not p._busy)
    await pilot.pause()


async def show(pilot, key: str) -> str:
    """Press ``key`` (a view) and return the screen's text."""
    await pilot.press(key)
    await pilot.pause()
    return screen_text(pilot.app)


async def open_detail(pilot, app, index: int) -> DetailScreen:
    p = pane(app)
    p.table.move_to(index)
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen)
                   and app.screen.detail is not None)
    await pilot.pause()
    return app.screen


async def test_opens_a_capture_and_shows_exchanges():
    app = make_app(ERR)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        assert len(app.store) == 115
        text = screen_text(app)
        assert "115 exchanges" in text and "done" in text
        for s in ("Time (UTC)", "API", "Latency", "Errors", "Produce v10", "ks-producer-err",
                  "NOT_LEADER_OR_F"):
            assert s in text, s
        assert app.query_one(TabbedContent).active == "exchanges"


async def test_errors_only_and_api_filters():
    app = make_app(ERR)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        await pilot.press("e")
        await settle(pilot, app)
        rows = rows_of_view(app)
        assert rows and all(r.errors for r in rows)
        text = screen_text(app)
        assert f"{len(rows)} of 115 exchanges" in text and "filter: errors" in text
        # the filter dialog: API Produce (keeps errors only)
        await pilot.press("f")
        await pilot.pause()
        app.screen.query_one("#f-api", Input).value = "Produce"
        await pilot.press("enter")
        await settle(pilot, app)
        rows = rows_of_view(app)
        assert rows and all(r.api_name == "Produce" and r.errors for r in rows)
        assert "NOT_LEADER_OR_FOLLOWER" in rows[0].errors
        text = screen_text(app)
        assert "api=Produce errors" in text
        assert "Metadata v13" not in text and "Produce v10" in text
        # min latency and clear
        await pilot.press("c")
        await settle(pilot, app)
        assert len(pane(app).view) == 115
        pane(app).set_filter(pane(app).filter.__class__(min_latency_ms=100))
        await settle(pilot, app)
        assert all(r.latency_ns >= 100_000_000 for r in rows_of_view(app))


async def test_incremental_search_moves_the_cursor():
    app = make_app(ERR)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        p = pane(app)
        await pilot.press("slash")
        for ch in "not_coord":
            await pilot.press(ch)
        await pilot.pause()
        first = app.store.row(p.current_row())
        assert "NOT_COORDINATOR" in first.errors
        await pilot.press("enter")
        assert p.table.has_focus
        assert "search: 'not_coord'" in screen_text(app)
        await pilot.press("n")
        second = app.store.row(p.current_row())
        assert "NOT_COORDINATOR" in second.errors and second.row != first.row or \
            sum("NOT_COORDINATOR" in r.errors for r in rows_of_view(app)) == 1
        # escape goes back to where the search started
        start = p.table.cursor = 3
        await pilot.press("slash", "f", "e", "t", "c", "h", "escape")
        assert p.table.cursor == start
        # a topic, then a client id
        await pilot.press("slash", *"ks-errors", "enter")
        assert "ks-errors" in app.store.row(p.current_row()).topics
        p.table.move_to(0)
        await pilot.press("slash", *"consumer", "enter")
        assert app.store.row(p.current_row()).client_id == "ks-consumer-err"


async def test_sort_by_latency_with_keys_and_header_click():
    app = make_app(ERR)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        await pilot.press("s")
        await pilot.pause()
        ol = app.screen.query_one(OptionList)
        keys = [ol.get_option_at_index(i).id for i in range(ol.option_count)]
        ol.highlighted = keys.index("latency")
        await pilot.press("enter")
        await settle(pilot, app)
        lat = [r.latency_ns if r.latency_ns is not None else -1 for r in rows_of_view(app)]
        assert lat == sorted(lat, reverse=True)
        assert "sort: latency ▼" in screen_text(app)
        await pilot.press("r")
        await settle(pilot, app)
        lat = [r.latency_ns if r.latency_ns is not None else -1 for r in rows_of_view(app)]
        assert lat == sorted(lat)
        # a click on the API header sorts by API name
        table = pane(app).table
        x = next(sum(w + 1 for _, w, _ in table._layout(table.size.width)[:k])
                 for k, (c, _, _) in enumerate(table._layout(table.size.width))
                 if c.key == "api")
        await pilot.click("#ex-table", offset=(x + 1, 0))
        await settle(pilot, app)
        names = [r.api_name.lower() for r in rows_of_view(app)]
        assert names == sorted(names)


async def test_detail_tree_records_and_hex_highlight():
    app = make_app(COMPRESSION)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        rows = rows_of_view(app)
        k = next(i for i, r in enumerate(rows)
                 if r.api_name == "Produce" and "gzip" in r.rec_info)
        screen = await open_detail(pilot, app, k)
        tree = screen.query_one(Tree)
        labels = {}

        def walk(node):
            labels[node.label.plain] = node
            for c in node.children:
                walk(c)
        walk(tree.root)
        text = "\n".join(labels)
        assert "Produce v" in text and "header" in text and "body" in text
        assert any(lbl.startswith("topic_data") for lbl in labels)
        # expand down to the records: topic_data[0] -> partition_data -> [0] -> records
        node = tree.root
        for name in ("Request", "body", "topic_data", "[0]", "partition_data", "[0]",
                     "records", "batch[0]"):
            node = next(c for c in node.children if c.label.plain.startswith(name))
            node.expand()
            await pilot.pause()
        batch_labels = [c.label.plain for c in node.children]
        assert any("codec: \"gzip\"" in lbl for lbl in batch_labels), batch_labels
        recs = next(c for c in node.children if c.label.plain.startswith("records"))
        recs.expand()
        await pilot.pause()
        assert recs.children and "offset" in recs.children[0].label.plain
        assert "value=" in recs.children[0].label.plain
        # selecting the topic name highlights its bytes (its length, int16 or compact
        # uvarint in flexible versions, and the name)
        topic = rows[k].topics[0]
        tnode = tree.root
        for name in ("Request", "body", "topic_data", "[0]", "name"):
            tnode = next(c for c in tnode.children if c.label.plain.startswith(name))
        tree.move_cursor(tnode)
        await pilot.pause()
        hexv = screen.query_one(HexView)
        assert hexv.highlighted_bytes() in (len(topic).to_bytes(2, "big") + topic.encode(),
                                            bytes([len(topic) + 1]) + topic.encode())
        assert "selected bytes" in screen_text(app)
        # the whole batch node highlights the batch (magic 2 at offset 16 of the batch)
        tree.move_cursor(node)
        await pilot.pause()
        assert hexv.highlighted_bytes()[16] == 2
        # x shows the response frame
        await pilot.press("x")
        assert screen.side == "response"
        assert "response frame" in screen_text(app)
        await pilot.press("escape")
        assert not isinstance(app.screen, DetailScreen)


async def test_detail_steps_through_the_view():
    app = make_app(ERR)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        screen = await open_detail(pilot, app, 7)
        assert "[8/115]" in screen_text(app)
        await pilot.press("right_square_bracket")
        await wait_for(pilot, lambda: screen.detail is not None and screen.index == 8)
        await pilot.pause()
        assert "[9/115]" in screen_text(app)
        assert pane(app).table.cursor == 8


async def test_jump_from_an_issue_to_its_exchange():
    app = make_app(ERR)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        await pilot.press("6")
        issues = app.query_one("#issues-pane", IssuesPane)
        text = screen_text(app)
        assert "issues" in text and "Message" in text
        model = issues.table.model
        k = next(i for i in range(len(model)) if model.issue_at(i)[0] > 10)
        row, issue = model.issue_at(k)
        issues.table.move_to(k)
        await pilot.press("enter")
        await pilot.pause()
        assert app.query_one(TabbedContent).active == "exchanges"
        assert pane(app).current_row() == row
        assert pane(app).table.has_focus
        # and Enter opens its detail, which lists the issue
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen)
                       and app.screen.detail is not None)
        await pilot.pause()
        tree_text = "\n".join(n.label.plain for n in _nodes(app.screen.query_one(Tree).root))
        assert str(issue.kind) in tree_text


def _nodes(node):
    yield node
    for c in node.children:
        yield from _nodes(c)


async def test_save_the_filtered_view_as_json_lines(tmp_path):
    app = make_app(ERR, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        await pilot.press("e")
        await settle(pilot, app)
        wanted = rows_of_view(app)
        await pilot.press("w")
        await pilot.pause()
        assert isinstance(app.screen, SaveScreen)
        out = tmp_path / "errors.jsonl"
        app.screen.query_one("#s-path", Input).value = str(out)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.last_saved == str(out))
    objs = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(objs) == len(wanted)
    assert all(o["type"] == "exchange" and o["errors"] for o in objs)
    assert [(o["connection"]["id"], o["correlation_id"], o["api_name"]) for o in objs] == \
        [(r.conn_id, r.correlation_id, r.api_name) for r in sorted(wanted, key=lambda r: r.row)]
    assert objs[0]["request"]["body"] is not None


async def test_saved_json_is_read_json_records(tmp_path):
    app = make_app(ERR, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        out = tmp_path / "all.jsonl"
        app.save_view(list(pane(app).view), "jsonl", str(out))
        await wait_for(pilot, lambda: app.last_saved == str(out))
        few = tmp_path / "few.jsonl"
        app.save_view(list(pane(app).view)[:50], "jsonl", str(few))
        await wait_for(pilot, lambda: app.last_saved == str(few))
    from kafkasniff.output.render import exchange_to_dict
    from tests.conftest import decode_capture

    ref = [json.loads(json.dumps(exchange_to_dict(ex)))
           for ex in decode_capture(ERR, with_records=True).exchanges]
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert got == ref
    # a few rows are decoded from their frames (not by a second pass): the same JSON
    assert [json.loads(line) for line in few.read_text().splitlines()] == ref[:50]


async def test_save_as_parquet(tmp_path):
    try:
        import pyarrow.parquet as pq

        from kafkasniff.export.writer import ExportSink  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"kafkasniff.export not available: {exc}")
    app = make_app(ERR, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        await pilot.press("e")
        await settle(pilot, app)
        n = len(pane(app).view)
        out = tmp_path / "pq"
        app.save_view(list(pane(app).view), "parquet", str(out))
        await wait_for(pilot, lambda: app.last_saved == str(out), timeout=60)
    table = pq.read_table(out / "exchanges")
    assert table.num_rows == n


async def test_copy_an_exchange_json(tmp_path):
    app = make_app(ERR, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        pane(app).table.move_to(7)
        row = pane(app).current_row()
        await pilot.press("y")
        path = tmp_path / f"kafkasniff-exchange-{row}.json"
        await wait_for(pilot, lambda: path.exists())
        obj = json.loads(path.read_text())
        assert obj["type"] == "exchange" and obj["api_name"] == app.store.row(row).api_name
        assert json.loads(app.clipboard) == obj


async def test_help_lists_every_binding():
    app = make_app(ERR)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        help_text = str(app.screen.query_one("#help-text").render())
        # every key named in the key column of the help (not merely somewhere in its text)
        key_column = {tok for _, section in app.screen.sections for keys, _ in section
                      for tok in keys.replace(",", " ").split()}
        names = {"question_mark": "?", "slash": "/", "left_square_bracket": "[",
                 "right_square_bracket": "]", "escape": "Esc", "enter": "Enter",
                 "pageup": "PgUp", "pagedown": "PgDn", "home": "Home", "end": "End",
                 "up": "↑", "down": "↓", "space": "space", "tab": "tab"}
        for cls in (KafkaSniffApp, ExchangesPane, IssuesPane, OverviewPane, DetailScreen,
                    VirtualTable):
            for b in cls.BINDINGS:
                for key in b.key.split(","):
                    shown = names.get(key, key)
                    assert shown in help_text, (cls.__name__, key)
                    assert shown in key_column, (cls.__name__, key)
        for _, desc in HELP_GLOBAL + HELP_TABLE + HELP_EXCHANGES + HELP_DETAIL + HELP_OTHER:
            assert desc in help_text
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_overview_and_other_views():
    app = make_app(ERR)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        text = await show(pilot, "1")
        for s in ("115 exchanges", "requests per", "p99 latency per", "Fetch", "Produce",
                  "Brokers", "Clients", "ks-consumer-err", "Issues", "trailing_bytes",
                  "Latency histogram: Fetch"):
            assert s in text, s
        await pilot.press("down")
        await pilot.pause()
        assert "Latency histogram: ApiVersions" in screen_text(app)
        text = await show(pilot, "3")
        assert "12 connections" in text and "127.0.0.1:36231" in text
        text = await show(pilot, "4")
        assert "2 client ids" in text and "ks-consumer-err" in text
        text = await show(pilot, "5")
        assert "ks-errors" in text and "NOT_LEADER_OR_FOLLOWER" in text
        # Enter on the topic: its exchanges
        await pilot.press("enter")
        await settle(pilot, app)
        assert app.query_one(TabbedContent).active == "exchanges"
        rows = rows_of_view(app)
        assert rows and all("ks-errors" in r.topics for r in rows)


async def test_follow_mode_and_small_terminal():
    app = make_app(ERR)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_loaded(pilot)
        text = screen_text(app)
        for s in ("Time (UTC)", "API", "Latency", "Errors", "Produce v10"):
            assert s in text, s
        await pilot.press("F")
        assert pane(app).table.cursor == 114 and "FOLLOW" in screen_text(app)
        await open_detail(pilot, app, 10)
        text = screen_text(app)
        assert "Summary" in text and "0000  " in text   # 4-digit offsets below 64 KiB


async def test_clicking_a_row_and_the_tabs():
    app = make_app(ERR)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        await pilot.click("#ex-table", offset=(5, 4))
        assert pane(app).table.cursor == 3
        await pilot.click("#ex-table", offset=(5, 4), times=2)
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen))
        await pilot.press("escape")
        await pilot.click("#tabs-list Tab#--content-tab-issues")
        await pilot.pause()
        assert app.query_one(TabbedContent).active == "issues"


async def test_a_capture_without_kafka_exchanges():
    """TLS only: no exchange, the TLS connections and their standalone issues are shown."""
    from kafkasniff.pipeline import PipelineOptions
    from tests.conftest import CAPTURES

    app = make_app(CAPTURES / "tls_handshake.pcap",
                   options=PipelineOptions(ports=frozenset({9093})))
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        assert len(app.store) == 0
        assert "0 exchanges" in screen_text(app)
        text = await show(pilot, "3")
        assert "tls" in text and "127.0.0.1:9093" in text
        text = await show(pilot, "6")
        assert "tls_connection" in text and "SNI broker1.kafka.test" in text
        await pilot.press("enter")
        await pilot.pause()
        assert app.query_one(TabbedContent).active == "issues"
        assert "tls_connection" in await show(pilot, "1")


async def test_a_failing_decode_is_reported_not_fatal(tmp_path):
    """A data source whose detail raises: the detail screen says why, copying the JSON is
    reported as failed, and the app keeps running."""
    app = make_app(ERR, tmp_path)

    def broken(info, issues=()):
        raise ValueError("bad frame")
    app.source.detail = broken
    notes: list[str] = []
    app.notify = lambda message, **kw: notes.append(message)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        await pilot.press("y")
        await wait_for(pilot, lambda: notes)
        assert "could not be decoded: decoding failed: ValueError: bad frame" in notes[0]
        screen = await open_detail(pilot, app, 0)
        assert screen.detail.exchange is None and "bad frame" in screen.detail.note
        assert "ValueError: bad frame" in screen_text(app)
        await pilot.press("escape")
        assert app.is_running and len(app.store) == 115


async def test_throttled_capture_counts_in_the_overview():
    """Throttle counts reach the TUI (a mutation probe found nothing checked them): the
    Overview's totals and its per-API table show what the capture's truth says (a crafted
    capture with throttle_time_ms values; no committed client capture is throttled)."""
    truth = json.loads((CAPTURES / "crafted_throttle.truth.json").read_text())
    per_api: dict = {}
    for r in truth["requests"]:
        thr = (r.get("response") or {}).get("throttle_time_ms") or 0
        n, total = per_api.get(r["api_name"], (0, 0))
        per_api[r["api_name"]] = (n + (thr > 0), total + thr)
    app = make_app(CAPTURES / "crafted_throttle.pcap")
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        text = await show(pilot, "1")
        throttled = sum(n for n, _ in per_api.values())
        assert throttled == 5 and f"throttled {throttled}" in text
        rows = {row.key: row for row in app.snapshot.apis}
        for api, (n, total) in per_api.items():
            assert (rows[api].throttled, rows[api].throttle_total_ms) == (n, total), api
        assert app.snapshot.total.throttle_total_ms == sum(t for _, t in per_api.values())
