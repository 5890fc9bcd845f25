"""Widgets of the TUI: a virtual table for millions of rows, and a hex view with highlights.

:class:`VirtualTable` is a line-API widget (Textual ``ScrollView``): it holds no rows, only a
*model* (``len(model)`` and ``model.cells(i)``), and renders just the lines on screen, so its
cost does not depend on the number of rows (Textual's ``DataTable`` keeps every row as
objects and renders from them: 100k rows already take seconds and hundreds of MB, see
docs/tui.md). Columns have a priority: on a narrow terminal the least important ones are
hidden rather than squeezed; the flexible columns share what is left.
"""

from __future__ import annotations

import time as _time
from typing import NamedTuple, Protocol, Sequence

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widget import Widget

from kafkasniff.text import escape_text


class Column(NamedTuple):
    """A table column.

    Attributes:
        key: identifier (also the sort key name, when sortable).
        label: header text.
        width: width in cells (the minimum for a flexible column).
        align: ``"left"`` or ``"right"``.
        priority: 0 is always shown; higher numbers are hidden first when space is short.
        flex: a share of the width left over (an ``int`` weight; ``True`` is 1, ``False``
            or 0 none). The spare cells are split between the flexible columns shown in
            proportion to their weights; when no column is flexible the last one takes them.
        sortable: a header click asks to sort by it.
        max_width: a flexible column grows no wider than this (0: no limit); what it cannot
            take goes to the other flexible columns.
        grow_to: a column grows to this width (when there is room) before the columns of
            lower priority are placed (0: no such claim), e.g. error names before less
            important columns take the width.
        fit: the column grows to its widest cell (as the model's ``content_width`` gives
            it), up to ``max_width``, when there is room once the columns of its priority
            and of priority 1 are placed (after the ``grow_to`` claims), before those of
            lower priority; a flexible one takes no spare width beyond it. For key columns
            (API, client id, topic, group id): shown whole rather than cut while the spare
            width goes to less important columns.
    """

    key: str
    label: str
    width: int
    align: str = "left"
    priority: int = 0
    flex: int = 0
    sortable: bool = True
    max_width: int = 0
    grow_to: int = 0
    fit: bool = False


class TableModel(Protocol):
    """What a :class:`VirtualTable` shows: ``len()`` rows, each ``cells(i)`` giving one text
    per column (or ``(text, style_name)``, style names ``error``, ``warning``, ``dim``,
    ``ok``), in the order of the table's columns. Texts are given as they are (names off
    the wire too): the table shows them through :func:`kafkasniff.text.escape_text`."""

    def __len__(self) -> int: ...

    def cells(self, index: int) -> Sequence: ...

    # optional: ``content_width(column_index) -> int``, the cells of the widest text of a
    # column (escaped as shown), for the columns with ``fit``; cheap (cached by the model)


class EmptyModel:
    """A :class:`TableModel` without rows (a table before its first data)."""

    def __len__(self) -> int:
        return 0

    def cells(self, index: int) -> Sequence:
        return ()


def fit(text: str, width: int, align: str = "left") -> str:
    """``text`` cut or padded to exactly ``width`` cells (``…`` marks a cut)."""
    if len(text) > width:
        return text[: max(0, width - 1)] + "…" if width > 0 else ""
    return text.rjust(width) if align == "right" else text.ljust(width)


