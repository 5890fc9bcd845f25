"""Errors, throttle time and topics extracted from decoded bodies; topic id registry."""

from __future__ import annotations

from kafkasniff.content.summary import Summarizer, TopicRegistry
from kafkasniff.protocol.decoder import BodyDecoder
from kafkasniff.protocol.primitives import ZERO_UUID
from kafkasniff.protocol.schema import load_definitions
from tests.pairing.frames import (
    FETCH,
    METADATA,
    PRODUCE,
    TOPIC_ID_ORDERS,
    TOPIC_ID_UNKNOWN,
    ZERO_ID,
    fetch_v4_request_body,
    fetch_v4_response_body,
    heartbeat_v0_response_body,
    metadata_v1_request_body,
    metadata_v1_response_body,
    metadata_v10_request_body,
    metadata_v10_response_body,
    produce_v3_request_body,
    produce_v3_response_body,
    uuid_text,
)

DEFS = load_definitions()
DEC = BodyDecoder(DEFS)


def decoded(api_key: int, version: int, is_response: bool, body: bytes):
    info = DEFS.apis[api_key]
    plan = DEFS.plan(info.response if is_response else info.request, version)
    res = DEC.decode(api_key, version, is_response, body, 0)
    assert res.complete and not res.issues
    return plan, res.value


def summarize(s: Summarizer, api_key: int, version: int, req: bytes | None, resp: bytes | None):
    qp, qv = decoded(api_key, version, False, req) if req is not None else (None, None)
    rp, rv = decoded(api_key, version, True, resp) if resp is not None else (None, None)
    return tuple(s.summarize(qp, qv, rp, rv))[:4]  # (errors, throttle, topics, counts)


# --------------------------------------------------------------------------- registry

def test_registry_learns_and_resolves():
    r = TopicRegistry()
    tid = uuid_text(TOPIC_ID_ORDERS)
    assert r.resolve(tid) == tid                      # unknown: the id itself
    r.learn(tid, "orders")
    assert r.resolve(tid) == "orders"
    r.learn(tid, "orders-renamed")                    # latest wins (topic re-created)
    assert r.resolve(tid) == "orders-renamed"


def test_registry_ignores_the_zero_uuid_and_empty_names():
    r = TopicRegistry()
    r.learn(ZERO_UUID, "orders")
    assert r.names == {}
    assert r.resolve(ZERO_UUID) == ZERO_UUID
    r.learn(uuid_text(TOPIC_ID_ORDERS), "")
    assert r.names == {}


def test_registry_is_bounded_oldest_forgotten_first():
    r = TopicRegistry(max_topics=3)
    ids = [uuid_text(bytes([i]) * 16) for i in range(1, 6)]
    for i, tid in enumerate(ids):
        r.learn(tid, f"t{i}")
    assert len(r.names) == 3
    assert [r.resolve(t) for t in ids] == [ids[0], ids[1], "t2", "t3", "t4"]
    r.learn(ids[2], "t2-again")                      # re-learning a known id evicts nothing
    assert len(r.names) == 3 and r.resolve(ids[3]) == "t3"


def test_zero_uuid_constant_is_kafkas_text_form():
    assert ZERO_UUID == "AAAAAAAAAAAAAAAAAAAAAA" == uuid_text(ZERO_ID)


# --------------------------------------------------------------------------- errors

def test_error_names_distinct_in_order_of_first_appearance_with_counts():
    s = Summarizer(DEFS)
    resp = produce_v3_response_body(
        topics=(("orders", ((0, 0), (1, 6), (2, 3), (3, 6))), ("payments", ((0, 3),))),
        throttle_time_ms=100)
    errors, throttle, topics, counts = summarize(s, PRODUCE, 3, produce_v3_request_body(), resp)
    assert errors == ("NOT_LEADER_OR_FOLLOWER", "UNKNOWN_TOPIC_OR_PARTITION")
    assert counts == {6: 2, 3: 2}
    assert throttle == 100
    assert topics == ("orders", "payments")


def test_top_level_error_and_unknown_code():
    s = Summarizer(DEFS)
    assert summarize(s, 12, 0, None, heartbeat_v0_response_body(6))[0] == ("NOT_LEADER_OR_FOLLOWER",)
    assert summarize(s, 12, 0, None, heartbeat_v0_response_body(0))[0] == ()
    errors = summarize(s, 12, 0, None, heartbeat_v0_response_body(-32000))[0]
    assert errors == ("UNKNOWN_ERROR_CODE_-32000",)
    assert summarize(s, 12, 0, None, heartbeat_v0_response_body(-1))[0] == ("UNKNOWN_SERVER_ERROR",)


