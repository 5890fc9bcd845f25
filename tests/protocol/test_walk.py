"""kafkasniff.protocol.walk: the plan walker over real decoded bodies.

Bodies are built as bytes (tests/pairing/frames.py, tests/protocol/encoder.py) and decoded
with the project's BodyDecoder, so the walker sees exactly what the pipeline gives it.
"""

from __future__ import annotations

from kafkasniff.protocol.decoder import BodyDecoder
from kafkasniff.protocol.headers import decode_request_header
from kafkasniff.protocol.primitives import RawRecords
from kafkasniff.protocol.schema import load_definitions
from kafkasniff.protocol.walk import (
    PARTITION,
    Node,
    PlanWalker,
    is_partition_index,
    is_topic_id,
    is_topic_name,
)

from tests.pairing.frames import (
    TOPIC_ID_ORDERS,
    TOPIC_ID_UNKNOWN,
    ZERO_ID,
    fetch_v4_response_body,
    metadata_v10_request_body,
    metadata_v10_response_body,
    produce_v3_request,
    tiny_batch,
    uuid_text,
)
from tests.protocol.encoder import encode, example_value

DEFS = load_definitions()
DECODER = BodyDecoder(DEFS)
ORDERS_ID = uuid_text(TOPIC_ID_ORDERS)
UNKNOWN_ID = uuid_text(TOPIC_ID_UNKNOWN)


def decode(api_key: int, version: int, is_response: bool, payload: bytes, offset: int = 0):
    """(plan, decoded body) of a whole body; the decode must be clean."""
    res = DECODER.decode(api_key, version, is_response, payload, offset)
    assert res.complete and res.issues == [], res.issues
    info = DEFS.apis[api_key]
    return DEFS.plan(info.response if is_response else info.request, version), res.value


def error_codes(f):
    return "err" if f.kind == "int16" and f.key == "error_code" else None


