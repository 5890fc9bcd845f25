"""TUI defects a new user hit (issue 45, items 7, 8, 11, 12, 13), driven with Textual's Pilot
on real captures."""

from __future__ import annotations

from textual.widgets import Input, Static

from kafkasniff.tui.screens import DetailScreen, FilterScreen
from tests.conftest import CAPTURES

from .conftest import ERR, make_app, pane, wait_for, wait_loaded
from .test_usability import _send_key, settle

FAILOVER = CAPTURES / "broker_failover.pcap"
JAVA = CAPTURES / "broker_java.pcap"
REBALANCE = CAPTURES / "librdkafka_rebalance.pcap"
SIZE = (120, 40)


# ------------------------------------------------------------------ 7. files out of time order

async def test_timeline_of_files_given_out_of_time_order():
    """``tui broker_failover.pcap broker_java.pcap``: the second file's exchanges are earlier;
    each falls in the bucket of its own time (they all went into the first bucket)."""
    app = make_app([FAILOVER, JAVA])
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        await pilot.press("1")
        await pilot.pause()
        timeline = app.snapshot.timeline
        ts = [t for t in app.store.columns["ts"] if t]
        assert timeline[0].start_ns <= min(ts)
        assert timeline[-1].start_ns + timeline[-1].width_ns > max(ts)
        for b in timeline:
            assert b.count == sum(1 for t in ts if b.start_ns <= t < b.start_ns + b.width_ns), b
        bars = app.query_one("#sp-rate")
        assert bars.start_ns == timeline[0].start_ns and sum(bars.values) == len(ts)


# ------------------------------------------------------------------ 8. partitions named PartitionId

async def test_topics_name_the_partitions_of_elect_leaders_errors():
    """ElectLeaders answers name partitions in ``PartitionId`` (not ``PartitionIndex``): the
    Topics view says which (``p1``, ``p2``), not ``p?``."""
    app = make_app(FAILOVER)
    async with app.run_test(size=(200, 30)) as pilot:
        await wait_loaded(pilot)
        await pilot.press("5")
        await pilot.pause()
        table = app.query_one("#topics-table")
        rows = [table.model.cells(i) for i in range(len(table.model))]
        row = next(r for r in rows if r[0] == "failover-topic")
        text = row[3][0]
        assert "p?" not in text, text
        assert "p1 ELECTION_NOT_NEEDED×1" in text and "p2 ELECTION_NOT_NEEDED×1" in text, text


# ------------------------------------------------------------------ 11. Enter twice

async def test_enter_twice_quickly_opens_one_detail():
    """Two Enter keys in one keystroke batch on the Exchanges table: one detail screen (the
    second Enter is ignored, as docs/tui.md says), and one Esc goes back."""
    app = make_app(ERR)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        for _ in range(2):
            _send_key(app, "enter", "\r")
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen))
        await pilot.pause(0.2)
        assert len(app.screen_stack) == 2, app.screen_stack
        await pilot.press("escape")
        await pilot.pause()
        assert len(app.screen_stack) == 1


async def test_enter_twice_quickly_opens_one_group():
    from kafkasniff.tui.panes import GroupScreen

    app = make_app(REBALANCE)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        await wait_for(pilot, lambda: app.groups is not None)
        await pilot.press("7")
        await pilot.pause()
        for _ in range(2):
            _send_key(app, "enter", "\r")
        await wait_for(pilot, lambda: isinstance(app.screen, GroupScreen))
        await pilot.pause(0.2)
        assert len(app.screen_stack) == 2, app.screen_stack
        await pilot.press("escape")
        await pilot.pause()
        assert len(app.screen_stack) == 1


# ------------------------------------------------------------------ 12. filters that match nothing

async def _filter_dialog(pilot, app, **fields) -> FilterScreen:
    await pilot.press("f")
    await wait_for(pilot, lambda: isinstance(app.screen, FilterScreen))
    for name, value in fields.items():
        app.screen.query_one(f"#f-{name}", Input).value = value
    await pilot.pause()
    return app.screen


async def test_filter_dialog_says_why_instead_of_dropping():
    """A minimum latency ``12.5-``, an unknown API, an unclosed ``[``: the dialog stays open
    with the reason (the latency was dropped silently, the others matched nothing); a comma
    list of APIs and a valid latency apply."""
    app = make_app(ERR)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        p = pane(app)
        for fields, message in (
                (dict(latency="12.5-"), "minimum latency: not a minimum latency in "
                                        "milliseconds: '12.5-'"),
                (dict(latency="", api="Produce,Prodce"), "unknown API 'Prodce' (did you "
                                                         "mean Produce?"),
                (dict(api="", client="[abc"), "client: invalid pattern '[abc'")):
            screen = await _filter_dialog(pilot, app, **fields)
            await pilot.press("enter")
            await pilot.pause()
            assert app.screen is screen, fields
            error = str(screen.query_one("#f-error", Static).render())
            assert message in error, error
            await pilot.press("escape")
            await wait_for(pilot, lambda: len(app.screen_stack) == 1)
            assert not p.filter.active
        await _filter_dialog(pilot, app, api="Produce, Metadata", latency="0.5")
        await pilot.press("enter")
        await wait_for(pilot, lambda: len(app.screen_stack) == 1)
        await settle(pilot, app)
        assert p.filter.apis == ("Produce", "Metadata") and p.filter.min_latency_ms == 0.5
        names = {app.store.row(r).api_name for r in p.view}
        assert names == {"Produce", "Metadata"}, names


