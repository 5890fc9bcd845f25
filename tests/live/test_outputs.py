"""Outputs of ``kafkasniff live``: ``--write`` pcapng with ring rotation, ``--export``
rolling Parquet files, and the terminal UI's live data source."""

from __future__ import annotations

import asyncio
import glob
import os
import re
import signal
import struct
import subprocess
import time
from pathlib import Path

import pytest

from kafkasniff.capture import open_capture
from tests.support.pty_run import PtyProcess

from .helpers import CAPTURES, LIVE, broker_ports, port_args, run_live, stream_session


def _packets(path) -> list[tuple]:
    with open_capture(str(path)) as src:
        return [(p.ts_ns, p.link_type, p.data, p.orig_len) for p in src]


def _block_types(path) -> list[int]:
    data = Path(path).read_bytes()
    out, off = [], 0
    while off + 12 <= len(data):
        btype, blen = struct.unpack_from("<II", data, off)
        out.append(btype)
        off += blen
    return out


def test_write_keeps_every_packet_exactly(tmp_path):
    cap = CAPTURES / "librdkafka_compression.pcap"
    out = tmp_path / "x.pcapng"
    p = run_live(["-r", str(cap), "--no-tui", "-q", "-w", str(out)])
    assert p.returncode == 0, p.stderr
    assert _packets(out) == _packets(cap)
    types = _block_types(out)
    assert types[0] == 0x0A0D0D0A and types[-1] == 5   # ends with an Interface Statistics Block


def test_write_ring_rotation(tmp_path):
    cap = CAPTURES / "librdkafka_midstream.pcap"
    out = tmp_path / "ring.pcapng"
    p = run_live(["-r", str(cap), "--no-tui", "-w", str(out), "--ring", "3",
                  "--ring-size", "0.02"])
    assert p.returncode == 0, p.stderr
    files = sorted(glob.glob(str(tmp_path / "ring-*.pcapng")))
    assert len(files) == 3
    numbers = [int(Path(f).stem.split("-")[1]) for f in files]
    assert numbers == list(range(numbers[0], numbers[0] + 3)) and numbers[0] > 1
    kept = [pkt for f in files for pkt in _packets(f)]
    everything = _packets(cap)
    assert kept == everything[-len(kept):]           # the newest packets, in order
    for f in files[:-1]:
        assert os.path.getsize(f) >= 0.02 * (1 << 20)
    summary = [line for line in p.stderr.splitlines() if line.startswith("summary:")][0]
    assert f"{len(everything)} packets written" in summary


# librdkafka_produce_consume: Fetch v16 carries topic ids only, learnt by Metadata on
# another connection (another decoder): the wire-name columns stay null as in export
@pytest.mark.parametrize("name", ["librdkafka_transactions", "librdkafka_produce_consume"])
def test_export_rolling_files_equal_export(tmp_path, name):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from kafkasniff.export.writer import export_captures
    from kafkasniff.pipeline import PipelineOptions

    cap = CAPTURES / f"{name}.pcap"
    ports = broker_ports(cap)
    live_dir, ref_dir = tmp_path / "live", tmp_path / "ref"
    p = run_live(["-r", str(cap), "--no-tui", "-q", "--export", str(live_dir), "--records",
                  "--workers", "3", "--export-rows", "20"] + port_args(ports))
    assert p.returncode == 0, p.stderr
    export_captures([str(cap)], ref_dir, options=PipelineOptions(ports=frozenset(ports)),
                    with_records=True)
    assert not [f for f in live_dir.rglob("*") if f.name.startswith(".")]  # all renamed
    rolls = {f.name.rsplit("-", 1)[0] for f in (live_dir / "exchanges").glob("*.parquet")}
    assert len(rolls) >= 4 or name != "librdkafka_transactions"   # 87 exchanges, 20 a file

    def rows(d: Path, table: str) -> list[str]:
        t = pa.concat_tables([pq.read_table(f) for f in (d / table).glob("*.parquet")])
        return sorted(map(str, t.drop(["capture"]).to_pylist()))

    for table in ("exchanges", "partitions", "records", "issues", "connections"):
        assert rows(live_dir, table) == rows(ref_dir, table), table
    # topic ids: each decoder may learn an id on its own connections (read them DISTINCT);
    # the first sighting of each is the one export has
    def first_seen(d: Path) -> dict:
        t = pa.concat_tables([pq.read_table(f) for f in (d / "topic_ids").glob("*.parquet")])
        out: dict = {}
        for r in t.to_pylist():
            k = (r["topic_id"], r["topic_name"])
            out[k] = min(out.get(k, r["first_seen_ts_ns"]), r["first_seen_ts_ns"])
        return out

    assert first_seen(live_dir) == first_seen(ref_dir)
    # every table's directory exists; an empty file only in a decoder's first roll
    for table in ("exchanges", "partitions", "issues", "connections", "topic_ids"):
        files = list((live_dir / table).glob("*.parquet"))
        assert files, table
        empty = [f.name for f in files if pq.read_metadata(f).num_rows == 0]
        assert all(re.search(r"-w\d+-00001-\d+\.parquet$", n) for n in empty), empty
    caps = pq.read_table(next((live_dir / "exchanges").glob("*.parquet"))).column("capture")
    assert set(caps.to_pylist()) == {f"live-{name}.pcap"}


