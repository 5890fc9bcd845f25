"""The live terminal UI: its status line at 80 columns, connection ids of several decoders,
Ctrl-C, and where it draws (Textual Pilot over the live engine; a pseudo-terminal for the
whole command)."""

from __future__ import annotations

import asyncio
import os
import subprocess

from tests.support.pty_run import PtyProcess

from .helpers import CAPTURES, LIVE, broker_ports, port_args, stream_session

CAP = CAPTURES / "librdkafka_produce_consume.pcap"      # 62 exchanges, several connections
LONG_NAME = ("lo (ring, 64 MB, filter 'tcp port 9092 or tcp port 9093 or tcp port 9094 or "
             "tcp port 9095')")


def _session(workers: int):
    """A live session reading CAP from a pipe (the stream backend), started."""
    return stream_session(CAP, workers)


def _drive(app, ds, size, body) -> dict:
    result: dict = {}

    async def run():
        async with app.run_test(size=size) as pilot:
            for _ in range(100):
                await pilot.pause(0.1)
                if len(app.store) >= 62:
                    break
            await pilot.pause(0.5)
            await body(pilot, result)
            if app.is_running:
                await pilot.press("q")

    asyncio.run(run())
    return result


def test_status_line_at_80_columns_keeps_the_drops_and_ids_of_decoder_2():
    """At 80 columns the status line was cut inside the filter text (the drop counters
    after it were off the line): the name is cut with an ellipsis instead. The connections
    of the second decoder (numbered from 1,000,000,000) all showed as ``10000…`` in the
    6-column Id: shown ids are short and unique, and the detail of an exchange is still
    asked from the decoder that has it."""
    from kafkasniff.live.tui import LiveDataSource
    from kafkasniff.tui.app import KafkaSniffApp
    from kafkasniff.tui.models import conn_cells

    session, r, w = _session(workers=2)
    ds = LiveDataSource(session, LONG_NAME)
    app = KafkaSniffApp(ds)

    async def body(pilot, result):
        await pilot.press("2")
        await pilot.pause(0.5)
        result["status"] = app.query_one("#status").render_line(0).text
        await pilot.press("3")
        await pilot.pause(0.5)
        result["conns"] = list(app.snapshot.connections)
        table = app.query_one("#connections-table")
        n = min(table.row_count, table.size.height - 1)
        result["id_cells"] = [table.render_line(y).text.split()[0] for y in range(1, n + 1)]
        ex_rows = [app.store.row(i) for i in range(len(app.store))]
        result["rows"] = ex_rows
        result["details"] = [await asyncio.to_thread(ds.detail, row, [])
                             for row in ex_rows if row.api_name == "Fetch"][:20]

    try:
        result = _drive(app, ds, (80, 24), body)
    finally:
        os.close(w)
        ds.stop()
        os.close(r)
    status = result["status"]
    assert "kernel drops n/a, queue drops 0" in status, status
    # the app leaves out its own name when the title does not fit
    name = status.removeprefix("kafkasniff ").split("  [kernel drops")[0].strip()
    assert name.endswith("…") and LONG_NAME.startswith(name[:-1]), status
    ids = [c.conn_id for c in result["conns"]]
    assert len(ids) >= 4 and len(set(ids)) == len(ids)
    assert {i % 2 for i in ids} == {0, 1}            # both decoders had connections
    for c in result["conns"]:
        assert len(conn_cells(c)[0]) <= 6, c.conn_id
    assert result["id_cells"] and set(result["id_cells"]) <= {str(i) for i in ids}
    assert {r.conn_id for r in result["rows"]} <= set(ids)
    assert result["details"] and all(d.exchange is not None for d in result["details"])
    for d in result["details"]:
        assert d.exchange.conn_id in ids and d.exchange.api_name == "Fetch"


def test_ctrl_c_quits_the_live_app():
    from kafkasniff.live.tui import LiveDataSource

    session, r, w = _session(workers=1)
    ds = LiveDataSource(session, "pipe")
    app = ds.make_app()

    async def body(pilot, result):
        await pilot.press("ctrl+c")
        await pilot.pause(0.3)
        result["running"] = app.is_running

    try:
        result = _drive(app, ds, (100, 30), body)
    finally:
        os.close(w)
        ds.stop()
        os.close(r)
    assert result["running"] is False
    assert ds.final is not None and ds.final.exchange_count == 62


def _pty_live(args: list[str], keys: bytes, stderr_path=None, timeout: float = 30):
    """``kafkasniff live ARGS`` on a pseudo-terminal (stdin, stdout; stderr too unless
    ``stderr_path``): waits for the UI to show 62 exchanges, types ``keys``, returns
    (exit code or None if it did not end, terminal text)."""
    p = PtyProcess(LIVE + args, columns=120, lines=40, stderr_path=stderr_path)
    p.wait_for_text("62 exchanges", timeout)
    p.type(keys)
    return p.wait(timeout), p.text()


def test_ctrl_c_stops_the_tui_in_order():
    """Ctrl-C in the TUI (a key in raw mode, not SIGINT) did nothing: it stops the capture
    in order like q, and the summary follows (exit 0)."""
    rc, text = _pty_live(["-r", str(CAP)] + port_args(broker_ports(CAP)), b"\x03")
    assert rc == 0, text[-2000:]
    assert "summary: 62 exchanges" in text


def test_tui_draws_on_the_terminal_when_stderr_is_a_file(tmp_path):
    """``2>file`` sent the whole TUI into the file (Textual draws on standard error): it
    draws on standard output, the file gets the messages only."""
    err = tmp_path / "err.txt"
    rc, text = _pty_live(["-r", str(CAP)] + port_args(broker_ports(CAP)), b"q",
                         stderr_path=str(err))
    assert rc == 0, err.read_text()[-2000:]
    assert "62 exchanges" in text and "queue drops 0" in text
    messages = err.read_text()
    assert "\x1b" not in messages
    lines = messages.splitlines()
    assert lines[0].startswith("kafkasniff: capturing on")
    assert lines[-1].startswith("summary: 62 exchanges")


def test_tui_without_a_terminal_refused():
    p = subprocess.run(LIVE + ["-r", str(CAP), "--tui"], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert p.stderr == ("kafkasniff: error: the terminal UI needs a terminal on standard "
                        "output; use --no-tui or --json\n")
