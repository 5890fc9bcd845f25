"""The data side of the TUI without a screen: the summary store (filters, sort, search,
memory per row), the data source protocol (batching, coalescing, a live-like source), the
on-demand decode (same fields as the pipeline), and the command."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from array import array

import pytest
from click.testing import CliRunner

from kafkasniff.model import Exchange
from kafkasniff.output.filters import Filter
from kafkasniff.output.render import exchange_to_dict
from kafkasniff.pipeline import PipelineOptions
from kafkasniff.tui.source import FileSource, Progress, ThreadedSource
from kafkasniff.tui.store import SummaryBuilder, SummaryStore, sort_rows
from tests.conftest import CAPTURES, decode_capture

from .conftest import ERR, load_store, wait_for


def loaded_store(path) -> tuple[FileSource, SummaryStore]:
    src = FileSource([str(path)])
    return src, load_store(src)


@pytest.fixture(scope="module")
def err_store():
    return loaded_store(ERR)


# ------------------------------------------------------------------------------------ store

def test_rows_match_the_pipeline(err_store):
    _, store = err_store
    ref = decode_capture(ERR).exchanges
    assert len(store) == len(ref)
    for i, ex in enumerate(ref):
        r = store.row(i)
        assert (r.conn_id, r.client, r.broker, r.client_id, r.api_key, r.api_name,
                r.api_version, r.correlation_id, r.status, r.latency_ns, r.errors,
                r.throttle_time_ms, r.topics, r.req_bytes, r.resp_bytes) == \
            (ex.conn_id, ex.client, ex.broker, ex.client_id, ex.api_key, ex.api_name,
             ex.api_version, ex.correlation_id, ex.status, ex.latency_ns, ex.errors,
             ex.throttle_time_ms, ex.topics, ex.request_bytes, ex.response_bytes)
        assert r.issue_kinds == tuple(sorted({str(i.kind) for i in ex.issues}))
        assert [i.to_dict() for i in store.row_issues(i)] == [i.to_dict() for i in ex.issues]
        assert r.req_seq == (ex.request.seq if ex.request else -1)


@pytest.mark.parametrize("f,check", [
    (Filter(errors_only=True), lambda ex: bool(ex.errors)),
    (Filter(issues_only=True), lambda ex: bool(ex.issues)),
    (Filter(apis=("produce", "1")), lambda ex: ex.api_name in ("Produce", "Fetch")),
    (Filter(client="*consumer*"), lambda ex: "consumer" in (ex.client_id or "")),
    (Filter(client="=ks-producer-err"), lambda ex: ex.client_id == "ks-producer-err"),
    (Filter(client="127.0.0.1:53190"), lambda ex: ex.client == "127.0.0.1:53190"),
    (Filter(broker="36231"), lambda ex: ex.broker.endswith(":36231")),
    (Filter(topic="ks-err*"), lambda ex: any(t.startswith("ks-err") for t in ex.topics)),
    (Filter(status="unanswered"), lambda ex: ex.status == "unanswered"),
    (Filter(min_latency_ms=30), lambda ex: (ex.latency_ns or -1) >= 30_000_000),
    (Filter(apis=("Fetch",), errors_only=True, min_latency_ms=1),
     lambda ex: ex.api_name == "Fetch" and ex.errors and (ex.latency_ns or -1) >= 1e6),
])
def test_filters(err_store, f, check):
    _, store = err_store
    ref = decode_capture(ERR).exchanges
    got = list(store.filter_rows(store.compile(f), 0, len(store)))
    assert got == [i for i, ex in enumerate(ref) if check(ex)]
    assert got, f
    # filtering in two parts (rows arriving later) gives the same rows
    comp = store.compile(f)
    half = len(store) // 2
    assert list(store.filter_rows(comp, 0, half)) + \
        list(store.filter_rows(comp, half, len(store))) == got


@pytest.mark.parametrize("key", ["latency", "api", "client_id", "errors", "bytes", "time",
                                 "topics", "corr"])
def test_sort_is_stable_and_arrow_matches_python(err_store, key):
    _, store = err_store
    view = array("i", range(len(store)))
    for reverse in (False, True):
        got = store.sort(view, key, reverse)
        from kafkasniff.tui.store import SORT_KEYS

        col, table = SORT_KEYS[key]
        ranks = getattr(store.tables, table).ranks() if table else None
        # the Python path (used below 2000 rows) on a view long enough for Arrow
        big = array("i", list(view) * 30)
        arrow = sort_rows(big, store.columns[col], ranks, reverse)
        keyf = (lambda i: ranks[store.columns[col][i]]) if ranks else store.columns[col].__getitem__
        assert list(arrow) == sorted(big, key=keyf, reverse=reverse)
        vals = [keyf(i) for i in got]
        assert vals == sorted(vals, reverse=reverse)


def test_search(err_store):
    _, store = err_store
    m = store.search_matcher("NOT_COORD")
    hits = [i for i in range(len(store)) if m(i)]
    assert hits and all("NOT_COORDINATOR" in store.row(i).errors for i in hits)
    m = store.search_matcher("15")
    assert any(store.row(i).correlation_id == 15 for i in range(len(store)) if m(i))
    assert not any(store.search_matcher("no-such-thing")(i) for i in range(len(store)))
    assert any(store.search_matcher("unanswered")(i) for i in range(len(store)))


def test_memory_per_row_is_small(err_store):
    _, store = err_store
    n = len(store)
    bytes_per_row = sum(c.itemsize for c in store.columns.values())
    assert bytes_per_row < 130
    # the arrays really are that compact (no per-row objects)
    assert all(isinstance(c, array) for c in store.columns.values())
    assert sum(c.buffer_info()[1] * c.itemsize for c in store.columns.values()) / n < 140


def test_kafka07_frames_are_found_again():
    """Kafka 0.7 frames carry their sequence number too: their detail is decoded again from
    the capture and equals the pipeline's."""
    src, store = loaded_store(CAPTURES / "crafted_kafka07.pcap")
    assert len(store) == 8
    for i in range(len(store)):
        d = src.detail(store.row(i))
        assert d.exchange is not None
    ref = decode_capture(CAPTURES / "crafted_kafka07.pcap").exchanges
    assert [exchange_to_dict(src.detail(store.row(i)).exchange) for i in range(8)] == \
        [exchange_to_dict(ex) for ex in ref]