def share_spare(columns: Sequence[Column], spare: int,
                widths: Sequence[int] | None = None) -> list[int]:
    """The widths of ``columns`` (all shown, at ``widths``, default their ``width``) once
    ``spare`` more cells are given out: to the flexible columns in proportion to their
    ``flex`` weights, none beyond its ``max_width``; what no flexible column can take goes to
    the last unlimited flexible column, or to the last column when there is none."""
    widths = list(widths) if widths is not None else [c.width for c in columns]
    open_ = [k for k, c in enumerate(columns) if c.flex]
    while spare > 0 and open_:
        total = sum(int(columns[k].flex) for k in open_)
        given = 0
        for n, k in enumerate(open_):
            share = spare * int(columns[k].flex) // total
            if n == 0:
                share += spare - sum(spare * int(columns[j].flex) // total for j in open_)
            cap = columns[k].max_width
            if cap:
                share = max(0, min(share, cap - widths[k]))
            widths[k] += share
            given += share
        spare -= given
        open_ = [k for k in open_ if not columns[k].max_width
                 or widths[k] < columns[k].max_width]
        if not given:
            break
    if spare > 0:
        unlimited = [k for k, c in enumerate(columns) if c.flex and not c.max_width]
        widths[unlimited[-1] if unlimited else len(columns) - 1] += spare
    return widths


class VirtualTable(ScrollView, can_focus=True):
    """A table over a model of any size; only the visible lines are rendered.

    Messages: :class:`Highlighted` (cursor moved), :class:`UserMoved` (moved by a key or a
    click, not by the program), :class:`Selected` (Enter or double click),
    :class:`HeaderClicked` (a click on a sortable column's header).
    """

    BINDINGS = [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown,space", "page(1)", "Page down", show=False),
        Binding("home,g", "first", "First", show=False),
        Binding("end,G", "last", "Last", show=False),
        Binding("enter", "select", "Open", show=False),
    ]

    COMPONENT_CLASSES = {"vt--header", "vt--cursor", "vt--cursor-blur", "vt--error",
                         "vt--warning", "vt--dim", "vt--ok", "vt--sorted"}

    DEFAULT_CSS = """
    VirtualTable {
        height: 1fr;
        overflow-x: hidden;
        background: $surface;
    }
    VirtualTable > .vt--header { text-style: bold; background: $panel; color: $text; }
    VirtualTable > .vt--sorted { text-style: bold underline; background: $panel; color: $accent; }
    VirtualTable > .vt--cursor { background: $accent 60%; color: $text; text-style: bold; }
    VirtualTable > .vt--cursor-blur { background: $accent 25%; }
    VirtualTable > .vt--error { color: $error; }
    VirtualTable > .vt--warning { color: $warning; }
    VirtualTable > .vt--dim { color: $text-muted; }
    VirtualTable > .vt--ok { color: $success; }
    """

    cursor = reactive(0, always_update=True, init=False)

    class Highlighted(Message):
        """The cursor moved to row ``index`` of ``table``."""

        def __init__(self, table: "VirtualTable", index: int) -> None:
            super().__init__()
            self.table = table
            self.index = index

        @property
        def control(self) -> "VirtualTable":
            return self.table

    class Selected(Highlighted):
        """Row ``index`` of ``table`` was opened (Enter or double click)."""

    class UserMoved(Highlighted):
        """The user moved the cursor (keys or a click) from row ``previous`` to ``index``
        (follow mode ends when that is upwards)."""

        def __init__(self, table: "VirtualTable", index: int, previous: int) -> None:
            super().__init__(table, index)
            self.previous = previous

    class HeaderClicked(Message):
        """The header of the sortable column ``key`` of ``table`` was clicked."""

        def __init__(self, table: "VirtualTable", key: str) -> None:
            super().__init__()
            self.table = table
            self.key = key

        @property
        def control(self) -> "VirtualTable":
            return self.table

    def __init__(self, columns: Sequence[Column], model: TableModel | None = None, *,
                 name: str | None = None, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.columns = list(columns)
        self.model: TableModel = model if model is not None else EmptyModel()
        self.sort_key: str | None = None
        self.sort_reverse = False
        self._col_layout: tuple | None = None
        self._style_cache: dict[str, Style] = {}
        self._fit_cols = [i for i, c in enumerate(self.columns) if c.fit]

    # -------------------------------------------------------------- data
    @property
    def row_count(self) -> int:
        """Rows of the model (the header line not counted)."""
        return len(self.model)

    def set_model(self, model: TableModel, cursor: int | None = None) -> None:
        """Show another model (a new view); the cursor moves to ``cursor`` if given."""
        self.model = model
        self.rows_changed()
        if cursor is not None:
            self.move_to(cursor)

    def rows_changed(self) -> None:
        """The model's rows changed (appended, filtered, sorted): update size and redraw."""
        n = len(self.model)
        self.virtual_size = Size(self.size.width or 1, n + 1)
        if self.cursor >= n and n:
            self.set_reactive(VirtualTable.cursor, n - 1)
        self.refresh()

    def move_to(self, index: int, *, center: bool = False) -> None:
        """Put the cursor on row ``index`` (clamped) and scroll it into view."""
        n = len(self.model)
        index = max(0, min(index, n - 1)) if n else 0
        self.cursor = index
        self._scroll_into_view(index, center)

    def _body_height(self) -> int:
        return max(1, self.scrollable_content_region.height - 1)

    def _scroll_into_view(self, index: int, center: bool = False) -> None:
        h = self._body_height()
        top = round(self.scroll_y)
        if center:
            self.scroll_to(y=max(0, index - h // 2), animate=False, immediate=True)
        elif index < top:
            self.scroll_to(y=index, animate=False, immediate=True)
        elif index >= top + h:
            self.scroll_to(y=index - h + 1, animate=False, immediate=True)

    def watch_cursor(self, old: int, new: int) -> None:
        self.refresh()
        self.post_message(self.Highlighted(self, new))

    # -------------------------------------------------------------- actions
    def _user_move(self, index: int) -> None:
        previous = self.cursor
        self.move_to(index)
        self.post_message(self.UserMoved(self, self.cursor, previous))

    def action_cursor(self, delta: int) -> None:
        self._user_move(self.cursor + delta)

    def action_page(self, direction: int) -> None:
        self._user_move(self.cursor + direction * self._body_height())

    def action_first(self) -> None:
        self._user_move(0)

    def action_last(self) -> None:
        self._user_move(len(self.model) - 1)

    def action_select(self) -> None:
        if len(self.model):
            self.post_message(self.Selected(self, self.cursor))

    def _on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        if offset.y == 0:
            col = self._column_at(offset.x)
            if col is not None and col.sortable:
                self.post_message(self.HeaderClicked(self, col.key))
            return
        index = round(self.scroll_y) + offset.y - 1
        if 0 <= index < len(self.model):
            self._user_move(index)
            if event.chain >= 2:
                self.post_message(self.Selected(self, index))

    def on_resize(self, event: events.Resize) -> None:
        self._col_layout = None
        self.virtual_size = Size(event.size.width or 1, len(self.model) + 1)

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    def on_unmount(self) -> None:
        self._style_cache.clear()

    # -------------------------------------------------------------- layout
    def _fits(self) -> dict[int, int]:
        """``column index -> cells its content needs`` for the columns with ``fit`` (capped
        at their ``max_width``), from the model's ``content_width``."""
        cw = getattr(self.model, "content_width", None)
        if cw is None or not self._fit_cols:
            return {}
        cols = self.columns
        return {i: max(1, min(cw(i), cols[i].max_width or 1 << 30)) for i in self._fit_cols}

    def _layout(self, width: int) -> list[tuple[Column, int, int]]:
        """Visible columns as ``(column, width, index in self.columns)``."""
        fits = self._fits()
        cache = self._col_layout
        if cache is not None and cache[0] == width and cache[1] == fits:
            return cache[2]
        cols = self.columns
        chosen: dict[int, int] = {}          # column index -> width
        used = 0
        for level in sorted({c.priority for c in cols}):
            for i in range(len(cols)):
                if cols[i].priority != level:
                    continue
                need = cols[i].width + (1 if chosen else 0)
                if used + need <= width or not chosen:
                    chosen[i] = cols[i].width
                    used += need
            # claims before lower priorities are placed: grow_to first, then the content
            # of the fit columns (once the essential columns, priorities 0 and 1, are in)
            fit_claims = {i: t for i, t in fits.items() if level >= max(1, cols[i].priority)}
            for claims in ({i: cols[i].grow_to for i in chosen}, fit_claims):
                for i, target in claims.items():
                    w = chosen.get(i)
                    if w is not None and target > w and used < width:
                        add = min(target - w, width - used)
                        chosen[i] += add
                        used += add
        out = [(cols[i], chosen[i], i) for i in range(len(cols)) if i in chosen]
        spare = width - used
        if spare > 0 and out:
            # a fit column takes no spare width beyond its content while another flexible
            # column without a limit is shown to take it
            shared = [c._replace(max_width=fits[i]) if i in fits and c.flex else c
                      for c, _, i in out]
            if not any(c.flex and not c.max_width for c in shared):
                shared = [c for c, _, _ in out]
            widths = share_spare(shared, spare, [w for _, w, _ in out])
            out = [(c, w, i) for (c, _, i), w in zip(out, widths)]
        self._col_layout = (width, fits, out)
        return out

    def _column_at(self, x: int) -> Column | None:
        pos = 0
        for col, w, _ in self._layout(self.scrollable_content_region.width):
            if pos <= x < pos + w + 1:
                return col
            pos += w + 1
        return None

    def _style(self, name: str) -> Style:
        st = self._style_cache.get(name)
        if st is None:
            st = self._style_cache[name] = self.get_component_rich_style(name, partial=True)
        return st

    # -------------------------------------------------------------- rendering
    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        layout = self._layout(width)
        base = self.rich_style
        if y == 0:
            segs = []
            for k, (col, w, _) in enumerate(layout):
                label = col.label
                sty = "vt--header"
                if col.key == self.sort_key:
                    label += " ▼" if self.sort_reverse else " ▲"
                    sty = "vt--sorted"
                segs.append(Segment(fit(label, w, col.align), base + self._style(sty)))
                if k < len(layout) - 1:
                    segs.append(Segment(" ", base + self._style("vt--header")))
            return Strip(segs, width).adjust_cell_length(width, base + self._style("vt--header"))
        index = round(self.scroll_y) + y - 1
        if index >= len(self.model):
            return Strip.blank(width, base)
        try:
            cells = self.model.cells(index)
        except IndexError:
            return Strip.blank(width, base)
        cursor = index == self.cursor
        row_style = base
        if cursor:
            row_style = base + self._style("vt--cursor" if self.has_focus else "vt--cursor-blur")
        segs = []
        for k, (col, w, ci) in enumerate(layout):
            cell = cells[ci] if ci < len(cells) else ""
            if type(cell) is tuple:
                text, sname = cell
                st = row_style + self._style(f"vt--{sname}") if sname else row_style
                if cursor and sname:
                    st = st + self._style("vt--cursor" if self.has_focus else "vt--cursor-blur")
            else:
                text, st = cell, row_style
            # every cell through the one escape (names off the wire: client_id, topics,
            # group and member ids ...); a Segment is drawn as it is, never read as markup
            segs.append(Segment(fit(escape_text(text), w, col.align), st))
            if k < len(layout) - 1:
                segs.append(Segment(" ", row_style))
        return Strip(segs).adjust_cell_length(width, row_style)


# ------------------------------------------------------------------------------------ hex view

class HexView(ScrollView, can_focus=True):
    """A hex dump of one frame: offset, bytes, ASCII; 16 bytes per line (8 or 4 when the
    widget is too narrow for a whole line of 16).

    ``highlight`` is a ``(start, end)`` byte range shown in reverse video (the selected field);
    masked ranges (secrets) are shown as ``**`` and their real bytes are never given to this
    widget; missing ranges (never captured) as ``??``.
    """

    COMPONENT_CLASSES = {"hex--offset", "hex--highlight", "hex--masked", "hex--missing"}

    DEFAULT_CSS = """
    HexView { height: 1fr; overflow-x: hidden; background: $surface; }
    HexView > .hex--offset { color: $text-muted; }
    HexView > .hex--highlight { background: $accent; color: $text; text-style: bold; }
    HexView > .hex--masked { color: $error; }
    HexView > .hex--missing { color: $warning; }
    """

    BINDINGS = [
        Binding("up,k", "scroll_up", "Up", show=False),
        Binding("down,j", "scroll_down", "Down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.data = b""
        self.masked: list[tuple[int, int]] = []
        self.missing: list[tuple[int, int]] = []
        self.highlight: tuple[int, int] | None = None
        self.title = ""

    @property
    def offset_digits(self) -> int:
        """Hex digits of the offset column: 4 for frames up to 64 KiB, else 6."""
        return 4 if len(self.data) <= 0x10000 else 6

    def line_width(self, per: int) -> int:
        """Cells of a dump line of ``per`` bytes: offset and 2 spaces, ``per`` bytes of 3
        cells and the wider middle gap, then the ``|text|`` column."""
        return self.offset_digits + 2 + 3 * per + 1 + per + 2

    @property
    def per_line(self) -> int:
        """Bytes per line: 16, 8 or 4, the most whose whole line (text column included)
        fits the widget's width."""
        w = self.scrollable_content_region.width or 80
        for per in (16, 8):
            if self.line_width(per) <= w:
                return per
        return 4

    def show(self, data: bytes | None, masked=(), missing=(), highlight=None) -> None:
        """Show a frame (``None``: nothing)."""
        self.data = data or b""
        self.masked = list(masked)
        self.missing = list(missing)
        self.highlight = highlight
        self._resize()
        self.scroll_to(y=0, animate=False)
        self.refresh()

    def set_highlight(self, span: tuple[int, int] | None) -> None:
        """Highlight the bytes of ``span`` and scroll them into view."""
        self.highlight = span
        if span is not None:
            line = span[0] // self.per_line
            h = self.scrollable_content_region.height or 1
            top = round(self.scroll_y)
            if not top <= line < top + h:
                self.scroll_to(y=max(0, line - 1), animate=False)
        self.refresh()

    def _resize(self) -> None:
        n = (len(self.data) + self.per_line - 1) // self.per_line
        self.virtual_size = Size(self.size.width or 1, n)

    def on_resize(self, event: events.Resize) -> None:
        self._resize()

    @staticmethod
    def _in(ranges, i: int) -> bool:
        for a, b in ranges:
            if a <= i < b:
                return True
        return False

    def line_parts(self, line: int, per: int | None = None) -> list[tuple[str, str]]:
        """The pieces of hex dump line ``line``: ``(text, kind)`` with kind ``offset``,
        ``byte``, ``masked``, ``missing``, ``highlight`` or ``""``."""
        per = per or self.per_line
        start = line * per
        data = self.data
        if start >= len(data):
            return []
        hi = self.highlight
        out = [(f"{start:0{self.offset_digits}x}  ", "offset")]
        ascii_parts = []
        for k in range(per):
            i = start + k
            sep = " " if k != per // 2 - 1 else "  "      # the wider gap in the middle
            if i >= len(data):                # past the end of a partial last line
                out.append(("  " + sep, ""))
                ascii_parts.append((" ", ""))
                continue
            b = data[i]
            if self._in(self.masked, i):
                h, a, kind = "**", "*", "masked"
            elif self._in(self.missing, i):
                h, a, kind = "??", "?", "missing"
            else:
                h, a, kind = f"{b:02x}", chr(b) if 32 <= b < 127 else ".", ""
            lit = hi is not None and hi[0] <= i < hi[1]
            if lit:
                kind = "highlight"
            out.append((h, kind))
            out.append((sep, "highlight" if lit and hi[0] <= i + 1 < hi[1] else ""))
            ascii_parts.append((a, kind))
        out.append(("|", "offset"))
        out.extend(ascii_parts)
        out.append(("|", "offset"))
        return out

    def dump(self, per: int = 16) -> str:
        """The whole dump as text (what the lines show), for tests and copies."""
        n = (len(self.data) + per - 1) // per
        return "\n".join("".join(t for t, _ in self.line_parts(i, per)) for i in range(n))

    def highlighted_bytes(self) -> bytes:
        """The bytes under the highlight (what the selected field occupies)."""
        if self.highlight is None:
            return b""
        a, b = self.highlight
        return self.data[a:b]

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self.rich_style
        parts = self.line_parts(round(self.scroll_y) + y)
        if not parts:
            return Strip.blank(width, base)
        styles = {
            "": base,
            "byte": base,
            "offset": base + self.get_component_rich_style("hex--offset", partial=True),
            "highlight": base + self.get_component_rich_style("hex--highlight", partial=True),
            "masked": base + self.get_component_rich_style("hex--masked", partial=True),
            "missing": base + self.get_component_rich_style("hex--missing", partial=True),
        }
        return Strip([Segment(t, styles[k]) for t, k in parts]).adjust_cell_length(width, base)


# ------------------------------------------------------------------------------------ time bars

_EIGHTHS = " ▁▂▃▄▅▆▇█"


def fit_values(values: Sequence[float], width: int) -> list[float]:
    """``values`` (one per time bucket) on ``width`` columns: each column the largest value
    of the buckets it covers (several buckets per column), or of the bucket it falls in
    (a bucket spread over several columns)."""
    n = len(values)
    if not n or width <= 0:
        return []
    out = []
    for j in range(width):
        a = j * n // width
        b = max(a + 1, (j + 1) * n // width)
        out.append(max(values[a:b]))
    return out


def bar_rows(values: Sequence[float], width: int, height: int) -> list[str]:
    """Vertical bars of ``values`` on ``height`` text rows (top row first), scaled from
    zero to the largest value in eighths of a cell; a non-zero value is never drawn empty."""
    cols = fit_values(values, width)
    top = max(cols, default=0) or 1
    levels = height * 8
    heights = [0 if v <= 0 else max(1, round(v / top * levels)) for v in cols]
    rows = []
    for r in range(height):
        floor = (height - 1 - r) * 8
        rows.append("".join(_EIGHTHS[max(0, min(8, h - floor))] for h in heights))
    return rows


def time_axis(start_ns: int, end_ns: int, width: int) -> str:
    """A ``width``-cell axis line: the UTC time of ``start_ns`` at the left, of ``end_ns``
    at the right and, when there is room, of the middle (``HH:MM:SS``; with milliseconds
    when the span is under 10 s)."""
    def fmt(ns: int) -> str:
        sec, rest = divmod(ns, 1_000_000_000)
        t = _time.strftime("%H:%M:%S", _time.gmtime(sec))
        return t + f".{rest // 1_000_000:03d}" if end_ns - start_ns < 10_000_000_000 else t
    left, right = fmt(start_ns), fmt(end_ns)
    if width < len(left) + len(right) + 1:
        return left[:width].ljust(width)
    line = left + " " * (width - len(left) - len(right)) + right
    mid = fmt((start_ns + end_ns) // 2)
    k = (width - len(mid)) // 2
    if k > len(left) + 1 and k + len(mid) < width - len(right) - 1:
        line = line[:k] + mid + line[k + len(mid):]
    return line


class TimeBars(Widget, can_focus=True):
    """A value per time bucket as vertical bars from zero (the last line: a time axis).

    :meth:`set_data` gives the values (one per bucket, oldest first, buckets of equal width)
    and the time they cover (ns since the epoch); the bars take every line but the last.
    A bucket can be picked: a click on its bars, or ``←`` ``→`` (the bucket under the
    cursor is shown in reverse) and Enter when the widget has the focus; :class:`Picked`
    gives its time range.
    """

    DEFAULT_CSS = """
    TimeBars { height: 3; }
    TimeBars > .tb--bar { color: $accent; }
    TimeBars > .tb--axis { color: $text-muted; }
    TimeBars > .tb--cursor { color: $text; background: $accent 40%; }
    """

    COMPONENT_CLASSES = {"tb--bar", "tb--axis", "tb--cursor"}

    BINDINGS = [
        Binding("left", "move(-1)", "Earlier", show=False),
        Binding("right", "move(1)", "Later", show=False),
        Binding("home", "move(-1000000)", "First", show=False),
        Binding("end", "move(1000000)", "Last", show=False),
        Binding("enter", "pick", "Exchanges of this time", show=False),
    ]

    class Picked(Message):
        """Bucket(s) ``[start_ns, end_ns)`` of ``bars`` were picked (click or Enter)."""

        def __init__(self, bars: "TimeBars", start_ns: int, end_ns: int) -> None:
            super().__init__()
            self.bars = bars
            self.start_ns = start_ns
            self.end_ns = end_ns

        @property
        def control(self) -> "TimeBars":
            return self.bars

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.values: list[float] = []
        self.start_ns = 0
        self.end_ns = 0
        self.cursor = 0

    def set_data(self, values: Sequence[float], start_ns: int, end_ns: int) -> None:
        """Show ``values`` (one per bucket) over ``start_ns`` .. ``end_ns``."""
        if len(values) != len(self.values) and self.values:
            self.cursor = self.cursor * len(values) // len(self.values)  # buckets merged
        self.values = list(values)
        self.start_ns, self.end_ns = start_ns, end_ns
        self.cursor = max(0, min(self.cursor, len(self.values) - 1))
        self.refresh()

    def bucket_range(self, first: int, last: int) -> tuple[int, int]:
        """``[start_ns, end_ns)`` of buckets ``first`` to ``last`` (inclusive)."""
        n = max(1, len(self.values))
        span = self.end_ns - self.start_ns
        return (self.start_ns + span * first // n, self.start_ns + span * (last + 1) // n)

    def _buckets_at(self, x: int) -> tuple[int, int]:
        n, w = len(self.values), self.size.width
        a = x * n // w
        return a, max(a + 1, (x + 1) * n // w) - 1

    def action_move(self, delta: int) -> None:
        if self.values:
            self.cursor = max(0, min(self.cursor + delta, len(self.values) - 1))
            self.refresh()

    def action_pick(self) -> None:
        if self.values:
            self.post_message(self.Picked(self, *self.bucket_range(self.cursor, self.cursor)))

    def _on_click(self, event: events.Click) -> None:
        if not self.values or self.size.width <= 0:
            return
        first, last = self._buckets_at(max(0, min(event.x, self.size.width - 1)))
        self.cursor = first
        self.refresh()
        self.post_message(self.Picked(self, *self.bucket_range(first, last)))

    def render(self) -> Text:
        w, h = self.size.width, self.size.height
        text = Text(no_wrap=True, overflow="crop")
        if not self.values or w <= 0 or h < 2:
            return text
        bar = self.get_component_rich_style("tb--bar", partial=True)
        axis = self.get_component_rich_style("tb--axis", partial=True)
        lit = self.get_component_rich_style("tb--cursor", partial=True)
        cols = [x for x in range(w) if self.has_focus
                and self._buckets_at(x)[0] <= self.cursor <= self._buckets_at(x)[1]]
        a, b = (cols[0], cols[-1] + 1) if cols else (w, w)
        for row in bar_rows(self.values, w, h - 1):
            text.append(row[:a], style=bar)
            text.append(row[a:b], style=lit)
            text.append(row[b:] + "\n", style=bar)
        text.append(time_axis(self.start_ns, self.end_ns, w), style=axis)
        return text

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()
