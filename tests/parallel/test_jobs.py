"""``--jobs N``: the same output as one process, on every committed capture and the public
ones; a decoder that fails or dies ends the run with a clear error, never a hang."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.dataset as pads
import pytest
from click.testing import CliRunner

from kafkasniff.cli import main
from kafkasniff.parallel import engine, worker
from kafkasniff.parallel.engine import DecoderFailed, run_jobs
from kafkasniff.pipeline import PipelineOptions
from tests.conftest import CAPTURES, public_captures_dir

ALL = sorted(CAPTURES.glob("*.pcap"))


def _public() -> list[Path]:
    d = public_captures_dir()
    if d is None:
        return []
    return sorted(p for p in d.rglob("*") if p.suffix in (".pcap", ".pcapng"))


def _keylog(pcap: Path) -> list[str]:
    k = pcap.with_suffix(".keylog")
    return ["--tls-keylog", str(k)] if k.exists() else []


def _run(args: list[str]) -> tuple[int, str]:
    r = CliRunner().invoke(main, args, catch_exceptions=False)
    return r.exit_code, r.stdout


@pytest.mark.parametrize("pcap", ALL + _public(), ids=lambda p: p.name)
def test_read_and_stats_are_the_same_with_two_decoders(pcap):
    for cmd in (["read", "--json", "-q"], ["stats", "--json"]):
        base = cmd + _keylog(pcap) + [str(pcap)]
        one = _run(base + ["--jobs", "1"])
        two = _run(base + ["--jobs", "2"])
        assert one == two, cmd


def _tables(out: Path) -> dict[str, list[str]]:
    tables = {}
    for t in sorted(os.listdir(out)):
        tab = pads.dataset(out / t, format="parquet", partitioning="hive").to_table()
        tables[t] = sorted(json.dumps(r, sort_keys=True, default=str) for r in tab.to_pylist())
    return tables


@pytest.mark.parametrize("name", ["broker_tls_sessions.pcap", "broker_failover.pcap",
                                  "librdkafka_errors_latency.pcap", "crafted_records.pcap"])
def test_export_writes_the_same_rows_with_two_decoders(name, tmp_path):
    pcap = CAPTURES / name
    outs = []
    for jobs in (1, 2):
        out = tmp_path / f"j{jobs}"
        code, _ = _run(["export", "-q", "--records", "-o", str(out), "--jobs", str(jobs)] +
                       _keylog(pcap) + [str(pcap)])
        assert code == 0
        outs.append(out)
    one, two = (_tables(o) for o in outs)
    assert one == two
    assert sum(len(v) for v in one.values()) > 0
    # one part file per decoder per table (and the reader's issues)
    assert any("-j0-" in p.name or "-j1-" in p.name for p in (outs[1] / "exchanges").iterdir())


def test_several_files_stdin_and_budgets_are_the_same(tmp_path):
    a, b = CAPTURES / "broker_java.pcap", CAPTURES / "librdkafka_errors_latency.pcap"
    assert _run(["read", "-q", "--jobs", "1", str(a), str(b)]) == \
        _run(["read", "-q", "--jobs", "2", str(a), str(b)])
    crafted = str(CAPTURES / "crafted_records.pcap")
    for cmd in (["read", "--json", "-q"], ["stats", "--json"]):
        args = cmd + ["--budget", "capture_issues=1", crafted]
        assert _run(args + ["--jobs", "1"]) == _run(args + ["--jobs", "2"])
    one = subprocess.run([sys.executable, "-m", "kafkasniff.cli", "read", "-q", "--jobs", "1",
                          str(a)], capture_output=True, check=True).stdout
    two = subprocess.run([sys.executable, "-m", "kafkasniff.cli", "read", "-q", "--jobs", "2",
                          "-"], input=a.read_bytes(), capture_output=True, check=True).stdout
    assert one == two and one


def test_count_stops_the_decoders():
    pcap = str(CAPTURES / "broker_java.pcap")
    one = _run(["read", "-q", "-c", "5", "--jobs", "1", pcap])
    assert one == _run(["read", "-q", "-c", "5", "--jobs", "2", pcap])
    assert one[1].count("\n") == 5


def test_auto_jobs_is_one_for_small_files(tmp_path):
    from kafkasniff.cli.inputs import SMALL_INPUT_BYTES, resolve_jobs

    small = CAPTURES / "broker_java.pcap"
    assert resolve_jobs(None, [str(small)]) == 1
    assert resolve_jobs(3, [str(small)]) == 3
    big = tmp_path / "big.pcap"
    with open(big, "wb") as f:
        f.truncate(SMALL_INPUT_BYTES)
    assert resolve_jobs(None, [str(big)]) == engine.default_jobs()
    assert resolve_jobs(None, ["-"]) == engine.default_jobs()


def test_a_decoder_that_raises_is_an_error(monkeypatch):
    def broken(self, ex, first_ts, capture):
        raise RuntimeError("boom")

    monkeypatch.setattr(worker.StatsOutput, "exchange", broken)   # inherited by the fork
    with pytest.raises(DecoderFailed, match=r"decoder process \d of 2 failed "
                                            r"\(RuntimeError: boom\)"):
        run_jobs([CAPTURES / "broker_java.pcap"], PipelineOptions(), 2, "stats", {},
                 lambda item: None)


def test_a_decoder_that_sent_its_results_ends_by_itself(monkeypatch, tmp_path):
    """The reader does not terminate a decoder that is ending after sending its results
    (the SIGTERM would run its failure path: abort its output, format a traceback)."""
    mark = tmp_path / "terminated"
    run = worker._Decoder.run

    def slow_to_end(self):
        run(self)
        time.sleep(0.5)         # still ending when the reader has every result

    def noted(signum, frame):
        mark.write_text(str(signum))
        raise SystemExit(128 + signum)

    monkeypatch.setattr(worker._Decoder, "run", slow_to_end)     # inherited by the fork
    monkeypatch.setattr(worker, "_terminated", noted)
    res = run_jobs([CAPTURES / "broker_java.pcap"], PipelineOptions(), 2, "stats", {},
                   lambda item: None)
    assert len(res.results) == 2
    assert not mark.exists()


def test_a_decoder_that_dies_is_an_error_not_a_hang(monkeypatch):
    # a decoder killed by the kernel (the OOM killer, say) in the middle of the capture
    def killed(self, buf):
        os.kill(os.getpid(), signal.SIGKILL)

    monkeypatch.setattr(worker._Decoder, "batch", killed)
    t0 = time.monotonic()
    with pytest.raises(DecoderFailed, match="was killed by signal 9"):
        run_jobs([CAPTURES / "broker_java.pcap"], PipelineOptions(), 2, "read",
                 dict(keep=None, as_json=False, with_records=False, value_bytes=0,
                      color=False), lambda item: None)
    assert time.monotonic() - t0 < 60


def test_the_command_line_says_what_failed(tmp_path):
    # a real process tree: SIGKILL one decoder while the reader still feeds it from a pipe
    pcap = (CAPTURES / "broker_java.pcap").read_bytes()
    p = subprocess.Popen([sys.executable, "-m", "kafkasniff.cli", "read", "-q", "--jobs",
                          "2", "-"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    p.stdin.write(pcap[:len(pcap) // 2])
    p.stdin.flush()
    children = []
    for _ in range(200):
        out = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True)
        children = out.stdout.split()
        if len(children) == 2:
            break
        time.sleep(0.05)
    assert len(children) == 2
    os.kill(int(children[0]), signal.SIGKILL)
    time.sleep(0.5)
    try:
        p.stdin.write(pcap[len(pcap) // 2:])
        p.stdin.close()
    except BrokenPipeError:
        pass
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 2
    assert "kafkasniff: error: decoder process" in err and "was killed by signal 9" in err


# --------------------------------------------------------------------------- memory (issue 45)


def test_the_reader_keeps_only_the_connections_without_a_global_id():
    """The reader numbers every decoder's connections by the packets that opened them; the
    opening packets of those numbered are dropped (it kept one per connection of the whole
    capture: a million connections, a million entries)."""
    run = engine._Run(PipelineOptions(), 2, "stats", {}, lambda item: None)
    run.opens = [[5, 9, 12], [7, 20]]
    run.clock = [15, 10]
    run.advance()                           # every decoder passed packet 10
    assert run.pending[0].conn_ids == [0, 2] and run.pending[1].conn_ids == [1]
    assert run.opens == [[12], [20]]
    run.opens[0].append(25)
    run.clock = [30, 30]
    run.advance()
    assert run.pending[0].conn_ids == [0, 2, 3, 5] and run.pending[1].conn_ids == [1, 4]
    assert run.opens == [[], []]


class _Collect(worker.Output):
    def __init__(self):
        self.exchanges = []

    def exchange(self, ex, first_ts, capture):
        self.exchanges.append(ex)


def test_a_decoder_forgets_a_connection_once_its_last_record_is_complete():
    """A decoder maps its connections' local ids to the global ids the reader gives; the
    map keeps only the connections whose records are not all complete (it kept every
    connection of the capture). Records after a connection's summary in its last packet (the
    connection_evicted issue) still get the global id."""
    from kafkasniff.parallel.wire import Control
    from kafkasniff.pipeline import Pipeline
    from tests.test_pipeline import waiting_connections

    pipe = Pipeline(engine.decoder_options(PipelineOptions(max_connections=20), 2))
    out = _Collect()
    dec = worker._Decoder(0, pipe, out, None, None, None)
    for idx, pkt in enumerate(waiting_connections(60)):
        recs = pipe.feed(pkt)
        if recs:
            dec.hold(recs, idx, 0)
    dec.control(Control(idx, conn_ids=list(range(100, 160))))
    assert len(pipe.connections) == 20 and len(dec.gids) == 20      # the 40 evicted: gone
    assert sorted(dec.gids.values()) == list(range(140, 160))
    assert sorted(e.conn_id for e in out.exchanges) == list(range(100, 140))
    evicted = [item[1] for _, item in dec.items if item[1].kind == "connection_evicted"]
    assert sorted(i.connection_id for i in evicted) == list(range(100, 140))
    dec.hold(pipe.finish(), engine.END_INDEX, 0)
    dec.control(Control(engine.END_INDEX))
    assert dec.gids == {} and len(out.exchanges) == 60


def test_a_decoder_far_ahead_of_the_others_waits_and_the_output_is_the_same(monkeypatch):
    """A decoder holding ``HOLD_MAX`` records waits for the others before taking more
    batches (its held records were bounded only by its queue's bytes: 33,000 records from
    small packets in a capture of a million connections); the output does not change."""
    pcap = CAPTURES / "broker_failover.pcap"
    one = _run(["read", "--json", "-q", "--jobs", "1", str(pcap)])
    monkeypatch.setattr(worker, "HOLD_MAX", 2)      # inherited by the forked decoders
    two = _run(["read", "--json", "-q", "--jobs", "2", str(pcap)])
    assert one == two and one[1].count("\n") > 100
