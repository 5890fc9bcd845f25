"""Names off the wire in the TUI (issue 45, item 1): terminal controls and Rich/Textual markup
in client_id, topics, group, member and instance ids, assignor, record header keys and the TLS
server name (``captures/regressions/hostile_names.pcap``) are shown escaped
(:func:`kafkasniff.text.escape_text`) and literally, in every view, the detail tree, the
group screen, the bars and titles; none reaches the terminal."""

from __future__ import annotations

import sys

import pytest
from textual.widgets import Input, Tree

from kafkasniff.text import escape_text
from kafkasniff.tui.panes import GroupScreen
from kafkasniff.tui.screens import DetailScreen, FilterScreen
from tests.support.pty_run import PtyProcess
from tests.support.terminal import (
    HOSTILE_NAMES,
    VISIBLE_ESCAPES,
    assert_terminal_safe,
    craft_regressions,
)

from .conftest import make_app, pane, screen_text, wait_for, wait_loaded

SIZE = (200, 50)
#: Textual / Rich markup in names: shown as typed, never as style, link or action
MARKUP = "[bold]b[/bold][link=https://evil.example]l[/link][@click=app.quit]q[/][/nope]"


def _all_nodes(tree: Tree):
    """Every node of ``tree``, lazily filled branches filled (the detail's ``fill``)."""
    from kafkasniff.tui.screens import fill

    out, todo = [], [tree.root]
    while todo:
        node = todo.pop()
        fill(node)
        out.append(node)
        todo.extend(node.children)
    return out


async def _views(pilot, app, seen: list[str]) -> None:
    """Every view, its screen's text in ``seen``."""
    await wait_loaded(pilot)
    await wait_for(pilot, lambda: app.groups is not None)
    for key in "1234567":
        await pilot.press(key)
        await pilot.pause()
        seen.append(screen_text(app))


async def _details(pilot, app, seen: list[str], labels: list[str]) -> None:
    """The detail of every exchange: its screen and every tree label (branches filled)."""
    await pilot.press("2")
    p = pane(app)
    for k in range(len(p.view)):
        p.table.move_to(k)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen)
                       and app.screen.detail is not None)
        await pilot.pause()
        seen.append(screen_text(app))
        labels.extend(n.label.plain for n in _all_nodes(app.screen.query_one(Tree)))
        await pilot.press("escape")
        await wait_for(pilot, lambda: len(app.screen_stack) == 1)


async def _group_and_jumps(pilot, app, seen: list[str]) -> None:
    """The group screen, a jump from Clients (the bar shows the client_id filter) and the
    filter dialog that shows it."""
    await pilot.press("7")
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(app.screen, GroupScreen))
    await pilot.pause()
    seen.append(screen_text(app))
    await pilot.press("escape")
    await wait_for(pilot, lambda: len(app.screen_stack) == 1)
    await pilot.press("4")
    await pilot.pause()
    await pilot.press("enter")
    await wait_for(pilot, lambda: pane(app).filter.client != "" and not pane(app)._busy)
    await pilot.pause()
    seen.append(screen_text(app))
    await pilot.press("f")
    await wait_for(pilot, lambda: isinstance(app.screen, FilterScreen))
    await pilot.pause()
    seen.append(screen_text(app))
    # the dialog shows the name escaped, and applying it unchanged keeps the exact filter
    f = pane(app).filter
    assert app.screen.query_one("#f-client", Input).value == escape_text(f.client)
    await pilot.press("enter")
    await wait_for(pilot, lambda: len(app.screen_stack) == 1)
    assert pane(app).filter == f


async def test_hostile_names_never_reach_the_screen_raw():
    cr = craft_regressions()
    app = make_app(HOSTILE_NAMES)
    seen: list[str] = []
    labels: list[str] = []
    async with app.run_test(size=SIZE) as pilot:
        await _views(pilot, app, seen)
        await _details(pilot, app, seen, labels)
        await _group_and_jumps(pilot, app, seen)
    for text in seen + labels:
        assert_terminal_safe(text)
    everything = "\n".join(seen + labels)
    # shown, visibly escaped: the client_id, a topic, the group, the SNI, a header key
    for escape in VISIBLE_ESCAPES[:3]:
        assert escape in everything, escape
    for name in ("client", "topic", "group", "member", "header", "assignor"):
        assert escape_text(cr.hostile(name))[:40] in everything, name
    assert escape_text(cr.HOSTILE_SNI.decode("ascii"))[:30] in everything


async def test_markup_in_names_is_shown_as_typed(tmp_path):
    """Names holding Textual markup (``[bold]``, ``[link=...]``, ``[@click=...]``, a closing
    tag never opened) are shown as typed: no style, link or action, no markup error."""
    cr = craft_regressions()
    names = {k: f"{k}{MARKUP}" for k in cr.HOSTILE}
    names["record_value"] = f"value{MARKUP}"
    names["record_json"] = '{"m": "%s"}' % MARKUP
    path = tmp_path / "markup.pcap"
    path.write_bytes(cr.hostile_names_capture(names, f"sni{MARKUP}".encode()))
    app = make_app(path)
    seen: list[str] = []
    labels: list[str] = []
    async with app.run_test(size=SIZE) as pilot:
        await _views(pilot, app, seen)
        await _details(pilot, app, seen, labels)
        await _group_and_jumps(pilot, app, seen)
    everything = "\n".join(seen + labels)
    for name in ("client_id", "topic", "group_id", "member_id", "header_key", "assignor"):
        assert f"{name}[bold]b[/bold][link=https://evil.example]" in everything, name
    assert f"sni{MARKUP}"[:40] in everything


@pytest.mark.parametrize("command", [["tui"], ["live", "--tui", "-r"]])
def test_no_hostile_control_reaches_the_terminal_stream(command):
    """A real ``kafkasniff tui`` (and ``live``'s UI over the capture as a stream) on a
    pseudo-terminal, through every view, the detail and the group screen: the terminal
    receives Textual's own escape sequences only, none of the names' (OSC title and clipboard
    writes, C1 CSI, BEL, the bidi override)."""
    p = PtyProcess([sys.executable, "-m", "kafkasniff.cli", *command, str(HOSTILE_NAMES)],
                   columns=200, lines=50)
    try:
        assert p.wait_for_text("DescribeGroups", 60), p.text()[-2000:]
        p.read_for(1.0)
        for keys in (b"1", b"3", b"4", b"5", b"6", b"7", b"\r", b"\x1b", b"2", b"\r"):
            p.type(keys)
            p.read_for(0.8)
        p.type(b"\x1b")
        p.read_for(0.5)
        p.type(b"q")
    finally:
        code = p.wait(25)
    out = p.out
    assert code == 0, p.text()[-2000:]
    for raw in (b"\x1b]0;pwned-title", b"\x1b]52;c;", b"pwned-title\x07", b"\x07\x07",
                "\x9b".encode(), "\u202e".encode(), b"\x1b[2J\x1b[31m", b"\r\xc2\x9b"):
        assert raw not in out, raw
    # Textual's own operating system commands only: the mouse pointer's shape (OSC 22)
    oscs = {out[i + 2:out.find(b";", i)] for i in range(len(out)) if out.startswith(b"\x1b]", i)}
    assert oscs <= {b"22"}, oscs
    assert "pwned-title" in p.text()          # the names were on screen, escaped
