"""kafkasniff tui: help, errors before the terminal is taken, no Textual on import."""

from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner


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
