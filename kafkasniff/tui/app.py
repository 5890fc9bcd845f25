"""The kafkasniff Textual app: dashboards and drill-down over a :class:`DataSource`.

Views (tabs, keys 1-7): Overview, Exchanges, Connections, Clients, Topics, Issues, Groups;
the detail of an exchange and of a consumer group are screens of their own (Enter). The
data comes from one :class:`~kafkasniff.tui.source.DataSource`; its batches are ingested
on the UI thread (``array.extend`` of compact columns, a few times per second), everything
heavy (decoding, finding frames again, filtering and sorting a million rows, saving) runs in
threads.

This module holds the app: its composition, bindings, actions and data ingestion. The views
are in :mod:`kafkasniff.tui.panes`, the styles of both in ``app.tcss`` (``CSS_PATH``).
"""

from __future__ import annotations

import json
import os
import threading
import time

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Footer, Static, TabbedContent, TabPane

from kafkasniff.output.filters import Filter
from kafkasniff.text import escape_text
from kafkasniff.tui.aggregates import Snapshot
from kafkasniff.tui.detail import Detail
from kafkasniff.tui.models import (
    CLIENT_COLUMNS,
    CLIENT_SORT,
    CONN_COLUMNS,
    CONN_SORT,
    TOPIC_COLUMNS,
    TOPIC_SORT,
    client_cells,
    conn_cells,
    fmt_count,
    topic_cells,
)
from kafkasniff.tui.panes import ExchangesPane, GroupsPane, IssuesPane, OverviewPane, TablePane
from kafkasniff.tui.screens import HelpScreen, SaveScreen
from kafkasniff.tui.source import DataSource, Progress
from kafkasniff.tui.store import RowInfo, SummaryStore

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


HELP_GLOBAL = [("1 2 3 4 5 6 7", "Overview, Exchanges, Connections, Clients, Topics, Issues, "
                                 "Groups"),
               ("?", "this help"), ("q, ctrl+q", "quit"),
               ("tab / shift+tab", "move the focus (tabs bar, table, inputs)")]
HELP_TABLE = [("↑ ↓ / j k", "move the cursor"), ("PgUp PgDn / space", "page"),
              ("Home End / g G", "first / last row"),
              ("Enter / double click", "open (detail, or the exchanges of this row)"),
              ("s / click a header", "sort by a column (again: reverse); cursor to the top "
                                     "(not in Issues)"),
              ("r", "reverse the sort")]
HELP_EXCHANGES = [("f", "filter dialog: API, client, broker, topic, status, errors, issues, "
                        "min latency, long-polls"),
                  ("e", "errors only (toggle)"), ("i", "issues only (toggle)"),
                  ("a", "only this row's API (toggle)"),
                  ("c", "clear the filter, the time range and a group's exchanges"),
                  ("t", "time range: FROM..TO (UTC; empty: any time)"),
                  ("s", "sort by a column (same column again: reverse)"),
                  ("r", "reverse the sort"),
                  ("/", "incremental search (Enter keeps, Esc goes back)"),
                  ("n / N", "next / previous match"),
                  ("F", "follow mode: stay on the newest exchange (moving up leaves it, "
                        "End takes it up again)"),
                  ("w", "save the filtered view (JSON Lines or Parquet)"),
                  ("y", "copy the exchange's JSON (clipboard and a file)"),
                  ("Enter", "detail of the exchange")]
HELP_DETAIL = [("↑ ↓ ← → / Enter", "move in the tree, expand and collapse"),
               ("x", "hex view: request / response frame"),
               ("b", "request and response bytes side by side (again: one frame)"),
               ("[ ] / p n", "previous / next exchange of the view"),
               ("y", "copy the exchange's JSON"), ("tab / shift+tab", "tree / hex view"),
               ("Esc / q", "back to the table")]
HELP_OTHER = [("Overview: tab to the bars, ← →, Enter",
               "the exchanges of a time bucket (or click a bar)"),
              ("Overview: Enter", "the exchanges of the API, broker or client under the cursor"),
              ("Overview: h", "show the latency histogram (the bottom of the view)"),
              ("Overview: ctrl+up ctrl+down", "scroll the view"),
              ("Overview: ctrl+home ctrl+end", "top / bottom of the view"),
              ("Connections: Enter", "the exchanges of the connection (its two endpoints)"),
              ("Clients: Enter", "the exchanges of that client_id"),
              ("Topics: Enter", "the exchanges touching that topic"),
              ("Issues: Enter", "go to the issue's exchange"),
              ("Issues: e", "warnings and errors only (toggle)"),
              ("Groups: Enter", "the group: members, rebalances, last commits"),
              ("Group: Enter", "the exchanges of the rebalance or commit under the cursor"),
              ("Group: tab, s, r, Esc", "next table, sort it, reverse, back")]


