"""The kafkasniff Textual app: dashboards and drill-down over a :class:`DataSource`.

Views (tabs, keys 1-6): Overview, Exchanges, Connections, Clients, Topics, Issues; the
detail of an exchange is a screen of its own (Enter). The data comes from one
:class:`~kafkasniff.tui.source.DataSource`; its batches are ingested on the UI thread
(``array.extend`` of compact columns, a few times per second), everything heavy (decoding,
finding frames again, filtering and sorting a million rows, saving) runs in threads.
"""

from __future__ import annotations

import json
import os
import threading
import time
from array import array
from dataclasses import replace
from itertools import chain

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import (Footer, Input, Label, Sparkline, Static, TabbedContent,
                             TabPane)

from kafkasniff.tui.aggregates import HIST_EDGES_NS, ClientRow, Snapshot
from kafkasniff.tui.detail import Detail
from kafkasniff.tui.models import (CLIENT_COLUMNS, CLIENT_SORT, CONN_COLUMNS, CONN_SORT,
                                   EXCHANGE_COLUMNS, ISSUE_COLUMNS, STAT_SORT, TOPIC_COLUMNS,
                                   TOPIC_SORT, ExchangeModel, IssueModel, RowsModel,
                                   client_cells, conn_cells, fmt_bytes, fmt_count, fmt_ms,
                                   fmt_rate, stat_cells, stat_columns, topic_cells)
from kafkasniff.tui.screens import ChoiceScreen, DetailScreen, FilterScreen, HelpScreen, SaveScreen
from kafkasniff.tui.source import DataSource, Progress
from kafkasniff.tui.store import SORT_KEYS, Filter, RowInfo, SummaryStore
from kafkasniff.tui.widgets import VirtualTable

#: GIL switch interval while the app runs (seconds; CPython's default is 0.005).
SWITCH_INTERVAL_S = 0.001


def configure_process() -> None:
    """Process settings for a responsive UI next to a decoding thread (``kafkasniff tui``
    calls it; tests do not): the UI thread waits at most 1 ms (not 5) for the GIL when it has
    work, which costs the decoder nothing while the UI is idle; objects alive at start-up
    (definitions, compiled decoders, Textual) are moved out of the garbage collector's scans
    (``gc.freeze``), shortening the full collections that pause both threads."""
    import gc
    import sys

    sys.setswitchinterval(SWITCH_INTERVAL_S)
    gc.collect()
    gc.freeze()


class DataReady(Message):
    """The data source has a batch (posted from its thread)."""


def bar(fraction: float | None, width: int = 20) -> str:
    """A text progress bar."""
    if fraction is None:
        return "▕" + "░" * width + "▏"
    k = int(round(fraction * width))
    return "▕" + "█" * k + "░" * (width - k) + "▏"


# ----------------------------------------------------------------------------- snapshot tables

def _row_key(row):
    """What identifies a snapshot row from one snapshot to the next (the API, broker,
    client_id, connection id or topic)."""
    return row.stats.key if type(row) is ClientRow else row[0]


def set_rows(table: VirtualTable, rows, cells, sort_keys: dict) -> None:
    """Show snapshot ``rows`` in ``table`` (a :class:`RowsModel` sorted as the table is),
    keeping the cursor on the row it was on."""
    model = RowsModel(rows, cells, sort_keys)
    model.sort(table.sort_key, table.sort_reverse)
    old = table.model
    key = None
    if isinstance(old, RowsModel) and 0 <= table.cursor < len(old):
        key = _row_key(old.rows[table.cursor])
    table.set_model(model)
    if key is not None:
        for i, r in enumerate(model.rows):
            if _row_key(r) == key:
                table.set_reactive(VirtualTable.cursor, i)
                break


def sort_on_header(event: VirtualTable.HeaderClicked, ascending_first: tuple = ()) -> None:
    """Sort a snapshot table by the clicked column: descending first (ascending for the
    columns of ``ascending_first``), the same column again reverses."""
    t = event.table
    t.sort_reverse = not t.sort_reverse if t.sort_key == event.key else \
        event.key not in ascending_first
    t.sort_key = event.key
    if isinstance(t.model, RowsModel):
        t.model.sort(t.sort_key, t.sort_reverse)
        t.rows_changed()


# ------------------------------------------------------------------------------------ overview

