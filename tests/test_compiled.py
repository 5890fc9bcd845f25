"""The compiled hot path (issue 14, docs/compiled.md): the extension modules built at install
time are the ones imported, ``KAFKASNIFF_PURE_PYTHON=1`` imports the ``.py`` sources instead,
and both give byte-identical output on every capture in ``captures/``."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import kafkasniff
from kafkasniff.capture.packet import decode_packet
from kafkasniff.capture.pcapfile import open_capture
from kafkasniff.capture.types import CapturedPacket, TcpSegment

# every module with a compiled extension installed, imported, for this process's own
# compiled_modules()
for _module in kafkasniff.compiled_available():
    importlib.import_module(_module)

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = sorted(p for p in (ROOT / "captures").iterdir()
                  if p.name.endswith((".pcap", ".pcapng", ".pcap.gz", ".pcapng.gz")))


def _run(args: list[str], pure: bool) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "KAFKASNIFF_PURE_PYTHON"}
    if pure:
        env["KAFKASNIFF_PURE_PYTHON"] = "1"
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, timeout=600)


# a child process's compiled modules once it imported every module that has one installed
_REPORT = ("import importlib, json, kafkasniff\n"
           "for m in kafkasniff.compiled_available(): importlib.import_module(m)\n"
           "print(json.dumps([kafkasniff.compiled_available(), kafkasniff.compiled_modules()]))")


def test_extension_modules_are_imported_when_present():
    available, running = json.loads(_run(["-c", _REPORT], pure=False).stdout)
    if not available:
        pytest.skip("no compiled extension module installed (pure-Python install)")
    assert running == available


def test_pure_python_switch_imports_the_sources():
    available, running = json.loads(_run(["-c", _REPORT], pure=True).stdout)
    assert running == []
    probe = ("import kafkasniff.tcp.reassembly as m; print(m.__file__)")
    assert _run(["-c", probe], pure=True).stdout.decode().strip().endswith("reassembly.py")


def test_this_process_runs_what_the_environment_asked_for():
    if kafkasniff.PURE_PYTHON:
        assert kafkasniff.compiled_modules() == []
    else:
        assert kafkasniff.compiled_modules() == kafkasniff.compiled_available()


def test_fast_constructed_values_equal_the_dataclass_constructors(tmp_path):
    """The pcap loop, the pcapng loop and the packet fast path fill the frozen dataclasses'
    slots directly."""
    import dpkt

    pcap = ROOT / "captures" / "aiokafka.pcap"
    with open_capture(pcap) as src:
        packets = list(src)
    # the same frames as enhanced packet blocks of a pcapng file (written by dpkt)
    pcapng = tmp_path / "aiokafka.pcapng"
    with open(pcap, "rb") as f, open(pcapng, "wb") as out:
        writer = dpkt.pcapng.Writer(out)
        for ts, frame in dpkt.pcap.Reader(f):
            writer.writepkt(frame, ts=float(ts))
    with open_capture(pcapng) as src:
        ng_packets = list(src)
    fields = [(p.link_type, p.data, p.orig_len, p.interface_id) for p in packets]
    assert [(p.link_type, p.data, p.orig_len, p.interface_id) for p in ng_packets] == fields
    # microsecond time stamps in the pcapng file (dpkt's default resolution)
    assert all(abs(a.ts_ns - b.ts_ns) <= 1000 for a, b in zip(ng_packets, packets))
    for p in ng_packets[:50]:
        same = CapturedPacket(p.ts_ns, p.link_type, p.data, p.orig_len, p.interface_id)
        assert p == same and hash(p) == hash(same) and repr(p) == repr(same)
    segments = [s for s in map(decode_packet, packets) if type(s) is TcpSegment]
    assert packets and segments
    for p in packets[:50]:
        same = CapturedPacket(p.ts_ns, p.link_type, p.data, p.orig_len, p.interface_id)
        assert p == same and hash(p) == hash(same) and repr(p) == repr(same)
    for s in segments[:50]:
        same = TcpSegment(s.ts_ns, s.src_ip, s.src_port, s.dst_ip, s.dst_port, s.seq, s.ack,
                          s.flags, s.payload, s.missing_bytes)
        assert s == same and hash(s) == hash(same) and repr(s) == repr(same)


# one process per mode runs both commands on every capture in-process (CliRunner): a
# process per command and capture spent most of this test starting Python
_BATCH = """
import json, sys, tempfile
from pathlib import Path
from click.testing import CliRunner
from kafkasniff.cli import main
out = {}
for capture in json.loads(sys.argv[1]):
    keylog = Path(capture).with_suffix(".keylog")
    extra = ["--tls-keylog", str(keylog)] if keylog.exists() else []
    for command in ("read", "stats"):
        r = CliRunner().invoke(main, [command, "--json", *extra, capture])
        out[command + " " + capture] = r.stdout + "\\nrc=%d\\n" % r.exit_code + r.stderr
    with tempfile.TemporaryDirectory() as d:
        r = CliRunner().invoke(main, ["export", "--jobs", "1", "--format", "jsonl", "-q",
                                      "-o", d, *extra, capture])
        files = sorted(Path(d).rglob("*.jsonl"))
        out["export " + capture] = "\\nrc=%d\\n" % r.exit_code + r.stderr + "".join(
            "%s\\n%s" % (f.relative_to(d), f.read_text()) for f in files)
