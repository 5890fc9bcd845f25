"""Helpers for driving the TUI with Textual's Pilot."""

from __future__ import annotations

import asyncio
import inspect
import io
import time

import pytest
from rich.console import Console

from kafkasniff.tui.app import KafkaSniffApp
from kafkasniff.tui.panes import ExchangesPane
from kafkasniff.tui.source import FileSource
from kafkasniff.tui.store import SummaryStore
from tests.conftest import CAPTURES

ERR = CAPTURES / "librdkafka_errors_latency.pcap"
SASL = CAPTURES / "crafted_sasl.pcap"
COMPRESSION = CAPTURES / "librdkafka_compression.pcap"


def make_app(path, tmp_path=None, **kwargs) -> KafkaSniffApp:
    """An app over one capture (a fresh source)."""
    paths = path if isinstance(path, list) else [path]
    return KafkaSniffApp(FileSource([str(p) for p in paths], **kwargs),
                         save_dir=str(tmp_path) if tmp_path else None)


def pane(app) -> ExchangesPane:
    """The app's Exchanges pane."""
    return app.query_one("#exchanges-pane", ExchangesPane)


def rows_of_view(app) -> list:
    """The :class:`~kafkasniff.tui.store.RowInfo` of every row the Exchanges view shows, in
    its order."""
    return [app.store.row(r) for r in pane(app).view]


def load_store(src: FileSource, timeout: float = 60.0) -> SummaryStore:
    """Run a source to its end without an app; its rows in a store."""
    store = SummaryStore(src.tables)
    src.start(lambda: None)
    end = time.monotonic() + timeout
    while src.running:
        assert time.monotonic() < end, "capture did not finish loading"
        time.sleep(0.01)
    for ch in src.drain().chunks:
        store.extend(ch)
    return store


async def wait_loaded(pilot, timeout: float = 30.0) -> None:
    """Wait until the source finished and the app ingested everything."""
    app = pilot.app
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not app.progress.finished:
        assert loop.time() < end, "capture did not finish loading"
        await pilot.pause(0.02)
    await pilot.pause()
    await pilot.pause()


async def wait_for(pilot, cond, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        assert loop.time() < end, "condition not reached"
        await pilot.pause(0.02)


def screen_text(app) -> str:
    """The text of the whole screen as it is drawn (every line)."""
    width, height = app.size
    console = Console(width=width, height=height, record=True, file=io.StringIO(),
                      force_terminal=True, color_system="truecolor", legacy_windows=False,
                      safe_box=False)
    update = app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    console.print(update)
    return console.export_text(styles=False)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Run ``async def`` tests in a fresh event loop (no asyncio plugin is installed)."""
    if inspect.iscoroutinefunction(pyfuncitem.obj):
        args = {a: pyfuncitem.funcargs[a] for a in pyfuncitem._fixtureinfo.argnames}
        asyncio.run(pyfuncitem.obj(**args))
        return True
    return None


def loaded_store(path) -> tuple[FileSource, SummaryStore]:
    """A file source over one capture, run to its end, and its rows in a store."""
    src = FileSource([str(path)])
    return src, load_store(src)
