"""kafkasniff definitions list."""

from __future__ import annotations

from tests.cli.common import run


def test_definitions_list():
    res = run("definitions", "list")
    lines = res.output.splitlines()
    assert len(lines) == 95 and lines[0].split()[1] == "Produce"
