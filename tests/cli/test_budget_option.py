"""--budget NAME=VALUE on the commands that decode traffic."""

from __future__ import annotations

import json

from click.testing import CliRunner

from kafkasniff.cli import main
from tests.conftest import CAPTURES

PER_FRAME = str(CAPTURES / "regressions" / "decompression_per_frame.pcap")


def test_budget_option_changes_the_budget():
    res = CliRunner().invoke(main, ["stats", "--json", "--budget",
                                    "frame_uncompressed_bytes=128M", PER_FRAME])
    assert res.exit_code == 0, res.output
    budgets = json.loads(res.output)["pipeline"]["budgets"]
    assert budgets["uncompressed_bytes"] == 128 << 20
    assert budgets["skipped"] == {"frame_uncompressed_bytes": 6}


def test_unbounded_budget_has_no_issue():
    res = CliRunner().invoke(main, ["read", "--json", "-q", "--budget",
                                    "frame_uncompressed_bytes=0", PER_FRAME])
    assert res.exit_code == 0, res.output
    assert "budget_exhausted" not in res.output


def test_bad_budget_is_a_usage_error():
    res = CliRunner().invoke(main, ["read", "--budget", "frame_records=lots", PER_FRAME])
    assert res.exit_code == 2 and "frame_records=lots" in res.output


def test_help_names_every_budget():
    """--budget's help lists every budget (it was a hand-kept list that missed the group
    budgets of issue 45)."""
    from kafkasniff.content.budgets import budget_names

    out = " ".join(CliRunner().invoke(main, ["read", "--help"], terminal_width=200).output.split())
    for name in budget_names():
        assert name in out, name
