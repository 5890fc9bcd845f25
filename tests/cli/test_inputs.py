"""The input options every capture-reading command shares: stdin, gzip, unreadable and truncated inputs."""

from __future__ import annotations

import gzip
import json
import subprocess

from click.testing import CliRunner

from kafkasniff.cli import main
from tests.cli.common import KAFKASNIFF, PC, run


def test_stdin_and_gzip(tmp_path):
    gz = tmp_path / "c.pcap.gz"
    gz.write_bytes(gzip.compress(PC.read_bytes()))
    direct = run("read", "-q", PC).output
    assert run("read", "-q", gz).output == direct
    proc = subprocess.run(KAFKASNIFF + ["read", "-q", "-r", "-"], input=PC.read_bytes(),
                          capture_output=True, check=True)
    assert proc.stdout.decode() == direct


def test_unreadable_input_exits_2_with_one_line(tmp_path):
    junk = tmp_path / "junk.txt"
    junk.write_text("hello, this is not a capture\n")
    for path in (junk, tmp_path / "missing.pcap"):
        res = CliRunner().invoke(main, ["read", str(path)])
        assert res.exit_code == 2
        err = res.stderr if hasattr(res, "stderr") else res.output
        assert len(err.strip().splitlines()) == 1 and "error" in err


def test_truncated_capture_is_an_issue_not_an_error(tmp_path):
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(PC.read_bytes()[:5000])
    res = run("read", "--json", cut)
    assert res.exit_code == 0
    kinds = {json.loads(ln).get("kind") for ln in res.output.splitlines() if ln.startswith("{")}
    assert "capture_truncated" in kinds


def test_errors_escape_names_on_one_line(tmp_path):
    # a file name chosen by whoever sent the capture: the error line shows it escaped
    # (kafkasniff.text.escape_text), on one line
    from tests.support.terminal import assert_terminal_safe

    bad = tmp_path / "capture\x1b]0;pwned\x07\r\nkafkasniff: forged line\x9b.pcap"
    bad.write_text("hello, this is not a capture\n")
    res = CliRunner().invoke(main, ["read", str(bad)], color=True)
    assert res.exit_code == 2
    assert_terminal_safe(res.stderr)
    [line] = res.stderr.splitlines()
    assert line.startswith("kafkasniff: error: ")
    assert r"capture\x1b]0;pwned\x07\r\nkafkasniff: forged line\x9b.pcap" in line