def test_export_files_appear_while_capturing(tmp_path):
    """--export-every: files appear (atomically renamed) while the capture goes on."""
    cap = CAPTURES / "kafka_python.pcap"
    out = tmp_path / "exp"
    p = subprocess.Popen(LIVE + ["-r", "-", "--no-tui", "-q", "--export", str(out),
                                 "--export-every", "0.5"] + port_args(broker_ports(cap)),
                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    p.stdin.write(cap.read_bytes())
    p.stdin.flush()
    deadline = time.monotonic() + 20
    files: list = []
    while time.monotonic() < deadline and not files:
        time.sleep(0.2)
        files = list((out / "exchanges").glob("part-*.parquet")) if out.exists() else []
    assert files and p.poll() is None          # written while still capturing
    p.send_signal(signal.SIGINT)
    p.stdin.close()
    assert p.wait(timeout=30) == 0
    import pyarrow.parquet as pq
    n = sum(pq.read_table(f).num_rows for f in (out / "exchanges").glob("*.parquet"))
    assert n == 42


def test_tui_live_source(tmp_path):
    """The terminal UI over the live engine: rows, dashboards, drops in the status line,
    and the detail of an exchange asked from the decoder that keeps it."""
    from kafkasniff.live.tui import LiveDataSource
    from kafkasniff.tui.app import KafkaSniffApp

    session, r, w = stream_session(CAPTURES / "librdkafka_produce_consume.pcap", workers=2)
    ds = LiveDataSource(session, "pipe")
    app = KafkaSniffApp(ds)
    result = {}

    async def drive():
        async with app.run_test(size=(160, 50)) as pilot:
            for _ in range(100):
                await pilot.pause(0.1)
                if len(app.store) >= 62:
                    break
            await pilot.pause(0.3)
            result["rows"] = len(app.store)
            result["snap"] = app.snapshot.exchanges
            result["title"] = ds.title
            row = next(i for i in range(len(app.store))
                       if app.store.row(i).api_name == "Fetch")
            result["detail"] = await asyncio.to_thread(ds.detail, app.store.row(row), [])
            await pilot.press("q")

    try:
        asyncio.run(drive())
    finally:
        os.close(w)
        ds.stop()
        os.close(r)
    assert result["rows"] == 62 and result["snap"] == 62
    assert "queue drops 0" in result["title"]
    d = result["detail"]
    assert d.exchange is not None and d.exchange.api_name == "Fetch"
    assert d.exchange.response.body is not None and "live capture" in d.note
    assert ds.final is not None and ds.final.exchange_count == 62


def test_tui_by_default_on_a_terminal():
    """On a terminal the TUI comes up (drops in its status line); q stops the capture in
    order and the summary follows; exit 0."""
    cap = CAPTURES / "librdkafka_produce_consume.pcap"
    p = PtyProcess(LIVE + ["-r", str(cap)] + port_args(broker_ports(cap)), columns=160,
                   lines=48)
    p.wait_for_text("62 exchanges", 30)
    p.type(b"q")
    assert p.wait(30) == 0
    text = p.text()
    assert "queue drops 0" in text and "62 exchanges" in text
    assert "summary: 62 exchanges" in text
