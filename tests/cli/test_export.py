"""kafkasniff export: tables written, JSON Lines, usage errors, through the main command."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from kafkasniff.cli.export import export_command
from kafkasniff.export.schema import TABLES
from tests.conftest import CAPTURES

PCAP = CAPTURES / "librdkafka_produce_consume.pcap"
HOUR_NS = 3_600_000_000_000


def test_export_command(tmp_path):
    ports = []
    for p in json.loads(PCAP.with_suffix(".truth.json").read_text())["broker_ports"]:
        ports += ["--port", str(p)]
    out = tmp_path / "out"
    res = CliRunner().invoke(export_command, [str(PCAP), "-o", str(out), "--records",
                                              "--partition-by", "date,hour", *ports,
                                              "--row-group-rows", "10"])
    assert res.exit_code == 0, res.output
    line = res.output.strip().splitlines()[-1]
    assert line.startswith("export: exchanges 62, partitions ")
    for table in TABLES:
        assert list((out / table).glob("date=*/hour=*/part-librdkafka_produce_consume.pcap-*"
                                       ".parquet")), table
    md = pq.read_metadata(next((out / "exchanges").rglob("*.parquet")))
    assert md.num_row_groups == 7
    res = CliRunner().invoke(export_command, [str(PCAP), "-o", str(tmp_path / "j"), "-q",
                                              "--format", "jsonl", *ports])
    assert res.exit_code == 0 and res.output == ""
    assert len((tmp_path / "j" / "exchanges").glob("*.jsonl").__next__().read_text()
               .splitlines()) == 62
    assert not (tmp_path / "j" / "records").exists()


@pytest.mark.parametrize("args", [["--partition-by", "week"], ["--format", "csv"],
                                  ["--row-group-rows", "0"], []])
def test_export_command_usage_errors(tmp_path, args):
    base = [str(PCAP)] if args else [str(CAPTURES / "missing.pcap")]
    res = CliRunner().invoke(export_command, base + ["-o", str(tmp_path / "o"), *args])
    assert res.exit_code == 2


def test_export_through_the_main_command(tmp_path):
    from kafkasniff.cli import main

    res = CliRunner().invoke(main, ["export", str(CAPTURES / "crafted_sasl.pcap"), "-o",
                                    str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "export: exchanges 22," in res.output
    assert pq.read_table(tmp_path / "exchanges").num_rows == 22
