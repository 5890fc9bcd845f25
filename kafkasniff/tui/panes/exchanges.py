"""The Exchanges view (key 2): one row per exchange of the store, the rows passing the
filter (a view of store row numbers), sorted, with incremental search and follow mode.

Styles: ``kafkasniff/tui/app.tcss``.
"""

from __future__ import annotations

from array import array
from dataclasses import replace
from itertools import chain

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Input, Static

from kafkasniff.output.filters import Filter
from kafkasniff.text import escape_text
from kafkasniff.tui.models import EXCHANGE_COLUMNS, ExchangeModel, fmt_time_range
from kafkasniff.tui.screens import ChoiceScreen, DetailScreen, FilterScreen, TimeRangeScreen
from kafkasniff.tui.store import SORT_KEYS, SummaryStore
from kafkasniff.tui.widgets import VirtualTable


class ExchangesPane(Vertical):
    """The virtual table of exchanges with filters, sort, incremental search, follow mode."""

    BINDINGS = [
        Binding("f", "edit_filter", "Filter"),
        Binding("e", "toggle_errors", "Errors only"),
        Binding("i", "toggle_issues", "Issues only", show=False),
        Binding("a", "filter_api", "This API", show=False),
        Binding("c", "clear_filter", "Clear", show=False),
        Binding("t", "edit_time_range", "Time range", show=False),
        Binding("s", "choose_sort", "Sort"),
        Binding("r", "reverse_sort", "Reverse", show=False),
        Binding("slash", "search", "Search"),
        Binding("n", "search_next(1)", "Next match", show=False),
        Binding("N", "search_next(-1)", "Prev match", show=False),
        Binding("F", "toggle_follow", "Follow"),
        Binding("w", "save", "Save view"),
        Binding("y", "copy_json", "Copy JSON"),
    ]

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
        self._follow_paused = False
        self.time_range: tuple[int, int] | None = None
        # exchanges named by the consumer-group analysis: (label, {(conn, corr, ts)})
        self.refs: tuple[str, frozenset] | None = None
        self._generation = 0
        self._last_filter = (self.filter, None, None)
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
        add = self.store.filter_rows(self.compiled, new.start, new.stop, self.time_range,
                                     self._refs())
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
        parts = [f"{shown:,} of {total:,} exchanges" if self.narrowed else
                 f"{total:,} exchanges"]
        if self.filter.active:
            parts.append("filter: " + self.filter.describe())
        if self.time_range is not None:
            parts.append("time: " + fmt_time_range(self.time_range))
        if self.refs is not None:
            parts.append(f"exchanges of {self.refs[0]}")
        if self.sort_key:
            parts.append(f"sort: {self.sort_key} {'▼' if self.sort_reverse else '▲'}")
        if self.search_text:
            parts.append(f"search: {self.search_text!r}")
        if self.follow:
            parts.append("FOLLOW")
        if self._busy:
            parts.append(self._busy)
        # the filter and the group label hold names off the wire (jumps from other views)
        self.query_one("#ex-bar", Static).update(Text(escape_text("  │  ".join(parts))))

    def current_row(self) -> int | None:
        """The store row under the cursor (``None``: empty view)."""
        c = self.table.cursor
        return self.view[c] if 0 <= c < len(self.view) else None

    @property
    def narrowed(self) -> bool:
        """A filter, a time range or a set of exchanges may hide exchanges."""
        return self.filter.active or self.time_range is not None or self.refs is not None

    def _refs(self) -> frozenset | None:
        return self.refs[1] if self.refs is not None else None

    def set_refs(self, label: str, refs) -> None:
        """Show only the exchanges ``refs`` names (``(conn_id, correlation_id, ts_ns)``
        tuples or :class:`~kafkasniff.groups.model.ExchangeRef` values: the exchanges a
        rebalance or commit was read from), the filter and time range cleared; ``label``
        says whose they are in the bar (``c`` clears)."""
        keys = frozenset((r.conn_id, r.correlation_id, r.ts_ns) if hasattr(r, "conn_id")
                         else tuple(r) for r in refs)
        self.refs = (label, keys)
        self.time_range = None
        self.set_filter(Filter(), keep_row=None)

    def set_time_range(self, time_range: tuple[int, int] | None,
                       keep_row: int | None = None) -> None:
        """Show only the exchanges whose time is in ``[from_ns, to_ns)`` (``None``: any
        time), with the current filter (computed in a thread)."""
        self.time_range = time_range
        self._recompute(keep_row if keep_row is not None else self.current_row())

    def set_filter(self, f: Filter, keep_row: int | None = None) -> None:
        """Show the rows passing ``f`` (computed in a thread); the cursor stays on store row
        ``keep_row`` (default: the current row) when it passes."""
        self.filter = f
        self.compiled = self.store.compile(f)
        self._recompute(keep_row if keep_row is not None else self.current_row())

    def _recompute(self, keep_row: int | None) -> None:
        """Filter and sort the whole store again (in a thread)."""
        key = (self.filter, self.time_range, self.refs)
        self._set_busy("sorting…" if key == self._last_filter else "filtering…")
        self._last_filter = key
        self._generation += 1
        self._recompute_worker(keep_row, self._generation)

    @work(thread=True, exclusive=True, group="exchanges-view")
    def _recompute_worker(self, keep_row: int | None, generation: int) -> None:
        """Filter and sort the whole store in a thread (a million rows take a moment)."""
        store = self.store
        compiled = self.compiled
        time_range = self.time_range
        refs = self._refs()
        n = len(store)
        try:
            view = store.filter_rows(compiled, 0, n, time_range, refs)
            if self.sort_key is not None:
                view = store.sort(view, self.sort_key, self.sort_reverse)
        except Exception as exc:  # noqa: BLE001 - a bug must not take the app down
            self.app.call_from_thread(self.app.notify, f"filter failed: {exc}",
                                      severity="error")
            self.app.call_from_thread(self._set_busy, "")
            return
        self.app.call_from_thread(self._install, view, n, generation, keep_row)

    def _install(self, view: array, n: int, generation: int, keep_row: int | None) -> None:
        if generation != self._generation:
            return  # a newer filter, time range or sort is being computed
        late = n < len(self.store)        # rows arrived while computing: appended unsorted
        if late:
            view.extend(self.store.filter_rows(self.compiled, n, len(self.store),
                                               self.time_range, self._refs()))
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
        """Sort the view by one of :data:`~kafkasniff.tui.store.SORT_KEYS` (in a thread);
        the cursor goes to the first row (the top of the new order is what a sort is for;
        in follow mode, the last)."""
        self.sort_key, self.sort_reverse = key, reverse
        self.table.sort_key, self.table.sort_reverse = key, reverse
        self._recompute(None)

    # -------------------------------------------------------------- actions
    def action_edit_filter(self) -> None:
        apis = sorted({n for n in self.store.tables.names.items if n})

        def done(f: Filter | None) -> None:
            if f is not None:
                self.set_filter(f)
            self.table.focus()
        options = getattr(self.app.source, "options", None)
        self.app.push_screen(FilterScreen(self.filter, apis,
                                          getattr(options, "definitions_dir", None)), done)

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
        self.time_range = None
        self.refs = None
        self.set_filter(Filter())

    def action_edit_time_range(self) -> None:
        """``t``: type a time range ``from..to`` (empty: any time)."""
        store = self.store
        ref = store.columns["ts"][0] if len(store) else 0

        def done(result) -> None:
            self.table.focus()
            if result is not None:
                self.set_time_range(result[1])
        self.app.push_screen(TimeRangeScreen(self.time_range, ref), done)

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
                self._recompute(None)
                return
            reverse = (not self.sort_reverse) if key == self.sort_key else \
                key in ("latency", "bytes", "resp_bytes", "throttle", "records", "errors", "err_n",
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
        reverse = not self.sort_reverse if key == self.sort_key else \
            key in ("latency", "bytes", "err_n")
        self.sort_by(key, reverse)

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow
        self._follow_paused = False
        if self.follow and len(self.view):
            self.table.move_to(len(self.view) - 1)
        self.update_bar()

    def _leave_follow(self) -> None:
        """The user went elsewhere: follow mode stops pulling the cursor to the newest row
        (End or ``F`` turn it on again)."""
        if self.follow:
            self.follow = False
            self._follow_paused = True
            self.update_bar()

    @on(VirtualTable.UserMoved, "#ex-table")
    def _user_moved(self, event: VirtualTable.UserMoved) -> None:
        if event.index < event.previous:
            if self.follow:
                self._leave_follow()
                if self.table.cursor != event.index:    # new rows pulled it down meanwhile
                    self.table.move_to(event.index)
        elif self._follow_paused and event.index == len(self.view) - 1:
            self.follow = True               # End (or down to the last row): follow again
            self._follow_paused = False
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
            if k != self.table.cursor:
                self._leave_follow()
            self.table.move_to(k, center=True)
        else:
            self.app.notify(f"no exchange matches {escape_text(repr(text))}",
                            severity="warning", timeout=2, markup=False)

    def action_save(self) -> None:
        self.app.action_save_view()

    def action_copy_json(self) -> None:
        row = self.current_row()
        if row is not None:
            self.app.copy_row_json(row)

    @on(VirtualTable.Selected, "#ex-table")
    def _open(self, event: VirtualTable.Selected) -> None:
        # a second Enter typed before the first one's detail is shown selects again: the
        # detail is on top by then, and the second one is ignored (docs/tui.md)
        if len(self.view) and self.app.screen is self.screen:
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
            if self.narrowed:
                self.time_range = None
                self.refs = None
                self.set_filter(Filter(), keep_row=row)
                return True
            return False
        self.table.move_to(k, center=True)
        return True
