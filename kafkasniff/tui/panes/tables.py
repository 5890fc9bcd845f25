"""The snapshot tables (Connections, Clients, Topics views) and the helpers every snapshot
table shares (the Overview's APIs, brokers and clients tables too): :func:`set_rows` shows a
new snapshot keeping the cursor on its row, :func:`sort_on_header` sorts on a header click.

Styles: ``kafkasniff/tui/app.tcss``.
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from kafkasniff.tui.aggregates import ClientRow
from kafkasniff.tui.models import RowsModel
from kafkasniff.tui.widgets import VirtualTable


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


class TablePane(Vertical):
    """A snapshot table (connections, clients, topics) with a one-line hint."""

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
