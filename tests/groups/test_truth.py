"""Consumer groups against the truth of real captures.

Two kinds of truth, neither read from the pcap:

- ``broker_java`` / ``broker_go``: the real Apache Kafka broker's request log (every group
  request and response as the broker parsed and sent it) and the clients' own records
  (consumed, committed). The expected rebalances are derived here from the broker's log,
  with the consumer-protocol assignment bytes decoded by this test's own reader.
- the librdkafka mock captures: the clients' own request logs (librdkafka, kafka-python,
  aiokafka debug logs), consumed records and commits.
"""

from __future__ import annotations

import base64
import json
import struct
from collections import defaultdict

import pytest

from kafkasniff.groups import GroupAnalyzer, GroupsReport
from kafkasniff.groups.analysis import load_state
from tests.conftest import CAPTURES, decode_capture


def report_of(name: str) -> GroupsReport:
    d = decode_capture(CAPTURES / f"{name}.pcap")
    an = GroupAnalyzer(d.pipeline.defs)
    for ex in d.exchanges:
        an.add(ex)
    return an.finish(d.pipeline.topics.names)


def truth(name: str) -> dict:
    return json.loads((CAPTURES / f"{name}.truth.json").read_text())


def read_assignment(b64: str) -> dict[str, tuple[int, ...]]:
    """ConsumerProtocolAssignment (int16 version, [string topic, [int32 partition]], bytes
    user_data), read independently of kafkasniff."""
    data = base64.b64decode(b64)
    off = 2
    (n,) = struct.unpack_from(">i", data, off)
    off += 4
    out = {}
    for _ in range(n):
        (ln,) = struct.unpack_from(">h", data, off)
        topic = data[off + 2:off + 2 + ln].decode()
        off += 2 + ln
        (np_,) = struct.unpack_from(">i", data, off)
        off += 4
        parts = struct.unpack_from(f">{np_}i", data, off)
        off += 4 * np_
        out[topic] = tuple(sorted(parts))
    return out


def expected_from_broker_log(t: dict) -> dict[str, list[tuple[str, dict]]]:
    """group id -> [(trigger, {member_id: {topic: partitions}}), ...] from the broker's log:
    classic: a generation per successful JoinGroup round (its SyncGroup answers give the
    assignment), a leave per LeaveGroup; KIP-848 / share: a join per heartbeat with epoch 0,
    a new assignment per heartbeat answer whose assignment changed, a leave per epoch -1."""
    names = {}
    for r in t["broker_requests"]:
        if r["api_key"] == 3 and r.get("response"):
            for tp in r["response"].get("topics") or ():
                if tp.get("topicId") and tp.get("name"):
                    names[tp["topicId"]] = tp["name"]
    out: dict[str, list] = defaultdict(list)
    last: dict[tuple, dict] = {}
    gens: dict[str, set] = defaultdict(set)
    for r in t["broker_requests"]:
        k, q, a = r["api_key"], r["request"], r.get("response") or {}
        gid = q.get("groupId")
        if k == 11 and a.get("errorCode") == 0 and a["generationId"] not in gens[gid]:
            gens[gid].add(a["generationId"])
            out[gid].append(["join", {}])
        elif k == 14 and a.get("errorCode") == 0:
            out[gid][-1][1][q["memberId"]] = read_assignment(a["assignment"])
        elif k == 13:
            out[gid].append(["leave", {}])
        elif k in (68, 76):
            mid, epoch = q["memberId"], q["memberEpoch"]
            if epoch == 0:
                out[gid].append(["join", {}])
            elif epoch < 0:
                out[gid].append(["leave", {}])
                continue
            asg = a.get("assignment")
            if asg is not None and a.get("errorCode") == 0:
                got = {names.get(tp["topicId"], tp["topicId"]): tuple(sorted(tp["partitions"]))
                       for tp in asg["topicPartitions"]}
                if last.get((gid, mid)) != got:
                    if mid in out[gid][-1][1]:
                        out[gid].append(["assignment_change", {}])
                    out[gid][-1][1][mid] = got
                    last[(gid, mid)] = got
    return {g: [tuple(x) for x in v] for g, v in out.items()}


def as_list(rebalance) -> tuple[str, dict]:
    return (rebalance.trigger, {m: dict(a) for m, a in rebalance.assignment})


