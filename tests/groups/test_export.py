"""The group tables of ``kafkasniff export``: rows equal to the analysis, keys that join the
exchanges table, the same rows with one decoder or two."""

from __future__ import annotations

import json

import pyarrow.dataset as pads
import pyarrow.parquet as pq

from kafkasniff.export.schema import GROUP_TABLES, SCHEMAS
from tests.cli.common import run
from tests.conftest import CAPTURES
from tests.groups.test_truth import report_of

JAVA = CAPTURES / "broker_java.pcap"


def rows(out, table):
    return pads.dataset(out / table, format="parquet", partitioning="hive").to_table() \
        .to_pylist()


def test_group_tables_hold_the_analysis(tmp_path):
    out = tmp_path / "x"
    res = run("export", "-o", out, "--jobs", "1", JAVA)
    assert res.exit_code == 0
    assert "groups 3, members 3, rebalances 7, commits 4 rows" in res.output
    for table in GROUP_TABLES:
        for f in (out / table).iterdir():
            assert pq.read_schema(f).equals(SCHEMAS[table], check_metadata=False)
    rep = report_of("broker_java")
    groups = {r["group_id"]: r for r in rows(out, "groups")}
    assert set(groups) == {g.group_id for g in rep.groups}
    for g in rep.groups:
        row = groups[g.group_id]
        assert (row["protocol"], row["coordinator"], row["rebalances"], row["members"]) == \
            (g.protocol, g.coordinator, len(g.rebalances), len(g.members))
    reb = sorted(rows(out, "rebalances"), key=lambda r: (r["group_id"], r["rebalance_index"]))
    want = sorted(((g.group_id, r) for g in rep.groups for r in g.rebalances),
                  key=lambda x: (x[0], x[1].index))
    assert [(r["group_id"], r["trigger"], r["duration_ns"], r["members"]) for r in reb] == \
        [(gid, r.trigger, r.duration_ns, list(r.members)) for gid, r in want]
    first = next(r for r in reb if r["group_id"] == "java-gclassic")
    assert first["assignment"] == [{"member_id": first["members"][0], "topic": "java-topic",
                                    "partitions": [0, 1]}]
    # every exchange a rebalance or a commit names is in the exchanges table
    ids = {r["exchange_id"] for r in rows(out, "exchanges")}
    named = [x for r in reb for x in r["exchange_ids"]] + \
        [r["exchange_id"] for r in rows(out, "commits")]
    assert named and set(named) <= ids
    commits = rows(out, "commits")
    assert {(r["group_id"], r["partition"], r["committed_offset"], r["lag"]) for r in commits} \
        == {(g, p, 10, 0) for g in ("java-g848", "java-gclassic") for p in (0, 1)}


def test_two_decoders_write_the_same_group_rows(tmp_path):
    got = []
    for jobs in (1, 2):
        out = tmp_path / f"j{jobs}"
        assert run("export", "-q", "-o", out, "--jobs", jobs, JAVA).exit_code == 0
        got.append({t: sorted(json.dumps(r, sort_keys=True, default=str)
                              for r in rows(out, t)) for t in GROUP_TABLES})
    assert got[0] == got[1] and all(got[0].values())


def test_jsonl_group_tables(tmp_path):
    out = tmp_path / "j"
    assert run("export", "-q", "--format", "jsonl", "-o", out, JAVA).exit_code == 0
    lines = [json.loads(x) for f in (out / "rebalances").iterdir()
             for x in f.read_text().splitlines()]
    assert len(lines) == 7 and lines[0]["start_ts"].endswith("Z")
