"""Screens pushed over the main one: detail of an exchange, help, filter, time range, sort,
save."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.await_complete import AwaitComplete
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import (
    Button,
    Checkbox,
    Footer,
    Input,
    Label,
    OptionList,
    RadioButton,
    RadioSet,
    Select,
    Static,
    Tree,
)
from textual.widgets.option_list import Option

from kafkasniff.content.sasl import Redacted
from kafkasniff.errors import KafkaSniffError
from kafkasniff.output.filters import STATUSES, Filter, known_api_names, parse_filter
from kafkasniff.output.render import batch_to_dict, records_summary_line
from kafkasniff.output.values import describe_bytes, short
from kafkasniff.protocol.primitives import RawRecords
from kafkasniff.text import escape_text
from kafkasniff.tui.detail import Detail, parent_path
from kafkasniff.tui.models import (
    api_label,
    fmt_date_time,
    fmt_ms,
    fmt_time_range,
    parse_time_range,
)
from kafkasniff.tui.widgets import HexView

if TYPE_CHECKING:
    from kafkasniff.tui.store import RowInfo

MAX_CHILDREN = 500   # tree children added at once; a "more" node loads the next ones


# ------------------------------------------------------------------------------------ tree

class NodeData:
    """What a detail tree node stands for: the frame side, the field path (key of the
    frame's spans) and the value whose children are added when the node is expanded."""

    __slots__ = ("side", "path", "value", "loaded", "start")

    def __init__(self, side: str | None, path: str, value=None, loaded: bool = True,
                 start: int = 0) -> None:
        self.side = side
        self.path = path
        self.value = value
        self.loaded = loaded
        self.start = start


def _scalar(v) -> str:
    """A leaf value as text, as it is: names off the wire are escaped where the text is
    shown (:func:`_label`)."""
    if v is None:
        return "null"
    t = type(v)
    if t is str:
        return f'"{v}"'
    if t is bool:
        return "true" if v else "false"
    if t in (bytes, bytearray, memoryview):
        b = bytes(v)
        return f"<{len(b)} bytes> {b[:24].hex()}{'…' if len(b) > 24 else ''}"
    if t is Redacted:
        return str(v)
    to_json = getattr(v, "to_json", None)
    if to_json is not None:
        j = to_json()
        return _scalar(j) if type(j) is str else json.dumps(j, ensure_ascii=False)
    return str(v)


def _label(key: str, text: str, kind: str = "") -> Text:
    """A tree label ``key: text`` (``key text`` for a branch). Both may hold names off the
    wire (field values, record header keys, JSON keys of a record): shown through
    :func:`~kafkasniff.text.escape_text`, as plain text (never markup)."""
    out = Text()
    out.append(escape_text(key), style="bold")
    if text:
        out.append(": " if kind == "" else " ")
        out.append(escape_text(text), style="red" if text.startswith("<redacted") else "")
    return out


def _expandable(v) -> bool:
    t = type(v)
    return (t is dict and bool(v)) or (t is list and bool(v)) or t is RawRecords


def _summary_of(v) -> str:
    t = type(v)
    if t is dict:
        return f"{{{len(v)} fields}}"
    if t is list:
        return f"[{len(v)}]"
    if t is RawRecords:
        rs = v.decoded
        if rs is None:
            return f"records {v.size_bytes} bytes (not decoded)"
        n = sum(b.record_count for b in rs.batches)
        return f"records {v.size_bytes} bytes, {len(rs.batches)} batch(es), {n} record(s)"
    return _scalar(v)


def add_value(node, side: str, key: str, path: str, value) -> None:
    """Add ``value`` under ``node`` as ``key``: a leaf, or a lazily filled branch."""
    if _expandable(value):
        node.add(_label(key, _summary_of(value), "branch"),
                 NodeData(side, path, value, loaded=False), allow_expand=True)
    else:
        node.add_leaf(_label(key, _scalar(value)), NodeData(side, path))


def fill(node) -> None:
    """Add the children of a lazily filled node (dicts, lists, records, batches)."""
    data: NodeData = node.data
    if data is None or data.loaded:
        return
    data.loaded = True
    v, side, path = data.value, data.side, data.path
    t = type(v)
    if t is dict:
        for k, x in v.items():
            add_value(node, side, k, f"{path}.{k}", x)
    elif t is list:
        end = min(len(v), data.start + MAX_CHILDREN)
        for i in range(data.start, end):
            add_value(node, side, f"[{i}]", f"{path}[{i}]", v[i])
        if end < len(v):
            node.add(Text(f"… {len(v) - end} more", style="italic"),
                     NodeData(side, path, v, loaded=False, start=end), allow_expand=True)
    elif t is RawRecords:
        rs = v.decoded
        if rs is None:
            node.add_leaf(_label("data", _scalar(v.data)), NodeData(side, path))
            return
        for i, b in enumerate(rs.batches):
            bpath = f"{path}.batches[{i}]"
            codec = f", {b.codec}" if b.codec != "none" else ""
            crc = "" if b.crc_ok is not False else ", CRC MISMATCH"
            label = (f"offsets {b.base_offset}-{b.last_offset}, {b.record_count} record(s), "
                     f"magic {b.magic}{codec}{crc}{', partial' if b.partial else ''}")
            node.add(_label(f"batch[{i}]", label, "branch"),
                     NodeData(side, bpath, b, loaded=False), allow_expand=True)
        if rs.partial_tail_bytes:
            node.add_leaf(_label("partial_tail_bytes", str(rs.partial_tail_bytes)),
                          NodeData(side, path))
    elif hasattr(v, "record_count") and hasattr(v, "magic"):      # a Batch
        d = batch_to_dict(v)
        d.pop("records", None)
        for k, x in d.items():
            node.add_leaf(_label(k, _scalar(x)), NodeData(side, path))
        recs = v.records or []
        if recs:
            rnode = node.add(_label("records", f"[{len(recs)}]", "branch"),
                             NodeData(side, path), expand=False)
            for j, r in enumerate(recs[:MAX_CHILDREN]):
                rpath = f"{path}.records[{j}]"
                ts = r.timestamp_ms
                label = (f"offset {r.offset}  key={short(describe_bytes(r.key), 30)}  "
                         f"value={short(describe_bytes(r.value), 40)}")
                rn = rnode.add(Text(escape_text(label)), NodeData(side, rpath), expand=False)
                rn.add_leaf(_label("offset", str(r.offset)), NodeData(side, rpath))
                ts_text = str(ts)
                if ts is not None and ts > 0:
                    ts_text += f" ({fmt_date_time(ts * 1_000_000)})"
                rn.add_leaf(_label("timestamp_ms", ts_text), NodeData(side, rpath))
                for name, val in (("key", r.key), ("value", r.value)):
                    _describe_node(rn, side, rpath, name, describe_bytes(val))
                if r.headers:
                    hn = rn.add(_label("headers", f"[{len(r.headers)}]", "branch"),
                                NodeData(side, rpath))
                    for hk, hv in r.headers:
                        _describe_node(hn, side, rpath, hk, describe_bytes(hv))
                if r.control is not None:
                    rn.add_leaf(_label("control", _scalar(r.control)), NodeData(side, rpath))
            if len(recs) > MAX_CHILDREN:
                rnode.add_leaf(Text(f"… {len(recs) - MAX_CHILDREN} more (see the JSON copy)",
                                    style="italic"), NodeData(side, path))


def _describe_node(parent, side: str, path: str, name: str, desc: dict | None) -> None:
    """A record key/value/header by the display rules (text, JSON, schema id, hex)."""
    if desc is None:
        parent.add_leaf(_label(name, "null"), NodeData(side, path))
        return
    text = short(desc, 80)
    if "json" in desc and isinstance(desc["json"], (dict, list)):
        node = parent.add(_label(name, text), NodeData(side, path))
        _json_children(node, side, path, desc["json"])
    else:
        parent.add_leaf(_label(name, f"{text}  ({desc['size_bytes']} bytes)"),
                        NodeData(side, path))


def _json_children(node, side, path, v, depth: int = 0) -> None:
    if depth > 20:
        return
    items = v.items() if isinstance(v, dict) else enumerate(v)
    for k, x in list(items)[:MAX_CHILDREN]:
        key = str(k) if isinstance(v, dict) else f"[{k}]"
        if isinstance(x, (dict, list)) and x:
            child = node.add(_label(key, f"[{len(x)}]" if isinstance(x, list) else "{…}",
                                    "branch"), NodeData(side, path))
            _json_children(child, side, path, x, depth + 1)
        else:
            node.add_leaf(_label(key, _scalar(x)), NodeData(side, path))


def build_tree(tree: Tree, detail: Detail, info: "RowInfo") -> None:
    """Fill the detail tree: summary, request, response (header, body), issues."""
    tree.clear()
    root = tree.root
    root.expand()
    ex = detail.exchange
    s = root.add("Summary", NodeData(None, "summary"), expand=True)
    name = api_label(info.api_name, info.api_version)
    rows = [
        ("exchange", f"#{info.row}"),
        ("connection", f"#{info.conn_id} {info.client} → {info.broker}"),
        ("client_id", info.client_id if info.client_id is not None else "-"),
        ("api", f"{name} (api_key {info.api_key})"),
        ("correlation_id", str(info.correlation_id)),
        ("time", fmt_date_time(info.ts_ns) + " UTC"),
        ("status", info.status + (" (inferred)" if info.inferred else "")),
        ("latency", fmt_ms(info.latency_ns)),
        ("long_poll", _long_poll_text(ex, info)),
        ("errors", ", ".join(info.errors) or "none"),
        ("throttle_time_ms", "-" if info.throttle_time_ms is None else str(info.throttle_time_ms)),
        ("topics", ", ".join(info.topics) or "-"),
        ("bytes", f"request {info.req_bytes}, response {info.resp_bytes}"),
    ]
    if ex is not None and ex.records is not None:
        rows.append(("records", records_summary_line(ex.records)))
    if info.extra.get("sasl_mechanism") or info.extra.get("sasl_user"):
        rows.append(("sasl", f"{info.extra.get('sasl_mechanism') or '?'} "
                             f"user={info.extra.get('sasl_user') or '?'}"))
    if info.extra.get("assumed_version") is not None:
        rows.append(("assumed_version", str(info.extra["assumed_version"])))
    for k, v in rows:
        style = "red" if k == "errors" and v != "none" else ""
        label = _label(k, "")
        label.append(": ")
        label.append(escape_text(v), style=style)
        s.add_leaf(label, NodeData(None, f"summary.{k}"))
    if detail.note:
        s.add_leaf(Text(escape_text(detail.note), style="italic yellow"),
                   NodeData(None, "summary.note"))
    if ex is not None:
        for side in ("request", "response"):
            msg = getattr(ex, side)
            if msg is None:
                root.add_leaf(Text(f"{side.capitalize()}: not captured", style="italic"),
                              NodeData(None, side))
                continue
            extra = "" if msg.complete else ", incomplete"
            if msg.missing_bytes:
                extra += f", {msg.missing_bytes} bytes missing"
            node = root.add(Text(f"{side.capitalize()} ({msg.frame_bytes} bytes{extra})",
                                 style="bold"), NodeData(side, side), expand=True)
            node.add_leaf(_label("size", str(msg.frame_bytes - 4)),
                          NodeData(side, f"{side}.size"))
            hnode = node.add(Text("header", style="bold"), NodeData(side, f"{side}.header"),
                             expand=True)
            for k, v in msg.header.items():
                add_value(hnode, side, k, f"{side}.header.{k}", v)
            if msg.body is not None:
                bnode = node.add(Text("body", style="bold"),
                                 NodeData(side, f"{side}.body", msg.body, loaded=False),
                                 expand=False)
                fill(bnode)
                bnode.expand()
            elif msg.raw_body is not None:
                node.add_leaf(_label("raw_body", _scalar(msg.raw_body)),
                              NodeData(side, f"{side}.raw_body"))
    issues = ex.issues if ex is not None else ()
    inode = root.add(Text(f"Issues ({len(issues)})", style="bold"), NodeData(None, "issues"),
                     expand=bool(issues))
    for iss in issues:
        where = f" at {iss.field_path}" if iss.field_path else ""
        sev = str(iss.severity)
        label = Text()
        label.append(sev, style="red" if sev == "error" else "yellow" if sev == "warning"
                     else "dim")
        label.append(escape_text(f" {iss.kind}{where}: {iss.message}"))
        inode.add_leaf(label, NodeData(None, "issues"))


def _long_poll_text(ex, info: "RowInfo") -> str:
    """``yes (fetch_max_wait: kept out of the latency percentiles)`` or ``no``: the
    long-poll rule of docs/long-polls.md the exchange matched (the decoded exchange's, else
    the summary's flag)."""
    rule = ex.long_poll_rule if ex is not None else None
    if rule or info.long_poll:
        return f"yes ({rule or 'rule not known'}: kept out of the latency percentiles)"
    return "no"


def span_for(detail: Detail, data: NodeData | None) -> tuple[str | None, tuple[int, int] | None]:
    """(side, byte span) to highlight for a tree node: its own span or its nearest
    ancestor's (records inside a compressed batch highlight the batch)."""
    if data is None or data.side is None:
        return None, None
    frame = detail.frames.get(data.side)
    if frame is None:
        return data.side, None
    path = data.path
    size = len(frame.data or b"")
    if path == data.side:
        return data.side, (0, size)
    if path in (f"{data.side}.header", f"{data.side}.body", f"{data.side}.raw_body"):
        body_start = 4 + getattr(detail.exchange, data.side).body_offset
        return data.side, (4, body_start) if path.endswith(".header") else (body_start, size)
    while path and path not in frame.spans:
        path = parent_path(path)
    return data.side, frame.spans.get(path)


class DetailScreen(Screen):
    """One exchange: a tree of every decoded field and the hex view of its frames."""

    BINDINGS = [
        Binding("escape,q", "close", "Back"),
        Binding("x", "switch_frame", "Req/resp bytes"),
        Binding("b", "toggle_both", "Side by side"),
        Binding("y", "copy_json", "Copy JSON"),
        Binding("left_square_bracket,p", "step(-1)", "Previous"),
        Binding("right_square_bracket,n", "step(1)", "Next"),
        # a screen has no action_focus_next (the app has): the binding named one that did
        # not exist and swallowed Tab
        Binding("tab,shift+tab", "toggle_focus", "Tree/hex", show=False),
    ]

    DEFAULT_CSS = """
    DetailScreen { layout: vertical; }
    DetailScreen #detail-title { height: 1; background: $panel; color: $text; padding: 0 1; }
    DetailScreen #detail-body { height: 1fr; }
    DetailScreen Tree { width: 1fr; height: 1fr; border: round $primary 50%; }
    DetailScreen Tree:focus { border: round $accent; }
    DetailScreen #hex-box { width: 1fr; height: 1fr; border: round $primary 50%; }
    DetailScreen #hex-box:focus-within { border: round $accent; }
    DetailScreen #hex-title { height: 1; color: $text-muted; }
    DetailScreen.wide #hex-box { width: 80; }
    DetailScreen.narrow #hex-box { width: 45; }
    DetailScreen #hex-box2 { display: none; width: 1fr; height: 1fr;
        border: round $primary 50%; }
    DetailScreen #hex-box2:focus-within { border: round $accent; }
    DetailScreen #hex-title2 { height: 1; color: $text-muted; }
    DetailScreen.both #hex-box2 { display: block; }
    DetailScreen.both #hex-box { width: 1fr; }
    DetailScreen.both.narrow Tree { width: 20; }
    DetailScreen.nohex #hex-box, DetailScreen.nohex #hex-box2 { display: none; }
    """

    def __init__(self, app_ref, view_rows, index: int) -> None:
        super().__init__()
        self.app_ref = app_ref
        self.view_rows = view_rows
        self.index = index
        self.detail: Detail | None = None
        self.info = None
        self.side = "request"
        self.both = False

    def compose(self) -> ComposeResult:
        yield Static("", id="detail-title")
        with Horizontal(id="detail-body"):
            tree: Tree = Tree("exchange", id="detail-tree")
            tree.show_root = False
            tree.guide_depth = 2
            yield tree
            with Vertical(id="hex-box"):
                yield Static("", id="hex-title")
                yield HexView(id="hex")
            with Vertical(id="hex-box2"):          # the response, side by side (b)
                yield Static("", id="hex-title2")
                yield HexView(id="hex2")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(Tree).focus()
        self._load()

    def on_resize(self, event) -> None:
        # wide: 16 bytes per line; narrow (below 100 columns): the 45 cells a line of 8
        # bytes needs with its text column, its borders and a scroll bar
        self.set_class(self.size.width >= 150, "wide")
        self.set_class(self.size.width < 100, "narrow")

    def _title(self, info: "RowInfo", suffix: str = "") -> None:
        self.query_one("#detail-title", Static).update(Text(escape_text(
            f"Exchange #{info.row}  {api_label(info.api_name, info.api_version)}  "
            f"corr={info.correlation_id}  {info.client} → {info.broker}  "
            f"[{self.index + 1}/{len(self.view_rows)}]{suffix}")))

    def _load(self) -> None:
        row = self.view_rows[self.index]
        self.info = self.app_ref.store.row(row)
        self._title(self.info, "  decoding…")
        self._decode(self.info)

    @work(thread=True, exclusive=True, group="detail")
    def _decode(self, info: "RowInfo") -> None:
        detail = self.app_ref.decode_row(info)
        self.app.call_from_thread(self._show, info, detail)

    def _show(self, info: "RowInfo", detail: Detail) -> None:
        if info.row != self.view_rows[self.index]:
            return
        self.detail = detail
        self._title(info)
        # no frame bytes to show (a TLS-decrypted or live exchange, frames not found): no
        # empty hex pane, the tree takes the width (the tree says why)
        self.set_class(not self.has_bytes, "nohex")
        tree = self.query_one(Tree)
        build_tree(tree, detail, info)
        self.side = "request" if "request" in detail.frames else "response"
        self._show_frame(self.side, None)

    def _show_frame(self, side: str, span) -> None:
        if self.both:
            # request on the left, response on the right; the selected field's side lit
            self.side = side
            for s, hex_id, title_id in (("request", "#hex", "#hex-title"),
                                        ("response", "#hex2", "#hex-title2")):
                self._fill_hex(s, span if s == side else None, hex_id, title_id)
            return
        self._fill_hex(side, span, "#hex", "#hex-title")

    def _fill_hex(self, side: str, span, hex_id: str, title_id: str) -> None:
        hexv = self.query_one(hex_id, HexView)
        detail = self.detail
        frame = detail.frames.get(side) if detail else None
        title = self.query_one(title_id, Static)
        if frame is None or frame.data is None:
            hexv.show(None)
            note = detail.note if detail and detail.note else "no bytes"
            title.update(Text(escape_text(f" {side}: {note}")))
            return
        if hex_id == "#hex" and not self.both:
            self.side = side
        if hexv.data is not frame.data:
            hexv.show(frame.data, frame.masked, frame.missing, span)
        hexv.set_highlight(span)
        extra = f", {len(frame.masked)} secret range(s) hidden" if frame.masked else ""
        sel = f"  selected bytes {span[0]}-{span[1] - 1}" if span and span[1] > span[0] else ""
        title.update(Text(f" {side} frame, {len(frame.data)} bytes{extra}{sel}"))

    @on(Tree.NodeExpanded)
    def _expanded(self, event: Tree.NodeExpanded) -> None:
        fill(event.node)

    @on(Tree.NodeHighlighted)
    def _highlighted(self, event: Tree.NodeHighlighted) -> None:
        if self.detail is None:
            return
        side, span = span_for(self.detail, event.node.data)
        if side is not None:
            self._show_frame(side, span)

    def action_close(self) -> None:
        if self.app.screen is self:      # Esc twice quickly: the second one has no screen
            self.app.pop_screen()

    @property
    def has_bytes(self) -> bool:
        """The decoded exchange has a frame whose bytes can be shown."""
        d = self.detail
        return d is not None and any(f.data is not None for f in d.frames.values())

    def action_toggle_focus(self) -> None:
        """Tab / Shift+Tab: the tree, the hex view (side by side: the request's, then the
        response's), in turn (the tree alone when there are no bytes to show)."""
        if not self.has_bytes:
            self.query_one(Tree).focus()
            return
        order = [self.query_one(Tree), self.query_one("#hex", HexView)]
        if self.both:
            order.append(self.query_one("#hex2", HexView))
        k = next((i for i, w in enumerate(order) if w.has_focus), -1)
        order[(k + 1) % len(order)].focus()

    def action_toggle_both(self) -> None:
        """``b``: request and response frames side by side (again: one frame, ``x``
        switches)."""
        self.both = not self.both
        self.set_class(self.both, "both")
        if self.detail is not None:
            node = self.query_one(Tree).cursor_node
            side, span = span_for(self.detail, node.data if node is not None else None)
            self._show_frame(side or self.side, span)

    def action_switch_frame(self) -> None:
        if self.detail is None or self.both:
            return
        other = "response" if self.side == "request" else "request"
        if other in self.detail.frames:
            self._show_frame(other, None)

    def action_step(self, delta: int) -> None:
        k = self.index + delta
        if 0 <= k < len(self.view_rows):
            self.index = k
            self.detail = None
            self._load()
            self.app_ref.exchanges_pane().follow_detail(self.view_rows[k])

    def action_copy_json(self) -> None:
        if self.detail is not None and self.detail.exchange is not None:
            self.app_ref.copy_exchange_json(self.detail.exchange, self.info.row)


# ------------------------------------------------------------------------------------ dialogs

class Dialog(ModalScreen):
    """A modal screen that is dismissed at most once.

    Keys typed quickly (Enter twice in a dialog) are queued before the first one's dismissal
    has popped the screen: Textual's :meth:`~textual.screen.Screen.dismiss` would then call
    the result callback again and pop the screen below (``ScreenStackError`` when that is the
    last one). Here a second dismissal, or one of a screen that is no longer on top, does
    nothing."""

    _ks_dismissed = False

    def dismiss(self, result=None) -> AwaitComplete:
        if self._ks_dismissed or self.app.screen is not self:
            return AwaitComplete.nothing()
        self._ks_dismissed = True
        return super().dismiss(result)


# ------------------------------------------------------------------------------------ help

class HelpScreen(Dialog):
    """Every key binding, by view."""

    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close")]

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 90%; max-width: 100; height: 90%;
        border: round $accent; background: $surface; padding: 0 1; }
    """

    def __init__(self, sections: list[tuple[str, list[tuple[str, str]]]]) -> None:
        super().__init__()
        self.sections = sections

    def compose(self) -> ComposeResult:
        text = Text()
        text.append("kafkasniff — keys (mouse: click tabs, rows, column headers to sort; "
                    "wheel scrolls)\n", style="bold")
        for title, keys in self.sections:
            text.append(f"\n{title}\n", style="bold underline")
            for key, desc in keys:
                text.append(f"  {key:<22}", style="bold")
                text.append(f"{desc}\n")
        with VerticalScroll():
            yield Static(text, id="help-text")


# ------------------------------------------------------------------------------------ filter

class FilterScreen(Dialog):
    """Edit the exchanges filter, in the one filter language of ``read`` and ``live``
    (:func:`kafkasniff.output.filters.parse_filter`): a field that could match nothing (an
    unknown API, a ``[`` never closed, a latency that is not a number) keeps the dialog open
    with the reason below the fields."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    DEFAULT_CSS = """
    FilterScreen { align: center middle; }
    FilterScreen > VerticalScroll { width: 70; height: auto; max-height: 95%;
        border: round $accent; background: $surface; padding: 0 1; }
    FilterScreen Label { margin-top: 1; }
    FilterScreen Input { width: 100%; }
    FilterScreen Horizontal { height: auto; margin-top: 1; }
    FilterScreen Button { margin-right: 1; }
    FilterScreen #f-error { color: $error; height: auto; margin-top: 1; }
    """

    def __init__(self, current: Filter, apis: list[str], definitions_dir: str | None = None
                 ) -> None:
        super().__init__()
        self.current = current
        self.apis = apis
        self.definitions_dir = definitions_dir
        # what a text field shows (names off the wire escaped, escape_text) -> the value
        # it stands for, kept when the field is left as it was
        self._raw: dict[str, tuple[str, str]] = {}

    def _field(self, key: str, value: str, **kwargs) -> Input:
        shown = escape_text(value)
        self._raw[key] = (shown, value)
        return Input(shown, id=key, **kwargs)

    def compose(self) -> ComposeResult:
        f = self.current
        seen = ", ".join(escape_text(a) for a in self.apis[:12])
        with VerticalScroll():
            yield Label(Text(f"API (names or keys, comma separated; seen: {seen}"
                             f"{'…' if len(self.apis) > 12 else ''})"))
            yield self._field("f-api", ",".join(f.apis), placeholder="Produce,Fetch")
            yield Label("Client (client_id or client ip:port; glob or substring, =exact)")
            yield self._field("f-client", f.client)
            yield Label("Broker (ip:port; glob or substring, =exact)")
            yield self._field("f-broker", f.broker)
            yield Label("Topic (glob or substring, =exact)")
            yield self._field("f-topic", f.topic)
            yield Label("Status")
            yield Select([(s, s) for s in STATUSES], value=f.status or Select.NULL,
                         id="f-status", allow_blank=True, prompt="any")
            yield Label("Minimum latency (ms)")
            yield Input("" if f.min_latency_ms is None else f"{f.min_latency_ms:g}",
                        id="f-latency", placeholder="12.5")
            yield Checkbox("Errors only (a Kafka error code)", f.errors_only, id="f-errors")
            yield Checkbox("Issues only (a decode issue)", f.issues_only, id="f-issues")
            yield Label("Long-polls (exchanges the broker held by design: an idle Fetch ...)")
            yield Select([("only long-polls", "only"), ("no long-polls", "none")],
                         value={True: "only", False: "none"}.get(f.long_poll, Select.NULL),
                         id="f-long-poll", allow_blank=True, prompt="any")
            yield Static("", id="f-error")
            with Horizontal():
                yield Button("Apply", variant="primary", id="f-apply")
                yield Button("Clear", id="f-clear")
                yield Button("Cancel", id="f-cancel")

    def on_mount(self) -> None:
        self.query_one("#f-api", Input).focus()

    def _collect(self) -> Filter:
        """The filter of the fields.

        Raises:
            FilterError: a field that could match nothing."""
        def val(key: str) -> str:
            text = self.query_one(f"#{key}", Input).value
            shown, raw = self._raw.get(key, (None, None))
            return raw if text == shown else text
        status = self.query_one("#f-status", Select).value
        lp = self.query_one("#f-long-poll", Select).value
        return parse_filter(
            apis=val("f-api"), client=val("f-client"), broker=val("f-broker"),
            topic=val("f-topic"), status=status if isinstance(status, str) else "",
            errors_only=self.query_one("#f-errors", Checkbox).value,
            issues_only=self.query_one("#f-issues", Checkbox).value,
            min_latency=val("f-latency"),
            long_poll={"only": True, "none": False}.get(lp) if isinstance(lp, str) else None,
            api_names=(*known_api_names(self.definitions_dir), *self.apis))

    def _apply_fields(self) -> None:
        try:
            f = self._collect()
        except KafkaSniffError as exc:      # FilterError (DefinitionError: no API names)
            self.query_one("#f-error", Static).update(Text(escape_text(str(exc))))
            return
        self.dismiss(f)

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self._apply_fields()

    @on(Button.Pressed, "#f-apply")
    def _apply(self) -> None:
        self._apply_fields()

    @on(Button.Pressed, "#f-clear")
    def _clear(self) -> None:
        self.dismiss(Filter())

    @on(Button.Pressed, "#f-cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


# ------------------------------------------------------------------------------------ time

class TimeRangeScreen(Dialog):
    """Type a time range ``from..to`` for the Exchanges view. Dismissed with ``("set",
    (from_ns, to_ns))``, ``("set", None)`` (an empty text: any time) or ``None`` (Esc)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    DEFAULT_CSS = """
    TimeRangeScreen { align: center middle; }
    TimeRangeScreen > Vertical { width: 70; height: auto; border: round $accent;
        background: $surface; padding: 0 1; }
    TimeRangeScreen Input { width: 100%; }
    TimeRangeScreen #t-error { color: $error; height: auto; }
    """

    def __init__(self, current: tuple[int, int] | None, ref_ns: int) -> None:
        super().__init__()
        self.current = current
        self.ref_ns = ref_ns

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Time range FROM..TO, UTC: HH:MM:SS[.ffffff] on the capture's "
                         "date, or YYYY-MM-DD HH:MM:SS[.ffffff]; a side left out is open; "
                         "empty: any time")
            yield Input(fmt_time_range(self.current) if self.current else "", id="t-range",
                        placeholder="00:56:17..00:56:18.5")
            yield Static("", id="t-error")

    def on_mount(self) -> None:
        self.query_one("#t-range", Input).focus()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        try:
            rng = parse_time_range(event.value, self.ref_ns)
        except ValueError as exc:
            self.query_one("#t-error", Static).update(Text(escape_text(str(exc))))
            return
        self.dismiss(("set", rng))

    def action_cancel(self) -> None:
        self.dismiss(None)