class KafkaSniffApp(App):
    """kafkasniff's terminal UI over one data source.

    Args:
        source: a :class:`~kafkasniff.tui.source.DataSource` (not started yet).
        save_dir: where saved views and exchange JSON files go by default.
    """

    TITLE = "kafkasniff"
    ENABLE_COMMAND_PALETTE = False

    CSS_PATH = "app.tcss"     # the app's and its panes' styles (panes/)

    BINDINGS = [
        Binding("1", "show('overview')", "Overview", show=False),
        Binding("2", "show('exchanges')", "Exchanges", show=False),
        Binding("3", "show('connections')", "Conns", show=False),
        Binding("4", "show('clients')", "Clients", show=False),
        Binding("5", "show('topics')", "Topics", show=False),
        Binding("6", "show('issues')", "Issues", show=False),
        Binding("7", "show('groups')", "Groups", show=False),
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
        self.groups = None          # the source's latest GroupsReport
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
            with TabPane("7 Groups", id="groups"):
                yield GroupsPane(id="groups-pane")
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
        if update.groups is not None:
            self.groups = update.groups
            self.query_one("#groups-pane", GroupsPane).update(update.groups)
        if update.progress is not None:
            self.progress = update.progress
            if update.progress.error:
                self.notify(f"reading stopped: {escape_text(update.progress.error)}",
                            severity="error", timeout=10, markup=False)
            if update.progress.finished and self.groups is None:
                self.query_one("#groups-pane", GroupsPane).show_state(
                    loading=False, error=self.source.groups_error)
        self._status()

    def _status(self) -> None:
        """The status line: title, progress, counters. What does not fit the width is cut
        from the title (the source's ``short_title`` instead, e.g. ``first.pcap +2 files``,
        then cut before its ``+N files`` suffix) and the packet count, never from the live
        capture's drop counters (a ``  [...]`` suffix of the title), the progress and the
        exchange and issue counters."""
        p = self.progress
        width = max(20, self.size.width - 2)
        prog = Text()
        if p.live:
            prog.append("● live", style="bold green")
        elif p.finished:
            prog.append(bar(1.0, 12) + " done ", style="green")
        else:
            frac = p.fraction
            prog.append(bar(frac, 12))
            prog.append(f" {frac * 100:.0f}% loading " if frac is not None else " loading ")
        from kafkasniff.text import plural

        exchanges = Text("  " + plural(len(self.store), "exchange", grouped=True))
        packets = Text(f"  {fmt_count(p.packets)} packet{'' if p.packets == 1 else 's'}")
        tail = Text()
        n_iss = len(self.store.issues) + self.store.issues_dropped
        if n_iss:
            tail.append("  " + plural(n_iss, "issue", grouped=True), style="yellow")
        if p.error:
            tail.append(f"  error: {escape_text(p.error)}", style="bold red")
        # file names, a live capture's interface and filter: shown escaped like every name
        title = escape_text(self.source.title or "")
        # a live capture's drop counters (``lo (ring)  [kernel drops 0, ...]``) are kept
        # whole, like the counters after them
        drops = ""
        if title.endswith("]") and "  [" in title:
            title, sep, rest = title.rpartition("  [")
            drops = sep + rest
        room = width - prog.cell_len - exchanges.cell_len - tail.cell_len - 2 - len(drops)
        show_packets = room - packets.cell_len >= 16     # the title keeps 16 cells or more
        if show_packets:
            room -= packets.cell_len
        text = Text()
        if room >= len("kafkasniff ") + len(title):
            text.append("kafkasniff ", style="bold")
        elif title:
            title = escape_text(getattr(self.source, "short_title", "")) or title
            suffix = ""
            if title.endswith(" files") and " +" in title:      # first.pcap +2 files
                title, plus, rest = title.rpartition(" +")
                suffix = plus + rest
            if len(title) + len(suffix) > room:
                keep = room - len(suffix) - 1
                title = title[:keep] + "…" if keep > 0 else ""
            title += suffix
        text.append(title + drops)
        text.append("  ")
        text.append_text(prog)
        text.append_text(exchanges)
        if show_packets:
            text.append_text(packets)
        text.append_text(tail)
        self.query_one("#status", Static).update(text)

    def on_resize(self, event) -> None:
        self._status()

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
               "topics": "#topics-table", "issues": "#issues-table",
               "groups": "#groups-table"}
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
        pane.refs = None
        pane.set_filter(f, keep_row=None)
        self._focus_tab("exchanges")

    def jump_to_time_range(self, time_range: tuple[int, int] | None) -> None:
        """Show the Exchanges view limited to ``[from_ns, to_ns)`` (the filter kept)."""
        pane = self.exchanges_pane()
        self.query_one(TabbedContent).active = "exchanges"
        pane.refs = None
        pane.set_time_range(time_range)
        self._focus_tab("exchanges")

    def jump_to_refs(self, label: str, refs) -> None:
        """Show the Exchanges view limited to the exchanges ``refs`` names
        (:class:`~kafkasniff.groups.model.ExchangeRef` values: connection id, correlation
        id, request time), e.g. those a rebalance was read from; ``label`` names them in the
        bar. The filter and the time range are cleared."""
        pane = self.exchanges_pane()
        self.query_one(TabbedContent).active = "exchanges"
        pane.set_refs(label, refs)
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
            self.call_from_thread(self.notify, f"saving failed: {escape_text(str(exc))}",
                                  severity="error", timeout=8, markup=False)
            return
        finally:
            self.saving = None
        self.last_saved = path
        self.call_from_thread(self.notify, f"saved {n:,} exchanges to {escape_text(path)}",
                              timeout=6, markup=False)

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
            why = f": {escape_text(d.note)}" if d.note else ""
            self.call_from_thread(self.notify, f"exchange #{row} could not be decoded{why}",
                                  severity="error", markup=False)
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
        self.notify(f"exchange #{row} JSON copied to the clipboard{escape_text(where)}",
                    timeout=5, markup=False)
