"""The row builders' shortcuts hold what they replace: the partitions table reads each
partition struct's wanted fields from its dict, the same values as a walk that visits every
wanted field the plan declares (scalars, and the scalars of a wanted struct such as
``current_leader``); the exchanges row computes its id, time and endpoint columns inline, the
same values as :func:`exchange_id`, :func:`time_columns` and :func:`split_endpoint`."""

from __future__ import annotations

import pytest

from kafkasniff.export import rows as R
from kafkasniff.protocol.schema import load_definitions
from kafkasniff.protocol.walk import PARTITION, PlanWalker
from tests.export.conftest import ALL_CAPTURES, decoded_values, planned_bodies

_SCALARS = {"int8", "int16", "int32", "int64", "string", "bool", "float64"}


def _wanted_field(f):
    """The plan's view: a wanted scalar, or a struct holding wanted scalars."""
    if f.kind in _SCALARS and f.key in R._WANTED_TOP:
        return "scalar"
    if f.kind == "struct" and f.key in R._WANTED_NESTED:
        return "nested"
    return None


_BY_FIELD = PlanWalker(_wanted_field, partition_structs=True)


def field_walk(plan, body: dict, side: str, out: dict) -> None:
    """Partition values by one callback per wanted field, in wire order."""
    here: dict[int, dict] = {}

    def visit(tag, key, v, struct, node, topic, topic_id, partition, path):
        if tag is PARTITION:
            k = (topic if topic is not None else topic_id, v)
            entry = out.setdefault(k, {"topic": None, "topic_id": None, "partition": v,
                                       "request": {}, "response": {}})
            if entry["topic"] is None:
                entry["topic"] = topic
            if entry["topic_id"] is None:
                entry["topic_id"] = topic_id
            here[id(struct)] = entry[side]
            entry[side][""] = True
            return
        vals = here.get(id(struct))
        if vals is None:
            return
        if tag == "scalar":
            vals.setdefault(key, v)
        elif type(v) is dict:
            for sub in R._WANTED_NESTED[key]:
                if v.get(sub) is not None:
                    vals.setdefault(f"{key}.{sub}", v[sub])

    _BY_FIELD.walk(plan, body, visit)


def both(plan, body: dict, side: str = "response") -> tuple[dict, dict]:
    by_dict, by_field = {}, {}
    R._walk_partitions(plan, body, side, by_dict)
    field_walk(plan, body, side, by_field)
    return by_dict, by_field


def as_items(found: dict) -> list:
    """Entries with their values in order (dict equality alone ignores order)."""
    return [(k, e["topic"], e["topic_id"], e["partition"], list(e["request"].items()),
             list(e["response"].items())) for k, e in found.items()]


@pytest.mark.parametrize("pcap", ALL_CAPTURES, ids=[p.stem for p in ALL_CAPTURES])
def test_partition_values_equal_a_walk_of_the_plans_fields(pcap):
    defs = load_definitions()
    compared = 0
    for ex, side, plan, body in planned_bodies(pcap, defs):
        by_dict, by_field = both(plan, body, side)
        assert as_items(by_dict) == as_items(by_field), (ex.api_name, ex.api_version, side)
        compared += len(by_dict)
    if pcap.stem in ("librdkafka_errors_latency", "broker_java", "crafted_records"):
        assert compared > 0


def test_a_partition_met_twice_keeps_its_first_values():
    defs = load_definitions()
    plan = defs.plan(defs.apis[1].response, 12)                  # FetchResponse v12
    body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": "t", "partitions": [
            {"partition_index": 0, "error_code": 0, "high_watermark": 5,
             "current_leader": {"leader_id": 1, "leader_epoch": 4}},
            {"partition_index": 1, "error_code": 6, "high_watermark": [1, 2]},
            {"partition_index": 0, "error_code": 3, "high_watermark": 9,
             "log_start_offset": 2, "current_leader": {"leader_id": 2}}]}]}
    by_dict, by_field = both(plan, body)
    first = by_dict[("t", 0)]["response"]
    assert first == {"": True, "error_code": 0, "high_watermark": 5,
                     "current_leader.leader_id": 1, "current_leader.leader_epoch": 4,
                     "log_start_offset": 2}
    # a value of another type than its field's: left out by the dict read, and null in the
    # row either way (the row keeps only integers in integer columns)
    assert by_dict[("t", 1)]["response"] == {"": True, "error_code": 6}
    assert by_field[("t", 1)]["response"]["high_watermark"] == [1, 2]
    del by_field[("t", 1)]["response"]["high_watermark"]
    assert as_items(by_dict) == as_items(by_field)


@pytest.mark.parametrize("pcap", ALL_CAPTURES, ids=[p.stem for p in ALL_CAPTURES])
def test_exchange_row_columns_equal_their_functions(pcap):
    defs = load_definitions()
    for ex in decoded_values(pcap).exchanges:
        out = R.exchange_rows(ex, "c.pcap", "ck", defs=defs)
        row = out["exchanges"][0]
        xid = R.exchange_id(ex, "ck")
        tcols = R.time_columns(ex.ts_ns)
        cip, cport = R.split_endpoint(ex.client)
        bip, bport = R.split_endpoint(ex.broker)
        assert {k: row[k] for k in ("exchange_id", *tcols, "client_ip", "client_port",
                                    "broker_ip", "broker_port", "request_bytes",
                                    "response_bytes")} == \
            {"exchange_id": xid, **tcols, "client_ip": cip, "client_port": cport,
             "broker_ip": bip, "broker_port": bport, "request_bytes": ex.request_bytes,
             "response_bytes": ex.response_bytes}
        for prow in out["partitions"]:
            assert {k: prow[k] for k in ("exchange_id", *tcols)} == {"exchange_id": xid,
                                                                     **tcols}
        assert [i["exchange_id"] for i in out["issues"]] == [xid] * len(ex.issues)
        assert [i["ts_ns"] for i in out["issues"]] == \
            [i.ts_ns or ex.ts_ns for i in ex.issues]
