"""Damaged captures never stop the group analysis: mutations of the captures with group
traffic (the fuzz target's own mutator) go through the pipeline, the analyzer, the text
report and JSON without an exception."""

from __future__ import annotations

import io
import json
import random

import pytest

from kafkasniff.groups import GroupAnalyzer
from kafkasniff.groups.report import render_groups
from kafkasniff.model import Exchange, TopicName
from kafkasniff.pipeline import Pipeline
from tests.conftest import CAPTURES
from tests.support import fuzz_target as ft

SEEDS = ["librdkafka_kip848", "librdkafka_share", "aiokafka", "kafka_python",
         "librdkafka_produce_consume"]


@pytest.mark.parametrize("name", SEEDS)
def test_mutated_group_captures(name):
    rng = random.Random(f"groups-{name}")
    seed = (CAPTURES / f"{name}.pcap").read_bytes()
    groups_seen = 0
    for _ in range(40):
        data = seed
        for _ in range(rng.randint(1, 3)):
            data = ft.mutate(data, rng)
        pipe = Pipeline()
        an = GroupAnalyzer(pipe.defs)
        try:
            with pipe.open(io.BytesIO(data)) as packets:
                for pkt in packets:
                    for rec in pipe.feed(pkt):
                        if type(rec) in (Exchange, TopicName):
                            an.add_record(rec)
        except Exception as exc:  # noqa: BLE001 - a capture the reader refuses is not ours
            if type(exc).__module__.startswith("kafkasniff"):
                continue
            raise
        for rec in pipe.finish():
            an.add_record(rec)
        rep = an.finish(pipe.topics.names)
        groups_seen += len(rep.groups)
        json.dumps(rep.to_dict())
        render_groups(rep)
    assert groups_seen > 0
