"""The Overview view (key 1): totals, request-rate and p99 bars per time bucket (from zero,
with a time axis), the per-API table, brokers and clients panels, issue counters by kind and
the latency histogram of the API under the cursor.

Styles: ``kafkasniff/tui/app.tcss``.
"""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Label, Static

from kafkasniff.output.filters import Filter
from kafkasniff.text import escape_text
from kafkasniff.tui.aggregates import HIST_EDGES_NS, Snapshot
from kafkasniff.tui.models import (
    STAT_PANEL_COLUMNS,
    STAT_SORT,
    RowsModel,
    fmt_bytes,
    fmt_count,
    fmt_ms,
    fmt_rate,
    stat_cells,
    stat_columns,
)
from kafkasniff.tui.panes.tables import choose_sort, reverse_sort, set_rows, sort_on_header
from kafkasniff.tui.widgets import TimeBars, VirtualTable


class OverviewPane(VerticalScroll):
    """Per-API table, request rate and p99 sparklines, brokers, clients, issues, histogram."""

    BINDINGS = [
        Binding("enter", "open_api", "API's exchanges", show=False),
        Binding("s", "choose_sort", "Sort"),
        Binding("r", "reverse_sort", "Reverse", show=False),
        Binding("h", "histogram", "Histogram"),
        Binding("ctrl+down", "scroll_down", "Scroll down", show=False),
        Binding("ctrl+up", "scroll_up", "Scroll up", show=False),
        Binding("ctrl+end", "scroll_end", "Bottom", show=False),
        Binding("ctrl+home", "scroll_home", "Top", show=False),
    ]

    def compose(self) -> ComposeResult:
        from textual_plotext import PlotextPlot

        yield Static("waiting for data…", id="ov-totals")
        with Horizontal(id="ov-sparks"):
            with Vertical(classes="spark-box"):
                yield Label("requests per bucket", id="sp-rate-label")
                yield TimeBars(id="sp-rate")
            with Vertical(classes="spark-box"):
                yield Label("p99 latency per bucket", id="sp-p99-label")
                yield TimeBars(id="sp-p99")
        yield Label("APIs (Enter: their exchanges; the histogram follows the cursor)",
                    classes="section")
        yield VirtualTable(stat_columns("API", 22), id="ov-apis")
        with Horizontal(id="ov-panels"):
            with Vertical():
                yield Label("Brokers", classes="section")
                yield VirtualTable(stat_columns("Broker", 21, errors_width=16)
                                   [:STAT_PANEL_COLUMNS], id="ov-brokers")
            with Vertical():
                yield Label("Clients (client_id)", classes="section")
                yield VirtualTable(stat_columns("Client id", 18, errors_width=16)
                                   [:STAT_PANEL_COLUMNS], id="ov-clients")
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
        self._totals: list = []
        self._titles: tuple = ()

    def _width_of(self, selector: str) -> int:
        """The content width of a widget of the view (0: not laid out yet)."""
        return self.query_one(selector).content_region.width

    def _draw_totals(self) -> None:
        """The totals, broken into lines between items to fit the width."""
        width = self._width_of("#ov-totals") or 1 << 30
        text = Text()
        line = 0
        for item in self._totals:
            if item is None:
                text.append("\n")
                line = 0
                continue
            part, sep = item
            if line and line + len(sep) + part.cell_len > width:
                text.append("\n")
                line = 0
            elif line:
                text.append(sep)
                line += len(sep)
            text.append_text(part)
            line += part.cell_len
        self.query_one("#ov-totals", Static).update(text)

    def _draw_titles(self) -> None:
        """The bars' titles, the longest form that fits (never one cut inside)."""
        for label, bars, forms in zip(("#sp-rate-label", "#sp-p99-label"),
                                      ("#sp-rate", "#sp-p99"), self._titles):
            self.query_one(label, Label).update(Text(fit_first(forms, self._width_of(bars))))

    def on_resize(self) -> None:
        if self._totals:
            self._draw_totals()
        if self._titles:
            self._draw_titles()
        self._draw_hist()

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
        first = Text()
        first.append(f"{fmt_count(snap.exchanges)} exchanges", style="bold")
        first.append(f" in {span:,.1f} s of capture ({fmt_rate(t.rate_per_s)})")
        # the totals as items: a narrow terminal breaks the lines between them, never
        # inside one (``issues 33`` was split); None starts a new line
        self._totals = [
            (first, ""),
            (Text(f"errors {fmt_count(t.error_exchanges)}",
                  style="bold red" if t.error_exchanges else ""), "   "),
            (Text(f"throttled {fmt_count(t.throttled)}",
                  style="bold yellow" if t.throttled else ""), "   "),
            (Text(f"issues {fmt_count(issues)}",
                  style="bold red" if sev.get("error") else "bold yellow"
                  if sev.get("warning") else ""), "   "),
            None,
            (Text(f"p50 {fmt_ms(t.p50_ns)}"), ""), (Text(f"p90 {fmt_ms(t.p90_ns)}"), "  "),
            (Text(f"p99 {fmt_ms(t.p99_ns)}"), "  "), (Text(f"max {fmt_ms(t.max_ns)}"), "  "),
            *([(Text(f"({fmt_count(t.long_polls)} long-polls apart, p50 "
                     f"{fmt_ms(t.long_poll_p50_ns)})"), " ")] if t.long_polls else []),
            (Text(f"bytes {fmt_bytes(t.request_bytes)} → / {fmt_bytes(t.response_bytes)} ←"),
             "   "),
            (Text(f"{fmt_count(pipe.get('packets', 0))} packets,"), "   "),
            (Text(f"{fmt_count(pipe.get('kafka_connections', 0))} Kafka connections"), " "),
        ]
        self._draw_totals()
        tl = snap.timeline
        if tl:
            width = tl[0].width_ns / 1e9
            counts = [b.count for b in tl]
            p99 = [(b.p99_ns or 0) / 1e6 for b in tl]
            start, end = tl[0].start_ns, tl[-1].start_ns + tl[-1].width_ns
            self.query_one("#sp-rate", TimeBars).set_data(counts, start, end)
            self.query_one("#sp-p99", TimeBars).set_data(p99, start, end)
            self._titles = (
                (f"requests per {width:g} s  (max {max(counts):,})",
                 f"requests per {width:g} s (max {max(counts):,})",
                 f"requests/{width:g} s (max {max(counts):,})", f"requests per {width:g} s"),
                (f"p99 latency per {width:g} s  (max {max(p99):,.1f} ms)",
                 f"p99 latency per {width:g} s (max {max(p99):,.1f} ms)",
                 f"p99/{width:g} s (max {max(p99):,.1f} ms)", f"p99 latency per {width:g} s"))
            self._draw_titles()
        apis = self.query_one("#ov-apis", VirtualTable)
        set_rows(apis, snap.apis, stat_cells, STAT_SORT)
        apis.styles.height = min(len(snap.apis) + 1, 16) if snap.apis else 2
        set_rows(self.query_one("#ov-brokers", VirtualTable), snap.brokers, stat_cells, STAT_SORT)
        set_rows(self.query_one("#ov-clients", VirtualTable), [c.stats for c in snap.clients],
                 stat_cells, STAT_SORT)
        itext = Text()
        for kind, n in snap.issues:
            itext.append(f"{n:>8,}  ", style="bold")
            itext.append(f"{escape_text(str(kind))}\n")
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

    def _table(self) -> VirtualTable:
        """The table with the focus (APIs, brokers or clients), else the APIs table."""
        f = self.app.focused
        if isinstance(f, VirtualTable) and f.id in ("ov-apis", "ov-brokers", "ov-clients"):
            return f
        return self.query_one("#ov-apis", VirtualTable)

    def action_choose_sort(self) -> None:
        choose_sort(self._table(), ascending_first=("key",))

    def action_reverse_sort(self) -> None:
        reverse_sort(self._table())

    def action_histogram(self) -> None:
        """``h``: scroll the latency histogram (the bottom of the view) into sight; the
        focus stays on the APIs table, whose cursor chooses the API shown."""
        self.scroll_to_widget(self.query_one("#ov-bottom"), animate=False, top=False)

    def _draw_hist(self) -> None:
        from textual_plotext import PlotextPlot

        api = self.selected_api()
        snap = self.snapshot
        counts = snap.histograms.get(api) if api else None
        plot = self.query_one("#ov-hist", PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        name = escape_text(api or "-")
        self.query_one("#ov-hist-title", Label).update(Text(fit_first(
            (f"Latency histogram: {name} (paired exchanges)", f"Latency histogram: {name}",
             f"Latency: {name}"), self._width_of("#ov-hist-box"))))
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

    @on(TimeBars.Picked)
    def _time_picked(self, event: TimeBars.Picked) -> None:
        """A bucket of the timeline picked (click, or Enter on the focused bars): the
        exchanges of that time."""
        self.app.jump_to_time_range((event.start_ns, event.end_ns))

    @on(VirtualTable.Selected, "#ov-brokers")
    def _broker_selected(self, event: VirtualTable.Selected) -> None:
        """Enter on a broker: the exchanges with that broker endpoint."""
        m = event.table.model
        if isinstance(m, RowsModel) and 0 <= event.index < len(m):
            self.app.jump_to_exchanges(Filter(broker="=" + m.rows[event.index].key))

    @on(VirtualTable.Selected, "#ov-clients")
    def _client_selected(self, event: VirtualTable.Selected) -> None:
        """Enter on a client: the exchanges of that client_id."""
        m = event.table.model
        if isinstance(m, RowsModel) and 0 <= event.index < len(m):
            key = m.rows[event.index].key
            self.app.jump_to_exchanges(Filter(client="=" + key if key != "(none)" else ""))


def fit_first(forms, width: int) -> str:
    """The first of ``forms`` (longest first) that fits ``width`` cells (0: any), else the
    last one cut with ``…``."""
    for form in forms:
        if not width or len(form) <= width:
            return form
    last = forms[-1]
    return last[:max(0, width - 1)] + "…"


def _edge(ns: int) -> str:
    if ns < 1_000_000:
        return f"{ns / 1000:.0f}µs"
    if ns < 1_000_000_000:
        return f"{ns / 1e6:.3g}ms"
    return f"{ns / 1e9:.3g}s"