def test_nested_metadata_errors():
    s = Summarizer(DEFS)
    resp = metadata_v1_response_body(topics=(
        ("orders", 0, ((0, 0, 1), (9, 1, -1))),     # partition 1: REPLICA_NOT_AVAILABLE
        ("secret", 29, ()),                          # TOPIC_AUTHORIZATION_FAILED
    ))
    errors, throttle, topics, counts = summarize(s, METADATA, 1, metadata_v1_request_body(None),
                                                 resp)
    assert errors == ("REPLICA_NOT_AVAILABLE", "TOPIC_AUTHORIZATION_FAILED")
    assert counts == {9: 1, 29: 1}
    assert throttle is None                          # Metadata v1 has no throttle_time_ms
    assert topics == ("orders", "secret")


def test_request_error_codes_are_not_response_errors():
    # only the response's error codes count; a request never reports errors
    s = Summarizer(DEFS)
    errors, _, _, counts = summarize(s, FETCH, 4, fetch_v4_request_body(), None)
    assert errors == () and counts == {}


# --------------------------------------------------------------------------- topics

def test_topics_request_then_response_order_and_dedup():
    s = Summarizer(DEFS)
    req = fetch_v4_request_body(topics=(("b", (0,)), ("a", (0,))))
    resp = fetch_v4_response_body(topics=(("a", ((0, 0),)), ("c", ((0, 0),))))
    _, throttle, topics, _ = summarize(s, FETCH, 4, req, resp)
    assert sorted(topics) == ["a", "b", "c"]
    assert len(topics) == len(set(topics))
    assert throttle == 0


def test_topic_ids_learnt_from_metadata_v10_and_resolved_later():
    s = Summarizer(DEFS)
    other = bytes(range(50, 66))
    resp = metadata_v10_response_body((("orders", TOPIC_ID_ORDERS, 0), ("payments", other, 0)))
    _, throttle, topics, _ = summarize(s, METADATA, 10, metadata_v10_request_body(()), resp)
    assert topics == ("orders", "payments")
    assert throttle == 0
    assert s.registry.resolve(uuid_text(TOPIC_ID_ORDERS)) == "orders"
    assert s.registry.resolve(uuid_text(other)) == "payments"
    req = metadata_v10_request_body(((TOPIC_ID_ORDERS, None), (TOPIC_ID_UNKNOWN, None),
                                     (other, None)))
    _, _, topics, _ = summarize(s, METADATA, 10, req, None)
    assert topics == ("orders", uuid_text(TOPIC_ID_UNKNOWN), "payments")


def test_zero_topic_id_is_ignored_and_never_learnt():
    s = Summarizer(DEFS)
    resp = metadata_v10_response_body((("legacy", ZERO_ID, 0),))
    _, _, topics, _ = summarize(s, METADATA, 10, metadata_v10_request_body(((ZERO_ID, "legacy"),)),
                                resp)
    assert topics == ("legacy",)
    assert s.registry.names == {}


def test_registry_shared_between_summarizers():
    reg = TopicRegistry()
    a, b = Summarizer(DEFS, reg), Summarizer(DEFS, reg)
    summarize(a, METADATA, 10, None, metadata_v10_response_body())
    _, _, topics, _ = summarize(b, METADATA, 10,
                                metadata_v10_request_body(((TOPIC_ID_ORDERS, None),)), None)
    assert topics == ("orders",)


def test_nothing_to_summarize():
    s = Summarizer(DEFS)
    assert s.summarize(None, None, None, None) == ((), None, (), {}, (), ())


def test_interest_tree_keeps_only_relevant_paths():
    s = Summarizer(DEFS)
    tree = s.tree(DEFS.plan("MetadataResponse", 1))
    keys = {k for k, _, _ in tree}
    assert "topics" in keys
    assert "brokers" not in keys and "controller_id" not in keys


def test_null_in_a_topic_name_array_is_not_a_topic():
    """A peer writing a null item in a ``[]string`` of topic names (a spec departure the
    lenient decoder keeps as None) must not put None among the topics."""
    s = Summarizer(DEFS)
    plan = DEFS.plan(DEFS.apis[20].request, 1)          # DeleteTopics v1: topic_names
    summary = s.summarize(plan, {"topic_names": [None, "a"], "timeout_ms": 1000}, None, None)
    assert summary.topics == summary.wire_topics == ("a",)