class Recorder:
    """A visit callback keeping (tag, key, value, topic, topic_id, partition, path)."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.structs: list[dict] = []
        self.nodes: list[Node] = []

    def __call__(self, tag, key, value, struct, node, topic, topic_id, partition, path):
        self.calls.append((tag, key, value, topic, topic_id, partition, path))
        self.structs.append(struct)
        self.nodes.append(node)


def walk(walker: PlanWalker, plan, body, *, paths: bool = False) -> list[tuple]:
    rec = Recorder()
    walker.walk(plan, body, rec, paths=paths)
    return rec.calls


def metadata_response():
    return decode(3, 10, True, metadata_v10_response_body(
        topics=(("orders", TOPIC_ID_ORDERS, 0), ("payments", TOPIC_ID_UNKNOWN, 3))))


def fetch_response():
    return decode(1, 4, True, fetch_v4_response_body(
        topics=(("orders", ((0, 0), (5, 6))), ("payments", ((2, 1),)))))


# --------------------------------------------------------------------------- predicates

def test_field_predicates_on_real_plans():
    plan = DEFS.plan("MetadataResponse", 10)
    topic = next(f for f in plan.fields if f.key == "topics").struct
    by_key = {f.key: f for f in topic.fields}
    assert is_topic_name(by_key["name"]) and not is_topic_name(by_key["error_code"])
    assert is_topic_id(by_key["topic_id"]) and not is_topic_id(by_key["name"])
    part = by_key["partitions"].struct
    assert [f.key for f in part.fields if is_partition_index(f)] == ["partition_index"]
    # a brokerId int32 is not a partition index
    assert not is_partition_index(next(f for f in part.fields if f.key == "leader_id"))


# --------------------------------------------------------------------------- context, order

def test_topic_and_partition_context_in_wire_order():
    """Error codes of a Fetch response are visited in wire order, each with the topic of its
    topic struct and the partition index of its partition struct."""
    plan, body = fetch_response()
    calls = walk(PlanWalker(error_codes), plan, body)
    assert calls == [
        ("err", "error_code", 0, "orders", None, 0, ""),
        ("err", "error_code", 6, "orders", None, 5, ""),
        ("err", "error_code", 1, "payments", None, 2, ""),
    ]


def test_topic_id_context_and_nesting():
    """A topic struct with a name and an id gives both to its own fields and to the
    fields of its partitions; a top-level field has no context."""
    plan, body = metadata_response()
    calls = walk(PlanWalker(error_codes), plan, body)
    assert calls == [
        ("err", "error_code", 0, "orders", ORDERS_ID, None, ""),
        ("err", "error_code", 0, "orders", ORDERS_ID, 0, ""),
        ("err", "error_code", 3, "payments", UNKNOWN_ID, None, ""),
        ("err", "error_code", 0, "payments", UNKNOWN_ID, 0, ""),
    ]
    throttle = walk(PlanWalker(lambda f: "t" if f.key == "throttle_time_ms" else None),
                    plan, body)
    assert throttle == [("t", "throttle_time_ms", 0, None, None, None, "")]


def test_null_topic_name_keeps_the_topic_id():
    """A null topic name gives ``topic=None``; the id is still the context."""
    plan, body = decode(3, 10, False, metadata_v10_request_body(
        topics=((TOPIC_ID_ORDERS, None), (ZERO_ID, "payments"))))
    calls = walk(PlanWalker(lambda f: "id" if is_topic_id(f) else None), plan, body)
    assert calls == [
        ("id", "topic_id", ORDERS_ID, None, ORDERS_ID, None, ""),
        ("id", "topic_id", uuid_text(ZERO_ID), "payments", uuid_text(ZERO_ID), None, ""),
    ]


def test_struct_and_node_arguments():
    """``struct`` is the dict holding the field; ``node`` says which of its keys hold the
    topic name, topic id and partition index."""
    plan, body = metadata_response()
    rec = Recorder()
    PlanWalker(error_codes).walk(plan, body, rec)
    assert rec.structs[0] is body["topics"][0]
    assert rec.structs[1] is body["topics"][0]["partitions"][0]
    topic_node, part_node = rec.nodes[0], rec.nodes[1]
    assert (topic_node.topic_key, topic_node.topic_id_key, topic_node.partition_key) == (
        "name", "topic_id", None)
    assert topic_node.in_topic and not topic_node.partition_struct
    assert (part_node.topic_key, part_node.partition_key) == (None, "partition_index")
    assert part_node.in_topic and part_node.partition_struct


def test_produce_request_records_with_index_partition_key():
    """Produce's partition index is named ``index``; records are found with their topic."""
    frame = produce_v3_request(1, topics=(("orders", ((0, tiny_batch()), (3, tiny_batch(b"x")))),
                                          ("payments", ((1, None),))))
    payload = frame[4:]
    hdr = decode_request_header(DEFS, payload)
    plan, body = decode(0, 3, False, payload, hdr.size)
    calls = walk(PlanWalker(lambda f: "rec" if f.kind == "records" else None), plan, body,
                 paths=True)
    assert [(c[3], c[5], c[6]) for c in calls] == [
        ("orders", 0, "topic_data[0].partition_data[0]"),
        ("orders", 3, "topic_data[0].partition_data[1]"),
    ]  # the null records field is not visited
    assert all(type(c[2]) is RawRecords for c in calls)
    assert calls[1][2].data == tiny_batch(b"x")


# --------------------------------------------------------------------------- paths

def test_paths_only_when_asked():
    """Paths name the holding struct (``topics[1].partitions[0]``), ``""`` at the top and
    whenever the walk was not asked for paths."""
    plan, body = metadata_response()
    walker = PlanWalker(error_codes)
    assert [c[6] for c in walk(walker, plan, body, paths=True)] == [
        "topics[0]", "topics[0].partitions[0]", "topics[1]", "topics[1].partitions[0]"]
    assert [c[6] for c in walk(walker, plan, body)] == ["", "", "", ""]


def test_paths_through_a_struct_field():
    """A (non-array) struct field adds its key to the path, without an index."""
    plan = DEFS.plan("ConsumerGroupHeartbeatResponse", 0)
    payload = encode(plan, example_value(plan, unknown_tags=False))
    plan, body = decode(68, 0, True, payload)
    select = lambda f: "parts" if f.key == "partitions" else None  # noqa: E731
    calls = walk(PlanWalker(select), plan, body, paths=True)
    tps = body["assignment"]["topic_partitions"]
    assert [(c[1], c[2], c[4], c[6]) for c in calls] == [
        ("partitions", tps[0]["partitions"], tps[0]["topic_id"], "assignment.topic_partitions[0]"),
        ("partitions", tps[1]["partitions"], tps[1]["topic_id"], "assignment.topic_partitions[1]"),
    ]
    assert [c[6] for c in walk(PlanWalker(select), plan, body)] == ["", ""]


