"""Groups in bounded memory and linear time (issue 45, item 2): assignments and member sets
beyond their budgets are cut and reported once, an assignment claiming more partitions than
its bytes hold is reported, and the analysis does work linear in the members."""

from __future__ import annotations

import dataclasses
import json

import pyarrow.dataset as pads
import pytest

from kafkasniff.export.rows import group_rows
from kafkasniff.groups import GroupAnalyzer
from kafkasniff.groups.report import render_groups
from tests.cli.common import run
from tests.conftest import decode_capture
from tests.groups.crafted import Capture, assignment, assignment_claiming

GROUP = "big-group"


def _one_member_capture(tmp_path, partitions: int, members: int = 1):
    """``members`` members; each SyncGroup answer assigns ``partitions`` partitions; the
    leader's plan too."""
    cap = Capture()
    mids = [f"member-{i}" for i in range(members)]
    for i, mid in enumerate(mids):
        cap.join(i, GROUP, mid, leader=mids[0], members=mids if i == 0 else ())
    plans = [(m, assignment([("t", range(i * partitions, (i + 1) * partitions))]))
             for i, m in enumerate(mids)]
    for i, mid in enumerate(mids):
        cap.sync(i, GROUP, mid, plans[i][1], plans=plans if i == 0 else ())
    path = tmp_path / "big.pcap"
    path.write_bytes(cap.pcap())
    return path


def _budget_issues(issues, name):
    return [i for i in issues if i["kind"] == "budget_exhausted" and name in i["message"]]


def test_assignment_beyond_its_budget_is_cut_and_reported_once(tmp_path):
    path = _one_member_capture(tmp_path, 3000, members=2)
    budget = ("--budget", "group_assignment_partitions=1000")

    res = run("groups", *budget, path)
    assert res.exit_code == 0, res.output
    out = res.output
    assert out.count("budget_exhausted") == 1 and "group_assignment_partitions" in out
    assert "--budget group_assignment_partitions=" in out            # how to raise it
    assert len(out) < 60_000                                          # bounded output

    doc = json.loads(run("groups", "--json", *budget, path).output)
    assert len(_budget_issues(doc["issues"], "group_assignment_partitions")) == 1
    assert len([i for i in doc["issues"] if i["kind"] == "budget_exhausted"]) == 1
    (g,) = doc["groups"]
    for m in g["members"]:                    # what was kept and what was not: the whole
        kept = sum(len(ps) for ps in m["assignment"].values())
        assert kept <= 1000 and kept + m["assignment_cut"] == 3000
    for r in g["rebalances"]:
        assert sum(len(ps) for a in r["assignment"].values() for ps in a.values()) <= 1000
        assert sorted(r["assignment_cut"]) == ["member-0", "member-1"]
    members = out.split("Members\n", 1)[1].split("\n\n", 1)[0]
    assert "(none)" not in members and "partitions not kept)" in members

    res = run("export", *budget, path, "-o", tmp_path / "out")
    assert res.exit_code == 0, res.output
    members = pads.dataset(tmp_path / "out" / "members").to_table().to_pylist()
    assert all(sum(len(tp["partitions"]) for tp in m["assignment"]) <= 1000 for m in members)
    issues = pads.dataset(tmp_path / "out" / "issues").to_table().to_pylist()
    # once where the decode cut the assignment (on its SyncGroup exchange: the consumer
    # protocol bytes were never decoded beyond the budget) and once by the group analysis
    # (what its tables hold: every exchange and rebalance together)
    reported = _budget_issues(issues, "group_assignment_partitions")
    assert sorted(i["api_key"] or -1 for i in reported) == [-1, 14]


def test_default_budget_bounds_an_assignment_of_a_million_partitions(tmp_path):
    path = _one_member_capture(tmp_path, 1_000_000)
    doc = json.loads(run("groups", "--json", path).output)
    (g,) = doc["groups"]
    (m,) = g["members"]
    kept = sum(len(ps) for ps in m["assignment"].values())
    assert 0 < kept < 1_000_000
    assert len(_budget_issues(doc["issues"], "group_assignment_partitions")) == 1


def test_members_beyond_their_budget_are_not_tracked_and_reported_once(tmp_path):
    cap = Capture()
    mids = [f"member-{i:03d}" for i in range(40)]
    for i, mid in enumerate(mids):
        cap.join(i, GROUP, mid, leader=mids[0], members=mids if i == 0 else ())
    for i, mid in enumerate(mids):
        cap.sync(i, GROUP, mid, assignment([("t", [i])]))
    cap.join(0, "other-group", "solo", members=["solo"])
    cap.sync(0, "other-group", "solo", assignment([("t", [0])]))
    path = tmp_path / "many.pcap"
    path.write_bytes(cap.pcap())
    budget = ("--budget", "group_members=10")

    doc = json.loads(run("groups", "--json", *budget, path).output)
    by_id = {g["group_id"]: g for g in doc["groups"]}
    assert len(by_id[GROUP]["members"]) == 10
    assert all(len(r["members"]) <= 10 for r in by_id[GROUP]["rebalances"])
    assert len(by_id["other-group"]["members"]) == 1
    (issue,) = _budget_issues(doc["issues"], "group_members")
    assert GROUP in issue["message"] and "30" in issue["message"]

    res = run("groups", *budget, path)
    assert res.exit_code == 0 and res.output.count("budget_exhausted") == 1
    assert run("export", *budget, path, "-o", tmp_path / "out").exit_code == 0


