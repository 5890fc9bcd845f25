"""The Groups view (key 7, issue 15 part 2): the consumer-group analysis of the capture, the
drill-down of one group (members, rebalances, last commits) and the jump from a rebalance or
a commit to the exchanges it was read from, driven with Textual's Pilot on the real
``librdkafka_rebalance`` capture (two classic members, five rebalances; docs/groups.md)."""

from __future__ import annotations

from kafkasniff.groups.analysis import GROUP_APIS
from kafkasniff.tui.panes import ExchangesPane, GroupScreen, GroupsPane
from kafkasniff.tui.source import DataSource, ThreadedSource
from tests.conftest import CAPTURES

from .conftest import make_app, screen_text, wait_for, wait_loaded

REBALANCE = CAPTURES / "librdkafka_rebalance.pcap"
GROUP = "ks-rebal-group"
SIZE = (160, 45)


async def _loaded(pilot):
    await wait_loaded(pilot)
    app = pilot.app
    await wait_for(pilot, lambda: app.groups is not None)
    await pilot.press("7")
    await pilot.pause()
    return app.query_one("#groups-pane", GroupsPane)


async def _settled(pilot):
    pane = pilot.app.query_one("#exchanges-pane", ExchangesPane)
    await wait_for(pilot, lambda: not pane._busy)
    await pilot.pause()
    return pane


def _keys(app, pane) -> set[tuple[int, int, int]]:
    """(conn_id, correlation_id, ts_ns) of the rows the Exchanges view shows."""
    c = app.store.columns
    return {(c["conn"][r], c["corr"][r], c["ts"][r]) for r in pane.view}


async def test_groups_table():
    """Key 7 shows one row per group with the analysis' numbers; s sorts, r reverses."""
    app = make_app(REBALANCE)
    async with app.run_test(size=SIZE) as pilot:
        pane = await _loaded(pilot)
        assert app.focused is pane.table
        m = pane.table.model
        assert [g.group_id for g in m.rows] == [GROUP]
        cells = m.cells(0)
        assert cells[:6] == (GROUP, "classic", "127.0.0.1:36045", "2", "5", "5")
        assert cells[6] == "5002.391ms"                # the longest rebalance (#3), ms
        assert cells[7] == "0.113ms"                   # the last one (#5, leave)
        assert cells[8] == "1"                       # one OffsetCommit request
        assert cells[9] == ("REBALANCE_IN_PROGRESS×4", "error")
        text = screen_text(app)
        assert "1 group, 5 rebalances" in text and "7 Groups" in text
        await pilot.press("s")
        await pilot.pause()
        await pilot.press("enter")          # the first sortable column: group id
        await pilot.pause()
        assert pane.table.sort_key == "group_id" and not pane.table.sort_reverse
        await pilot.press("r")
        await pilot.pause()
        assert pane.table.sort_reverse


async def test_group_drill_down():
    """Enter on a group: its members (ids, instance id, client id, host, assignment), its
    five rebalances (trigger, duration, the assignment after the one under the cursor) and
    its commits, newest first; Esc goes back to the table."""
    app = make_app(REBALANCE)
    async with app.run_test(size=SIZE) as pilot:
        await _loaded(pilot)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, GroupScreen))
        await pilot.pause()
        screen = app.screen
        g = screen.group
        assert g.group_id == GROUP
        members = screen.query_one("#gs-members").model
        assert [members.cells(i)[:4] for i in range(len(members))] == [
            ("0x7ff718008b00", "-", "ks-rebal-a", "127.0.0.1"),
            ("0x7ff71800a420", "ks-rebal-b-static", "ks-rebal-b", "127.0.0.1")]
        assert members.cells(1)[5] == ("11:40:49.641571 session_timeout", "warning")
        assert members.cells(0)[7] == "ks-rebal[0,1,2,3]"
        rebal = screen.query_one("#gs-rebalances")
        assert app.focused is rebal
        triggers = [rebal.model.cells(i)[4] for i in range(len(rebal.model))]
        assert [t[0] if isinstance(t, tuple) else t for t in triggers] == [
            "join 0x7ff718008b00", "join 0x7ff71800a420",
            "error REBALANCE_IN_PROGRESS 0x7ff71800a420", "session_timeout 0x7ff71800a420",
            "leave 0x7ff718008b00"]
        await pilot.press("down")
        await pilot.pause()
        assignment = str(screen.query_one("#gs-assignment").render())
        assert "#2 assignment after" in assignment
        assert "0x7ff718008b00: ks-rebal[0,1]" in assignment
        assert "0x7ff71800a420: ks-rebal[2,3]" in assignment
        commits = screen.query_one("#gs-commits").model
        assert len(commits) == 4
        assert sorted(commits.cells(i)[2:6] for i in range(4)) == [
            (str(p), "2", "0.259ms", "0") for p in (0, 1, 2, 3)]   # partition offset lat lag
        text = screen_text(app)
        assert "Rebalances (5)" in text and "Members (2)" in text
        await pilot.press("tab")                # rebalances -> commits
        await pilot.pause()
        assert app.focused is screen.query_one("#gs-commits")
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, GroupScreen)
        assert app.query_one("#tabs").active == "groups"


async def test_rebalance_jumps_to_its_exchanges():
    """Enter on a rebalance shows exactly the exchanges it was read from (its
    ExchangeRefs) in the Exchanges view; c clears; Enter on a commit shows its
    OffsetCommit."""
    app = make_app(REBALANCE)
    async with app.run_test(size=SIZE) as pilot:
        await _loaded(pilot)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, GroupScreen))
        await pilot.pause()
        g = app.screen.group
        await pilot.press("down")                   # rebalance #2
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, GroupScreen)
        assert app.query_one("#tabs").active == "exchanges"
        pane = await _settled(pilot)
        refs = g.rebalances[1].exchanges
        assert len(refs) > 2
        want = {(r.conn_id, r.correlation_id, r.ts_ns) for r in refs}
        assert _keys(app, pane) == want
        assert len(pane.view) == len(want) < len(app.store)
        assert {app.store.row(r).api_key for r in pane.view} <= GROUP_APIS
        assert f"exchanges of rebalance #2 of {GROUP}" in screen_text(app)
        await pilot.press("c")
        pane = await _settled(pilot)
        assert len(pane.view) == len(app.store) and pane.refs is None

        await pilot.press("7")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, GroupScreen))
        await pilot.press("tab")                    # the commits
        await pilot.press("enter")
        await pilot.pause()
        pane = await _settled(pilot)
        assert len(pane.view) == 1
        assert app.store.row(pane.view[0]).api_name == "OffsetCommit"
        c = g.commits[0].exchange
        assert _keys(app, pane) == {(c.conn_id, c.correlation_id, c.ts_ns)}


class _NoGroups(ThreadedSource):
    """A live-like source without a groups analysis."""

    live = True

    def _run(self) -> None:
        self._stop.wait()


async def test_groups_not_available_without_source_support():
    """A source without ``has_groups`` (the live TUI) says so instead of an empty table."""
    from kafkasniff.tui.app import KafkaSniffApp

    assert DataSource.has_groups is False
    app = KafkaSniffApp(_NoGroups())
    async with app.run_test(size=(100, 24)) as pilot:
        await pilot.pause()
        await pilot.press("7")
        await pilot.pause()
        assert "groups: not available in live mode" in screen_text(app)
