"""The Issues view (key 6): every decode issue kept by the store, attached to an exchange or
standalone, with the full message of the one under the cursor below the table.

Styles: ``kafkasniff/tui/app.tcss``.
"""

from __future__ import annotations

from array import array

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Static

from kafkasniff.text import escape_text
from kafkasniff.tui.models import ISSUE_COLUMNS, IssueModel
from kafkasniff.tui.widgets import VirtualTable


class IssuesPane(Vertical):
    """Every issue (attached and standalone); Enter jumps to its exchange."""

    BINDINGS = [Binding("e", "toggle_serious", "Warnings+errors")]

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
        # the message holds names off the wire (a TLS server name, a topic ...)
        text.append(escape_text(f"  {where}  {', '.join(extra)}"))
        text.append("\n" + escape_text(iss.message))
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
