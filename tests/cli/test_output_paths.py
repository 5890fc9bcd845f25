"""Output paths are checked before any capture or decoding starts (issue 45, item 15): a bad
``live -w``, ``live --export``, ``export -o``, ``spark decode -o``, ``tui --save-dir`` or
``stats --openmetrics`` stops at once with one line, ``kafkasniff: error: ...``, exit 2."""

from __future__ import annotations

import subprocess

import pytest
from click.testing import CliRunner

from kafkasniff.cli import main
from tests.cli.common import KAFKASNIFF
from tests.conftest import CAPTURES
from tests.live.helpers import LIVE, capture_permission

JAVA = CAPTURES / "broker_java.pcap"


def one_line_error(stderr: str, option: str) -> None:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"kafkasniff: error: {option} "), stderr


@pytest.fixture()
def a_file(tmp_path):
    """A regular file where a directory is wanted."""
    path = tmp_path / "plain-file"
    path.write_text("x")
    return path


def bad_files(tmp_path, a_file):
    """Output files that cannot be written: no such directory, a directory, a file's child."""
    return [tmp_path / "no-such-dir" / "x.pcapng", tmp_path, a_file / "x.pcapng"]


@pytest.mark.skipif(capture_permission() is not None, reason=capture_permission() or "")
def test_live_interface_write_path_checked_before_capturing(tmp_path, a_file):
    for bad in bad_files(tmp_path, a_file):
        p = subprocess.run(LIVE + ["-i", "lo", "--no-tui", "--duration", "3", "-w", str(bad)],
                           capture_output=True, text=True, timeout=60,
                           stdin=subprocess.DEVNULL)
        assert p.returncode == 2, p.stderr
        assert "capturing on" not in p.stderr
        one_line_error(p.stderr, "--write")


def test_live_stream_write_and_export_paths(tmp_path, a_file):
    for bad in bad_files(tmp_path, a_file):
        p = subprocess.run(LIVE + ["-r", str(JAVA), "--no-tui", "-w", str(bad)],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and not p.stdout, p.stderr
        one_line_error(p.stderr, "--write")
    for bad in (a_file, a_file / "sub"):
        p = subprocess.run(LIVE + ["-r", str(JAVA), "--no-tui", "--export", str(bad)],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and not p.stdout, p.stderr
        one_line_error(p.stderr, "--export")


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_export_output_directory(tmp_path, a_file, jobs):
    for bad in (a_file, a_file / "sub"):
        p = subprocess.run(KAFKASNIFF + ["export", "-j", jobs, "-o", str(bad), str(JAVA)],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 2, p.stderr
        one_line_error(p.stderr, "--output")
    # a missing directory is made, with its parents
    out = tmp_path / "new" / "tables"
    p = subprocess.run(KAFKASNIFF + ["export", "-q", "-j", jobs, "-o", str(out), str(JAVA)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert (out / "exchanges").is_dir()


def test_stats_openmetrics_path_checked_before_decoding(tmp_path, a_file):
    for bad in bad_files(tmp_path, a_file):
        p = subprocess.run(KAFKASNIFF + ["stats", "--openmetrics", str(bad), str(JAVA)],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 2
        assert not p.stdout            # nothing decoded, no report
        one_line_error(p.stderr, "--openmetrics")


def test_spark_decode_output_checked_before_spark_starts(a_file, monkeypatch):
    import kafkasniff.spark.decode as decode

    def no_spark(*args, **kwargs):
        raise AssertionError("Spark started with a bad output directory")

    monkeypatch.setattr(decode, "spark_decode", no_spark)
    for bad in (a_file, a_file / "sub"):
        res = CliRunner().invoke(main, ["spark", "decode", str(JAVA), "-o", str(bad)])
        assert res.exit_code == 2, res.output
        one_line_error(res.output, "--output")


def test_tui_save_dir_checked_before_the_terminal_is_taken(tmp_path, a_file, monkeypatch):
    from kafkasniff.tui.app import KafkaSniffApp

    def no_ui(self, *args, **kwargs):
        raise AssertionError("the UI started with a bad --save-dir")

    monkeypatch.setattr(KafkaSniffApp, "run", no_ui)
    for bad in (a_file, a_file / "sub"):
        res = CliRunner().invoke(main, ["tui", "--save-dir", str(bad), str(JAVA)])
        assert res.exit_code == 2, res.output
        one_line_error(res.output, "--save-dir")