@pytest.mark.parametrize("name", ["broker_java", "broker_go"])
def test_rebalances_and_assignments_match_the_brokers_log(name):
    t = truth(name)
    rep = report_of(name)
    expected = expected_from_broker_log(t)
    assert expected, "the truth has group traffic"
    for gid, rebalances in expected.items():
        g = rep.group(gid)
        assert g is not None, gid
        got = [as_list(r) for r in g.rebalances]
        assert got == rebalances, gid
        assert all(r.complete and r.end_ts_ns is not None for r in g.rebalances), gid
        assert all(r.duration_ns >= 0 for r in g.rebalances)


@pytest.mark.parametrize("name", ["broker_java", "broker_go"])
def test_protocols_members_and_coordinator_match_the_brokers_log(name):
    t = truth(name)
    rep = report_of(name)
    kinds = {}
    for r in t["broker_requests"]:
        if r["api_key"] == 16:            # ListGroups: the broker's own word on each group
            for grp in r["response"]["groups"]:
                kinds[grp["groupId"]] = grp["groupType"]
    members = defaultdict(set)
    for r in t["broker_requests"]:
        q = r["request"]
        if r["api_key"] in (11, 14, 12) and q.get("memberId"):
            members[q["groupId"]].add((q["memberId"], r["client_id"]))
        elif r["api_key"] in (68, 76):
            members[q["groupId"]].add((q["memberId"], r["client_id"]))
    assert set(kinds) == set(members)
    port = t["broker_ports"][0] if name == "broker_java" else None
    for gid, kind in kinds.items():
        g = rep.group(gid)
        assert g.protocol == kind, gid
        assert {(m.member_id, m.client_id) for m in g.members} == members[gid]
        assert all(m.client_host == "127.0.0.1" for m in g.members)
        assert g.coordinator_node_id == 1
        if port:
            assert g.coordinator == f"127.0.0.1:{port}"
        assert g.coordinator in g.coordinator_brokers
        # every member ended by leaving, as the clients closed
        assert all(m.left_reason == "leave" for m in g.members), gid


@pytest.mark.parametrize("name", ["broker_java", "broker_go"])
def test_consumed_and_committed_match_the_clients(name):
    t = truth(name)
    rep = report_of(name)
    by_client = {m.client_id: (g, m) for g in rep.groups for m in g.members}
    consumed = defaultdict(set)
    committed = defaultdict(dict)
    for e in t["client_events"]:
        if e["event"] == "consumed":
            consumed[e["client_id"]].add((e["topic"], e["partition"]))
        elif e["event"] == "committed":
            committed[e["client_id"]][(e["topic"], e["partition"])] = e["offset"]
    checked = 0
    for cid, parts in consumed.items():
        g, m = by_client[cid]
        assigned = {(tp, p) for tp, ps in m.assignment for p in ps}
        assert parts <= assigned, cid
        checked += 1
    assert checked >= 3
    for cid, offsets in committed.items():
        g, m = by_client[cid]
        got = {(c.topic, c.partition): c.committed_offset for c in g.commits
               if c.member_id == m.member_id and c.error is None and c.answered}
        assert got == offsets, cid
        for c in g.commits:
            assert c.latency_ns is not None and c.latency_ns >= 0
        lags = {(x.topic, x.partition): x for x in g.lags}
        for key, off in offsets.items():
            assert lags[key].committed_offset == off
            assert lags[key].lag == lags[key].high_watermark - off >= 0


MOCK_GROUP_CAPTURES = {
    # capture: group protocol
    "librdkafka_kip848": "consumer",
    "librdkafka_share": "share",
    "librdkafka_produce_consume": "classic",
    "librdkafka_compression": "classic",
    "librdkafka_errors_latency": "classic",
    "librdkafka_transactions": "classic",
    "kafka_python": "classic",
    "kafka_python_codecs": "classic",
    "aiokafka": "classic",
    "librdkafka_rebalance": "classic",
}