json.dump(out, sys.stdout)
"""


@pytest.mark.slow
def test_compiled_and_pure_python_outputs_are_identical():
    """``read --json``, ``stats --json`` and ``export --format jsonl`` of every capture,
    compiled and pure Python."""
    if not kafkasniff.compiled_available():
        pytest.skip("no compiled extension module installed (pure-Python install)")
    names = json.dumps([str(c) for c in CAPTURES])
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(lambda pure: _run(["-c", _BATCH, names], pure), (False, True)))
    for run in runs:
        assert run.returncode == 0, run.stderr.decode()[-3000:]
    compiled, pure = (json.loads(r.stdout) for r in runs)
    assert len(compiled) == 3 * len(CAPTURES)
    for capture in CAPTURES:
        for command in ("read", "stats", "export"):
            key = f"{command} {capture}"
            assert compiled[key] == pure[key], f"{command} differs on {capture.name}"
        assert compiled[f"export {capture}"].startswith("\nrc=0\n"), capture.name


def test_a_stale_extension_module_in_a_source_tree_is_not_used(tmp_path, monkeypatch):
    """An extension module older than its .py or .pxd, or than the shared slotstore.pxd
    (edited since the build), is skipped; without a .pxd beside it (an installed wheel) the
    extension module is always used."""
    from importlib.machinery import EXTENSION_SUFFIXES

    from kafkasniff import _SourceFinder

    ext = tmp_path / ("mod" + EXTENSION_SUFFIXES[0])
    py, pxd, shared = tmp_path / "mod.py", tmp_path / "mod.pxd", tmp_path / "slotstore.pxd"
    for f in (py, pxd, ext, shared):
        f.write_text("")
    monkeypatch.setattr(_SourceFinder, "shared_pxd", str(shared))
    os.utime(py, (1000, 1000))
    os.utime(pxd, (1000, 1000))
    os.utime(shared, (1000, 1000))
    os.utime(ext, (2000, 2000))
    assert not _SourceFinder._stale("kafkasniff.mod", [str(tmp_path)])
    os.utime(shared, (3000, 3000))
    with pytest.warns(RuntimeWarning, match="newer than its compiled"):
        assert _SourceFinder._stale("kafkasniff.mod", [str(tmp_path)])
    os.utime(shared, (1000, 1000))
    os.utime(pxd, (3000, 3000))
    with pytest.warns(RuntimeWarning, match="newer than its compiled"):
        assert _SourceFinder._stale("kafkasniff.mod", [str(tmp_path)])
    pxd.unlink()
    os.utime(py, (3000, 3000))
    assert not _SourceFinder._stale("kafkasniff.mod", [str(tmp_path)])
