"""The kafkasniff command group: every command's help, lazy loading of the heavier commands."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.cli.common import PC, run


@pytest.mark.parametrize("cmd", [[], ["read"], ["stats"], ["definitions"],
                                 ["definitions", "generate"], ["definitions", "list"]])
def test_help_for_every_command(cmd):
    res = run(*cmd, "--help")
    assert res.exit_code == 0
    assert "Usage:" in res.output
    if cmd in (["read"], ["stats"]):
        for opt in ("--port", "--detect", "--max-frame-bytes", "-r, --read-file"):
            assert opt in res.output


def test_headless_commands_do_not_import_textual():
    code = ("import sys; from click.testing import CliRunner; from kafkasniff.cli import main; "
            f"r = CliRunner().invoke(main, ['stats', {str(PC)!r}]); assert r.exit_code == 0; "
            f"r = CliRunner().invoke(main, ['read', '--json', {str(PC)!r}]); assert r.exit_code == 0; "
            "import tempfile; d = tempfile.mkdtemp(); "
            f"r = CliRunner().invoke(main, ['export', '-q', '-o', d, {str(PC)!r}]); "
            "assert r.exit_code == 0, r.output; "
            "bad = [m for m in ('textual', 'pyspark', 'scapy', 'dpkt', 'kafkasniff.tui', "
            "'kafkasniff.live', 'kafkasniff.spark') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_python_dash_m_kafkasniff_is_the_command():
    """``python -m kafkasniff`` runs the same command as the ``kafkasniff`` script."""
    res = subprocess.run([sys.executable, "-m", "kafkasniff", "stats", "--json", str(PC)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout == run("stats", "--json", PC).stdout
    res = subprocess.run([sys.executable, "-m", "kafkasniff", "--help"], capture_output=True,
                         text=True, timeout=60)
    assert res.stdout.startswith("Usage: kafkasniff ")


def test_commands_collect_garbage_less_often_and_importing_does_not():
    """Every command runs with the decoding process's collector threshold
    (:func:`kafkasniff.pipeline.tune_gc_for_decoding`); importing the package (a library
    user's process) leaves the collector as it was."""
    code = ("import gc; start = gc.get_threshold(); "
            "from click.testing import CliRunner; from kafkasniff.cli import main; "
            "import kafkasniff.pipeline as p; assert gc.get_threshold() == start, start; "
            f"r = CliRunner().invoke(main, ['stats', {str(PC)!r}]); assert r.exit_code == 0; "
            "assert gc.get_threshold() == (p.DECODE_GC_THRESHOLD, *start[1:]), "
            "gc.get_threshold()")
    subprocess.run([sys.executable, "-c", code], check=True)
