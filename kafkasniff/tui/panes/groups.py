"""The Groups view (key 7): the consumer groups of the capture
(:mod:`kafkasniff.groups`, docs/groups.md), and the drill-down of one group
(:class:`GroupScreen`: its members, rebalances and last commits), from which Enter on a
rebalance or a commit shows the exchanges it was read from in the Exchanges view.

The data is a :class:`~kafkasniff.groups.model.GroupsReport` the data source publishes
(``SourceUpdate.groups``): a file source analyses the capture's group exchanges as they are
decoded and publishes the report when loading ends (and while loading, for captures with few
group exchanges). A source without ``has_groups`` (the live TUI) shows why the view is empty.

Styles: ``kafkasniff/tui/app.tcss`` (the pane) and :attr:`GroupScreen.DEFAULT_CSS`.
"""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Footer, Static

from kafkasniff.groups.model import assignment_text
from kafkasniff.text import escape_text, plural
from kafkasniff.tui.models import (
    COMMIT_COLUMNS,
    COMMIT_SORT,
    GROUP_COLUMNS,
    GROUP_SORT,
    MEMBER_COLUMNS,
    MEMBER_SORT,
    REBALANCE_COLUMNS,
    REBALANCE_SORT,
    RowsModel,
    commit_cells,
    fmt_ms,
    fmt_time,
    group_cells,
    group_commit_requests,
    member_cells,
    rebalance_cells,
)
from kafkasniff.tui.panes.tables import choose_sort, reverse_sort, set_rows, sort_on_header
from kafkasniff.tui.widgets import VirtualTable

#: commit rows shown in the drill-down (the newest; the report keeps more)
MAX_COMMITS_SHOWN = 1_000

HINT = "Enter: the group's members, rebalances and commits  │  s: sort  r: reverse"


class GroupsPane(Vertical):
    """One row per consumer group; Enter opens its :class:`GroupScreen`."""

    BINDINGS = [Binding("s", "choose_sort", "Sort"),
                Binding("r", "reverse_sort", "Reverse", show=False)]

    def compose(self) -> ComposeResult:
        yield Static("", classes="hint", id="groups-hint")
        yield VirtualTable(GROUP_COLUMNS, id="groups-table")

    def on_mount(self) -> None:
        self.report = None
        self.show_state()

    @property
    def table(self) -> VirtualTable:
        return self.query_one("#groups-table", VirtualTable)

    def show_state(self, loading: bool = True, error: str | None = None) -> None:
        """The line above the table when there is no report (yet): why."""
        if self.report is not None:
            return
        source = self.app.source
        if not getattr(source, "has_groups", False):
            text = ("groups: not available in live mode" if source.live else
                    "groups: not available from this data source")
        elif error:
            text = f"groups: the analysis failed: {error}"
        elif loading:
            text = "groups: analysed when loading ends…"
        else:
            text = "groups: none in this capture"
        self.query_one("#groups-hint", Static).update(Text(escape_text(text)))

    def update(self, report) -> None:
        """Show a :class:`~kafkasniff.groups.model.GroupsReport` (the cursor stays on its
        group)."""
        self.report = report
        set_rows(self.table, report.groups, group_cells, GROUP_SORT)
        n = len(report.groups)
        rebal = sum(len(g.rebalances) for g in report.groups)
        text = (f"{plural(n, 'group', grouped=True)}, {plural(rebal, 'rebalance', grouped=True)}"
                f", {plural(report.group_exchanges, 'group exchange', grouped=True)}")
        if report.groups_dropped:
            text += f" ({plural(report.groups_dropped, 'group', grouped=True)} not tracked)"
        self.query_one("#groups-hint", Static).update(
            (text + "  │  " + HINT) if n else "groups: none in this capture")

    @on(VirtualTable.HeaderClicked, "#groups-table")
    def _sort(self, event: VirtualTable.HeaderClicked) -> None:
        sort_on_header(event, ("group_id", "protocol", "coordinator"))

    def action_choose_sort(self) -> None:
        choose_sort(self.table, ("group_id", "protocol", "coordinator"))

    def action_reverse_sort(self) -> None:
        reverse_sort(self.table)

    @on(VirtualTable.Selected, "#groups-table")
    def _selected(self, event: VirtualTable.Selected) -> None:
        m = event.table.model
        if self.app.screen is not self.screen:      # Enter twice quickly: one group screen
            return
        if isinstance(m, RowsModel) and 0 <= event.index < len(m):
            self.app.push_screen(GroupScreen(m.rows[event.index]))