@pytest.mark.parametrize("name", sorted(MOCK_GROUP_CAPTURES))
def test_mock_captures_against_the_clients_logs(name):
    """Per consumer of the client truth: one member with its client_id; a join rebalance
    per member and a leave per LeaveGroup (or KIP-848 / share heartbeat with epoch -1) the
    client logged; every partition it consumed is in its assignment."""
    t = truth(name)
    rep = report_of(name)
    protocol = MOCK_GROUP_CAPTURES[name]
    heartbeat = {"consumer": "ConsumerGroupHeartbeat", "share": "ShareGroupHeartbeat",
                 "classic": "JoinGroup"}[protocol]
    clients = {r["client"] for r in t["requests"] if r["api_name"] == heartbeat}
    assert clients
    ports = {r["client"]: r["local_port"] for r in t["requests"]
             if r["api_name"] == heartbeat and r.get("local_port")}
    leaves = defaultdict(int)
    for r in t["requests"]:
        if r["api_name"] == "LeaveGroup":
            leaves[r["client"]] += 1
    if protocol != "classic":                # the last heartbeat of each member leaves
        for c in clients:
            leaves[c] = 1
    everyone = [(g, m) for g in rep.groups for m in g.members]
    for client in clients:
        # the truth names a client by its client_id (librdkafka) or by its library (Python
        # clients: then by the local port of its group connection, or the only member)
        found = [(g, m) for g, m in everyone if m.client_id == client] or \
            [(g, m) for g, m in everyone if client in ports and
             m.client.endswith(f":{ports[client]}")] or \
            (everyone if len(everyone) == 1 and len(clients) == 1 else [])
        assert len(found) == 1, client
        g, m = found[0]
        assert g.protocol == protocol
        joins = [r for r in g.rebalances if r.trigger == "join" and r.trigger_member ==
                 m.member_id]
        left = [r for r in g.rebalances if r.trigger == "leave" and r.trigger_member ==
                m.member_id]
        assert len(joins) == 1, client
        assert len(left) == leaves[client], client
        assert joins[0].complete and joins[0].assignment_of(m.member_id)
        consumed = {(c["topic"], c["partition"]) for c in t["consumed"]
                    if c["client"] == client or len(clients) == 1}
        assigned = {(tp, p) for tp, ps in joins[0].assignment_of(m.member_id) for p in ps}
        assert consumed <= assigned, client
        assert consumed, client


def test_kip848_assignment_by_topic_id_is_named_and_acknowledged():
    rep = report_of("librdkafka_kip848")
    (g,) = rep.groups
    assert g.group_id == "ks-848-group" and g.coordinator == "127.0.0.1:40755"
    join, leave = g.rebalances
    (m,) = g.members
    # all three partitions of ks-848, by name (the answer carries the topic id)
    assert join.assignment_of(m.member_id) == (("ks-848", (0, 1, 2)),)
    assert join.generation_id == 2 and m.member_epoch == 2
    # it ends when the member acknowledged the assignment in its next heartbeat
    hbs = sorted((ex for ex in decode_capture(CAPTURES / "librdkafka_kip848.pcap").exchanges
                  if ex.api_name == "ConsumerGroupHeartbeat"), key=lambda ex: ex.ts_ns)
    assert join.start_ts_ns == hbs[0].ts_ns and join.end_ts_ns == hbs[1].ts_ns
    assert [x.correlation_id for x in join.exchanges] == [hbs[0].correlation_id,
                                                          hbs[1].correlation_id]
    assert leave.start_ts_ns == hbs[2].ts_ns and leave.members == ()


def test_commits_and_lag_match_the_client():
    """librdkafka_produce_consume: the client's committed offsets, their latency, and lag 0
    (it read everything; the Fetch answers' high watermarks equal the commits)."""
    t = truth("librdkafka_produce_consume")
    (g,) = report_of("librdkafka_produce_consume").groups
    want = {(c["topic"], c["partition"]): c["offset"] for c in t["committed"]}
    assert {(c.topic, c.partition): c.committed_offset for c in g.commits} == want
    assert {(x.topic, x.partition): (x.committed_offset, x.lag) for x in g.lags} == \
        {k: (v, 0) for k, v in want.items()}
    ex = [e for e in decode_capture(CAPTURES / "librdkafka_produce_consume.pcap").exchanges
          if e.api_name == "OffsetCommit"]
    assert {c.latency_ns for c in g.commits} == {ex[0].latency_ns}
    assert g.to_dict()["commit_latency_ns"]["max"] == ex[0].latency_ns


def test_commit_errors_match_the_injected_error():
    """librdkafka_errors_latency: the first OffsetCommit was answered NOT_COORDINATOR
    (injected), librdkafka retried it (the truth's note); both are commit rows, only the
    second counts as committed."""
    t = truth("librdkafka_errors_latency")
    (g,) = report_of("librdkafka_errors_latency").groups
    ok = {(tp, p): off for tp, p, off in t["commit_attempts"][0]["offsets"]}
    assert {(c.topic, c.partition): c.committed_offset for c in g.commits
            if c.error is None} == ok
    assert {c.error for c in g.commits} == {None, "NOT_COORDINATOR"}
    assert {(x.topic, x.partition): x.committed_offset for x in g.lags} == ok
    assert dict(g.errors) == {"COORDINATOR_NOT_AVAILABLE": 1, "NOT_COORDINATOR": 1}


