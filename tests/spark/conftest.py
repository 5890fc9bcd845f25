"""Fixtures of the Spark tests: one local SparkSession (local[2]) for the whole session, the
``export`` of every capture and one ``spark decode`` of all of them (cached)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafkasniff.pipeline import PipelineOptions
from tests.conftest import CAPTURES

ALL_CAPTURES = sorted(CAPTURES.glob("*.pcap"))
#: shards forced on every capture, so that even the small committed captures are split
FORCED_SHARDS = 3


def all_broker_ports() -> frozenset[int]:
    """Broker ports of every committed capture (from the truth files), plus 9092."""
    ports = {9092}
    for pcap in ALL_CAPTURES:
        ports.update(json.loads(pcap.with_suffix(".truth.json").read_text())["broker_ports"])
    return frozenset(ports)


def pipeline_options() -> PipelineOptions:
    """One set of options for every capture (a decode of all captures takes one set)."""
    return PipelineOptions(ports=all_broker_ports())


def java_missing_reason() -> str | None:
    from kafkasniff.spark.session import SparkSetupError, check_java

    try:
        check_java()
    except SparkSetupError as exc:
        return f"Spark needs Java: {exc}"
    return None


@pytest.fixture(scope="session")
def spark():
    """The one SparkSession of the Spark tests (local[2], UTC); skipped without Java."""
    reason = java_missing_reason()
    if reason:
        pytest.skip(reason)
    from kafkasniff.spark.session import _active_session, get_spark

    existed = _active_session()
    session = get_spark(cores=2, app_name="kafkasniff-tests",
                        conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"})
    yield session
    if session is not existed:
        session.stop()


@pytest.fixture(scope="session")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("spark")


@pytest.fixture(scope="session")
def exported(work) -> Path:
    """``kafkasniff export`` (``export_captures``) of every capture on its own, with records,
    all into one directory (part files are named after the capture)."""
    from kafkasniff.export.writer import export_captures

    out = work / "export"
    counts = {}
    for pcap in ALL_CAPTURES:
        counts[pcap.name] = export_captures([pcap], out, options=pipeline_options(),
                                            with_records=True)
    (work / "export-counts.json").write_text(json.dumps(counts))
    return out


@pytest.fixture(scope="session")
def decoded(spark, work):
    """``spark_decode`` of every capture at once, each forced into 3 shards, with records.
    Returns ``(out_dir, DecodeResult)``."""
    from kafkasniff.spark.decode import spark_decode

    out = work / "spark"
    res = spark_decode(ALL_CAPTURES, out, spark=spark, shards=FORCED_SHARDS,
                       with_records=True, options=pipeline_options())
    return out, res
