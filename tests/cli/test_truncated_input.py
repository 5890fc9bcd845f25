"""One truncated capture through every path reports the same damage and the same byte
ledger (issue 45, item 5): ``head -c 1000 captures/broker_java.pcap | kafkasniff live -r -``
printed 405 bytes, 0 skipped and no ``capture_truncated``, where ``read -r -`` printed the
truncation and 491 unread bytes.

Paths: ``read``, ``stats`` (``-j 1`` and ``-j 2``, a file and stdin), ``groups``,
``export`` (its issues table), ``live -r`` (a file and stdin, lines, JSON and the live
session's TUI data), and the TUI's file loader (a file and a stream)."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from tests.cli.common import KAFKASNIFF
from tests.conftest import CAPTURES
from tests.live.helpers import LIVE

JAVA = CAPTURES / "broker_java.pcap"
#: what read -j 1 reports for the first 1000 bytes of broker_java.pcap
BYTES_PART = "1000 bytes: 509 decoded, 491 skipped (unread 491)"
LEDGER = {"capture_format": 104, "kafka_frames": 59, "packet_headers": 346, "unread": 491}
ISSUES_PART = "2 issues (capture_truncated 1, unanswered_request 1)"


@pytest.fixture(scope="module")
def truncated(tmp_path_factory):
    path = tmp_path_factory.mktemp("trunc") / "trunc.pcap"
    path.write_bytes(JAVA.read_bytes()[:1000])
    return path


def summary_of(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("summary:")]
    assert len(lines) == 1, stderr
    return lines[0]


def check_summary(stderr: str) -> None:
    summary = summary_of(stderr)
    assert ISSUES_PART in summary, summary
    assert summary.endswith(BYTES_PART) or f"; {BYTES_PART};" in summary, summary


def truncation_lines(stdout: str) -> list[str]:
    return [ln for ln in stdout.splitlines()
            if ln.startswith("! ") and "capture_truncated" in ln]


def run(cmd: list[str], path, stdin: bool) -> subprocess.CompletedProcess:
    if stdin:
        with open(path, "rb") as f:
            return subprocess.run(cmd + ["-r", "-"], stdin=f, capture_output=True, text=True,
                                  timeout=120)
    return subprocess.run(cmd + [str(path)], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("stdin", [False, True], ids=["file", "stdin"])
@pytest.mark.parametrize("cmd", [KAFKASNIFF + ["read", "-j", "1"],
                                 KAFKASNIFF + ["read", "-j", "2"],
                                 LIVE + ["--no-tui", "--workers", "2"]],
                         ids=["read -j 1", "read -j 2", "live"])
def test_lines_and_summary(truncated, cmd, stdin):
    if cmd[-3:] == ["--no-tui", "--workers", "2"] and not stdin:
        cmd = cmd + ["-r"]
        p = subprocess.run(cmd + [str(truncated)], capture_output=True, text=True,
                           timeout=120)
    else:
        p = run(cmd, truncated, stdin)
    assert p.returncode == 0, p.stderr
    lines = truncation_lines(p.stdout)
    assert len(lines) == 1 and "(491 of 967 bytes present)" in lines[0], p.stdout
    check_summary(p.stderr)


@pytest.mark.parametrize("cmd", [KAFKASNIFF + ["read", "--json", "-r"],
                                 LIVE + ["--no-tui", "--json", "-r"]], ids=["read", "live"])
def test_json_issue_object(truncated, cmd):
    p = subprocess.run(cmd + [str(truncated)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    objs = [json.loads(ln) for ln in p.stdout.splitlines()]
    issues = [o for o in objs if o["type"] == "issue" and o["kind"] == "capture_truncated"]
    assert len(issues) == 1 and issues[0]["length_bytes"] == 491
    check_summary(p.stderr)


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("stdin", [False, True], ids=["file", "stdin"])
def test_stats(truncated, jobs, stdin):
    p = run(KAFKASNIFF + ["stats", "--json", "-j", jobs], truncated, stdin)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["issues"]["capture_truncated"] == 1
    assert d["pipeline"]["issues"]["capture_truncated"] == 1
    assert d["pipeline"]["bytes"] == LEDGER
    text = run(KAFKASNIFF + ["stats", "-j", jobs], truncated, stdin).stdout
    assert text.rstrip().endswith(BYTES_PART)


@pytest.mark.parametrize("args", [[], ["--json"]], ids=["text", "json"])
def test_groups(truncated, args):
    """groups' report is about groups: a damaged capture is said on stderr, as read says
    it (the issue line, the summary with the ledger); -q keeps stderr empty, and a capture
    that is not damaged adds nothing."""
    p = run(KAFKASNIFF + ["groups"] + args, truncated, False)
    assert p.returncode == 0, p.stderr
    assert len(truncation_lines(p.stderr)) == 1, p.stderr
    check_summary(p.stderr)
    q = run(KAFKASNIFF + ["groups", "-q"] + args, truncated, False)
    assert q.returncode == 0 and not q.stderr and q.stdout == p.stdout
    whole = run(KAFKASNIFF + ["groups"] + args, JAVA, False)
    assert whole.returncode == 0 and not whole.stderr


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_export_issues_table(truncated, tmp_path, jobs):
    out = tmp_path / "t"
    p = subprocess.run(KAFKASNIFF + ["export", "-q", "--format", "jsonl", "-j", jobs, "-o",
                                     str(out), str(truncated)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    rows = [json.loads(ln) for f in (out / "issues").glob("*.jsonl")
            for ln in f.read_text().splitlines()]
    cut = [r for r in rows if r["kind"] == "capture_truncated"]
    assert len(cut) == 1 and cut[0]["length_bytes"] == 491


def test_live_session_tui_data_and_stats(truncated):
    """The live engine's TUI side: the issue reaches the decoders' TUI data and the merged
    statistics carry the source's bytes."""
    from kafkasniff.live.backends import StreamBackend
    from kafkasniff.live.collector import LiveSession
    from kafkasniff.live.config import LiveConfig

    cfg = LiveConfig(workers=2, output="none", tui=True)
    session = LiveSession(StreamBackend(str(truncated)), cfg)
    cfg.block_when_full = True
    seen: list = []
    session.on_extra = lambda wid, items: seen.extend(x for k, x in items if k == "i")
    snap = session.run()
    assert not session.errors
    assert [i.kind for i in seen if i.kind == "capture_truncated"] == ["capture_truncated"]
    assert snap.issues.get("capture_truncated") == 1
    assert {k: v for k, v in snap.stats["bytes"].items() if v} == LEDGER


@pytest.mark.parametrize("kind", ["file", "stream"])
def test_tui_loader(truncated, kind):
    from kafkasniff.tui.source import FileSource

    src = FileSource([str(truncated)] if kind == "file" else [open(truncated, "rb")])
    src.start(lambda: None)
    deadline = time.monotonic() + 60
    while src.running:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    u = src.drain()
    src.stop()
    issues = [i for ch in u.chunks for _, i in ch.issues if i.kind == "capture_truncated"]
    assert len(issues) == 1 and issues[0].length_bytes == 491
    assert u.snapshot.pipeline["bytes"] == LEDGER