def test_capture_joined_mid_stream():
    """librdkafka_midstream: the member was in its group before the capture began: it is a
    member without a join, no rebalance is invented, its commits are read."""
    (g,) = report_of("librdkafka_midstream").groups
    (m,) = g.members
    assert m.joined_ts_ns is None and g.rebalances == ()
    assert g.protocol == "classic" and g.generation_id == m.generation_id > 0
    assert len(g.commits) == 12 and all(c.error is None for c in g.commits)


def test_two_members_every_rebalance_the_clients_logged():
    """librdkafka_rebalance: two members of a classic group; the clients' on_assign
    callbacks (the truth's rebalance_events) name every assignment they got. Each one is
    the assignment after one rebalance found on the wire, in order; the triggers are what
    the scenario did: A joins, B joins, an injected Heartbeat error, B's session times out
    (a static member closing sends no LeaveGroup), A leaves."""
    t = truth("librdkafka_rebalance")
    (g,) = report_of("librdkafka_rebalance").groups
    a, b = (next(m for m in g.members if m.client_id == c) for c in ("ks-rebal-a",
                                                                      "ks-rebal-b"))
    injected = t["injected"][0]["error_names"][0]
    assert [(r.trigger, r.trigger_error) for r in g.rebalances] == [
        ("join", None), ("join", None), ("error", injected), ("session_timeout", None),
        ("leave", None)]
    assert [r.trigger_member for r in g.rebalances[:2] + g.rebalances[3:]] == \
        [a.member_id, b.member_id, b.member_id, a.member_id]
    assert g.rebalances[2].trigger_member in (a.member_id, b.member_id)   # who got it
    assigns = defaultdict(list)
    for e in t["rebalance_events"]:
        if e["event"] == "assign":
            assigns[e["client"]].append(
                (tuple(sorted({tp for tp, _ in e["partitions"]})),
                 tuple(p for _, p in e["partitions"]), e["ts_ns"]))
    got = defaultdict(list)
    for r in g.rebalances:
        for mid, asg in r.assignment:
            (topic, parts), = asg
            client = g.members[[m.member_id for m in g.members].index(mid)].client_id
            got[client].append(((topic,), parts, r))
    assert set(got) == set(assigns) == {"ks-rebal-a", "ks-rebal-b"}
    for client, events in assigns.items():
        assert [(tps, ps) for tps, ps, _ in events] == \
            [(tps, ps) for tps, ps, _ in got[client]], client
        # the client's callback ran after the rebalance started, soon after it ended
        for (_, _, ts), (_, _, r) in zip(events, got[client]):
            assert r.start_ts_ns < ts and 0 <= ts - r.end_ts_ns < 1_000_000_000
    assert all(r.complete for r in g.rebalances)
    assert [len(r.members) for r in g.rebalances] == [1, 2, 2, 1, 0]
    assert [r.generation_id for r in g.rebalances[:4]] == [2, 3, 4, 5]
    assert injected in g.rebalances[2].errors
    assert (b.group_instance_id, b.left_reason, a.left_reason) == \
        ("ks-rebal-b-static", "session_timeout", "leave")
    assert {(c.topic, c.partition): c.committed_offset for c in g.commits} == \
        {(c["topic"], c["partition"]): c["offset"] for c in t["committed"]}


def _states(events: list[dict], client: str) -> list[tuple]:
    """The client's assignment after each callback (incremental with KIP-848), empty ones
    and repeats dropped: the assignments it held, in order."""
    cur: set = set()
    out: list[tuple] = []
    for e in events:
        if e["client"] != client:
            continue
        tps = {tuple(tp) for tp in e["partitions"]}
        cur = cur | tps if e["event"] == "assign" else cur - tps
        state = tuple(sorted(cur))
        if state and (not out or out[-1] != state):
            out.append(state)
    return out