# ------------------------------------------------------------------------------------ detail

def test_detail_spans_cover_the_fields():
    src, store = loaded_store(CAPTURES / "librdkafka_produce_consume.pcap")
    checked = 0
    for i in range(len(store)):
        info = store.row(i)
        if info.api_name != "Produce":
            continue
        d = src.detail(info)
        req = d.frames["request"]
        a, b = req.spans["request.header.client_id"]
        assert req.data[a + 2:b].decode() == info.client_id
        a, b = req.spans["request.body.acks"]
        assert int.from_bytes(req.data[a:b], "big", signed=True) == \
            d.exchange.request.body["acks"]
        a, b = req.spans["request.body.topic_data[0].partition_data[0].records"]
        raw = d.exchange.request.body["topic_data"][0]["partition_data"][0]["records"]
        assert req.data[b - raw.size_bytes:b] == raw.data
        checked += 1
    assert checked >= 2


# ------------------------------------------------------------------------------------ sources

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


# ------------------------------------------------------------------------------------ command

def test_command_help_and_errors(tmp_path):
    from kafkasniff.cli.tui import tui_command

    res = CliRunner().invoke(tui_command, ["--help"])
    assert res.exit_code == 0
    for opt in ("--port", "--detect", "-r, --read-file", "--show-secrets", "--save-dir"):
        assert opt in res.output
    res = CliRunner().invoke(tui_command, [str(tmp_path / "missing.pcap")])
    assert res.exit_code == 2 and "no such file" in res.output
    res = CliRunner().invoke(tui_command, [])
    assert res.exit_code == 2


def test_importing_the_command_does_not_import_textual():
    code = ("import sys; import kafkasniff.cli.tui, kafkasniff.tui.source, "
            "kafkasniff.tui.store, kafkasniff.tui.detail; "
            "print('textual' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"


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
    spool = src._spool
    assert (spool is not None) == kind.startswith("stdin")
    src.stop()
    if spool:
        import os

        assert not os.path.exists(spool)


def test_an_exchange_without_a_time_does_not_stretch_the_timeline():
    import dataclasses

    from kafkasniff.tui.aggregates import Aggregates

    exchanges = decode_capture(ERR).exchanges
    plain, with_zero = Aggregates(), Aggregates()
    ex = exchanges[0]
    with_zero.add(dataclasses.replace(ex, request=dataclasses.replace(ex.request, first_ts_ns=0),
                                      response=None))
    for ex in exchanges:
        plain.add(ex)
        with_zero.add(ex)
    assert (with_zero.timeline.start, with_zero.timeline.width) == \
        (plain.timeline.start, plain.timeline.width)
    assert len(with_zero.timeline.counts) == len(plain.timeline.counts) > 2