# --------------------------------------------------------------------------- partition structs

def test_partition_callbacks_before_fields():
    """With partition_structs=True every partition struct is announced (tag PARTITION,
    key and value of its index) before its own fields."""
    plan, body = fetch_response()
    calls = walk(PlanWalker(error_codes, partition_structs=True), plan, body, paths=True)
    assert calls == [
        (PARTITION, "partition_index", 0, "orders", None, 0, "responses[0].partitions[0]"),
        ("err", "error_code", 0, "orders", None, 0, "responses[0].partitions[0]"),
        (PARTITION, "partition_index", 5, "orders", None, 5, "responses[0].partitions[1]"),
        ("err", "error_code", 6, "orders", None, 5, "responses[0].partitions[1]"),
        (PARTITION, "partition_index", 2, "payments", None, 2, "responses[1].partitions[0]"),
        ("err", "error_code", 1, "payments", None, 2, "responses[1].partitions[0]"),
    ]
    # without the option, no PARTITION callbacks
    assert PARTITION not in [c[0] for c in walk(PlanWalker(error_codes), plan, body)]


def test_partition_structs_without_wanted_fields():
    """A walker that wants no field still announces partition structs when asked, and
    keeps the trees that lead to them."""
    plan, body = fetch_response()
    walker = PlanWalker(lambda f: None, partition_structs=True)
    assert walker.tree(plan) is not None
    calls = walk(walker, plan, body)
    assert [(c[0], c[2], c[3]) for c in calls] == [
        (PARTITION, 0, "orders"), (PARTITION, 5, "orders"), (PARTITION, 2, "payments")]


def _announced(walker: PlanWalker, plan, body) -> list:
    """(topic, topic_id, partition, struct) of every PARTITION callback of a walk."""
    out = []

    def visit(tag, key, v, struct, node, topic, topic_id, partition, path):
        if tag is PARTITION:
            out.append((topic, topic_id, v, struct))

    walker.walk(plan, body, visit)
    return out


def test_partitions_gathers_what_the_walk_announces():
    """``partitions`` appends, without a callback, what ``walk`` announces as PARTITION:
    the same topic context, index and struct dict (the very object), in wire order."""
    plan, body = fetch_response()
    walker = PlanWalker(lambda f: None, partition_structs=True)
    got: list = []
    walker.partitions(plan, body, got)
    parts = [p for t in body["responses"] for p in t["partitions"]]
    assert [(g[0], g[1], g[2]) for g in got] == [
        ("orders", None, 0), ("orders", None, 5), ("payments", None, 2)]
    assert all(g[3] is p for g, p in zip(got, parts, strict=True))
    assert got == _announced(walker, plan, body)
    # a walker with wanted fields gathers the same partitions (its fields are not visited)
    more: list = []
    PlanWalker(error_codes, partition_structs=True).partitions(plan, body, more)
    assert more == got


def test_partitions_needs_partition_structs_and_a_dict():
    plan, body = fetch_response()
    got: list = []
    PlanWalker(error_codes).partitions(plan, body, got)
    walker = PlanWalker(lambda f: None, partition_structs=True)
    walker.partitions(plan, None, got)
    walker.partitions(plan, [body], got)
    assert got == []


def test_partitions_by_topic_id_and_outside_a_topic():
    """Topic ids are context as names are; a partition index with no topic above it is no
    partition struct (StreamsGroupHeartbeat's task_offsets)."""
    walker = PlanWalker(lambda f: None, partition_structs=True)
    plan = DEFS.plan("StreamsGroupHeartbeatRequest", 0)
    plan, body = decode(88, 0, False, encode(plan, example_value(plan, unknown_tags=False)))
    got: list = []
    walker.partitions(plan, body, got)
    assert got == _announced(walker, plan, body)
    assert all(g[3] not in body["task_offsets"] for g in got)
    gathered = 0
    for api_key, version in ((1, 4), (1, 13), (0, 3), (0, 13), (2, 9), (8, 10), (9, 10)):
        for p in (DEFS.plan(DEFS.apis[api_key].request, version),
                  DEFS.plan(DEFS.apis[api_key].response, version)):
            value = example_value(p, unknown_tags=False)
            got = []
            walker.partitions(p, value, got)
            assert got == _announced(walker, p, value), (api_key, version)
            gathered += len(got)
    assert gathered >= 10


