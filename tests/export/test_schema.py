"""The export schemas: versioned, documented, Spark-safe; the doc page is generated from them."""

from __future__ import annotations

import os

import pyarrow as pa

from kafkasniff.export import rows
from kafkasniff.export.schema import (DOC_BEGIN, DOC_END, GROUP_TABLES, SCHEMA_VERSION,
                                      SCHEMAS, TABLES, description, schema_markdown,
                                      spark_ddl, with_generated_doc)
from tests.conftest import ROOT

DOC = ROOT / "docs" / "parquet-schema.md"
COMMON = ["capture", "ts", "ts_ns", "date", "hour"]


def _leaf_types(t: pa.DataType):
    if pa.types.is_list(t):
        yield t
        yield from _leaf_types(t.value_type)
    elif pa.types.is_struct(t):
        yield t
        for f in t:
            yield from _leaf_types(f.type)
    else:
        yield t


def test_tables_and_version():
    assert set(TABLES) == {"exchanges", "partitions", "records", "issues", "connections",
                           "topic_ids"}
    assert set(GROUP_TABLES) == {"groups", "members", "rebalances", "commits"}
    assert set(SCHEMAS) == set(TABLES) | set(GROUP_TABLES)
    for table, schema in SCHEMAS.items():
        meta = schema.metadata
        assert meta[b"kafkasniff.schema_version"] == str(SCHEMA_VERSION).encode()
        assert meta[b"kafkasniff.table"] == table.encode()


def test_every_table_starts_with_the_common_columns():
    for table, schema in SCHEMAS.items():
        assert schema.names[:5] == COMMON, table
        assert schema.field("ts").type == pa.timestamp("us", tz="UTC")
        assert schema.field("ts_ns").type == pa.int64()
        assert schema.field("date").type == pa.string()
        assert schema.field("hour").type == pa.int8()
        assert not any(schema.field(c).nullable for c in COMMON)
        assert len(set(schema.names)) == len(schema.names), table


def test_only_spark_safe_types():
    allowed = {pa.string(), pa.binary(), pa.bool_(), pa.float64(), pa.int8(), pa.int16(),
               pa.int32(), pa.int64(), pa.timestamp("us", tz="UTC")}
    for table, schema in SCHEMAS.items():
        for f in schema:
            for t in _leaf_types(f.type):
                if pa.types.is_list(t):
                    assert pa.types.is_string(t.value_type) or pa.types.is_struct(t.value_type) \
                        or t.value_type == pa.int32()
                elif not pa.types.is_struct(t):
                    assert t in allowed, f"{table}.{f.name}: {t}"
            if f.name.endswith("_ts_ns") or f.name.endswith("_ns"):
                assert f.type == pa.int64(), f"{table}.{f.name}"
            if f.name.endswith("_ms"):
                assert f.type in (pa.int32(), pa.int64(), pa.float64()), f"{table}.{f.name}"


def test_every_field_is_described():
    for table, schema in SCHEMAS.items():
        for f in schema:
            assert len(description(f)) > 5, f"{table}.{f.name}"
    headers = SCHEMAS["records"].field("headers").type.value_type
    assert all(f.metadata and f.metadata.get(b"description") for f in headers)


def test_doc_is_generated_from_the_schema():
    text = DOC.read_text()
    assert DOC_BEGIN in text and DOC_END in text
    expected = with_generated_doc(text)
    if os.environ.get("KAFKASNIFF_UPDATE_GOLDEN") == "1":
        DOC.write_text(expected)
    assert text == expected, ("docs/parquet-schema.md is out of date: run "
                              "`.venv/bin/python -m kafkasniff.export.schema "
                              "docs/parquet-schema.md`")
    md = schema_markdown()
    for table, schema in SCHEMAS.items():
        assert f"### `{table}`" in md
        for f in schema:
            assert f"| `{f.name}` |" in md


def test_partition_columns_exist():
    cols = set(SCHEMAS["partitions"].names)
    assert set(rows.PARTITION_FIELDS) <= cols
    assert {"error_name", "topic", "topic_id", "partition", "batches", "records",
            "producer_id"} <= cols


def test_spark_ddl_lists_every_column():
    for table, schema in SCHEMAS.items():
        ddl = spark_ddl(table)
        assert ddl.count("`") >= 2 * len(schema)
        for f in schema:
            assert f"`{f.name}` " in ddl
    assert "ARRAY<STRUCT<`key`: STRING, `value`: BINARY>>" in spark_ddl("records")


def test_partition_column_widths_match_the_schema():
    import pyarrow as pa

    bounds = {pa.int16(): 2**15, pa.int32(): 2**31, pa.int64(): 2**63}
    schema = SCHEMAS["partitions"]
    for col, kind in rows._COLUMN_KINDS.items():
        t = schema.field(col).type
        assert kind is str if t == pa.string() else kind == bounds[t], col
