"""Spark reads every exported table back with exactly the documented types, times in UTC."""

from __future__ import annotations

import pyarrow as pa
import pytest

from kafkasniff.export.schema import SCHEMAS, TABLES, spark_ddl
from tests.conftest import CAPTURES
from tests.export.test_export_captures import read_parquet

PCAP = CAPTURES / "librdkafka_produce_consume.pcap"  # every table has rows


def expected_spark_type(t: pa.DataType):
    from pyspark.sql import types as T

    simple = {pa.string(): T.StringType(), pa.binary(): T.BinaryType(),
              pa.bool_(): T.BooleanType(), pa.float64(): T.DoubleType(),
              pa.int8(): T.ByteType(), pa.int16(): T.ShortType(), pa.int32(): T.IntegerType(),
              pa.int64(): T.LongType(), pa.timestamp("us", tz="UTC"): T.TimestampType()}
    if pa.types.is_list(t):
        return T.ArrayType(expected_spark_type(t.value_type), True)
    if pa.types.is_struct(t):
        return T.StructType([T.StructField(f.name, expected_spark_type(f.type), True)
                             for f in t])
    return simple[t]


def expected_spark_schema(table: str):
    """The documented schema as Spark reads Parquet: same names and types, all nullable."""
    from pyspark.sql import types as T

    return T.StructType([T.StructField(f.name, expected_spark_type(f.type), True)
                         for f in SCHEMAS[table]])


@pytest.mark.parametrize("table", TABLES)
def test_spark_reads_the_documented_schema(spark, exported, table):
    out = exported(PCAP)
    df = spark.read.parquet(str(out / table))
    assert df.schema == expected_spark_schema(table)
    assert df.count() == read_parquet(out, table).num_rows > 0
    # times are UTC: ts is ts_ns in microseconds, date/hour its UTC calendar values
    bad = df.filter("unix_micros(ts) != ts_ns div 1000 OR date_format(ts, 'yyyy-MM-dd') != date "
                    "OR hour(ts) != hour").count()
    assert bad == 0


def test_spark_values(spark, exported):
    out = exported(PCAP)
    ex = spark.read.parquet(str(out / "exchanges"))
    want = read_parquet(out, "exchanges").to_pylist()
    rows = {r.exchange_id: r for r in ex.select(
        "exchange_id", "latency_ms", "errors", "topics", "api_key", "status",
        "request_bytes").collect()}
    for w in want:
        r = rows[w["exchange_id"]]
        assert (r.latency_ms, r.errors, r.topics, r.api_key, r.status, r.request_bytes) == \
            (w["latency_ms"], w["errors"], w["topics"], w["api_key"], w["status"],
             w["request_bytes"])
    recs = spark.read.parquet(str(out / "records"))
    got = sorted([(r.offset, bytes(r.key) if r.key is not None else None,
                   bytes(r.value or b""),
                   [(h.key, None if h.value is None else bytes(h.value)) for h in r.headers])
                  for r in recs.filter("side = 'response'").collect()], key=repr)
    want_r = sorted([(r["offset"], r["key"], r["value"] or b"",
                      [(h["key"], h["value"]) for h in r["headers"]])
                     for r in read_parquet(out, "records").to_pylist()
                     if r["side"] == "response"], key=repr)
    assert got == want_r
    bad = recs.filter("timestamp IS NOT NULL AND unix_millis(timestamp) != timestamp_ms").count()
    assert bad == 0
    # a join through the documented keys
    n = spark.sql(f"""
        SELECT count(*) AS n FROM parquet.`{out / 'exchanges'}` e
        JOIN parquet.`{out / 'connections'}` c USING (connection_key)""").collect()[0].n
    assert n == len(want)


def test_spark_reads_hive_partitions(spark, exported):
    out = exported(PCAP, partition_by=("date", "hour"))
    assert list((out / "exchanges").glob("date=*/hour=*/part-*.parquet"))
    # inferred from the directory names: date becomes DATE, hour INT (documented)
    df = spark.read.parquet(str(out / "exchanges"))
    types = dict(df.dtypes)
    assert types["date"] == "date" and types["hour"] == "int"
    # with the documented DDL every column keeps its type
    df = spark.read.schema(spark_ddl("exchanges")).parquet(str(out / "exchanges"))
    assert sorted(df.schema, key=lambda f: f.name) == \
        sorted(expected_spark_schema("exchanges"), key=lambda f: f.name)
    flat = read_parquet(exported(PCAP), "exchanges")
    assert df.count() == flat.num_rows
    assert df.filter("date_format(ts, 'yyyy-MM-dd') != date OR hour(ts) != hour").count() == 0


@pytest.mark.parametrize("table", ["exchanges", "records", "connections"])
def test_spark_reads_json_lines(spark, exported, table):
    out = exported(PCAP, fmt="jsonl")
    df = spark.read.schema(spark_ddl(table)).option("mode", "FAILFAST").json(str(out / table))
    assert df.schema == expected_spark_schema(table)
    pq_df = spark.read.parquet(str(exported(PCAP) / table))
    assert df.count() == pq_df.count()
    assert df.exceptAll(pq_df).count() == 0
