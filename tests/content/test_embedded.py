"""kafkasniff.content.embedded: the consumer group protocol inside JoinGroup, SyncGroup and
DescribeGroups bytes fields.

Subscriptions and assignments are encoded with tests/protocol/encoder.py from Kafka's data
specs (ConsumerProtocolSubscription / ConsumerProtocolAssignment); the group API bodies are
encoded the same way and decoded with BodyDecoder, so apply() sees real decoded bodies."""

from __future__ import annotations

import gc

import pytest

from kafkasniff.content.embedded import (
    ASSIGNMENT,
    CONSUMER,
    SUBSCRIPTION,
    EmbeddedDecoder,
    embedded_topics,
)
from kafkasniff.content.frames import ContentDecoder
from kafkasniff.issues import IssueKind
from kafkasniff.protocol.decoder import BodyDecoder
from kafkasniff.protocol.schema import load_definitions

from tests.pairing.frames import i16, request
from tests.protocol.encoder import encode

DEFS = load_definitions()
DECODER = BodyDecoder(DEFS)
JOIN_GROUP, SYNC_GROUP, DESCRIBE_GROUPS = 11, 14, 15


def subscription(version: int, topics, owned=(), user_data=None, generation_id=-1,
                 rack_id=None) -> bytes:
    """int16 version + ConsumerProtocolSubscription at min(version, 3)."""
    plan = DEFS.plan(SUBSCRIPTION, min(version, 3))
    value = {"topics": list(topics), "user_data": user_data,
             "owned_partitions": [{"topic": t, "partitions": list(p)} for t, p in owned],
             "generation_id": generation_id, "rack_id": rack_id}
    value = {f.key: value[f.key] for f in plan.fields}
    return i16(version) + encode(plan, value)


def assignment(version: int, assigned, user_data=None) -> bytes:
    plan = DEFS.plan(ASSIGNMENT, min(version, 3))
    return i16(version) + encode(plan, {
        "assigned_partitions": [{"topic": t, "partitions": list(p)} for t, p in assigned],
        "user_data": user_data})


def body(api_key: int, version: int, is_response: bool, value: dict) -> dict:
    """Encode ``value`` with the API's plan and decode it back with BodyDecoder."""
    info = DEFS.apis[api_key]
    plan = DEFS.plan(info.response if is_response else info.request, version)
    res = DECODER.decode(api_key, version, is_response, encode(plan, value), 0)
    assert res.complete and res.issues == []
    return res.value


def join_request(group: str, protocol_type: str, metadatas: list[bytes]) -> dict:
    return body(JOIN_GROUP, 5, False, {
        "group_id": group, "session_timeout_ms": 45000, "rebalance_timeout_ms": 300000,
        "member_id": "", "group_instance_id": None, "protocol_type": protocol_type,
        "protocols": [{"name": f"p{i}", "metadata": m} for i, m in enumerate(metadatas)]})


def join_response(metadatas: list[bytes]) -> dict:
    return body(JOIN_GROUP, 5, True, {
        "throttle_time_ms": 0, "error_code": 0, "generation_id": 3, "protocol_name": "range",
        "leader": "m-0", "member_id": "m-0",
        "members": [{"member_id": f"m-{i}", "group_instance_id": None, "metadata": m}
                    for i, m in enumerate(metadatas)]})


def sync_request(group: str, version: int, assignments: list[bytes], **extra) -> dict:
    value = {"group_id": group, "generation_id": 3, "member_id": "m-0",
             "group_instance_id": None,
             "assignments": [{"member_id": f"m-{i}", "assignment": a}
                             for i, a in enumerate(assignments)]}
    value.update(extra)
    return body(SYNC_GROUP, version, False, value)


def sync_response(data: bytes) -> dict:
    return body(SYNC_GROUP, 3, True, {"throttle_time_ms": 0, "error_code": 0,
                                      "assignment": data})


SUB = subscription(1, ["orders", "payments"], owned=[("orders", [0, 2])], user_data=b"\x01\x02")
ASSIGN = assignment(1, [("orders", [0, 1]), ("payments", [3])], user_data=None)


@pytest.fixture
def emb() -> EmbeddedDecoder:
    return EmbeddedDecoder(DEFS)


# --------------------------------------------------------------------------- decode

def test_decode_subscription(emb):
    assert emb.decode(SUBSCRIPTION, SUB) == {
        "protocol_type": "consumer", "version": 1, "topics": ["orders", "payments"],
        "user_data": b"\x01\x02", "owned_partitions": [{"topic": "orders", "partitions": [0, 2]}]}