def test_partition_index_outside_a_topic_is_not_a_partition_struct():
    """A partition index with no topic name or id above it (StreamsGroupHeartbeat's
    task_offsets) is context for its fields, but not announced as a partition struct."""
    plan = DEFS.plan("StreamsGroupHeartbeatRequest", 0)
    plan, body = decode(88, 0, False, encode(plan, example_value(plan, unknown_tags=False)))
    select = lambda f: "off" if f.key == "offset" else None  # noqa: E731
    calls = walk(PlanWalker(select, partition_structs=True), plan, body, paths=True)
    offsets = body["task_offsets"]
    assert [c[0] for c in calls] == ["off"] * 4
    assert [(c[2], c[3], c[5], c[6]) for c in calls[:2]] == [
        (offsets[0]["offset"], None, offsets[0]["partition"], "task_offsets[0]"),
        (offsets[1]["offset"], None, offsets[1]["partition"], "task_offsets[1]"),
    ]


# --------------------------------------------------------------------------- leaves, skips

def test_selected_struct_is_a_leaf():
    """A selected array of structs is visited as a value; its inside is not walked even
    where the predicate would select fields."""
    plan, body = fetch_response()
    select = lambda f: f.key if f.key in ("partitions", "error_code") else None  # noqa: E731
    calls = walk(PlanWalker(select), plan, body)
    assert [(c[0], c[3]) for c in calls] == [("partitions", "orders"), ("partitions", "payments")]
    assert calls[0][2] is body["responses"][0]["partitions"]


def test_non_dict_array_items_are_skipped():
    """Items that are not dicts (a partial decode) are skipped, the others still walked;
    a body that is not a dict gives nothing."""
    plan, body = fetch_response()
    body["responses"].insert(1, None)
    body["responses"][0]["partitions"].insert(0, RawRecords(b"junk"))
    calls = walk(PlanWalker(error_codes), plan, body, paths=True)
    assert [(c[2], c[6]) for c in calls] == [
        (0, "responses[0].partitions[1]"), (6, "responses[0].partitions[2]"),
        (1, "responses[2].partitions[0]")]
    body["responses"][2]["partitions"] = "not a list"
    assert [c[2] for c in walk(PlanWalker(error_codes), plan, body)] == [0, 6]
    assert walk(PlanWalker(error_codes), plan, None) == []
    assert walk(PlanWalker(error_codes), plan, [body]) == []


def test_missing_and_null_fields_are_not_visited():
    plan, body = fetch_response()
    del body["responses"][0]["partitions"][0]["error_code"]
    body["responses"][1]["partitions"][0]["error_code"] = None
    assert [c[2] for c in walk(PlanWalker(error_codes), plan, body)] == [6]


# --------------------------------------------------------------------------- trees

def test_tree_cached_per_plan():
    """A plan's tree is built once (the predicate runs once per field) and reused."""
    seen = []

    def select(f):
        seen.append(f.key)
        return error_codes(f)

    walker = PlanWalker(select)
    plan, body = fetch_response()
    node = walker.tree(plan)
    n = len(seen)
    assert n > 0
    assert walker.tree(plan) is node
    walk(walker, plan, body)
    walk(walker, plan, body)
    assert len(seen) == n
    other = DEFS.plan("FetchResponse", 5)
    assert walker.tree(other) is not node and len(seen) > n


def test_tree_entries_lead_only_to_wanted_fields():
    plan, _ = fetch_response()
    node = PlanWalker(error_codes).tree(plan)
    [(key, _kind, sub)] = node.entries
    assert key == "responses" and sub.topic_key == "topic"
    [(pkey, _pkind, psub)] = sub.entries
    assert pkey == "partitions"
    assert psub.entries == (("error_code", "err", None),)
    assert psub.partition_key == "partition_index"


def test_none_for_plans_without_wanted_fields():
    """No wanted field below a plan: tree is None and walk calls nothing."""
    plan, body = decode(3, 10, False, metadata_v10_request_body())
    walker = PlanWalker(error_codes)
    assert walker.tree(plan) is None
    assert walk(walker, plan, body) == []
    heartbeat = DEFS.plan("HeartbeatRequest", 0)
    assert PlanWalker(lambda f: "r" if f.kind == "records" else None).tree(heartbeat) is None
