"""The snapshot tables (Connections, Clients, Topics views) and the helpers every snapshot
table shares (the Overview's APIs, brokers and clients tables too): :func:`set_rows` shows a
new snapshot keeping the cursor on its row, :func:`sort_table` sorts (a header click, the
``s`` dialog of :func:`choose_sort`, ``r``).

Styles: ``kafkasniff/tui/app.tcss``.
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Static

from kafkasniff.tui.aggregates import ClientRow
from kafkasniff.tui.models import RowsModel
from kafkasniff.tui.widgets import VirtualTable


def _row_key(row):
    """What identifies a snapshot row from one snapshot to the next (the API, broker,
    client_id, connection id, topic, or a group's id)."""
    if type(row) is ClientRow:
        return row.stats.key
    if isinstance(row, tuple):
        return row[0]
    return getattr(row, "group_id", None)


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
    """Sort a snapshot table by the clicked column (:func:`sort_table`)."""
    sort_table(event.table, event.key, ascending_first)


def choose_sort(table: VirtualTable, ascending_first: tuple = ()) -> None:
    """The ``s`` key of a snapshot table: a dialog of its sortable columns; the column it is
    sorted by again reverses the order (what a header click does)."""
    from kafkasniff.tui.screens import ChoiceScreen

    opts = [(c.key, c.label) for c in table.columns if c.sortable]

    def done(key: str | None) -> None:
        table.focus()
        if key is not None:
            sort_table(table, key, ascending_first)
    table.app.push_screen(ChoiceScreen("Sort by (again: reverse)", opts, table.sort_key), done)


def sort_table(table: VirtualTable, key: str, ascending_first: tuple = ()) -> None:
    """Sort a snapshot table by column ``key``: descending first (ascending for the columns
    of ``ascending_first``), the same column again reverses; the cursor goes to the top
    row."""
    table.sort_reverse = not table.sort_reverse if table.sort_key == key else \
        key not in ascending_first
    table.sort_key = key
    if isinstance(table.model, RowsModel):
        table.model.sort(table.sort_key, table.sort_reverse)
        table.rows_changed()
    table.move_to(0)


def reverse_sort(table: VirtualTable) -> None:
    """The ``r`` key of a snapshot table: the same column, the other order."""
    if table.sort_key is not None:
        sort_table(table, table.sort_key)


class TablePane(Vertical):
    """A snapshot table (connections, clients, topics) with a one-line hint; ``s`` sorts
    by a column, ``r`` reverses."""

    BINDINGS = [Binding("s", "choose_sort", "Sort"), Binding("r", "reverse_sort", "Reverse",
                                                             show=False)]

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

    def action_choose_sort(self) -> None:
        choose_sort(self.table)

    def action_reverse_sort(self) -> None:
        reverse_sort(self.table)

    @on(VirtualTable.Selected)
    def _selected(self, event: VirtualTable.Selected) -> None:
        m = event.table.model
        if isinstance(m, RowsModel) and 0 <= event.index < len(m):
            self.app.open_from_table(self.kind, m.rows[event.index])
