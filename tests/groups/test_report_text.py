"""``kafkasniff groups``' rough edges (issue 45, item 14, and the singular counts of item 16):
an unknown generation or epoch is ``-``, a member id is cut the same in a rebalance's row and
in its sub-row, a session-timeout round lists the member that left, ``--group`` counts that
group's exchanges, the lag table names each partition's owner (member, client_id, host, as
``kafka-consumer-groups --describe`` does), and one of anything is singular."""

from __future__ import annotations

import json
import re

from tests.cli.common import run
from tests.conftest import CAPTURES
from tests.groups.crafted import Capture, assignment

JAVA = CAPTURES / "broker_java.pcap"
GO = CAPTURES / "broker_go.pcap"
REBALANCE = CAPTURES / "librdkafka_rebalance.pcap"
REBALANCE_848 = CAPTURES / "librdkafka_rebalance_848.pcap"
A, B = "0x7ff718008b00", "0x7ff71800a420"      # librdkafka_rebalance's members


def tables(text: str) -> dict[str, list[dict[str, str]]]:
    """Every table of a group block: title -> rows as {column: cell} (cells cut at the
    rule's column spans; several groups' tables of one title are concatenated)."""
    out: dict[str, list[dict[str, str]]] = {}
    lines = text.splitlines()
    for i in range(len(lines) - 2):
        rule = lines[i + 2]
        if not rule.startswith("-") or set(rule) - {"-", " "}:
            continue
        spans = [m.span() for m in re.finditer(r"-+", rule)]
        header = lines[i + 1]

        def cells(line: str) -> list[str]:
            return [line[a:b if k < len(spans) - 1 else None].strip()
                    for k, (a, b) in enumerate(spans)]
        names = cells(header)
        rows = out.setdefault(lines[i].split(" (")[0], [])
        for line in lines[i + 3:]:
            if not line.strip():
                break
            rows.append(dict(zip(names, cells(line))))
    return out


def test_an_unknown_generation_or_epoch_is_a_dash():
    out = run("groups", REBALANCE).output
    rebalances = tables(out)["Rebalances"]
    leave = [r for r in rebalances if r["#"] == "5"]
    assert leave and leave[0]["gen"] == "-"                  # the leave round: no generation
    for r in rebalances:
        assert r["gen"] != "-1"
    out = run("groups", GO).output                            # a group never joined
    block = out.split("Group go-franz-no-such-group", 1)[1].split("\nGroup ", 1)[0]
    assert "-1" not in block
    assert "generation -," in block
    for name in (JAVA, GO, REBALANCE, REBALANCE_848):
        t = tables(run("groups", name).output)
        for table in ("Members", "Rebalances"):
            for row in t.get(table, []):
                assert row.get("gen", row.get("epoch")) != "-1", (name, table, row)


def test_a_member_id_is_cut_the_same_in_its_row_and_sub_row():
    rows = tables(run("groups", JAVA).output)["Rebalances"]
    first = [i for i, r in enumerate(rows) if r["#"] == "1"
             and r["member"].startswith("java-classic-")][0]
    row, sub = rows[first]["member"], rows[first + 1]["member"]
    assert row == sub and row.endswith("…")
    member = "java-classic-94057b37-a801-46d1-b788-7623fabd466f"
    assert member.startswith(row[:-1])


def test_the_session_timeout_round_lists_the_member_that_left():
    doc = json.loads(run("groups", "--json", REBALANCE).output)
    (g,) = doc["groups"]
    (r,) = [r for r in g["rebalances"] if r["trigger"] == "session_timeout"]
    assert r["trigger_member"] == B and r["left"] == [B] and r["members"] == [A]
    (m,) = [m for m in g["members"] if m["member_id"] == B]
    assert m["left_reason"] == "session_timeout"


def test_group_filter_counts_that_groups_exchanges():
    whole = json.loads(run("groups", "--json", JAVA).output)
    share = {g["group_id"]: g for g in whole["groups"]}["java-gshare"]
    doc = json.loads(run("groups", "--json", "--group", "java-gshare", JAVA).output)
    assert doc["group_exchanges"] == share["exchanges"] < whole["group_exchanges"]
    out = run("groups", "--group", "java-gshare", JAVA).output
    assert out.rstrip().endswith(
        f"1 group, {len(share['rebalances'])} rebalances, {share['exchanges']} group exchanges")


def test_the_lag_table_names_each_partitions_owner():
    doc = json.loads(run("groups", "--json", REBALANCE).output)
    (g,) = doc["groups"]
    # the last rebalance gave A all four partitions (B's 2 and 3 after B timed out)
    assert [(x["partition"], x["member_id"], x["client_id"], x["client_host"])
            for x in g["lags"]] == [(p, A, "ks-rebal-a", "127.0.0.1") for p in range(4)]
    lag = tables(run("groups", REBALANCE).output)["Lag at the end"]
    assert [r["member_id"] for r in lag] == [A] * 4
    assert [r["client_id"] for r in lag] == ["ks-rebal-a"] * 4
    assert [r["host"] for r in lag] == ["127.0.0.1"] * 4


def test_the_lag_owner_is_the_member_holding_the_partition_last(tmp_path):
    cap = Capture()
    cap.join(1, "g", "m-1", members=["m-1", "m-2"], client_id="c-one")
    cap.join(2, "g", "m-2", leader="m-1", client_id="c-two")
    cap.sync(1, "g", "m-1", assignment([("t", [0])]), client_id="c-one")
    cap.sync(2, "g", "m-2", assignment([("t", [1, 2])]), client_id="c-two")
    cap.fetch(1, "t", [0, 1, 2, 3], 10)
    cap.commit(1, "g", "m-1", [("t", 0, 4)], client_id="c-one")
    cap.commit(2, "g", "m-2", [("t", 1, 5), ("t", 2, 6)], client_id="c-two")
    cap.commit(2, "g", "m-2", [("t", 3, 7)], client_id="c-two")   # nobody holds 3
    path = tmp_path / "owners.pcap"
    path.write_bytes(cap.pcap())
    (g,) = json.loads(run("groups", "--json", path).output)["groups"]
    assert [(x["partition"], x["lag"], x["member_id"], x["client_id"], x["client_host"])
            for x in g["lags"]] == [(0, 6, "m-1", "c-one", "10.1.0.1"),
                                    (1, 5, "m-2", "c-two", "10.1.0.2"),
                                    (2, 4, "m-2", "c-two", "10.1.0.2"),
                                    (3, 3, None, None, None)]
    lag = tables(run("groups", path).output)["Lag at the end"]
    assert [(r["member_id"], r["client_id"], r["host"]) for r in lag] == [
        ("m-1", "c-one", "10.1.0.1"), ("m-2", "c-two", "10.1.0.2"),
        ("m-2", "c-two", "10.1.0.2"), ("-", "-", "-")]


def test_one_of_anything_is_singular():
    out = run("groups", CAPTURES / "librdkafka_produce_consume.pcap").output
    assert "1 groups" not in out and "1 members" not in out
    assert "1 commit requests" not in out
    assert ", 1 member, 2 rebalances, 1 commit request (" in out
    assert out.rstrip().endswith("1 group, 2 rebalances, 8 group exchanges")
    out = run("groups", "--group", "java-gshare", JAVA).output
    assert "1 groups" not in out and "1 members" not in out
    out = run("groups", JAVA).output
    assert re.search(r"\b1 rebalances\b|\b1 groups\b|\b1 members\b", out) is None
