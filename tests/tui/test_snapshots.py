"""Snapshots (pytest-textual-snapshot) of the main screens at fixed sizes.

Deterministic: the captures' own timestamps (UTC), no wall-clock time on screen, no progress
animation (the status bar is text), inputs hidden, loading finished before the screenshot.
Update with ``pytest tests/tui/test_snapshots.py --snapshot-update`` and look at the SVGs.
"""

from __future__ import annotations

from textual.widgets import Tree

from kafkasniff.tui.screens import DetailScreen
from tests.conftest import CAPTURES

from .conftest import COMPRESSION, ERR, make_app, wait_for, wait_loaded

REBALANCE = CAPTURES / "librdkafka_rebalance.pcap"


def _then(*keys):
    async def run(pilot) -> None:
        await wait_loaded(pilot)
        for k in keys:
            await pilot.press(k)
            await pilot.pause()
        pane = pilot.app.query_one("#exchanges-pane")
        await wait_for(pilot, lambda: not pane._busy)
        await pilot.pause()
    return run


def test_exchanges(snap_compare):
    assert snap_compare(make_app(ERR), terminal_size=(120, 40), run_before=wait_loaded)


def test_exchanges_errors_only_sorted(snap_compare):
    async def run(pilot) -> None:
        await wait_loaded(pilot)
        pane = pilot.app.query_one("#exchanges-pane")
        await pilot.press("e")
        await wait_for(pilot, lambda: not pane._busy)
        pane.sort_by("latency", True)
        await wait_for(pilot, lambda: not pane._busy)
        await pilot.pause()
    assert snap_compare(make_app(ERR), terminal_size=(120, 30), run_before=run)


def test_exchanges_80x24(snap_compare):
    assert snap_compare(make_app(ERR), terminal_size=(80, 24), run_before=wait_loaded)


def test_overview(snap_compare):
    assert snap_compare(make_app(ERR), terminal_size=(120, 50), run_before=_then("1"))


def test_connections(snap_compare):
    assert snap_compare(make_app(ERR), terminal_size=(120, 24), run_before=_then("3"))


def test_clients(snap_compare):
    assert snap_compare(make_app(ERR), terminal_size=(120, 24), run_before=_then("4"))


def test_topics(snap_compare):
    assert snap_compare(make_app(ERR), terminal_size=(120, 24), run_before=_then("5"))


def test_issues(snap_compare):
    assert snap_compare(make_app(ERR), terminal_size=(120, 30), run_before=_then("6"))


def test_help(snap_compare):
    assert snap_compare(make_app(ERR), terminal_size=(100, 60), run_before=_then("question_mark"))


def _detail(select: tuple[str, ...]):
    async def run(pilot) -> None:
        app = pilot.app
        await wait_loaded(pilot)
        pane = app.query_one("#exchanges-pane")
        rows = [app.store.row(r) for r in pane.view]
        k = next(i for i, r in enumerate(rows) if r.api_name == "Produce" and "gzip" in r.rec_info)
        pane.table.move_to(k)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen)
                       and app.screen.detail is not None)
        await pilot.pause()
        tree = app.screen.query_one(Tree)
        node = tree.root
        for name in select:
            node = next(c for c in node.children if c.label.plain.startswith(name))
            node.expand()
            await pilot.pause()
        tree.move_cursor(node)
        await pilot.pause()
    return run


def test_detail_with_field_highlight(snap_compare):
    assert snap_compare(make_app(COMPRESSION), terminal_size=(160, 45),
                        run_before=_detail(("Request", "body", "topic_data", "[0]",
                                            "partition_data", "[0]", "records", "batch[0]")))


def test_detail_80x24(snap_compare):
    assert snap_compare(make_app(COMPRESSION), terminal_size=(80, 24),
                        run_before=_detail(("Request", "header", "client_id")))


def _groups(*keys):
    async def run(pilot) -> None:
        await wait_loaded(pilot)
        await wait_for(pilot, lambda: pilot.app.groups is not None)
        await pilot.press("7")
        await pilot.pause()
        for k in keys:
            await pilot.press(k)
            await pilot.pause()
        await pilot.pause()
    return run


def test_groups_80x24(snap_compare):
    assert snap_compare(make_app(REBALANCE), terminal_size=(80, 24), run_before=_groups())


def test_groups_200x50(snap_compare):
    assert snap_compare(make_app(REBALANCE), terminal_size=(200, 50), run_before=_groups())


def test_group_drill_down_80x24(snap_compare):
    assert snap_compare(make_app(REBALANCE), terminal_size=(80, 24),
                        run_before=_groups("enter", "down"))


def test_group_drill_down_200x50(snap_compare):
    assert snap_compare(make_app(REBALANCE), terminal_size=(200, 50),
                        run_before=_groups("enter", "down"))
