"""``kafkasniff groups``: text and JSON reports, filters, exit codes; bad bodies."""

from __future__ import annotations

import dataclasses
import json

from kafkasniff.groups import GroupAnalyzer
from tests.cli.common import run
from tests.conftest import CAPTURES, decode_capture

JAVA = CAPTURES / "broker_java.pcap"


def test_text_report_shows_every_group_member_rebalance_and_commit():
    res = run("groups", JAVA)
    assert res.exit_code == 0
    out = res.output
    for gid in ("java-g848", "java-gclassic", "java-gshare"):
        assert f"Group {gid}" in out
    assert "protocol consumer (KIP-848)" in out and "protocol share (KIP-932)" in out
    assert "protocol classic, protocol_type consumer, assignor range" in out
    assert "coordinator 127.0.0.1:9092 (node 1)" in out
    assert "java-classic-94057b37-a801-46d1-b788-7623fabd466f" in out   # whole member id
    assert "java-topic[0,1]" in out and "join" in out and "leave" in out
    assert "Lag at the end" in out
    assert out.rstrip().endswith("3 groups, 7 rebalances, 26 group exchanges")


def test_json_report_is_the_analysis():
    doc = json.loads(run("groups", "--json", JAVA).output)
    d = decode_capture(JAVA)
    an = GroupAnalyzer(d.pipeline.defs)
    for ex in d.exchanges:
        an.add(ex)
    assert doc == json.loads(json.dumps(an.finish(d.pipeline.topics.names).to_dict()))
    g = {x["group_id"]: x for x in doc["groups"]}["java-gclassic"]
    assert g["rebalances"][0]["assignment"] == {
        "java-classic-94057b37-a801-46d1-b788-7623fabd466f": {"java-topic": [0, 1]}}
    assert g["rebalances"][0]["duration_ns"] > 0


def test_group_filter_and_no_groups():
    doc = json.loads(run("groups", "--json", "--group", "java-gshare", JAVA).output)
    assert [g["group_id"] for g in doc["groups"]] == ["java-gshare"]
    res = run("groups", "--group", "no-such-group", JAVA)
    assert res.exit_code == 0 and res.output.startswith("no group to show")
    res = run("groups", CAPTURES / "crafted_throttle.pcap")
    assert res.exit_code == 0
    assert res.output.startswith("no consumer group traffic found")


def test_exit_codes(tmp_path):
    assert run("groups").exit_code == 2                      # no capture given
    res = run("groups", tmp_path / "missing.pcap")
    assert res.exit_code == 2
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"not a capture at all")
    res = run("groups", bad)
    assert res.exit_code == 2 and "kafkasniff: error:" in res.output


def _mangle(body):
    """Every value of a body replaced by something of the wrong type, level by level."""
    if isinstance(body, dict):
        return {k: (_mangle(v) if isinstance(v, (dict, list)) else "x") for k, v in body.items()}
    if isinstance(body, list):
        return [_mangle(v) if isinstance(v, (dict, list)) else None for v in body]
    return body


def test_bodies_of_the_wrong_shape_are_skipped_not_raised():
    """A peer departing from the spec (fields missing, of other types, responses without
    requests) never stops the analysis; the well-formed exchanges around are still read."""
    d = decode_capture(JAVA)
    an = GroupAnalyzer(d.pipeline.defs)
    for ex in d.exchanges:
        req, rsp = ex.request, ex.response
        bad = dataclasses.replace(
            ex, request=req and dataclasses.replace(req, body=_mangle(req.body)),
            response=rsp and dataclasses.replace(rsp, body=_mangle(rsp.body)))
        an.add(bad)
        an.add(dataclasses.replace(ex, request=None))
        an.add(dataclasses.replace(ex, request=req and dataclasses.replace(req, body={}),
                                   response=rsp and dataclasses.replace(rsp, body=None)))
    rep = an.finish()
    assert rep.group_exchanges > 0
    good = GroupAnalyzer(d.pipeline.defs)
    for ex in d.exchanges:
        good.add(ex)
        good.add(dataclasses.replace(ex, request=None))
    assert good.finish(d.pipeline.topics.names).to_dict() == \
        json.loads(run("groups", "--json", JAVA).output)


def test_group_exchanges_beyond_the_bound_are_counted_not_kept():
    """The replay keeps at most ``max_events`` group exchanges (memory stays bounded on a
    long capture of heartbeats); the rest are counted and the report says so. Fed whole or
    as two merged halves (``--jobs`` decoders), the same exchanges are kept."""
    from kafkasniff.groups.report import render_groups

    d = decode_capture(JAVA)
    whole = GroupAnalyzer(d.pipeline.defs, max_events=10)
    for ex in d.exchanges:
        whole.add(ex)
    assert len(whole.events) == 10 and whole.events_dropped == 16
    report = whole.finish(d.pipeline.topics.names)
    assert report.events_dropped == 16 and report.group_exchanges == 26
    assert report.to_dict()["events_dropped"] == 16
    assert "16 group exchanges beyond the limit not analysed" in render_groups(report)
    halves = [GroupAnalyzer(d.pipeline.defs, max_events=10) for _ in range(2)]
    for i, ex in enumerate(d.exchanges):
        halves[i % 2].add(ex)
    merged = GroupAnalyzer(d.pipeline.defs, max_events=10)
    for h in halves:
        merged.merge(h.snapshot())
    assert len(merged.events) == 10 and merged.events_dropped == 16