class GroupScreen(Screen):
    """One group: its members, its rebalances (with the assignment after the one under the
    cursor) and its last commits. Enter on a rebalance or a commit: the exchanges it was read
    from, in the Exchanges view (``c`` there clears the restriction)."""

    BINDINGS = [
        Binding("escape,q", "close", "Back"),
        Binding("s", "choose_sort", "Sort"),
        Binding("r", "reverse_sort", "Reverse", show=False),
    ]

    DEFAULT_CSS = """
    GroupScreen { layout: vertical; }
    GroupScreen #gs-title { height: auto; max-height: 3; background: $panel; padding: 0 1; }
    GroupScreen .gs-section { height: 1; text-style: bold; color: $accent; padding: 0 1; }
    GroupScreen #gs-members { height: 1fr; }
    GroupScreen #gs-rebalances { height: 2fr; }
    GroupScreen #gs-commits { height: 1fr; }
    GroupScreen #gs-assignment { height: auto; max-height: 3; padding: 0 1;
        color: $text-muted; }
    """

    def __init__(self, group) -> None:
        super().__init__()
        self.group = group

    def compose(self) -> ComposeResult:
        g = self.group
        yield Static(Text(escape_text(_title(g))), id="gs-title")
        yield Static(f"Members ({len(g.members)})", classes="gs-section")
        yield VirtualTable(MEMBER_COLUMNS, id="gs-members")
        yield Static(f"Rebalances ({len(g.rebalances)})  │  Enter: their exchanges",
                     classes="gs-section")
        yield VirtualTable(REBALANCE_COLUMNS, id="gs-rebalances")
        yield Static("", id="gs-assignment")
        shown = min(len(g.commits), MAX_COMMITS_SHOWN)
        more = f", the last {shown:,} of {len(g.commits):,} shown" if shown < len(g.commits) \
            else ""
        yield Static(f"Commits ({group_commit_requests(g):,} requests, {len(g.commits):,} "
                     f"partitions{more}, newest first)  │  Enter: the commit's exchange",
                     classes="gs-section")
        yield VirtualTable(COMMIT_COLUMNS, id="gs-commits")
        yield Footer()

    def on_mount(self) -> None:
        g = self.group
        rebal = self.query_one("#gs-rebalances", VirtualTable)
        commits = self.query_one("#gs-commits", VirtualTable)
        commits.sort_key, commits.sort_reverse = "time", True
        set_rows(self.query_one("#gs-members", VirtualTable), g.members, member_cells,
                 MEMBER_SORT)
        set_rows(rebal, g.rebalances, rebalance_cells, REBALANCE_SORT)
        set_rows(commits, g.commits[-MAX_COMMITS_SHOWN:], commit_cells, COMMIT_SORT)
        (rebal if g.rebalances else self.query_one("#gs-members", VirtualTable)).focus()
        self._show_assignment(0)

    def _focused_table(self) -> VirtualTable | None:
        f = self.focused
        return f if isinstance(f, VirtualTable) else None

    @on(VirtualTable.Highlighted, "#gs-rebalances")
    def _rebalance_highlighted(self, event: VirtualTable.Highlighted) -> None:
        self._show_assignment(event.index)

    def _show_assignment(self, index: int) -> None:
        """The assignment after the rebalance under the cursor, one member a line."""
        m = self.query_one("#gs-rebalances", VirtualTable).model
        out = self.query_one("#gs-assignment", Static)
        if not isinstance(m, RowsModel) or not 0 <= index < len(m):
            out.update("")
            return
        r = m.rows[index]
        cut = dict(r.assignment_cut)
        out.update(Text(escape_text(f"#{r.index} assignment after: " + (
            "  ".join(f"{mid}: {assignment_text(a, cut.get(mid, 0))}"
                      for mid, a in r.assignment)
            or "(not seen)"))))

    @on(VirtualTable.HeaderClicked)
    def _sort(self, event: VirtualTable.HeaderClicked) -> None:
        sort_on_header(event, ("member_id", "instance", "client_id", "host", "index", "start",
                               "end", "trigger", "topic", "partition", "member"))

    def action_choose_sort(self) -> None:
        t = self._focused_table()
        if t is not None:
            choose_sort(t, ("member_id", "instance", "client_id", "host", "index", "start",
                            "end", "trigger", "topic", "partition", "member"))

    def action_reverse_sort(self) -> None:
        t = self._focused_table()
        if t is not None:
            reverse_sort(t)

    @on(VirtualTable.Selected, "#gs-rebalances")
    def _rebalance_selected(self, event: VirtualTable.Selected) -> None:
        r = event.table.model.rows[event.index]
        self._jump(f"rebalance #{r.index} of {self.group.group_id}", r.exchanges)

    @on(VirtualTable.Selected, "#gs-commits")
    def _commit_selected(self, event: VirtualTable.Selected) -> None:
        c = event.table.model.rows[event.index]
        self._jump(f"the commit of {c.topic}[{c.partition}] at {fmt_time(c.ts_ns)} "
                   f"({self.group.group_id})", (c.exchange,))

    @on(VirtualTable.Selected, "#gs-members")
    def _member_selected(self, event: VirtualTable.Selected) -> None:
        self.app.notify("Enter on a rebalance or a commit shows its exchanges", timeout=3)

    def _jump(self, label: str, refs) -> None:
        if self.app.screen is not self:          # Enter twice quickly
            return
        self.app.pop_screen()
        self.app.jump_to_refs(label, refs)

    def action_close(self) -> None:
        if self.app.screen is self:              # Esc twice quickly
            self.app.pop_screen()


def _title(g) -> str:
    """The group's header: protocol, assignor, coordinator, state, generation, counts,
    commit latency, errors."""
    parts = [f"Group {g.group_id}", g.protocol + (f" ({g.protocol_type})"
                                                  if g.protocol_type else "")]
    if g.protocol_name:
        parts.append(f"assignor {g.protocol_name}")
    if g.coordinator:
        node = f" (node {g.coordinator_node_id})" if g.coordinator_node_id >= 0 else ""
        parts.append(f"coordinator {g.coordinator}{node}")
    if g.state:
        parts.append(f"state {g.state}")
    if g.generation_id >= 0:
        parts.append(f"{'generation' if g.protocol == 'classic' else 'epoch'} "
                     f"{g.generation_id}")
    parts.append(f"{g.exchanges:,} group exchanges")
    lat = sorted(g.commit_latencies_ns())
    if lat:
        parts.append(f"commit latency p50 {fmt_ms(lat[(len(lat) - 1) // 2])}, "
                     f"max {fmt_ms(lat[-1])}")
    if g.errors:
        parts.append("errors " + ", ".join(f"{n}×{c}" for n, c in g.errors))
    return "  │  ".join(parts)





__all__ = ["GroupScreen", "GroupsPane"]