class OverviewPane(VerticalScroll):
    """Per-API table, request rate and p99 sparklines, brokers, clients, issues, histogram."""

    BINDINGS = [Binding("enter", "open_api", "API's exchanges", show=False)]

    DEFAULT_CSS = """
    OverviewPane { padding: 0 1; }
    OverviewPane #ov-totals { height: auto; margin-bottom: 1; }
    OverviewPane .spark-box { height: 4; width: 1fr; margin-right: 2; }
    OverviewPane Sparkline { height: 2; }
    OverviewPane #ov-sparks { height: 4; }
    OverviewPane .section { text-style: bold; color: $accent; height: 1; }
    OverviewPane #ov-apis { height: 8; }
    OverviewPane #ov-panels { height: 9; margin-top: 1; }
    OverviewPane #ov-panels > Vertical { width: 1fr; margin-right: 1; }
    OverviewPane #ov-panels VirtualTable { height: 1fr; }
    OverviewPane #ov-bottom { height: 16; margin-top: 1; }
    OverviewPane #ov-issues-box { width: 40; margin-right: 1; }
    OverviewPane #ov-hist-box { width: 1fr; }
    """

    def compose(self) -> ComposeResult:
        from textual_plotext import PlotextPlot

        yield Static("waiting for data…", id="ov-totals")
        with Horizontal(id="ov-sparks"):
            with Vertical(classes="spark-box"):
                yield Label("requests per bucket", id="sp-rate-label")
                yield Sparkline([], id="sp-rate")
            with Vertical(classes="spark-box"):
                yield Label("p99 latency per bucket", id="sp-p99-label")
                yield Sparkline([], id="sp-p99")
        yield Label("APIs (Enter: their exchanges; the histogram follows the cursor)",
                    classes="section")
        yield VirtualTable(stat_columns("API", 22), id="ov-apis")
        with Horizontal(id="ov-panels"):
            with Vertical():
                yield Label("Brokers", classes="section")
                yield VirtualTable(stat_columns("Broker", 21)[:6], id="ov-brokers")
            with Vertical():
                yield Label("Clients (client_id)", classes="section")
                yield VirtualTable(stat_columns("Client id", 18)[:6], id="ov-clients")
        with Horizontal(id="ov-bottom"):
            with Vertical(id="ov-issues-box"):
                yield Label("Issues", classes="section")
                yield Static("none", id="ov-issues")
            with Vertical(id="ov-hist-box"):
                yield Label("Latency histogram", classes="section", id="ov-hist-title")
                yield PlotextPlot(id="ov-hist")

    def on_mount(self) -> None:
        self.snapshot = Snapshot()
        self._hist_api: str | None = None

    def update(self, snap: Snapshot) -> None:
        """Show a new snapshot (totals, sparklines, tables, issues, histogram)."""
        self.snapshot = snap
        t = snap.total
        if t is None:
            return
        pipe = snap.pipeline
        span = snap.span_s
        issues = sum(n for _, n in snap.issues)
        sev = dict(snap.severities)
        text = Text()
        text.append(f"{fmt_count(snap.exchanges)} exchanges", style="bold")
        text.append(f" in {span:,.1f} s of capture ({fmt_rate(t.rate_per_s)})   ")
        text.append(f"errors {fmt_count(t.error_exchanges)}",
                    style="bold red" if t.error_exchanges else "")
        text.append(f"   throttled {fmt_count(t.throttled)}",
                    style="bold yellow" if t.throttled else "")
        text.append(f"   issues {fmt_count(issues)}",
                    style="bold red" if sev.get("error") else "bold yellow"
                    if sev.get("warning") else "")
        text.append(f"\np50 {fmt_ms(t.p50_ns)}  p99 {fmt_ms(t.p99_ns)}  max {fmt_ms(t.max_ns)}"
                    f"   bytes {fmt_bytes(t.request_bytes)} → / {fmt_bytes(t.response_bytes)} ←"
                    f"   {fmt_count(pipe.get('packets', 0))} packets, "
                    f"{fmt_count(pipe.get('kafka_connections', 0))} Kafka connections")
        self.query_one("#ov-totals", Static).update(text)
        tl = snap.timeline
        if tl:
            width = tl[0].width_ns / 1e9
            counts = [b.count for b in tl]
            p99 = [(b.p99_ns or 0) / 1e6 for b in tl]
            self.query_one("#sp-rate", Sparkline).data = counts
            self.query_one("#sp-p99", Sparkline).data = p99
            self.query_one("#sp-rate-label", Label).update(
                f"requests per {width:g} s  (max {max(counts):,})")
            self.query_one("#sp-p99-label", Label).update(
                f"p99 latency per {width:g} s  (max {max(p99):,.1f} ms)")
        apis = self.query_one("#ov-apis", VirtualTable)
        set_rows(apis, snap.apis, stat_cells, STAT_SORT)
        apis.styles.height = min(len(snap.apis) + 1, 16) if snap.apis else 2
        set_rows(self.query_one("#ov-brokers", VirtualTable), snap.brokers, stat_cells, STAT_SORT)
        set_rows(self.query_one("#ov-clients", VirtualTable), [c.stats for c in snap.clients],
                 stat_cells, STAT_SORT)
        itext = Text()
        for kind, n in snap.issues:
            itext.append(f"{n:>8,}  ", style="bold")
            itext.append(f"{kind}\n")
        if not snap.issues:
            itext.append("none")
        self.query_one("#ov-issues", Static).update(itext)
        self._draw_hist()

    def selected_api(self) -> str | None:
        """The API name under the cursor of the APIs table (``None``: empty table)."""
        t = self.query_one("#ov-apis", VirtualTable)
        if isinstance(t.model, RowsModel) and 0 <= t.cursor < len(t.model):
            return t.model.rows[t.cursor].key
        return None

    @on(VirtualTable.Highlighted, "#ov-apis")
    def _api_highlighted(self) -> None:
        self._draw_hist()

    @on(VirtualTable.HeaderClicked)
    def _sort(self, event: VirtualTable.HeaderClicked) -> None:
        sort_on_header(event, ascending_first=("key",))

    def _draw_hist(self) -> None:
        from textual_plotext import PlotextPlot

        api = self.selected_api()
        snap = self.snapshot
        counts = snap.histograms.get(api) if api else None
        plot = self.query_one("#ov-hist", PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        self.query_one("#ov-hist-title", Label).update(
            f"Latency histogram: {api or '-'} (paired exchanges)")
        if counts:
            nz = [i for i, c in enumerate(counts) if c]
            lo, hi = max(0, nz[0] - 1), min(len(counts), nz[-1] + 2)
            labels = [_edge(HIST_EDGES_NS[i]) for i in range(lo, hi)]
            xs = list(range(len(labels)))
            # numeric positions and explicit ticks: string categories make plotext's tick
            # layout depend on set order (hash seed), i.e. change from run to run
            plt.bar(xs, list(counts[lo:hi]), width=0.8)
            step = max(1, len(xs) // 8)
            plt.xticks(xs[::step], labels[::step])
            plt.xlabel("latency ≥")
        plt.title("")
        plot.refresh()

    def action_open_api(self) -> None:
        api = self.selected_api()
        if api:
            self.app.jump_to_exchanges(Filter(apis=(api,)))

    @on(VirtualTable.Selected, "#ov-apis")
    def _api_selected(self) -> None:
        self.action_open_api()


def _edge(ns: int) -> str:
    if ns < 1_000_000:
        return f"{ns / 1000:.0f}µs"
    if ns < 1_000_000_000:
        return f"{ns / 1e6:.3g}ms"
    return f"{ns / 1e9:.3g}s"


# ------------------------------------------------------------------------------------ exchanges

class ExchangesPane(Vertical):
    """The virtual table of exchanges with filters, sort, incremental search, follow mode."""

    BINDINGS = [
        Binding("f", "edit_filter", "Filter"),
        Binding("e", "toggle_errors", "Errors only"),
        Binding("i", "toggle_issues", "Issues only", show=False),
        Binding("a", "filter_api", "This API", show=False),
        Binding("c", "clear_filter", "Clear", show=False),
        Binding("s", "choose_sort", "Sort"),
        Binding("r", "reverse_sort", "Reverse", show=False),
        Binding("slash", "search", "Search"),
        Binding("n", "search_next(1)", "Next match", show=False),
        Binding("N", "search_next(-1)", "Prev match", show=False),
        Binding("F", "toggle_follow", "Follow"),
        Binding("w", "save", "Save view"),
        Binding("y", "copy_json", "Copy JSON"),
    ]

    DEFAULT_CSS = """
    ExchangesPane #ex-bar { height: 1; background: $panel; padding: 0 1; }
    ExchangesPane #ex-search { dock: bottom; display: none; height: 3; }
    ExchangesPane #ex-search.visible { display: block; }
    """

    def compose(self) -> ComposeResult:
        yield Static("", id="ex-bar")
        yield VirtualTable(EXCHANGE_COLUMNS, id="ex-table")
        yield Input(placeholder="search: API, client, topic, error, issue, corr id … "
                                "(Enter keeps, Esc cancels)", id="ex-search")

    def on_mount(self) -> None:
        self.store: SummaryStore = self.app.store
        self.filter = Filter()
        self.compiled = None
        self.view = array("i")
        self.sort_key: str | None = None
        self.sort_reverse = False
        self.follow = bool(self.app.source.live)
        self._last_filter = self.filter
        self.search_text = ""
        self._search_origin = 0
        self._sort_dirty = False
        self._busy = ""
        self.table = self.query_one("#ex-table", VirtualTable)
        self.table.set_model(ExchangeModel(self.store, self.view))
        self.set_interval(1.0, self._resort_if_dirty)
        self.update_bar()

    # -------------------------------------------------------------- data
    def ingest(self, new: range) -> None:
        """New rows arrived in the store."""
        if not len(new):
            return
        add = self.store.filter_rows(self.compiled, new.start, new.stop)
        if add:
            self.view.extend(add)
            if self.sort_key is not None:
                self._sort_dirty = True
            self.table.rows_changed()
            if self.follow:
                self.table.move_to(len(self.view) - 1)
        self.update_bar()

    def update_bar(self) -> None:
        """Redraw the line above the table (counts, filter, sort, search, follow, busy)."""
        total = len(self.store)
        shown = len(self.view)
        parts = [f"{shown:,} of {total:,} exchanges" if self.filter.active else
                 f"{total:,} exchanges"]
        if self.filter.active:
            parts.append("filter: " + self.filter.describe())
        if self.sort_key:
            parts.append(f"sort: {self.sort_key} {'▼' if self.sort_reverse else '▲'}")
        if self.search_text:
            parts.append(f"search: {self.search_text!r}")
        if self.follow:
            parts.append("FOLLOW")
        if self._busy:
            parts.append(self._busy)
        self.query_one("#ex-bar", Static).update("  │  ".join(parts))

    def current_row(self) -> int | None:
        """The store row under the cursor (``None``: empty view)."""
        c = self.table.cursor
        return self.view[c] if 0 <= c < len(self.view) else None

    def set_filter(self, f: Filter, keep_row: int | None = None) -> None:
        """Show the rows passing ``f`` (computed in a thread); the cursor stays on store row
        ``keep_row`` (default: the current row) when it passes."""
        self.filter = f
        self.compiled = self.store.compile(f)
        self._recompute(keep_row if keep_row is not None else self.current_row())

    def _recompute(self, keep_row: int | None) -> None:
        """Filter and sort the whole store again (in a thread)."""
        self._set_busy("sorting…" if self.filter == self._last_filter else "filtering…")
        self._last_filter = self.filter
        self._recompute_worker(keep_row)

    @work(thread=True, exclusive=True, group="exchanges-view")
    def _recompute_worker(self, keep_row: int | None) -> None:
        """Filter and sort the whole store in a thread (a million rows take a moment)."""
        store = self.store
        compiled = self.compiled
        n = len(store)
        try:
            view = store.filter_rows(compiled, 0, n)
            if self.sort_key is not None:
                view = store.sort(view, self.sort_key, self.sort_reverse)
        except Exception as exc:  # noqa: BLE001 - a bug must not take the app down
            self.app.call_from_thread(self.app.notify, f"filter failed: {exc}",
                                      severity="error")
            self.app.call_from_thread(self._set_busy, "")
            return
        self.app.call_from_thread(self._install, view, n, compiled, keep_row)

    def _install(self, view: array, n: int, compiled, keep_row: int | None) -> None:
        if compiled is not self.compiled:
            return  # a newer filter is being computed
        late = n < len(self.store)        # rows arrived while computing: appended unsorted
        if late:
            view.extend(self.store.filter_rows(compiled, n, len(self.store)))
        self.view = view
        self._sort_dirty = late and self.sort_key is not None
        self._busy = ""
        cursor = 0
        if keep_row is not None:
            try:
                cursor = view.index(keep_row)
            except ValueError:
                cursor = 0
        if self.follow:
            cursor = len(view) - 1
        self.table.set_model(ExchangeModel(self.store, view), cursor=cursor)
        self.update_bar()

    def _set_busy(self, text: str) -> None:
        self._busy = text
        self.update_bar()

    def _resort_if_dirty(self) -> None:
        if self._sort_dirty:
            self._sort_dirty = False
            self._recompute(self.current_row())

    def sort_by(self, key: str, reverse: bool) -> None:
        """Sort the view by one of :data:`~kafkasniff.tui.store.SORT_KEYS` (in a thread)."""
        self.sort_key, self.sort_reverse = key, reverse
        self.table.sort_key, self.table.sort_reverse = key, reverse
        self._recompute(self.current_row())

    # -------------------------------------------------------------- actions
    def action_edit_filter(self) -> None:
        apis = sorted({n for n in self.store.tables.names.items if n})

        def done(f: Filter | None) -> None:
            if f is not None:
                self.set_filter(f)
            self.table.focus()
        self.app.push_screen(FilterScreen(self.filter, apis), done)

    def action_toggle_errors(self) -> None:
        self.set_filter(replace(self.filter, errors_only=not self.filter.errors_only))

    def action_toggle_issues(self) -> None:
        self.set_filter(replace(self.filter, issues_only=not self.filter.issues_only))

    def action_filter_api(self) -> None:
        row = self.current_row()
        if self.filter.apis:
            self.set_filter(replace(self.filter, apis=()), keep_row=row)
        elif row is not None:
            info = self.store.row(row)
            self.set_filter(replace(self.filter, apis=(info.api_name,)), keep_row=row)

    def action_clear_filter(self) -> None:
        self.set_filter(Filter())

    def action_choose_sort(self) -> None:
        labels = {c.key: c.label for c in EXCHANGE_COLUMNS}
        opts = [(k, labels.get(k, "Response bytes")) for k in SORT_KEYS
                if k in labels or k == "resp_bytes"]
        opts.append(("", "(capture order)"))

        def done(key: str | None) -> None:
            self.table.focus()
            if key is None:
                return
            if key == "":
                self.sort_key = None
                self.table.sort_key = None
                self._recompute(self.current_row())
                return
            reverse = (not self.sort_reverse) if key == self.sort_key else \
                key in ("latency", "bytes", "resp_bytes", "throttle", "records", "errors",
                        "issues")
            self.sort_by(key, reverse)
        self.app.push_screen(ChoiceScreen("Sort exchanges by (again: reverse)", opts,
                                          self.sort_key), done)

    def action_reverse_sort(self) -> None:
        if self.sort_key is not None:
            self.sort_by(self.sort_key, not self.sort_reverse)

    @on(VirtualTable.HeaderClicked, "#ex-table")
    def _header(self, event: VirtualTable.HeaderClicked) -> None:
        key = event.key
        if key not in SORT_KEYS:
            return
        reverse = not self.sort_reverse if key == self.sort_key else key in ("latency", "bytes")
        self.sort_by(key, reverse)

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow
        if self.follow and len(self.view):
            self.table.move_to(len(self.view) - 1)
        self.update_bar()

    def action_search(self) -> None:
        inp = self.query_one("#ex-search", Input)
        self._search_origin = self.table.cursor
        inp.add_class("visible")
        inp.value = self.search_text
        inp.focus()

    @on(Input.Changed, "#ex-search")
    def _search_changed(self, event: Input.Changed) -> None:
        self.search_text = event.value
        if event.value.strip():
            self._find(self._search_origin, 1)
        self.update_bar()

    @on(Input.Submitted, "#ex-search")
    def _search_done(self) -> None:
        self._close_search()

    def on_key(self, event) -> None:
        inp = self.query_one("#ex-search", Input)
        if event.key == "escape" and inp.has_focus:
            event.stop()
            self.table.move_to(self._search_origin)
            self.search_text = ""
            self._close_search()

    def _close_search(self) -> None:
        inp = self.query_one("#ex-search", Input)
        inp.remove_class("visible")
        self.table.focus()
        self.update_bar()

    def action_search_next(self, direction: int) -> None:
        if self.search_text.strip():
            self._find(self.table.cursor + direction, direction)

    #: views longer than this are searched in a thread (the UI stays responsive)
    SEARCH_INLINE_ROWS = 100_000

    def _find(self, start: int, direction: int) -> None:
        """Move the cursor to the first match from view index ``start`` (wrapping)."""
        if len(self.view) <= self.SEARCH_INLINE_ROWS:
            self._found(self._scan(self.view, self.search_text, start, direction),
                        self.search_text)
        else:
            self._scan_worker(self.view, self.search_text, start, direction)

    def _scan(self, view: array, text: str, start: int, direction: int) -> int | None:
        n = len(view)
        if not n:
            return None
        match = self.store.search_matcher(text)
        start = max(0, min(start, n - 1)) if direction > 0 or start >= 0 else n - 1
        order = chain(range(start, n), range(0, start)) if direction > 0 else \
            chain(range(start, -1, -1), range(n - 1, start, -1))
        for k in order:
            if match(view[k]):
                return k
        return None

    @work(thread=True, exclusive=True, group="search")
    def _scan_worker(self, view: array, text: str, start: int, direction: int) -> None:
        k = self._scan(view, text, start, direction)
        self.app.call_from_thread(self._found, k, text)

    def _found(self, k: int | None, text: str) -> None:
        if text != self.search_text:
            return          # the search text changed meanwhile
        if k is not None:
            self.table.move_to(k, center=True)
        else:
            self.app.notify(f"no exchange matches {text!r}", severity="warning", timeout=2)

    def action_save(self) -> None:
        self.app.action_save_view()

    def action_copy_json(self) -> None:
        row = self.current_row()
        if row is not None:
            self.app.copy_row_json(row)

    @on(VirtualTable.Selected, "#ex-table")
    def _open(self, event: VirtualTable.Selected) -> None:
        if len(self.view):
            self.app.push_screen(DetailScreen(self.app, self.view, event.index))

    def follow_detail(self, row: int) -> None:
        """The detail screen stepped to another exchange: keep the cursor on it."""
        try:
            self.table.move_to(self.view.index(row))
        except ValueError:
            pass

    def show_row(self, row: int) -> bool:
        """Put the cursor on ``row`` (clearing the filter if the row is hidden by it)."""
        try:
            k = self.view.index(row)
        except ValueError:
            if self.filter.active:
                self.set_filter(Filter(), keep_row=row)
                return True
            return False
        self.table.move_to(k, center=True)
        return True


# ------------------------------------------------------------------------------------ tables

class TablePane(Vertical):
    """A snapshot table (connections, clients, topics) with a one-line hint."""

    DEFAULT_CSS = """
    TablePane > .hint { height: 1; background: $panel; padding: 0 1; }
    """

    def __init__(self, kind: str, columns, cells, sort_keys, hint: str, *, id: str) -> None:
        super().__init__(id=id)
        self.kind = kind
        self.columns = columns
        self.cells = cells
        self.sort_keys = sort_keys
        self.hint = hint

    def compose(self) -> ComposeResult:
        yield Static(self.hint, classes="hint", id=f"{self.kind}-hint")
        yield VirtualTable(self.columns, id=f"{self.kind}-table")

    @property
    def table(self) -> VirtualTable:
        return self.query_one(VirtualTable)

    def update(self, rows, count_text: str = "") -> None:
        """Show snapshot ``rows``; ``count_text`` goes before the hint."""
        set_rows(self.table, rows, self.cells, self.sort_keys)
        self.query_one(".hint", Static).update(f"{count_text}  {self.hint}" if count_text
                                               else self.hint)

    @on(VirtualTable.HeaderClicked)
    def _sort(self, event: VirtualTable.HeaderClicked) -> None:
        sort_on_header(event)

    @on(VirtualTable.Selected)
    def _selected(self, event: VirtualTable.Selected) -> None:
        m = event.table.model
        if isinstance(m, RowsModel) and 0 <= event.index < len(m):
            self.app.open_from_table(self.kind, m.rows[event.index])


class IssuesPane(Vertical):
    """Every issue (attached and standalone); Enter jumps to its exchange."""

    BINDINGS = [Binding("e", "toggle_serious", "Warnings+errors")]

    DEFAULT_CSS = """
    IssuesPane > #is-hint { height: 1; background: $panel; padding: 0 1; }
    IssuesPane > #is-message { height: auto; max-height: 4; background: $panel;
        padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        yield Static("", id="is-hint")
        yield VirtualTable(ISSUE_COLUMNS, id="issues-table")
        yield Static("", id="is-message")

    @on(VirtualTable.Highlighted, "#issues-table")
    def _highlighted(self, event: VirtualTable.Highlighted) -> None:
        self._show_message(event.index)

    def _show_message(self, index: int) -> None:
        """The full text of the issue under the cursor, below the table."""
        model = self.table.model
        if not 0 <= index < len(model):
            self.query_one("#is-message", Static).update("")
            return
        row, iss = model.issue_at(index)
        where = f"{iss.client} → {iss.broker}" if iss.client else "capture"
        extra = [f"field {iss.field_path}"] if iss.field_path else []
        if iss.stream_offset >= 0:
            extra.append(f"stream offset {iss.stream_offset}")
        if iss.frame_offset >= 0:
            extra.append(f"frame offset {iss.frame_offset}")
        text = Text()
        text.append(f"{iss.severity} {iss.kind}", style="bold")
        text.append(f"  {where}  {', '.join(extra)}\n{iss.message}")
        self.query_one("#is-message", Static).update(text)

    def on_mount(self) -> None:
        self.serious_only = False
        self.indices: array | None = None
        self.table = self.query_one(VirtualTable)
        self.table.set_model(IssueModel(self.app.store))
        self._hint()

    def _hint(self) -> None:
        store = self.app.store
        n = len(self.table.model)
        text = f"{n:,} issues" + (" (warnings and errors)" if self.serious_only else "")
        if store.issues_dropped:
            text += f" (+{store.issues_dropped:,} not kept, counted in the overview)"
        self.query_one("#is-hint", Static).update(
            text + "  │  Enter: go to the exchange  │  e: warnings+errors only")

    def refresh_rows(self, start: int) -> None:
        if self.serious_only and self.indices is not None:
            store = self.app.store
            self.indices.extend(k for k in range(start, len(store.issues))
                                if store.issue_severity(k) != "info")
        self.table.rows_changed()
        self._hint()
        self._show_message(self.table.cursor)

    def action_toggle_serious(self) -> None:
        self.serious_only = not self.serious_only
        store = self.app.store
        if self.serious_only:
            self.indices = array("i", (k for k in range(len(store.issues))
                                       if store.issue_severity(k) != "info"))
            self.table.set_model(IssueModel(store, self.indices), cursor=0)
        else:
            self.indices = None
            self.table.set_model(IssueModel(store), cursor=0)
        self._hint()
        self._show_message(self.table.cursor)

    @on(VirtualTable.Selected)
    def _selected(self, event: VirtualTable.Selected) -> None:
        row, issue = self.table.model.issue_at(event.index)
        if row < 0:
            self.app.notify("a standalone issue: it belongs to no exchange", timeout=3)
            return
        self.app.goto_exchange(row)


# ------------------------------------------------------------------------------------ the app

HELP_GLOBAL = [("1 2 3 4 5 6", "Overview, Exchanges, Connections, Clients, Topics, Issues"),
               ("?", "this help"), ("q, ctrl+q", "quit"),
               ("tab / shift+tab", "move the focus (tabs bar, table, inputs)")]
HELP_TABLE = [("↑ ↓ / j k", "move the cursor"), ("PgUp PgDn / space", "page"),
              ("Home End / g G", "first / last row"),
              ("Enter / double click", "open (detail, or the exchanges of this row)"),
              ("click a header", "sort by that column (again: reverse)")]
HELP_EXCHANGES = [("f", "filter dialog: API, client, broker, topic, status, errors, issues, "
                        "min latency"),
                  ("e", "errors only (toggle)"), ("i", "issues only (toggle)"),
                  ("a", "only this row's API (toggle)"), ("c", "clear the filter"),
                  ("s", "sort by a column (same column again: reverse)"),
                  ("r", "reverse the sort"),
                  ("/", "incremental search (Enter keeps, Esc goes back)"),
                  ("n / N", "next / previous match"),
                  ("F", "follow mode: stay on the newest exchange"),
                  ("w", "save the filtered view (JSON Lines or Parquet)"),
                  ("y", "copy the exchange's JSON (clipboard and a file)"),
                  ("Enter", "detail of the exchange")]
HELP_DETAIL = [("↑ ↓ ← → / Enter", "move in the tree, expand and collapse"),
               ("x", "hex view: request / response frame"),
               ("[ ] / p n", "previous / next exchange of the view"),
               ("y", "copy the exchange's JSON"), ("tab", "tree / hex view"),
               ("Esc / q", "back to the table")]
HELP_OTHER = [("Overview: Enter", "the exchanges of the API under the cursor"),
              ("Connections: Enter", "the exchanges of the connection (its two endpoints)"),
              ("Clients: Enter", "the exchanges of that client_id"),
              ("Topics: Enter", "the exchanges touching that topic"),
              ("Issues: Enter", "go to the issue's exchange"),
              ("Issues: e", "warnings and errors only (toggle)")]


class KafkaSniffApp(App):
    """kafkasniff's terminal UI over one data source.

    Args:
        source: a :class:`~kafkasniff.tui.source.DataSource` (not started yet).
        save_dir: where saved views and exchange JSON files go by default.
    """

    TITLE = "kafkasniff"
    ENABLE_COMMAND_PALETTE = False

    CSS = """
    Screen { layout: vertical; }
    #status { height: 1; background: $primary-background; color: $text; padding: 0 1; }
    TabbedContent { height: 1fr; }
    TabbedContent ContentSwitcher { height: 1fr; }
    TabPane { padding: 0; height: 1fr; }
    """

    BINDINGS = [
        Binding("1", "show('overview')", "Overview", show=False),
        Binding("2", "show('exchanges')", "Exchanges", show=False),
        Binding("3", "show('connections')", "Conns", show=False),
        Binding("4", "show('clients')", "Clients", show=False),
        Binding("5", "show('topics')", "Topics", show=False),
        Binding("6", "show('issues')", "Issues", show=False),
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, source: DataSource, *, save_dir: str | None = None,
                 initial_tab: str = "exchanges") -> None:
        super().__init__()
        self.source = source
        self.store = SummaryStore(source.tables)
        self.snapshot = Snapshot()
        self.progress = Progress(live=source.live)
        self.save_dir = save_dir or os.getcwd()
        self.initial_tab = initial_tab
        self._dirty: set[str] = set()
        self._shown: dict[str, object] = {}
        self._issues_seen = 0
        self.saving: threading.Event | None = None
        self.last_saved: str | None = None
        self.ingest_count = 0

    # -------------------------------------------------------------- layout
    def compose(self) -> ComposeResult:
        yield Static("", id="status")
        with TabbedContent(initial=self.initial_tab, id="tabs"):
            with TabPane("1 Overview", id="overview"):
                yield OverviewPane(id="overview-pane")
            with TabPane("2 Exchanges", id="exchanges"):
                yield ExchangesPane(id="exchanges-pane")
            with TabPane("3 Connections", id="connections"):
                yield TablePane("connections", CONN_COLUMNS, conn_cells, CONN_SORT,
                                "Enter: this connection's exchanges  │  click a header to sort",
                                id="connections-pane")
            with TabPane("4 Clients", id="clients"):
                yield TablePane("clients", CLIENT_COLUMNS, client_cells, CLIENT_SORT,
                                "Enter: this client's exchanges  │  click a header to sort",
                                id="clients-pane")
            with TabPane("5 Topics", id="topics"):
                yield TablePane("topics", TOPIC_COLUMNS, topic_cells, TOPIC_SORT,
                                "Enter: exchanges touching this topic  │  produce/fetch: "
                                "record data of Produce requests and Fetch responses",
                                id="topics-pane")
            with TabPane("6 Issues", id="issues"):
                yield IssuesPane(id="issues-pane")
        yield Footer()

    def on_mount(self) -> None:
        self._status()
        self.source.start(self._notify)
        self.call_after_refresh(self._focus_tab, self.initial_tab)

    def _notify(self) -> None:
        self.post_message(DataReady())

    def on_unmount(self) -> None:
        self.source.stop()

    def exchanges_pane(self) -> ExchangesPane:
        """The Exchanges view."""
        return self.query_one("#exchanges-pane", ExchangesPane)

    # -------------------------------------------------------------- data
    def on_data_ready(self, _: DataReady) -> None:
        update = self.source.drain()
        start = len(self.store)
        for chunk in update.chunks:
            self.store.extend(chunk)
        self.ingest_count += 1
        new = range(start, len(self.store))
        if len(new):
            self.exchanges_pane().ingest(new)
        if len(self.store.issues) > self._issues_seen:
            self.query_one("#issues-pane", IssuesPane).refresh_rows(self._issues_seen)
            self._issues_seen = len(self.store.issues)
        if update.snapshot is not None:
            self.snapshot = update.snapshot
            self._dirty.update(("overview", "connections", "clients", "topics"))
            self._refresh_active()
        if update.progress is not None:
            self.progress = update.progress
            if update.progress.error:
                self.notify(f"reading stopped: {update.progress.error}", severity="error",
                            timeout=10)
        self._status()

    def _status(self) -> None:
        p = self.progress
        text = Text()
        text.append("kafkasniff ", style="bold")
        text.append(self.source.title or "")
        text.append("  ")
        if p.live:
            text.append("● live", style="bold green")
        elif p.finished:
            text.append(bar(1.0, 12) + " done ", style="green")
        else:
            frac = p.fraction
            text.append(bar(frac, 12))
            text.append(f" {frac * 100:.0f}% loading " if frac is not None else " loading ")
        text.append(f"  {len(self.store):,} exchanges  {fmt_count(p.packets)} packets")
        n_iss = len(self.store.issues) + self.store.issues_dropped
        if n_iss:
            text.append(f"  {n_iss:,} issues", style="yellow")
        if p.error:
            text.append(f"  error: {p.error}", style="bold red")
        self.query_one("#status", Static).update(text)

    def _refresh_active(self) -> None:
        tab = self.query_one(TabbedContent).active
        if tab not in self._dirty:
            return
        self._dirty.discard(tab)
        snap = self.snapshot
        if tab == "overview":
            self.query_one("#overview-pane", OverviewPane).update(snap)
            return
        rows = {"connections": snap.connections, "clients": snap.clients,
                "topics": snap.topics}.get(tab)
        if rows is None or self._shown.get(tab) is rows:
            return          # partial snapshots reuse these tables: nothing changed
        self._shown[tab] = rows
        what = {"connections": "connections", "clients": "client ids", "topics": "topics"}[tab]
        self.query_one(f"#{tab}-pane", TablePane).update(rows, f"{len(rows):,} {what}")

    @on(TabbedContent.TabActivated)
    def _tab_changed(self, event: TabbedContent.TabActivated) -> None:
        self._refresh_active()
        self._focus_tab(event.pane.id)

    def _focus_tab(self, tab: str) -> None:
        ids = {"overview": "#ov-apis", "exchanges": "#ex-table",
               "connections": "#connections-table", "clients": "#clients-table",
               "topics": "#topics-table", "issues": "#issues-table"}
        try:
            self.query_one(ids[tab]).focus()
        except Exception:  # noqa: BLE001 - not mounted yet
            pass

    # -------------------------------------------------------------- actions
    def action_show(self, tab: str) -> None:
        if len(self.screen_stack) > 1:        # a detail, help or dialog screen is open
            return
        self.query_one(TabbedContent).active = tab
        self._refresh_active()
        self._focus_tab(tab)

    def action_help(self) -> None:
        self.push_screen(HelpScreen([
            ("Everywhere", HELP_GLOBAL), ("Tables", HELP_TABLE),
            ("Exchanges", HELP_EXCHANGES), ("Detail of an exchange", HELP_DETAIL),
            ("Other views", HELP_OTHER)]))

    def jump_to_exchanges(self, f: Filter) -> None:
        """Show the Exchanges view filtered by ``f``."""
        pane = self.exchanges_pane()
        self.query_one(TabbedContent).active = "exchanges"
        pane.set_filter(f, keep_row=None)
        self._focus_tab("exchanges")

    def open_from_table(self, kind: str, row) -> None:
        """Enter on a snapshot row (``kind``: connections, clients, topics): its exchanges."""
        if kind == "connections":
            self.jump_to_exchanges(Filter(client="=" + row.client, broker="=" + row.broker))
        elif kind == "clients":
            self.jump_to_exchanges(Filter(client="=" + row.stats.key
                                          if row.stats.key != "(none)" else ""))
        elif kind == "topics":
            self.jump_to_exchanges(Filter(topic="=" + row.topic))

    def goto_exchange(self, row: int) -> None:
        """Show the Exchanges view with the cursor on store row ``row``."""
        pane = self.exchanges_pane()
        self.query_one(TabbedContent).active = "exchanges"
        self._focus_tab("exchanges")
        pane.show_row(row)

    def action_save_view(self) -> None:
        pane = self.exchanges_pane()
        try:
            import kafkasniff.export.writer  # noqa: F401
            parquet = True
        except Exception:  # noqa: BLE001 - export not available: JSON Lines only
            parquet = False
        stamp = time.strftime("%Y%m%d-%H%M%S")
        default = os.path.join(self.save_dir, f"kafkasniff-view-{stamp}.jsonl")

        def done(result) -> None:
            if result is not None:
                fmt, path = result
                self.save_view(list(pane.view), fmt, path)
        self.push_screen(SaveScreen(len(pane.view), default, parquet), done)

    @work(thread=True, exclusive=True, group="save")
    def save_view(self, rows: list[int], fmt: str, path: str) -> None:
        """Write the full exchanges of ``rows`` (a thread; capture order)."""
        from kafkasniff.output.render import exchange_to_dict, json_default

        cancel = threading.Event()
        self.saving = cancel
        n = 0
        try:
            exchanges = self.source.exchanges(rows, self.store, cancel)
            if fmt == "parquet":
                from kafkasniff.export.writer import ExportSink

                sink = ExportSink(path, file_stem="tui-view", fmt="parquet")
                try:
                    for ex in exchanges:
                        sink.add(ex, capture=self.source.title or "tui")
                        n += 1
                except BaseException:
                    sink.abort()
                    raise
                sink.close()
            else:
                default = json_default()
                with open(path, "w", encoding="utf-8") as f:
                    for ex in exchanges:
                        f.write(json.dumps(exchange_to_dict(ex, convert=False),
                                           ensure_ascii=False, default=default))
                        f.write("\n")
                        n += 1
        except Exception as exc:  # noqa: BLE001 - reported, the app goes on
            self.call_from_thread(self.notify, f"saving failed: {exc}", severity="error",
                                  timeout=8)
            return
        finally:
            self.saving = None
        self.last_saved = path
        self.call_from_thread(self.notify, f"saved {n:,} exchanges to {path}", timeout=6)

    def decode_row(self, info: RowInfo) -> Detail:
        """The full decode of one exchange by the data source (blocking: call it from a
        worker thread). Never raises: a failure is a :class:`Detail` without exchange whose
        note says why, so that a frame the decoders choke on cannot take the app down."""
        try:
            return self.source.detail(info, self.store.row_issues(info.row))
        except Exception as exc:  # noqa: BLE001 - shown, the app goes on
            return Detail(None, {}, f"decoding failed: {type(exc).__name__}: {exc}")

    @work(thread=True, group="copy")
    def copy_row_json(self, row: int) -> None:
        """Decode store row ``row`` (in a thread) and copy its JSON
        (:meth:`copy_exchange_json`)."""
        d = self.decode_row(self.store.row(row))
        if d.exchange is None:
            why = f": {d.note}" if d.note else ""
            self.call_from_thread(self.notify, f"exchange #{row} could not be decoded{why}",
                                  severity="error")
            return
        self.call_from_thread(self.copy_exchange_json, d.exchange, row)

    def copy_exchange_json(self, ex, row: int) -> None:
        """Copy an exchange's JSON (as ``read --json`` writes it, indented) to the clipboard
        (OSC 52) and to a file in the save directory (terminals that ignore OSC 52)."""
        from kafkasniff.output.render import exchange_to_dict, json_default

        text = json.dumps(exchange_to_dict(ex, convert=False), ensure_ascii=False, indent=2,
                          default=json_default())
        self.copy_to_clipboard(text)
        path = os.path.join(self.save_dir, f"kafkasniff-exchange-{row}.json")
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text + "\n")
            where = f" and saved to {path}"
        except OSError as exc:
            where = f" (file not written: {exc})"
        self.last_saved = path
        self.notify(f"exchange #{row} JSON copied to the clipboard{where}", timeout=5)
