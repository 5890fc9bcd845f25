"""No secret of captures/crafted_sasl.pcap appears anywhere in the TUI: any view, every node
of every exchange's detail tree, the hex views (the bytes given to them and their text), the
copied JSON and a saved view; with --show-secrets they do appear."""

from __future__ import annotations

import json

from textual.widgets import Tree

from kafkasniff.pipeline import PipelineOptions
from kafkasniff.tui.screens import DetailScreen, fill
from kafkasniff.tui.widgets import HexView
from tests.captures.test_secrets import leak_forms, secrets

from .conftest import SASL, load_store, make_app, screen_text, wait_for, wait_loaded


def leaks(text: str) -> list[str]:
    return [what for what, secret in secrets() for form in leak_forms(secret) if form in text]


def byte_leaks(data: bytes) -> list[str]:
    return [what for what, secret in secrets() if len(secret) >= 4 and secret in data]


def expand_all(node) -> None:
    fill(node)
    node.expand()
    for c in node.children:
        expand_all(c)


def labels(node):
    yield node.label.plain
    for c in node.children:
        yield from labels(c)


async def _walk_everything(app, pilot, tmp_path) -> tuple[str, list[bytes]]:
    """Every text the app can show for the capture, and every byte given to hex views."""
    texts = []
    blobs = []
    for key in "123456":
        await pilot.press(key)
        await pilot.pause()
        texts.append(screen_text(app))
    await pilot.press("2")
    pane = app.query_one("#exchanges-pane")
    pane.table.move_to(0)
    await pilot.press("enter")
    for k in range(len(pane.view)):
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen)
                       and app.screen.detail is not None and app.screen.index == k)
        await pilot.pause()
        screen = app.screen
        tree = screen.query_one(Tree)
        expand_all(tree.root)
        texts.append("\n".join(labels(tree.root)))
        texts.append(screen_text(app))
        hexv = screen.query_one(HexView)
        for side, frame in screen.detail.frames.items():
            blobs.append(frame.data)
            screen._show_frame(side, None)
            texts.append(hexv.dump())
            texts.append(hexv.dump(8))
        row = pane.view[k]
        app.copy_exchange_json(screen.detail.exchange, row)
        texts.append((tmp_path / f"kafkasniff-exchange-{row}.json").read_text())
        texts.append(app.clipboard)
        await pilot.press("right_square_bracket")
    await pilot.press("escape")
    out = tmp_path / "view.jsonl"
    app.save_view(list(pane.view), "jsonl", str(out))
    await wait_for(pilot, lambda: app.last_saved == str(out))
    texts.append(out.read_text())
    return "\n".join(texts), blobs


async def test_no_secret_on_any_screen(tmp_path):
    app = make_app(SASL, tmp_path)
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_loaded(pilot)
        assert len(app.store) == 22
        text, blobs = await _walk_everything(app, pilot, tmp_path)
    assert not leaks(text), leaks(text)[:5]
    for blob in blobs:
        assert not byte_leaks(blob)
    # what is shown instead: usernames, mechanisms, redaction markers, masked bytes
    for s in ("alice", "carol", "PLAIN", "SCRAM-SHA-256", "OAUTHBEARER", "GSSAPI",
              "<redacted password", "**"):
        assert s in text, s
    assert any(b"\x00\x00\x00\x00" in blob for blob in blobs)


async def test_show_secrets_shows_them(tmp_path):
    app = make_app(SASL, tmp_path, options=PipelineOptions(show_secrets=True))
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_loaded(pilot)
        pane = app.query_one("#exchanges-pane")
        rows = [app.store.row(r) for r in pane.view]
        k = next(i for i, r in enumerate(rows) if r.api_name == "SaslAuthenticate")
        pane.table.move_to(k)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen)
                       and app.screen.detail is not None)
        tree = app.screen.query_one(Tree)
        expand_all(tree.root)
        text = "\n".join(labels(tree.root))
        assert "alice-secret-pw" in text
        assert b"alice-secret-pw" in app.screen.detail.frames["request"].data


def test_detail_masks_are_reported(tmp_path):
    """A frame whose decoded body holds a redacted value has masked bytes: the whole token
    of a raw SASL frame, the auth_bytes field of a SaslAuthenticate frame."""
    from kafkasniff.tui.source import FileSource

    src = FileSource([str(SASL)])
    store = load_store(src)
    seen = 0
    for r in range(len(store)):
        info = store.row(r)
        if info.api_name not in ("SaslAuthenticate", "SaslToken"):
            continue
        d = src.detail(info, store.row_issues(r))
        req = d.frames["request"]
        redacted = "<redacted" in json.dumps(d.exchange.request.body, default=str)
        if info.api_name == "SaslToken":
            assert req.masked == [(4, len(req.data))] or len(req.data) == 4
        elif redacted:
            a, b = req.spans["request.body.auth_bytes"]
            assert any(x <= a and b <= y for x, y in req.masked)
            seen += 1
        else:
            assert not req.masked
    assert seen >= 4


def test_a_damaged_header_does_not_show_the_secret_body():
    """A SaslAuthenticate request whose header cannot be decoded (a gap cut it, or a bad
    client_id length): its undecoded body is redacted in the tree and masked in the hex view,
    as the pipeline redacts it."""
    from kafkasniff.content.frames import ContentDecoder
    from kafkasniff.protocol.schema import load_definitions
    from kafkasniff.tui.detail import decode_exchange
    from kafkasniff.tui.store import RowInfo

    secret = b"damaged-header-pw"
    token = b"\x00alice\x00" + secret
    for version in (1, 2):
        payload = ((36).to_bytes(2, "big") + version.to_bytes(2, "big") + (7).to_bytes(4, "big")
                   + (1000).to_bytes(2, "big")          # client_id longer than the frame
                   + len(token).to_bytes(4, "big") + token)
        frame = len(payload).to_bytes(4, "big") + payload
        ctx = ContentDecoder(load_definitions(None), with_records=True)
        info = RowInfo(0, 1, 1, "10.0.0.1:5000", "10.0.0.2:9092", None, 36,
                       "SaslAuthenticate", version, 7, "unanswered", None, len(frame), 0, (),
                       None, (), None, 0, (), (), "", -1, 1, -1, 0, False, False, False, {})
        d = decode_exchange(ctx, info, frame, None)
        req = d.exchange.request
        assert req.raw_body is None and "<redacted" in str(req.body["_raw_body"])
        assert secret not in d.frames["request"].data
        assert d.frames["request"].masked == [(12, len(frame))]