# ------------------------------------------------------------------ 13. widths

BROKER_GO = CAPTURES / "broker_go.pcap"
SASL = CAPTURES / "crafted_sasl.pcap"
TLS = CAPTURES / "broker_tls.pcap"
TLS_KEYLOG = CAPTURES / "broker_tls.keylog"
WIDE = (200, 50)
NARROW = (80, 24)


def _shown(table, key: str) -> int:
    """The width of column ``key`` of a VirtualTable as laid out now (0: hidden)."""
    return next((w for c, w, _ in table._layout(table.scrollable_content_region.width)
                 if c.key == key), 0)


async def test_wide_terminals_show_key_columns_whole():
    """At 200x50 the Clients view and the Overview's clients panel show every client_id
    whole (up to 40 cells), rather than cutting them while the spare width went elsewhere."""
    app = make_app(BROKER_GO)
    async with app.run_test(size=WIDE) as pilot:
        await wait_loaded(pilot)
        ids = {r.stats.key for r in app.snapshot.clients}
        longest = max(len(k) for k in ids)
        assert 24 < longest <= 40
        await pilot.press("4")
        await pilot.pause()
        assert _shown(app.query_one("#clients-table"), "key") >= longest
        await pilot.press("1")
        await pilot.pause()
        assert _shown(app.query_one("#ov-clients"), "key") >= longest
        apis = app.query_one("#ov-apis")
        assert _shown(apis, "key") >= max(len(r.key) for r in app.snapshot.apis)


async def test_wide_exchanges_show_the_api_whole():
    app = make_app(SASL)
    async with app.run_test(size=WIDE) as pilot:
        await wait_loaded(pilot)
        from .conftest import screen_text
        text = screen_text(app)
        assert "SaslAuthenticate v2 " in text, text


async def test_tls_detail_without_frame_bytes_gives_the_tree_the_width():
    """At 80x24 the detail of a TLS-decrypted exchange (no frame bytes to show) hides the
    empty hex pane: the tree takes the width (it kept 33 cells beside 45 empty ones)."""
    from textual.widgets import Tree

    from kafkasniff.pipeline import PipelineOptions
    from kafkasniff.tui.app import KafkaSniffApp
    from kafkasniff.tui.source import FileSource

    app = KafkaSniffApp(FileSource([str(TLS)], PipelineOptions(tls_keylog=(str(TLS_KEYLOG),))))
    async with app.run_test(size=NARROW) as pilot:
        await wait_loaded(pilot)
        p = pane(app)
        k = next(i for i, r in enumerate(p.view) if app.store.row(r).api_name == "Produce")
        p.table.move_to(k)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen)
                       and app.screen.detail is not None)
        await pilot.pause()
        screen = app.screen
        assert not screen.detail.frames.get("request") or \
            screen.detail.frames["request"].data is None
        assert not screen.query_one("#hex-box").display
        assert screen.query_one(Tree).size.width >= 76
        await pilot.press("tab")                    # the focus stays in the tree
        assert isinstance(app.focused, Tree)


async def test_overview_at_80x24_breaks_lines_between_items():
    """The totals break between items (``issues 33`` was split over two lines), and the
    titles of the bars and of the histogram fit their width whole (the histogram's lost its
    ``)``)."""
    app = make_app(ERR)
    async with app.run_test(size=NARROW) as pilot:
        await wait_loaded(pilot)
        await pilot.press("1")
        await pilot.pause()
        totals = str(app.query_one("#ov-totals").render()).splitlines()
        assert any("issues 33" in ln for ln in totals), totals
        assert any("Kafka connections" in ln and "12 Kafka" in ln for ln in totals), totals
        assert any(ln.strip().startswith("(") and ln.strip().endswith(")") or
                   "(47 long-polls apart, p50" in ln for ln in totals), totals
        width = app.query_one("#ov-totals").content_region.width
        assert all(len(ln) <= width for ln in totals), totals
        for label in ("#sp-rate-label", "#sp-p99-label", "#ov-hist-title"):
            w = app.query_one(label)
            text = str(w.render())
            assert len(text) <= w.content_region.width, (label, text)
            assert text.count("(") == text.count(")"), (label, text)


def test_partial_last_hex_line_keeps_the_text_column_aligned():
    from kafkasniff.tui.widgets import HexView

    hexv = HexView()
    for n in (1, 5, 7, 8, 9, 20, 31):
        hexv.data = bytes(range(n + 16))
        for per in (16, 8, 4):
            lines = hexv.dump(per).splitlines()
            assert len({ln.index("|") for ln in lines}) == 1, (n, per, lines)
            assert len({len(ln) for ln in lines}) == 1, (n, per, lines)