def test_decode_subscription_v3():
    data = subscription(3, ["t"], generation_id=12, rack_id="rack-a")
    out = EmbeddedDecoder(DEFS).decode(SUBSCRIPTION, data)
    assert (out["version"], out["generation_id"], out["rack_id"]) == (3, 12, "rack-a")


def test_decode_assignment(emb):
    assert emb.decode(ASSIGNMENT, ASSIGN) == {
        "protocol_type": "consumer", "version": 1, "user_data": None,
        "assigned_partitions": [{"topic": "orders", "partitions": [0, 1]},
                                {"topic": "payments", "partitions": [3]}]}


def test_newer_version_read_as_newest_with_trailing_bytes(emb):
    """A version above the specs is read with the newest one; extra bytes are allowed, as
    Kafka's ConsumerProtocol does."""
    data = subscription(9, ["orders"], rack_id="r1") + b"future-fields"
    out = emb.decode(SUBSCRIPTION, data)
    assert out["version"] == 9 and out["topics"] == ["orders"] and out["rack_id"] == "r1"


@pytest.mark.parametrize("data, why", [
    (b"\x00", "shorter than the int16 version"),
    (i16(-1) + b"\x00\x00\x00\x00", "negative version -1"),
    (SUB + b"x", "1 trailing bytes"),
    (SUB[:-3], "ConsumerProtocolSubscription v1"),
])
def test_decode_raises_value_error(emb, data, why):
    with pytest.raises(ValueError, match=why):
        emb.decode(SUBSCRIPTION, data)


# --------------------------------------------------------------------------- JoinGroup

def test_join_group_request_and_response(emb):
    """Subscriptions of a consumer group's JoinGroup are decoded in place, both ways; the
    response takes the protocol type from its request."""
    req = join_request("g1", "consumer", [SUB, subscription(0, ["x"])])
    assert emb.apply(JOIN_GROUP, False, req) == []
    assert req["protocols"][0]["metadata"]["topics"] == ["orders", "payments"]
    assert req["protocols"][1]["metadata"]["version"] == 0
    resp = join_response([SUB])
    assert emb.apply(JOIN_GROUP, True, resp, request_body=req) == []
    assert resp["members"][0]["metadata"]["protocol_type"] == CONSUMER
    assert resp["members"][0]["metadata"]["owned_partitions"][0]["partitions"] == [0, 2]


def test_non_consumer_protocol_stays_raw(emb):
    req = join_request("connect-cluster", "connect", [b"\x00\x01connect-bytes"])
    assert emb.apply(JOIN_GROUP, False, req) == []
    assert req["protocols"][0]["metadata"] == b"\x00\x01connect-bytes"


def test_undecodable_subscription_kept_raw_with_a_spec_departure(emb):
    """Bytes that claim the consumer protocol but do not decode stay raw, with a
    spec_departure naming the field path; the other items are still decoded."""
    broken = SUB[:-3]
    req = join_request("g1", "consumer", [SUB, broken])
    [issue] = emb.apply(JOIN_GROUP, False, req)
    assert issue.kind == IssueKind.SPEC_DEPARTURE
    assert issue.field_path == "protocols[1].metadata" and issue.offset == -1
    assert issue.message.startswith("consumer protocol ConsumerProtocolSubscription does not "
                                    "decode (")
    assert issue.message.endswith("); kept raw")
    assert req["protocols"][1]["metadata"] == broken
    assert req["protocols"][0]["metadata"]["version"] == 1


def test_empty_metadata_is_left_alone(emb):
    req = join_request("g1", "consumer", [b""])
    assert emb.apply(JOIN_GROUP, False, req) == []
    assert req["protocols"][0]["metadata"] == b""


# --------------------------------------------------------------------------- SyncGroup

def test_sync_group_below_v5_uses_the_remembered_protocol(emb):
    """SyncGroup < v5 does not carry the protocol type: the one a JoinGroup of the same
    group declared is used; an unknown group stays raw."""
    emb.apply(JOIN_GROUP, False, join_request("g1", "consumer", [SUB]))
    assert emb.group_protocol == {"g1": "consumer"}
    req = sync_request("g1", 3, [ASSIGN])
    assert emb.apply(SYNC_GROUP, False, req) == []
    assert req["assignments"][0]["assignment"]["assigned_partitions"][1] == {
        "topic": "payments", "partitions": [3]}
    resp = sync_response(ASSIGN)
    assert emb.apply(SYNC_GROUP, True, resp, request_body=sync_request("g1", 3, [])) == []
    assert resp["assignment"]["version"] == 1
    other = sync_request("g2", 3, [ASSIGN])
    assert emb.apply(SYNC_GROUP, False, other) == []
    assert other["assignments"][0]["assignment"] == ASSIGN


