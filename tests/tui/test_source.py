"""Data sources: batching and coalescing, errors in the progress, a live-like source, inputs that cannot seek, the pipeline options."""

from __future__ import annotations

import threading
import time

import pytest

from kafkasniff.model import Exchange
from kafkasniff.output.filters import Filter
from kafkasniff.output.render import exchange_to_dict
from kafkasniff.pipeline import PipelineOptions
from kafkasniff.tui.source import FileSource, Progress, ThreadedSource
from kafkasniff.tui.store import SummaryBuilder
from tests.conftest import decode_capture
from tests.tui.conftest import ERR, load_store, wait_for


def test_batches_coalesce_until_drained():
    calls = []
    src = FileSource([str(ERR)], interval_s=0.0)
    src.start(lambda: calls.append(1))
    while src.running:
        time.sleep(0.01)
    assert len(calls) == 1           # nobody drained: one notification, the rest piled up
    u = src.drain()
    assert sum(len(c) for c in u.chunks) == 115 and u.progress.finished
    assert u.snapshot is not None and u.snapshot.exchanges == 115
    assert src.drain().chunks == []


def test_a_missing_file_is_an_error_in_the_progress(tmp_path):
    src = FileSource([str(tmp_path / "nope.pcap")])
    src.start(lambda: None)
    while src.running:
        time.sleep(0.01)
    p = src.drain().progress
    assert p.finished and "no such file" in p.error and src.error


class ReplaySource(ThreadedSource):
    """A live-like source: replays a capture's exchanges in steps the test releases (what a
    live source does with packets from the network)."""

    live = True
    title = "replay"

    def __init__(self, exchanges: list[Exchange], steps: int) -> None:
        super().__init__()
        self.exchanges = exchanges
        self.steps = steps
        self.go = threading.Semaphore(0)
        self.source = FileSource([str(ERR)])

    def _run(self) -> None:
        from kafkasniff.tui.aggregates import Aggregates

        builder = SummaryBuilder(self.tables)
        agg = Aggregates()
        per = len(self.exchanges) // self.steps + 1
        for k in range(0, len(self.exchanges), per):
            self.go.acquire()
            for ex in self.exchanges[k:k + per]:
                builder.add(ex)
                agg.add(ex)
            self.publish(builder.take(), agg.snapshot(), Progress(live=True, exchanges=k + per))

    def detail(self, info, issues=()):
        return self.source.detail(info, issues)


async def test_live_like_source_follow_mode_and_filters_on_arriving_rows():
    from kafkasniff.tui.app import KafkaSniffApp

    exchanges = decode_capture(ERR).exchanges
    src = ReplaySource(exchanges, steps=4)
    app = KafkaSniffApp(src)
    async with app.run_test(size=(120, 30)) as pilot:
        pane = app.query_one("#exchanges-pane")
        assert pane.follow
        src.go.release()
        await wait_for(pilot, lambda: len(app.store) >= 29)
        await pilot.pause()
        assert pane.table.cursor == len(pane.view) - 1
        assert "live" in str(app.query_one("#status").render())
        pane.set_filter(Filter(errors_only=True))
        await wait_for(pilot, lambda: not pane._busy)
        n = len(pane.view)
        for _ in range(3):
            src.go.release()
        await wait_for(pilot, lambda: len(app.store) == len(exchanges))
        await pilot.pause()
        rows = [app.store.row(r) for r in pane.view]
        assert len(rows) > n and all(r.errors for r in rows)
        assert pane.table.cursor == len(pane.view) - 1


async def test_usable_while_loading():
    """Keys are handled between batches: the table moves, filters apply, the detail opens
    while rows keep arriving (the source is gated so that loading lasts)."""
    from kafkasniff.tui.app import KafkaSniffApp
    from kafkasniff.tui.screens import DetailScreen

    exchanges = decode_capture(ERR).exchanges
    src = ReplaySource(exchanges, steps=5)
    src.live = False
    app = KafkaSniffApp(src)
    async with app.run_test(size=(120, 30)) as pilot:
        pane = app.query_one("#exchanges-pane")
        assert not pane.follow
        for step in range(5):
            src.go.release()
            await wait_for(pilot, lambda: len(app.store) >= min(115, 24 * (step + 1)))
            before = pane.table.cursor
            await pilot.press("down")
            assert pane.table.cursor == before + 1
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen)
                       and app.screen.detail is not None)
        assert app.screen.detail.exchange.api_name == app.store.row(pane.current_row()).api_name


def test_pipeline_options_reach_the_source():
    src = FileSource([str(ERR)], PipelineOptions(ports=frozenset({1234}), show_secrets=True))
    assert src.options.meta_records and src.show_secrets and src.options.ports == {1234}


@pytest.mark.parametrize("kind", ["stdin", "gzip", "stdin-gzip"])
def test_inputs_that_cannot_seek(tmp_path, kind):
    """stdin is spooled to a temporary file, gzip is read again from its start: the detail
    finds the frames either way, and the spool is removed at the end."""
    import gzip

    data = ERR.read_bytes()
    if "gzip" in kind:
        data = gzip.compress(data)
    path = tmp_path / "cap.pcap.gz"
    path.write_bytes(data)
    if kind.startswith("stdin"):
        src = FileSource(["-"], stdin=open(path, "rb"))
    else:
        src = FileSource([str(path)])
    store = load_store(src)
    assert len(store) == 115
    ref = decode_capture(ERR, with_records=True).exchanges
    for i in (0, 50, 114):
        d = src.detail(store.row(i), store.row_issues(i))
        assert exchange_to_dict(d.exchange) == exchange_to_dict(ref[i])
        assert d.frames["request"].data[:4] == (ref[i].request.frame_bytes - 4).to_bytes(4, "big")
    spools = list(src._spools)
    assert len(spools) == (1 if kind.startswith("stdin") else 0)
    src.stop()
    import os

    assert not any(os.path.exists(p) for p in spools)


def test_a_named_fifo_is_read_once_and_its_frames_found_again(tmp_path):
    """A FIFO given as a path (issue 45, item 6): read once, spooled as it is read; the
    writer is never cut off, and the detail finds the frames in the spool (opening the FIFO
    again would wait for a writer that is gone)."""
    import os
    import subprocess

    fifo = tmp_path / "cap.fifo"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", 'exec cat "$0" > "$1"', str(ERR), str(fifo)])
    src = FileSource([str(fifo)])
    try:
        store = load_store(src)
        assert writer.wait(30) == 0             # not killed by SIGPIPE
        assert len(store) == 115 and src.error is None
        ref = decode_capture(ERR, with_records=True).exchanges
        got: list = []
        t = threading.Thread(target=lambda: got.append(src.detail(store.row(50),
                                                                  store.row_issues(50))),
                             daemon=True)
        t.start()
        t.join(30)
        assert got, "the detail waited on the FIFO"
        assert exchange_to_dict(got[0].exchange) == exchange_to_dict(ref[50])
        assert len(src._spools) == 1
    finally:
        if writer.poll() is None:
            writer.kill()
        try:        # a reader still waiting for a writer gets one (and end of file)
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
        src.stop()
