"""Fixtures of the export tests: exports of every capture (cached per session), the decoded
values they come from, and one local SparkSession."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kafkasniff.model import DecodeIssue, Exchange
from kafkasniff.pipeline import Pipeline, PipelineOptions, analyze
from tests.conftest import CAPTURES

ALL_CAPTURES = sorted(CAPTURES.glob("*.pcap"))


def truth_of(pcap: Path) -> dict:
    return json.loads(pcap.with_suffix(".truth.json").read_text())


def capture_options(pcap: Path, **extra) -> PipelineOptions:
    """Pipeline options for a committed capture: its broker ports from the truth file."""
    ports = truth_of(pcap).get("broker_ports") or [9092]
    return PipelineOptions(ports=frozenset(ports), **extra)


@dataclass
class Values:
    """Everything ``analyze`` yields for a capture with ``meta_records=True``."""

    exchanges: list[Exchange] = field(default_factory=list)
    issues: list[DecodeIssue] = field(default_factory=list)  # standalone
    summaries: list = field(default_factory=list)
    topic_names: list = field(default_factory=list)

    def all_issues(self) -> list[DecodeIssue]:
        return [i for ex in self.exchanges for i in ex.issues] + self.issues


_VALUES: dict[str, Values] = {}
_EXPORTS: dict[tuple, Path] = {}


def decoded_values(pcap: Path) -> Values:
    """The pipeline values of a capture (with records), cached."""
    key = str(pcap)
    if key not in _VALUES:
        v = Values()
        opts = capture_options(pcap, meta_records=True, with_records=True)
        for rec in analyze([pcap], pipeline=Pipeline(opts)):
            name = type(rec).__name__
            if type(rec) is Exchange:
                v.exchanges.append(rec)
            elif type(rec) is DecodeIssue:
                v.issues.append(rec)
            elif name == "ConnectionSummary":
                v.summaries.append(rec)
            else:
                v.topic_names.append(rec)
        _VALUES[key] = v
    return _VALUES[key]


@pytest.fixture(scope="session")
def export_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("exports")


@pytest.fixture(scope="session")
def exported(export_root):
    """``exported(pcap, fmt="parquet", partition_by=(), show_secrets=False)`` -> output dir
    of ``export_captures`` with records, cached per session."""
    from kafkasniff.export.writer import export_captures

    def run(pcap: Path, fmt: str = "parquet", partition_by: tuple = (),
            show_secrets: bool = False) -> Path:
        key = (str(pcap), fmt, partition_by, show_secrets)
        if key not in _EXPORTS:
            out = export_root / f"{pcap.stem}-{fmt}-{'_'.join(partition_by) or 'flat'}" \
                f"{'-secrets' if show_secrets else ''}"
            counts = export_captures([pcap], out, with_records=True, fmt=fmt,
                                     partition_by=partition_by,
                                     options=capture_options(pcap, show_secrets=show_secrets))
            (out / "counts.json").write_text(json.dumps(counts))
            _EXPORTS[key] = out
        return _EXPORTS[key]
    return run


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """One local SparkSession (UTC) for the whole session."""
    if shutil.which("java") is None:
        pytest.skip("no java on PATH: Spark cannot start (install a JRE 17+, e.g. "
                    "openjdk-17-jre-headless, to run the Spark read-back tests)")
    pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed (extra 'spark')")
    from pyspark.sql import SparkSession

    del pyspark
    session = (SparkSession.builder.master("local[1]").appName("kafkasniff-export-tests")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "1")
               .config("spark.driver.memory", "1g")
               .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("warehouse")))
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def planned_bodies(pcap: Path, defs):
    """``(exchange, side, plan, body)`` of every decoded body of a capture that has a plan
    (``side``: ``"request"`` or ``"response"``), in exchange order."""
    from kafkasniff.export.rows import _plans

    for ex in decoded_values(pcap).exchanges:
        qplan, rplan = _plans(ex, defs)
        for plan, msg, side in ((qplan, ex.request, "request"), (rplan, ex.response, "response")):
            if plan is not None:
                yield ex, side, plan, msg.body
