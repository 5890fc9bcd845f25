"""Exports of every committed capture: exact schemas, row counts equal to what the pipeline
produced, keys that join, JSON Lines equal to Parquet."""

from __future__ import annotations

import base64
import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kafkasniff.export.schema import GROUP_TABLES, SCHEMAS, TABLES
from tests.export.conftest import ALL_CAPTURES, decoded_values

IDS = [p.stem for p in ALL_CAPTURES]


def table_files(out: Path, table: str, ext: str = ".parquet") -> list[Path]:
    return sorted(p for p in (out / table).rglob(f"*{ext}"))


def read_parquet(out: Path, table: str) -> pa.Table:
    files = table_files(out, table)
    assert files, f"no file for {table}"
    return pa.concat_tables([pq.read_table(f) for f in files])


def _from_iso(text: str) -> int:
    assert text.endswith("Z")
    d = dt.datetime.strptime(text[:-1], "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=dt.timezone.utc)
    return (int(d.replace(microsecond=0).timestamp()) * 1_000_000) + d.microsecond


def read_jsonl(out: Path, table: str) -> pa.Table:
    """A JSON Lines table back as Arrow, with the documented conventions undone (ISO
    timestamps, base64 binary); every line must hold exactly the schema's columns."""
    schema = SCHEMAS[table]
    rows = []
    for f in table_files(out, table, ".jsonl"):
        for line in f.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            assert list(row) == schema.names
            for fld in schema:
                v = row[fld.name]
                if v is None:
                    continue
                if fld.type == pa.timestamp("us", tz="UTC"):
                    row[fld.name] = _from_iso(v)
                elif fld.type == pa.binary():
                    row[fld.name] = base64.b64decode(v)
                elif fld.name == "headers":
                    row[fld.name] = [{"key": h["key"], "value": None if h["value"] is None
                                      else base64.b64decode(h["value"])} for h in v]
            rows.append(row)
    return pa.Table.from_pylist(rows, schema=schema)


@pytest.mark.parametrize("pcap", ALL_CAPTURES, ids=IDS)
def test_every_table_has_exactly_the_schema(pcap, exported):
    out = exported(pcap)
    for table in TABLES:
        files = table_files(out, table)
        assert files, table
        for f in files:
            schema = pq.read_schema(f)
            assert schema.equals(SCHEMAS[table], check_metadata=True), (table, f)
            assert [fl.nullable for fl in schema] == [fl.nullable for fl in SCHEMAS[table]]
            kv = pq.ParquetFile(f).metadata.metadata
            assert kv[b"kafkasniff.schema_version"] == b"1"
        t = read_parquet(out, table)
        for fl in SCHEMAS[table]:
            if not fl.nullable:
                assert t.column(fl.name).null_count == 0, (table, fl.name)
    assert not [p for p in out.rglob(".*")], "temporary files left"


@pytest.mark.parametrize("pcap", ALL_CAPTURES, ids=IDS)
def test_row_counts_equal_the_pipeline(pcap, exported):
    out = exported(pcap)
    v = decoded_values(pcap)
    counts = json.loads((out / "counts.json").read_text())
    got = {t: read_parquet(out, t).num_rows for t in counts}
    assert set(got) == set(TABLES) | set(GROUP_TABLES)
    assert got == counts
    assert got["exchanges"] == len(v.exchanges)
    assert got["issues"] == len(v.all_issues())
    assert got["connections"] == len(v.summaries)
    assert got["topic_ids"] == len(v.topic_names)
    n_records = sum(len(b.records or ()) for ex in v.exchanges for loc in ex.record_fields
                    if loc.records.decoded is not None for b in loc.records.decoded.batches)
    assert got["records"] == n_records


@pytest.mark.parametrize("pcap", ALL_CAPTURES, ids=IDS)
def test_keys_join(pcap, exported):
    out = exported(pcap)
    ex = read_parquet(out, "exchanges").to_pylist()
    ids = [r["exchange_id"] for r in ex]
    assert len(set(ids)) == len(ids)
    conns = {r["connection_key"] for r in read_parquet(out, "connections").to_pylist()}
    assert {r["connection_key"] for r in ex} <= conns
    for r in ex:
        assert r["exchange_id"].startswith(r["connection_key"] + "/")
        assert r["connection_key"].startswith(f"{r['client']}>{r['broker']}@")
    idset = set(ids)
    for table in ("partitions", "records"):
        assert {r["exchange_id"] for r in read_parquet(out, table).to_pylist()} <= idset
    issues = read_parquet(out, "issues").to_pylist()
    assert {r["exchange_id"] for r in issues if r["exchange_id"]} <= idset
    assert {r["connection_key"] for r in issues if r["connection_key"]} <= conns
    assert sum(1 for r in issues if r["exchange_id"]) == sum(r["issue_count"] for r in ex)


def test_connection_keys_use_the_first_packet(exported):
    pcap = next(p for p in ALL_CAPTURES if p.stem == "librdkafka_produce_consume")
    v = decoded_values(pcap)
    rows = read_parquet(exported(pcap), "connections").to_pylist()
    assert sorted(r["first_ts_ns"] for r in rows) == sorted(s.first_ts_ns for s in v.summaries)
    for r in rows:
        assert r["connection_key"] == f"{r['client']}>{r['broker']}@{r['first_ts_ns']}"
        assert r["ts_ns"] == r["first_ts_ns"]
    ex = read_parquet(exported(pcap), "exchanges").to_pylist()
    first = {r["connection_key"]: r["first_ts_ns"] for r in rows}
    for r in ex:
        assert first[r["connection_key"]] <= r["ts_ns"]


def test_elect_leaders_partitions_are_rows(exported):
    """The ElectLeaders answer names its partitions PartitionId: each is a partitions row
    with its error (the walker knew partition_index, index and partition only, so the
    answer gave no row and the TUI's Topics view showed p?; issue 45 item 8)."""
    pcap = next(p for p in ALL_CAPTURES if p.stem == "broker_failover")
    rows = [r for r in read_parquet(exported(pcap), "partitions").to_pylist()
            if r["api_name"] == "ElectLeaders"]
    assert sorted((r["topic"], r["partition"], r["error_name"], r["in_response"])
                  for r in rows) == [("failover-topic", 0, "NONE", True),
                                     ("failover-topic", 1, "ELECTION_NOT_NEEDED", True),
                                     ("failover-topic", 2, "ELECTION_NOT_NEEDED", True)]


@pytest.mark.parametrize("pcap", ALL_CAPTURES, ids=IDS)
def test_jsonl_equals_parquet(pcap, exported):
    pq_out = exported(pcap)
    js_out = exported(pcap, fmt="jsonl")
    assert json.loads((js_out / "counts.json").read_text()) == \
        json.loads((pq_out / "counts.json").read_text())
    for table in TABLES:
        assert table_files(js_out, table, ".jsonl"), table
        got = read_jsonl(js_out, table)
        want = read_parquet(pq_out, table)
        assert got.schema.equals(SCHEMAS[table], check_metadata=True)
        assert got.equals(want), table
    assert not [p for p in js_out.rglob(".*")]
