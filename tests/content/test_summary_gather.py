"""The summary's walk without a callback (``PlanWalker.gather``) collects what a callback per
selected field collects: error codes counted, topic names and topic-id lists in wire order,
and the (topic id, name) pairs a struct carries, on every body of every capture and on
crafted bodies (null list items, the zero uuid, items that are not dicts)."""

from __future__ import annotations

import pytest

from kafkasniff.content.summary import _TAGS, ERROR, TOPIC, TOPIC_ID, TOPIC_LIST, summary_field
from kafkasniff.protocol.primitives import ZERO_UUID
from kafkasniff.protocol.schema import load_definitions
from kafkasniff.protocol.walk import PlanWalker
from tests.export.conftest import ALL_CAPTURES, planned_bodies

_WALKER = PlanWalker(summary_field)


def by_callback(plan, body) -> tuple:
    """What the summary collected with one callback per selected field (the code before
    ``gather``)."""
    errors: dict = {}
    topics: dict = {}
    ids: list = []
    pairs: list = []

    def visit(tag, key, v, struct, node, topic, topic_id, partition, path):
        if tag is ERROR:
            if v:
                errors[v] = errors.get(v, 0) + 1
        elif tag is TOPIC:
            topics[v] = None
        elif tag is TOPIC_ID:
            if v != ZERO_UUID:
                ids.append(v)
                if node.topic_key is not None and struct.get(node.topic_key) is not None:
                    pairs.append((v, struct[node.topic_key]))
        elif tag is TOPIC_LIST:
            for t in v:
                if t is not None:
                    topics[t] = None

    _WALKER.walk(plan, body, visit)
    return list(errors.items()), list(topics), ids, pairs


def by_gather(plan, body) -> tuple:
    errors: dict = {}
    topics: dict = {}
    ids: list = []
    pairs: list = []
    _WALKER.gather(plan, body, _TAGS, errors, topics, ids, pairs)
    return list(errors.items()), list(topics), ids, pairs


@pytest.mark.parametrize("pcap", ALL_CAPTURES, ids=[p.stem for p in ALL_CAPTURES])
def test_gather_equals_a_callback_walk_on_every_body(pcap):
    defs = load_definitions()
    found = 0
    for ex, side, plan, body in planned_bodies(pcap, defs):
        got = by_gather(plan, body)
        assert got == by_callback(plan, body), (ex.api_name, ex.api_version, side)
        found += sum(map(len, got))
    if pcap.stem in ("librdkafka_errors_latency", "broker_java"):
        assert found > 0


def test_gather_on_crafted_bodies():
    defs = load_definitions()
    fetch = defs.plan(defs.apis[1].response, 13)            # topics by id
    tid = "G5bnJ5_CQNyywK96SOzEzw"
    body = {"throttle_time_ms": 0, "error_code": 7, "session_id": 0, "responses": [
        {"topic_id": tid, "partitions": [
            {"partition_index": 0, "error_code": 6}, "not a dict",
            {"partition_index": 1, "error_code": 0}, {"partition_index": 2, "error_code": 6}]},
        {"topic_id": ZERO_UUID, "partitions": None},
        "x"]}
    assert by_gather(fetch, body) == by_callback(fetch, body) == \
        ([(7, 1), (6, 2)], [], [tid], [])
    metadata = defs.plan(defs.apis[3].response, 12)         # name and id in one struct
    body = {"topics": [{"error_code": 3, "name": "orders", "topic_id": tid, "partitions": []},
                       {"error_code": 0, "name": None, "topic_id": tid},
                       {"error_code": 0, "name": "a", "topic_id": ZERO_UUID}]}
    assert by_gather(metadata, body) == by_callback(metadata, body) == \
        ([(3, 1)], ["orders", "a"], [tid, tid], [(tid, "orders")])
    describe = defs.plan(defs.apis[15].request, 5)          # DescribeGroups: no topics
    assert by_gather(describe, {"groups": ["g"]}) == ([], [], [], [])
    offsets = defs.plan(defs.apis[47].request, 0)            # OffsetDelete
    body = {"group_id": "g", "topics": [{"name": "t", "partitions": [{"partition_index": 0}]},
                                        {"name": None}]}
    assert by_gather(offsets, body) == by_callback(offsets, body) == ([], ["t"], [], [])
    assert by_gather(fetch, None) == by_gather(fetch, [1, 2]) == ([], [], [], [])


def test_topic_name_lists_skip_null_items():
    defs = load_definitions()
    plans = [(k, v, defs.plan(info.request, v)) for k, info in sorted(defs.apis.items())
             for v in defs.message_versions(info.request)]
    hits = [(k, v, plan) for k, v, plan in plans
            if any(tag is TOPIC_LIST for _, tag, _ in (_WALKER.tree(plan).entries
                                                          if _WALKER.tree(plan) else ()))]
    assert hits, "no request with a top-level list of topic names"
    k, v, plan = hits[0]
    key = next(key for key, tag, _ in _WALKER.tree(plan).entries if tag is TOPIC_LIST)
    body = {key: ["a", None, "b", "a"]}
    assert by_gather(plan, body) == by_callback(plan, body) == ([], ["a", "b"], [], [])
