"""Names off the wire on ``live --no-tui``'s lines (issue 45 item 1): the same escapes as
``read`` (:func:`kafkasniff.text.escape_text`), one exchange, record or issue per line."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.terminal import (
    HOSTILE_NAMES,
    VISIBLE_ESCAPES,
    assert_bytes_terminal_safe,
    benign_twin,
)

from .helpers import LIVE

#: hostile_names.pcap: 9 exchanges and one standalone issue; 4 records with --records
LINES = {(): 10, ("--records",): 14}


def live_lines(path, *args) -> bytes:
    p = subprocess.run(LIVE + ["-r", str(path), "--no-tui", "-q", *args],
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.mark.parametrize("args", list(LINES))
def test_live_lines_escape_every_name(args, tmp_path):
    out = assert_bytes_terminal_safe(live_lines(HOSTILE_NAMES, *args))
    twin = live_lines(benign_twin(tmp_path / "twin.pcap"), *args)
    assert len(out.splitlines()) == LINES[args] == len(twin.splitlines())
    for escaped in VISIBLE_ESCAPES:
        assert escaped in out, escaped
