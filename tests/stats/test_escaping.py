"""Names off the wire in the ``stats`` text report (issue 45 item 1): client_id and topic
keys are written as visible escapes through :func:`kafkasniff.text.escape_text`, one row per
line; ``stats --json`` keeps the exact names."""

from __future__ import annotations

import json

from click.testing import CliRunner

from kafkasniff.cli import main
from kafkasniff.text import escape_text
from tests.support.terminal import (
    HOSTILE_NAMES,
    VISIBLE_ESCAPES,
    assert_terminal_safe,
    benign_twin,
    craft_regressions,
)


def stats(*args) -> str:
    # color=True: click strips nothing, as on a terminal
    res = CliRunner().invoke(main, ["stats", *map(str, args)], color=True,
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.stdout


def test_stats_report_escapes_client_ids_and_topics(tmp_path):
    out = stats(HOSTILE_NAMES)
    assert_terminal_safe(out)
    assert len(out.splitlines()) == len(stats(benign_twin(tmp_path / "twin.pcap")).splitlines())
    for escaped in VISIBLE_ESCAPES:
        assert escaped in out, escaped
    names = craft_regressions().HOSTILE
    lines = out.splitlines()
    # each row on one line: the key, then its count (exchanges) on the same line
    for key, count in ((names["client_id"], 3), (names["consumer_client_id"], 6),
                       (names["topic"], 7), (names["topic2"], 4)):
        [row] = [line for line in lines if line.startswith(escape_text(key))]
        assert row[len(escape_text(key)):].split()[0] == str(count), row


def test_stats_json_keeps_the_exact_names():
    names = craft_regressions().HOSTILE
    doc = json.loads(stats("--json", HOSTILE_NAMES))
    assert set(doc["clients"]) == {names["client_id"], names["consumer_client_id"]}
    assert set(doc["topics"]) == {names["topic"], names["topic2"]}