def test_an_assignment_claiming_more_partitions_than_its_bytes_is_reported(tmp_path):
    cap = Capture()
    cap.join(0, GROUP, "m-1", members=["m-1"])
    cap.sync(0, GROUP, "m-1", assignment_claiming(2**31 - 1))
    path = tmp_path / "claim.pcap"
    path.write_bytes(cap.pcap())

    doc = json.loads(run("groups", "--json", path).output)
    (g,) = doc["groups"]
    (m,) = g["members"]
    assert m["assignment"] != {}                     # not an empty assignment
    (issue,) = [i for i in doc["issues"] if "2147483647" in i["message"]]
    assert "m-1" in issue["message"] and GROUP in issue["message"]

    out = run("groups", path).output
    assert "2147483647" in out
    members = out.split("Members\n", 1)[1].split("\n\n", 1)[0]
    assert "(none)" not in members
    rebalances = out.split("Rebalances", 1)[1].split("\n\n", 1)[0]
    assert "(none)" not in rebalances
    assert run("export", path, "-o", tmp_path / "out").exit_code == 0


# ------------------------------------------------------------------ linear in members

class _Id(str):
    """A member id that counts how often it is compared for equality: membership tests in
    lists compare against every element, those in sets and dicts against one."""

    eq_calls = 0

    def __eq__(self, other):
        _Id.eq_calls += 1
        return str.__eq__(self, other)

    def __ne__(self, other):
        _Id.eq_calls += 1
        return str.__ne__(self, other)

    __hash__ = str.__hash__


def _counted(v):
    """A copy of a body whose member ids are new :class:`_Id` objects (as a decoder makes a
    new string for every occurrence)."""
    if isinstance(v, dict):
        return {k: _counted(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_counted(x) for x in v]
    if isinstance(v, str) and v.startswith("member-"):
        return _Id(v)
    return v


def _group_of(n: int, tmp_path):
    """``n`` members join, sync, heartbeat and leave one by one (the bench's shape)."""
    cap = Capture()
    mids = [f"member-{i:05d}" for i in range(n)]
    conns = max(1, n // 20)
    for i in list(range(1, n)) + [0]:
        cap.join(i % conns, GROUP, mids[i], leader=mids[0], members=mids if i == 0 else ())
    plans = [(m, assignment([("t", [i])])) for i, m in enumerate(mids)]
    for i in list(range(1, n)) + [0]:
        cap.sync(i % conns, GROUP, mids[i], plans[i][1], plans=plans if i == 0 else ())
    for i in range(n):
        cap.heartbeat(i % conns, GROUP, mids[i])
    for i in range(n):
        cap.commit(i % conns, GROUP, mids[i], [("t", i, 5)])
    for i in range(n):
        cap.leave(i % conns, GROUP, mids[i])
    path = tmp_path / f"g{n}.pcap"
    path.write_bytes(cap.pcap())
    d = decode_capture(path)
    return [dataclasses.replace(
        ex, request=ex.request and dataclasses.replace(ex.request, body=_counted(ex.request.body)),
        response=ex.response and dataclasses.replace(ex.response,
                                                     body=_counted(ex.response.body)))
        for ex in d.exchanges], d.pipeline.defs


def _comparisons(exchanges, defs) -> int:
    _Id.eq_calls = 0
    an = GroupAnalyzer(defs)
    for ex in exchanges:
        an.add(ex)
    report = an.finish()
    render_groups(report)
    json.dumps(report.to_dict())
    for rows in group_rows(report, "x").values():
        for _ in rows:
            pass
    (g,) = report.groups
    assert len(g.members) == len({m.member_id for m in g.members}) > 0
    return _Id.eq_calls


@pytest.mark.parametrize("n", [150])
def test_member_id_comparisons_grow_linearly_with_the_members(tmp_path, n):
    small = _comparisons(*_group_of(n, tmp_path))
    large = _comparisons(*_group_of(4 * n, tmp_path))
    # linear: 4x the members, about 4x the comparisons (quadratic would be 16x)
    assert large <= 6 * max(small, 1), (small, large)
    assert large <= 40 * 4 * n, (small, large)