def test_sync_group_v5_carries_its_protocol_type(emb):
    req = sync_request("g9", 5, [ASSIGN], protocol_type="consumer", protocol_name="range")
    assert emb.apply(SYNC_GROUP, False, req) == []
    assert req["assignments"][0]["assignment"]["version"] == 1
    assert emb.group_protocol["g9"] == "consumer"
    # a later join declaring another type replaces what is remembered
    emb.apply(JOIN_GROUP, False, join_request("g9", "connect", [b"raw"]))
    raw = sync_request("g9", 3, [ASSIGN])
    emb.apply(SYNC_GROUP, False, raw)
    assert raw["assignments"][0]["assignment"] == ASSIGN


def test_sync_group_response_bad_assignment(emb):
    emb.apply(JOIN_GROUP, False, join_request("g1", "consumer", []))
    resp = sync_response(b"\x00\x00\x00")
    [issue] = emb.apply(SYNC_GROUP, True, resp, request_body={"group_id": "g1"})
    assert issue.field_path == "assignment" and "ConsumerProtocolAssignment" in issue.message


def test_remembered_groups_are_bounded():
    emb = EmbeddedDecoder(DEFS, max_groups=2)
    for g in ("a", "b", "c"):
        emb.apply(JOIN_GROUP, False, join_request(g, "consumer", []))
    assert list(emb.group_protocol) == ["b", "c"]


# --------------------------------------------------------------------------- DescribeGroups

def describe_response() -> dict:
    def member(i, meta, assign):
        return {"member_id": f"m-{i}", "client_id": "c", "client_host": "/10.0.0.1",
                "member_metadata": meta, "member_assignment": assign}
    return body(DESCRIBE_GROUPS, 3, True, {"throttle_time_ms": 0, "groups": [
        {"error_code": 0, "group_id": "connectors", "group_state": "Stable",
         "protocol_type": "connect", "protocol_data": "sessioned",
         "members": [member(0, b"\x00\x01c", b"\x00\x01d")], "authorized_operations": 0},
        {"error_code": 0, "group_id": "g1", "group_state": "Stable",
         "protocol_type": "consumer", "protocol_data": "range",
         "members": [member(0, SUB, ASSIGN), member(1, SUB, b"\xff")],
         "authorized_operations": 0}]})


def test_describe_groups_response(emb):
    """Only consumer groups are decoded, each member's metadata and assignment."""
    resp = describe_response()
    [issue] = emb.apply(DESCRIBE_GROUPS, True, resp)
    assert issue.field_path == "groups[1].members[1].member_assignment"
    connect, consumer = resp["groups"]
    assert connect["members"][0]["member_metadata"] == b"\x00\x01c"
    m0, m1 = consumer["members"]
    assert m0["member_metadata"]["topics"] == ["orders", "payments"]
    assert m0["member_assignment"]["assigned_partitions"][0]["topic"] == "orders"
    assert m1["member_metadata"]["version"] == 1 and m1["member_assignment"] == b"\xff"


def test_apply_ignores_requests_of_describe_groups_and_other_apis(emb):
    assert emb.apply(DESCRIBE_GROUPS, False, {"groups": ["g1"]}) == []
    assert emb.apply(3, True, {"topics": []}) == []
    assert emb.apply(JOIN_GROUP, False, None) == [] and emb.apply(JOIN_GROUP, False, {}) == []


# --------------------------------------------------------------------------- topics

def test_embedded_topics():
    """Topic names inside decoded consumer-protocol values: subscribed, owned, assigned."""
    emb = EmbeddedDecoder(DEFS)
    resp = describe_response()
    emb.apply(DESCRIBE_GROUPS, True, resp)
    assert embedded_topics(resp) == [
        "orders", "payments", "orders",          # m-0 subscription (topics, owned)
        "orders", "payments",                    # m-0 assignment
        "orders", "payments", "orders",          # m-1 subscription; its assignment is raw
    ]
    assert embedded_topics(None) == [] and embedded_topics({"a": [b"raw"]}) == []


def test_embedded_topics_leaves_no_reference_cycle(collector_off):
    """A closure calling itself would leave one cycle per call for the collector."""
    resp = describe_response()
    EmbeddedDecoder(DEFS).apply(DESCRIBE_GROUPS, True, resp)
    gc.collect()
    for _ in range(3):
        assert embedded_topics(resp)
    assert gc.collect() == 0


