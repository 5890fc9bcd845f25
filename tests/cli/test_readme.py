"""The README's quick start (issue 45, item 17): its first command decodes a sample capture
whose first screen a new user can trust (no issue on it), and it stays runnable."""

from __future__ import annotations

import re
import subprocess

from tests.cli.common import KAFKASNIFF
from tests.conftest import CAPTURES

README = CAPTURES.parent / "README.md"


def first_command() -> list[str]:
    """The arguments of the README's first ``kafkasniff`` command (its quick start)."""
    m = re.search(r"^\.ci/setup && \.venv/bin/kafkasniff (.+)$", README.read_text(), re.M)
    assert m, "the README's quick start command is not '.ci/setup && .venv/bin/kafkasniff ...'"
    return m.group(1).split()


def test_quick_start_capture_is_clean_on_its_first_screen():
    args = first_command()
    assert args[0] == "read" and (CAPTURES.parent / args[-1]).is_file(), args
    p = subprocess.run(KAFKASNIFF + args, capture_output=True, text=True, timeout=120,
                       cwd=CAPTURES.parent)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) >= 24
    screen = lines[:24]
    assert not [ln for ln in screen if "issues=" in ln or ln.startswith("!")], screen
    summary = next(ln for ln in p.stderr.splitlines() if ln.startswith("summary:"))
    assert "; 0 issues;" in summary, summary