# ------------------------------------------------------------------------------------ sort

class ChoiceScreen(Dialog):
    """Pick one of a few options (sort column)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    DEFAULT_CSS = """
    ChoiceScreen { align: center middle; }
    ChoiceScreen > Vertical { width: 44; height: auto; max-height: 90%;
        border: round $accent; background: $surface; }
    ChoiceScreen OptionList { height: auto; max-height: 20; }
    """

    def __init__(self, title: str, options: list[tuple[str, str]], current: str | None) -> None:
        super().__init__()
        self.title_text = title
        self.options = options
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.title_text)
            yield OptionList(*[Option(label, id=key) for key, label in self.options])

    def on_mount(self) -> None:
        ol = self.query_one(OptionList)
        ol.focus()
        keys = [k for k, _ in self.options]
        if self.current in keys:
            ol.highlighted = keys.index(self.current)

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)


# ------------------------------------------------------------------------------------ save

class SaveScreen(Dialog):
    """Where and how to save the current view."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    DEFAULT_CSS = """
    SaveScreen { align: center middle; }
    SaveScreen > Vertical { width: 70; height: auto; border: round $accent;
        background: $surface; padding: 0 1; }
    SaveScreen Input { width: 100%; }
    SaveScreen Horizontal { height: auto; }
    SaveScreen Button { margin-right: 1; }
    """

    def __init__(self, rows: int, default_path: str, parquet: bool) -> None:
        super().__init__()
        self.rows = rows
        self.default_path = default_path
        self.parquet = parquet

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"Save the {self.rows:,} exchanges of the current view")
            with RadioSet(id="s-format"):
                yield RadioButton("JSON Lines (one file, as read --json)", value=True,
                                  id="s-jsonl")
                yield RadioButton("Parquet (a directory of export tables)"
                                  + ("" if self.parquet else " — unavailable"),
                                  id="s-parquet", disabled=not self.parquet)
            yield Label("Path")
            yield Input(self.default_path, id="s-path")
            with Horizontal():
                yield Button("Save", variant="primary", id="s-save")
                yield Button("Cancel", id="s-cancel")

    def on_mount(self) -> None:
        self.query_one("#s-path", Input).focus()

    def _fmt(self) -> str:
        return "parquet" if self.query_one("#s-parquet", RadioButton).value else "jsonl"

    @on(RadioSet.Changed)
    def _fmt_changed(self) -> None:
        inp = self.query_one("#s-path", Input)
        path = inp.value
        if self._fmt() == "parquet" and path.endswith(".jsonl"):
            inp.value = path[: -len(".jsonl")]
        elif self._fmt() == "jsonl" and not path.endswith(".jsonl"):
            inp.value = path + ".jsonl"

    @on(Input.Submitted)
    @on(Button.Pressed, "#s-save")
    def _save(self) -> None:
        path = self.query_one("#s-path", Input).value.strip()
        if path:
            self.dismiss((self._fmt(), path))

    @on(Button.Pressed, "#s-cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