def test_content_decoder_adds_embedded_topics_to_the_summary():
    """Through the frame decoder, a JoinGroup request's subscribed topics are topics of the
    exchange."""
    content = ContentDecoder(DEFS)
    plan = DEFS.plan("JoinGroupRequest", 5)
    raw = join_request("g1", "consumer", [SUB])
    raw["protocols"][0]["metadata"] = SUB
    frame = request(JOIN_GROUP, 5, 1, encode(plan, raw))[4:]
    d = content.decode_request(frame)
    assert d.body["protocols"][0]["metadata"]["topics"] == ["orders", "payments"]
    s = content.summarize(JOIN_GROUP, d, None)
    assert s.topics == ("orders", "payments") and s.wire_topics == ("orders", "payments")


# --------------------------------------------------------------------------- budget

def _metered(limit: int):
    from kafkasniff.content.budgets import BudgetMeter, Budgets

    meter = BudgetMeter(Budgets(group_assignment_partitions=limit))
    return EmbeddedDecoder(DEFS, meter=meter), meter


def test_partitions_beyond_the_budget_are_never_decoded_and_reported_once():
    """Issue 45 item 2: the partitions decoded per body are bounded by the
    group_assignment_partitions budget. The first ones are decoded (topic by topic), each
    cut topic says how many it lost, the bytes of the rest never become ints; the first cut
    of the capture is one budget_exhausted issue, later ones are counted."""
    from kafkasniff.content.embedded import CUT_KEY, claimed_partitions

    big = assignment(1, [("a", range(30)), ("b", range(50)), ("c", range(5))],
                     user_data=b"ud")
    assert claimed_partitions(ASSIGNMENT, big) == 85
    emb, meter = _metered(40)
    req = sync_request("g1", 5, [big, ASSIGN], protocol_type="consumer",
                       protocol_name="range")
    [issue] = emb.apply(SYNC_GROUP, False, req)
    assert issue.kind == IssueKind.BUDGET_EXHAUSTED
    assert "group_assignment_partitions (40 per frame)" in issue.message
    assert "claiming 85 partitions" in issue.message and "--budget" in issue.message
    got = req["assignments"][0]["assignment"]
    assert [(tp["topic"], tp["partitions"], tp.get(CUT_KEY)) for tp in
            got["assigned_partitions"]] == [("a", list(range(30)), None),
                                           ("b", list(range(10)), 40), ("c", [], 5)]
    assert got["user_data"] == b"ud"                         # what follows the array kept
    # the budget is per body: the second assignment of this one has no room left
    second = req["assignments"][1]["assignment"]
    assert sum(len(tp["partitions"]) for tp in second["assigned_partitions"]) == 0
    assert meter.skipped["group_assignment_partitions"] == 2
    # the next body has its own budget; a cut there is counted, not reported again
    resp = sync_response(big)
    assert emb.apply(SYNC_GROUP, True, resp, request_body=req) == []
    assert sum(len(tp["partitions"]) for tp in resp["assignment"]["assigned_partitions"]) == 40
    assert meter.skipped["group_assignment_partitions"] == 3


def test_owned_partitions_of_a_subscription_are_cut_alike():
    from kafkasniff.content.embedded import CUT_KEY

    sub = subscription(3, ["t"], owned=[("t", range(100))], user_data=b"u",
                       generation_id=7, rack_id="r1")
    emb, _ = _metered(10)
    req = join_request("g1", "consumer", [sub])
    [issue] = emb.apply(JOIN_GROUP, False, req)
    got = req["protocols"][0]["metadata"]
    assert got["owned_partitions"] == [{"topic": "t", "partitions": list(range(10)),
                                        CUT_KEY: 90}]
    assert (got["generation_id"], got["rack_id"], got["user_data"]) == (7, "r1", b"u")


def test_a_crafted_count_beyond_the_bytes_is_kept_raw_not_decoded():
    """A count of 2^31-1 with the bytes of 300 ints: never decoded (nor cut: the rest of
    the layout is not there), kept raw with the budget's issue."""
    data = i16(0) + (1).to_bytes(4, "big") + i16(1) + b"t" + (2**31 - 1).to_bytes(4, "big") + \
        b"\x00\x00\x00\x01" * 300
    emb, meter = _metered(100)
    resp = sync_response(data)
    [issue] = emb.apply(SYNC_GROUP, True, resp,
                        request_body=sync_request("g1", 5, [], protocol_type="consumer",
                                                     protocol_name="range"))
    assert issue.kind == IssueKind.BUDGET_EXHAUSTED and "kept raw" in issue.message
    assert resp["assignment"] == data