def test_kip848_two_members_every_rebalance_the_clients_logged():
    """librdkafka_rebalance_848: two KIP-848 members; the assignments their incremental
    callbacks built up are, in order, the assignments after the rebalances found (joins
    wait for the joiner's first assignment and its acknowledgement; a member fenced by an
    injected FENCED_MEMBER_EPOCH rejoins inside the error's rebalance; a leave waits for
    its partitions to reach the other member)."""
    t = truth("librdkafka_rebalance_848")
    (g,) = report_of("librdkafka_rebalance_848").groups
    assert g.protocol == "consumer"
    a, b = (next(m for m in g.members if m.client_id == c) for c in ("ks-848-a", "ks-848-b"))
    injected = t["injected"][0]["error_names"][0]
    assert [(r.trigger, r.trigger_member, r.trigger_error) for r in g.rebalances] == [
        ("join", a.member_id, None), ("join", b.member_id, None),
        ("error", a.member_id, injected), ("leave", b.member_id, None),
        ("leave", a.member_id, None)]
    for client, m in (("ks-848-a", a), ("ks-848-b", b)):
        got = [tuple((tp, p) for tp, ps in r.assignment_of(m.member_id) for p in ps)
               for r in g.rebalances if r.assignment_of(m.member_id)]
        assert got == _states(t["rebalance_events"], client), client
    assert all(r.complete and r.end_ts_ns is not None for r in g.rebalances)
    assert [len(r.members) for r in g.rebalances] == [1, 2, 2, 1, 0]
    # epochs only grow; the rebalance ends after the last callback of its members
    epochs = [r.generation_id for r in g.rebalances[:4]]
    assert epochs == sorted(epochs) and epochs[0] > 0
    assert (a.left_reason, b.left_reason) == ("leave", "leave")
    want = {(c["topic"], c["partition"]): c["offset"] for c in t["committed"]
            if c["offset"] >= 0}
    assert {(c.topic, c.partition): c.committed_offset for c in g.commits} == want


@pytest.mark.parametrize("name", ["librdkafka_rebalance.pcap", "librdkafka_rebalance_848.pcap",
                                  "broker_java.pcap"])
def test_spilled_runs_give_the_same_report(name):
    """Group exchanges spilled to sorted runs on disk every few events (memory bounded
    whatever the capture) give the report of keeping them all in memory, also when the
    report is built twice and when an analyzer is merged from another's snapshot."""
    exchanges = decode_capture(CAPTURES / name).exchanges

    def analyzer(spill: int) -> GroupAnalyzer:
        a = GroupAnalyzer(spill_events=spill)
        for ex in exchanges:
            a.add(ex)
        return a

    whole = analyzer(1_000_000)
    assert whole.kept_events > 10 and not whole._runs
    want = whole.finish()
    spilled = analyzer(3)
    assert spilled._runs and spilled.kept_events == whole.kept_events
    assert spilled.finish() == want and spilled.finish() == want
    # one run per event: runs are merged level by level (few open files at any size)
    merged_runs = analyzer(1)
    assert max(level for level, _ in merged_runs._runs) >= 1
    assert len(merged_runs._runs) < merged_runs.kept_events
    assert merged_runs.finish() == want
    merged_runs.close()
    merged = GroupAnalyzer(spill_events=4)
    merged.merge(spilled.snapshot())
    assert merged.finish() == want
    spilled.close()


def test_saved_halves_merge_into_the_whole_report(tmp_path):
    """Two analyzers fed one half of the connections each (``spark decode`` shards), saved to
    files and merged in another analyzer, give the report of one analyzer fed everything;
    the topic names passed to ``save`` yield to the analyzer's own, as in ``finish``."""
    exchanges = decode_capture(CAPTURES / "librdkafka_rebalance.pcap").exchanges
    whole = GroupAnalyzer()
    halves = [GroupAnalyzer(spill_events=3), GroupAnalyzer(spill_events=3)]
    for ex in exchanges:
        whole.add(ex)
        halves[ex.conn_id % 2].add(ex)
    assert all(h.kept_events for h in halves)
    halves[0].add_topic_name("id-1", "own")
    for i, h in enumerate(halves):
        h.save(tmp_path / f"s{i}", {"id-1": "passed", "id-2": "passed"}, first_ts_ns=7 + i)
        h.close()
    assert not list(tmp_path.glob("*.inprogress"))
    merged = GroupAnalyzer()
    states = [load_state(tmp_path / f"s{i}") for i in range(2)]
    for st in states:
        merged.merge(st)
    assert [st["first_ts_ns"] for st in states] == [7, 8]
    assert {k: states[0]["topic_names"][k] for k in ("id-1", "id-2")} == \
        {"id-1": "own", "id-2": "passed"}
    assert merged.finish() == whole.finish()
