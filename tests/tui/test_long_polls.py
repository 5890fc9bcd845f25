"""Long-polls in the TUI (issue 15 part 1; docs/long-polls.md): the store keeps a flag per
row, the filter selects or hides them, the Exchanges table marks their latency, the summary
tables count them apart from the percentiles, the detail names the rule. On the real
``librdkafka_errors_latency`` capture, whose idle consumers' Fetches wait ``MaxWaitMs``."""

from __future__ import annotations

from kafkasniff.output.filters import Filter
from kafkasniff.tui.aggregates import Aggregates
from kafkasniff.tui.models import (
    CONN_COLUMNS,
    EXCHANGE_COLUMNS,
    ExchangeModel,
    conn_cells,
    stat_cells,
    stat_columns,
)
from kafkasniff.tui.screens import DetailScreen
from tests.conftest import decode_capture

from .conftest import ERR, loaded_store, make_app, screen_text, wait_for, wait_loaded


def _pipeline():
    exchanges = decode_capture(ERR).exchanges
    lp = [ex for ex in exchanges if ex.long_poll]
    assert len(lp) > 10 and len(lp) < len(exchanges)
    return exchanges, lp


def test_store_keeps_the_long_poll_flag_and_filters_on_it():
    exchanges, lp = _pipeline()
    src, store = loaded_store(ERR)
    try:
        assert len(store) == len(exchanges)
        flagged = [r for r in range(len(store)) if store.row(r).long_poll]
        want = {(ex.conn_id, ex.correlation_id, ex.ts_ns) for ex in lp}
        c = store.columns
        assert {(c["conn"][r], c["corr"][r], c["ts"][r]) for r in flagged} == want
        only = store.filter_rows(store.compile(Filter(long_poll=True)), 0, len(store))
        assert list(only) == flagged
        hidden = store.filter_rows(store.compile(Filter(long_poll=False, min_latency_ms=50)),
                                   0, len(store))
        assert hidden and not set(hidden) & set(flagged)
        # the Exchanges table marks a long-poll in its Status cell
        k = [col.key for col in EXCHANGE_COLUMNS].index("status")
        cells = [ExchangeModel(store, only).cells(i)[k] for i in range(len(only))]
        assert {text for text, _ in cells} == {"paired lp"}
        assert {style for text, style in cells} <= {"dim", "error"}
        assert all(ExchangeModel(store, hidden).cells(i)[k][0] == "paired"
                   for i in range(len(hidden)))
    finally:
        src.stop()


def test_summary_tables_count_long_polls_apart():
    """The per-API row of Fetch: LP counts the long-polls, LP p50 is theirs, and the
    percentiles and max are those of the served fetches; connections count them too and
    their max latency is a served exchange's."""
    exchanges, lp = _pipeline()
    agg = Aggregates()
    for ex in exchanges:
        agg.add(ex)
    snap = agg.snapshot()
    fetch = next(r for r in snap.apis if r.key == "Fetch")
    n_lp = sum(1 for ex in lp if ex.api_name == "Fetch")
    assert fetch.long_polls == n_lp > 0 and snap.total.long_polls == len(lp)
    served = [ex.latency_ns for ex in exchanges if ex.api_name == "Fetch"
              and not ex.long_poll and ex.latency_ns is not None and ex.status == "paired"]
    assert fetch.max_ns == max(served)
    assert fetch.long_poll_p50_ns is not None and fetch.long_poll_p50_ns > fetch.p50_ns
    keys = [c.key for c in stat_columns("API")]
    cells = stat_cells(fetch)
    assert cells[keys.index("long_polls")] == (str(n_lp), "dim")
    assert cells[keys.index("long_poll_p50")][0].endswith("ms")
    assert sum(c.long_polls for c in snap.connections) == len(lp)
    lp_conn = next(c for c in snap.connections if c.long_polls)
    assert lp_conn.max_latency_ns is None or lp_conn.max_latency_ns < max(
        ex.latency_ns for ex in lp if ex.conn_id == lp_conn.conn_id)
    ck = [c.key for c in CONN_COLUMNS]
    assert conn_cells(lp_conn)[ck.index("long_polls")] == (str(lp_conn.long_polls), "dim")


async def test_overview_and_detail_show_long_polls():
    """The Overview's totals say how many long-polls are apart; the detail of one names its
    rule (fetch_max_wait)."""
    app = make_app(ERR)
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_loaded(pilot)
        await pilot.press("1")
        await pilot.pause()
        _, lp = _pipeline()
        assert f"({len(lp)} long-polls apart, p50" in screen_text(app)
        await pilot.press("2")
        pane = app.exchanges_pane()
        pane.set_filter(Filter(apis=("Fetch",), long_poll=True))
        await wait_for(pilot, lambda: not pane._busy)
        await pilot.pause()
        assert len(pane.view) == sum(1 for ex in lp if ex.api_name == "Fetch")
        assert "filter: api=Fetch long-polls" in screen_text(app)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen)
                       and app.screen.detail is not None)
        await pilot.pause()
        assert app.screen.detail.exchange.long_poll_rule == "fetch_max_wait"
        assert "long_poll: yes (fetch_max_wait: kept out of the latency percentiles)" in \
            screen_text(app)


async def test_filter_dialog_keeps_and_sets_the_long_poll_criterion():
    """The filter dialog (f) shows the current long-poll criterion and applies it: "no
    long-polls" with a minimum latency leaves the exchanges slow without waiting by
    design."""
    from textual.widgets import Select

    from kafkasniff.tui.screens import FilterScreen

    app = make_app(ERR)
    async with app.run_test(size=(120, 50)) as pilot:
        await wait_loaded(pilot)
        pane = app.exchanges_pane()
        pane.set_filter(Filter(min_latency_ms=50, long_poll=False))
        await wait_for(pilot, lambda: not pane._busy)
        n_served = len(pane.view)
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FilterScreen))
        assert app.screen.query_one("#f-long-poll", Select).value == "none"
        app.screen.query_one("#f-long-poll", Select).value = "only"
        await pilot.pause()
        await pilot.press("enter")                # in the API input: apply
        await wait_for(pilot, lambda: not isinstance(app.screen, FilterScreen))
        await wait_for(pilot, lambda: not pane._busy)
        assert pane.filter == Filter(min_latency_ms=50, long_poll=True)
        assert pane.view and all(app.store.row(r).long_poll for r in pane.view)
        assert n_served > 0
