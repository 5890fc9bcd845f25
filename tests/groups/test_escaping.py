"""Names off the wire in the ``groups`` text report (issue 45 item 1): group id, member id,
group instance id, client_id, host, topics, assignor, state and coordinator are written as
visible escapes through :func:`kafkasniff.text.escape_text`, one row per line; ``groups
--json`` keeps the exact names."""

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


def groups(*args) -> str:
    # color=True: click strips nothing, as on a terminal
    res = CliRunner().invoke(main, ["groups", *map(str, args)], color=True,
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.stdout


def test_groups_report_escapes_every_name(tmp_path):
    out = groups(HOSTILE_NAMES)
    assert_terminal_safe(out)
    assert len(out.splitlines()) == len(groups(benign_twin(tmp_path / "twin.pcap")).splitlines())
    for escaped in VISIBLE_ESCAPES:
        assert escaped in out, escaped
    n = {k: escape_text(v) for k, v in craft_regressions().HOSTILE.items()}
    lines = out.splitlines()
    assert lines[0] == f"Group {n['group_id']}"
    assert f"assignor {n['assignor']}" in lines[1] and f"state {n['group_state']}" in lines[1]
    assert lines[2].startswith(f"  coordinator [{n['coordinator_host']}]:9092 (node 1)")
    # the member's row: its id, then the instance and client_id (cut to 30), its host
    [member] = [line for line in lines if line.startswith(n["member_id"])]
    assert n["group_instance_id"][:20] in member and n["consumer_client_id"][:20] in member
    assert "192.0.2.10" in member
    assert f"{n['topic2']}[0,1] {n['topic']}[0]" in member
    # the commit and the lag rows: the topic, then the partition on the same line
    rows = [line for line in lines if line.startswith(n["topic"])]
    assert len(rows) == 1 and rows[0][len(n["topic"]):].split()[0] == "0"
    assert sum(f"OffsetCommit  {n['topic']}  " in line for line in lines) == 1


def test_groups_json_keeps_the_exact_names():
    names = craft_regressions().HOSTILE
    [g] = json.loads(groups("--json", HOSTILE_NAMES))["groups"]
    assert (g["group_id"], g["protocol_name"], g["state"]) == (
        names["group_id"], names["assignor"], names["group_state"])
    [m] = g["members"]
    assert (m["member_id"], m["group_instance_id"], m["client_id"]) == (
        names["member_id"], names["group_instance_id"], names["consumer_client_id"])
