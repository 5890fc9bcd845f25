"""Consumer groups from decoded exchanges: members, rebalances, assignments, commits and lag.

:class:`GroupAnalyzer` is fed every :class:`~kafkasniff.model.Exchange` of a capture (and,
optionally, the :class:`~kafkasniff.model.TopicName` records) and returns a
:class:`~kafkasniff.groups.model.GroupsReport` from :meth:`GroupAnalyzer.finish`. It keeps
only what the analysis needs: the group API exchanges' bodies (small), the high watermarks
of Fetch / ListOffsets answers (changes only, bounded per partition) and topic id -> name
pairs; the rest of each exchange is dropped as it is fed. The group APIs are replayed in
request order at :meth:`~GroupAnalyzer.finish`, so exchanges may be fed in completion order
and analyzers of parts of a capture can be merged (:meth:`GroupAnalyzer.merge`).

What is read, by protocol (Kafka's JSON message specs, field names in snake_case):

- classic groups (KIP-62, KIP-345, KIP-394): JoinGroup (``member_id``,
  ``group_instance_id``, ``protocol_type``, ``protocols[].metadata`` decoded as
  ConsumerProtocolSubscription by :mod:`kafkasniff.content.embedded`; the answer's
  ``generation_id``, ``protocol_name``, ``leader``, ``members``), SyncGroup (the answer's
  ``assignment``, a ConsumerProtocolAssignment), Heartbeat, LeaveGroup;
- KIP-848 consumer groups: ConsumerGroupHeartbeat (``member_epoch`` 0 joins, -1 leaves, -2
  leaves a static member; the answer's ``member_epoch`` and ``assignment.topic_partitions``
  by topic id; a later request's ``topic_partitions`` acknowledges it);
- KIP-932 share groups: ShareGroupHeartbeat (as KIP-848, without acknowledgement);
- every protocol: FindCoordinator (``key_type`` 0), OffsetCommit, TxnOffsetCommit,
  OffsetFetch, DescribeGroups, ListGroups, ConsumerGroupDescribe, ShareGroupDescribe;
- lag: Fetch responses' ``high_watermark``; ListOffsets answers to ``timestamp`` -1 (latest).

A rebalance is a round: it opens at its first sign on the wire and closes when every member
of the new generation holds its assignment (see :class:`~kafkasniff.groups.model.Rebalance`
for the exact rule per protocol and the triggers). Bad or partial bodies are skipped field by
field, never raised.

Bounds (``docs/budgets.md``): the partitions of the assignments kept per exchange and per
rebalance (budget ``group_assignment_partitions``) and the members tracked per group
(``group_members``); what goes beyond is counted and reported once per budget
(``budget_exhausted`` issues of the report). The replay does work linear in the members of a
round: member sets are dicts and sets, never lists searched.
"""

from __future__ import annotations

import heapq
import os
import pickle
import struct
import tempfile
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Mapping

from kafkasniff.groups.model import (
    CLASSIC,
    CONSUMER,
    SHARE,
    UNKNOWN,
    Assignment,
    Commit,
    ExchangeRef,
    Group,
    GroupsReport,
    Lag,
    Member,
    Rebalance,
)
from kafkasniff.content.budgets import Budgets
from kafkasniff.content.embedded import CUT_KEY
from kafkasniff.issues import IssueKind, Severity
from kafkasniff.model import DecodeIssue, Exchange, TopicName
from kafkasniff.protocol.apis import (
    CONSUMER_GROUP_DESCRIBE,
    CONSUMER_GROUP_HEARTBEAT,
    DESCRIBE_GROUPS,
    FETCH,
    FIND_COORDINATOR,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    LIST_OFFSETS,
    METADATA,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    SHARE_GROUP_DESCRIBE,
    SHARE_GROUP_HEARTBEAT,
    SYNC_GROUP,
    TXN_OFFSET_COMMIT,
)

__all__ = ["GROUP_APIS", "GroupAnalyzer", "analyze_groups"]

#: the APIs whose exchanges the analysis replays
GROUP_APIS = frozenset({
    FIND_COORDINATOR, JOIN_GROUP, SYNC_GROUP, HEARTBEAT, LEAVE_GROUP, OFFSET_COMMIT,
    OFFSET_FETCH, TXN_OFFSET_COMMIT, DESCRIBE_GROUPS, LIST_GROUPS, CONSUMER_GROUP_HEARTBEAT,
    CONSUMER_GROUP_DESCRIBE, SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE,
})

#: every API whose exchanges :meth:`GroupAnalyzer.add` reads (the group APIs; Fetch and
#: ListOffsets for high watermarks; Metadata for topic names); it ignores the others
READ_APIS = GROUP_APIS | {FETCH, LIST_OFFSETS, METADATA}

#: error answers that mean "the group is rebalancing" or "you are no longer a member"
REBALANCE_ERRORS = frozenset({
    "REBALANCE_IN_PROGRESS", "UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION", "FENCED_INSTANCE_ID",
    "FENCED_MEMBER_EPOCH", "STALE_MEMBER_EPOCH", "UNRELEASED_INSTANCE_ID",
})
#: error answers after which a member must join again (it was removed or fenced)
FENCING_ERRORS = frozenset({"UNKNOWN_MEMBER_ID", "FENCED_MEMBER_EPOCH", "FENCED_INSTANCE_ID"})
#: a step of a normal classic join (KIP-394), not a sign of trouble
MEMBER_ID_REQUIRED = "MEMBER_ID_REQUIRED"
#: KIP-848 members unseen this long before a round opened without a visible cause are
#: taken as timed out (Kafka's default ``group.consumer.session.timeout.ms``)
KIP848_SESSION_TIMEOUT_NS = 45_000_000_000
#: assignments that do not decode listed as issues (the rest are counted in one more)
MAX_UNDECODED_ISSUES = 100


def _host(endpoint: str) -> str:
    host = endpoint.rsplit(":", 1)[0] if ":" in endpoint else endpoint
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def _int(v, default: int = -1) -> int:
    return v if type(v) is int else default


def _str(v) -> str | None:
    return v if isinstance(v, str) else None


def _list(v) -> list:
    return v if isinstance(v, list) else []


#: the group APIs whose bodies carry assignments, subscriptions or member lists: cut to the
#: budgets when kept (:class:`_Cutter`)
_CUT_APIS = frozenset({
    JOIN_GROUP, SYNC_GROUP, LEAVE_GROUP, DESCRIBE_GROUPS, CONSUMER_GROUP_HEARTBEAT,
    SHARE_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE, SHARE_GROUP_DESCRIBE,
})
#: the lists of members in those bodies (JoinGroup answer, SyncGroup plan, LeaveGroup,
#: DescribeGroups / ConsumerGroupDescribe / ShareGroupDescribe answers)
_MEMBER_LISTS = frozenset({"members", "assignments"})
#: raw bytes (a protocol type other than the consumer protocol, or bytes that did not decode)
#: longer than this are kept as ``_RAW`` tuples of their size and first bytes
_RAW_KEEP = 256
_RAW = "raw"
# CUT_KEY: the key a cut body's dict gets beside a list of partitions it cut (how many);
# the consumer-protocol decode cuts with the same key (content.embedded)


def _cut_of(topics) -> int:
    """Partitions cut from a list of topic-partitions (:data:`CUT_KEY`)."""
    return sum(tp.get(CUT_KEY, 0) for tp in _list(topics) if isinstance(tp, dict))


class _Cutter:
    """Cuts a group API body to the budgets, copying only what it cuts (the exchange's
    own body is never changed): lists of partitions (lists of ints) keep at most
    ``partitions`` entries over the whole body (:attr:`partitions_left` is what is left),
    member lists at most ``members`` entries, raw bytes longer than :data:`_RAW_KEEP`
    their size and first bytes."""

    __slots__ = ("partitions_left", "members", "partitions_cut", "members_cut",
                 "decode_cut")

    def __init__(self, partitions: int, members: int) -> None:
        self.partitions_left = partitions
        self.members = members
        self.partitions_cut = 0
        self.members_cut = 0
        #: partitions the consumer-protocol decode had already cut to the same budget
        #: (:data:`CUT_KEY` in the bodies as they came)
        self.decode_cut = 0

    def cut(self, v, key: str = ""):
        t = type(v)
        if t is dict:
            out = None
            pre = v.get(CUT_KEY)
            if pre:
                self.decode_cut += pre
            for k, x in v.items():
                tx = type(x)
                if tx is not dict and tx is not list and tx is not bytes:
                    continue
                before = self.partitions_cut
                y = self.cut(x, k)
                if y is not x:
                    if out is None:
                        out = dict(v)
                    out[k] = y
                    if tx is list and self.partitions_cut > before and type(x[0]) is int:
                        out[CUT_KEY] = out.get(CUT_KEY, 0) + self.partitions_cut - before
            return v if out is None else out
        if t is list:
            if not v:
                return v
            if type(v[0]) is int:                    # partitions (or partition indexes)
                room = self.partitions_left
                if len(v) <= room:
                    self.partitions_left = room - len(v)
                    return v
                self.partitions_cut += len(v) - room
                self.partitions_left = 0
                return v[:room]
            out = None
            if key in _MEMBER_LISTS and len(v) > self.members:
                self.members_cut += len(v) - self.members
                v = out = v[:self.members]
            for i, x in enumerate(v):
                if type(x) is dict or type(x) is list:
                    y = self.cut(x)
                    if y is not x:
                        if out is None:
                            out = list(v)
                        out[i] = y
            return v if out is None else out
        if t is bytes and len(v) > _RAW_KEEP:
            return (_RAW, len(v), v[:_RAW_KEEP])
        return v


def claimed_assignment(data) -> str:
    """What the raw bytes of a ConsumerProtocolAssignment that did not decode claim:
    ``"version 0, 1 topic(s), topic 't' claims 2147483647 partitions in 22 bytes"`` (as
    far as the bytes go; ``data`` is bytes or a ``_RAW`` tuple of size and first bytes)."""
    if type(data) is tuple and len(data) == 3 and data[0] == _RAW:
        size, data = data[1], data[2]
    else:
        size = len(data)
    parts = []
    try:
        pos = 0
        version, topics = struct.unpack_from(">hi", data, pos)
        pos += 6
        parts.append(f"version {version}, {topics} topic(s)")
        for _ in range(min(max(topics, 0), 4)):
            (n,) = struct.unpack_from(">h", data, pos)
            name = bytes(data[pos + 2:pos + 2 + max(n, 0)]).decode("utf-8", "replace")
            pos += 2 + max(n, 0)
            (count,) = struct.unpack_from(">i", data, pos)
            pos += 4
            parts.append(f"topic {name!r} claims {count} partitions")
            if count < 0 or pos + 4 * count > size:
                break
            pos += 4 * count
    except struct.error:
        pass
    return ", ".join(parts + [f"in {size} bytes"])


#: group API exchanges held in memory before they are written, sorted, to a temporary file
SPILL_EVENTS = 2048
_RUN_CHUNK = 64      # events per pickle in a run file (what a run holds in memory when read)
#: runs of one level merged into one run of the next level: at most this many per level are
#: open files (a million events are five levels: under 80 files, 5 000 events read at once)
_FAN_IN = 16


def _order(ev: "_Ev") -> tuple:
    """Replay order: request time, then connection and correlation_id."""
    return (ev.ts_ns, ev.conn_id, ev.correlation_id)


def _write_run(events: Iterable["_Ev"]):
    """A new anonymous temporary file holding ``events`` (sorted) in pickled chunks."""
    f = tempfile.TemporaryFile(prefix="kafkasniff-groups-")
    chunk: list = []
    for ev in events:
        chunk.append(ev)
        if len(chunk) >= _RUN_CHUNK:
            pickle.dump(chunk, f, protocol=pickle.HIGHEST_PROTOCOL)
            chunk = []
    if chunk:
        pickle.dump(chunk, f, protocol=pickle.HIGHEST_PROTOCOL)
    return f


def _read_run(f) -> Iterator["_Ev"]:
    """The events of one spilled run file, in the order they were written (sorted)."""
    f.seek(0)
    while True:
        try:
            chunk = pickle.load(f)
        except EOFError:
            return
        yield from chunk


def load_state(path) -> dict:
    """A state :meth:`GroupAnalyzer.save` wrote, for :meth:`GroupAnalyzer.merge`: a dict of
    ``events`` (replay order), ``events_dropped``, ``topic_names``, ``hw``, ``cut`` (what
    the group budgets cut as the events were kept) and ``first_ts_ns``. Only for files this
    program wrote (it is a pickle). Raises ``OSError``
    when the file cannot be read and ``pickle.UnpicklingError`` / ``EOFError`` when it is not
    a whole state."""
    with open(path, "rb") as f:
        return pickle.load(f)


@dataclass(slots=True)
class _Ev:
    """One group API exchange, reduced to what the analysis reads."""

    ts_ns: int
    rsp_ts_ns: int | None
    api_key: int
    api_name: str
    conn_id: int
    correlation_id: int
    client: str
    broker: str
    client_id: str | None
    latency_ns: int | None
    errors: tuple[str, ...]
    req: dict
    rsp: dict | None
    exchange_id: str | None = None

    @property
    def ref(self) -> ExchangeRef:
        return ExchangeRef(self.conn_id, self.correlation_id, self.ts_ns, self.client,
                           self.broker, self.exchange_id)

    @property
    def end_ts_ns(self) -> int:
        return self.rsp_ts_ns if self.rsp_ts_ns is not None else self.ts_ns


@dataclass(slots=True)
class _M:
    member_id: str
    first_ts_ns: int
    last_ts_ns: int
    client_id: str | None = None
    client: str = ""
    group_instance_id: str | None = None
    joined_ts_ns: int | None = None
    left_ts_ns: int | None = None
    left_reason: str | None = None
    generation_id: int = -1
    member_epoch: int = -1
    assignment: Assignment | None = None
    subscribed_topics: tuple[str, ...] = ()
    rack_id: str | None = None
    session_timeout_ms: int = -1
    rebalance_timeout_ms: int = -1
    exchanges: int = 0
    heartbeat_interval_ms: int = -1
    assigned_seq: int = 0           # when its assignment was set (the analyzer's count)
    assignment_cut: int = 0         # partitions of its assignment not kept (budget)

    def freeze(self) -> Member:
        return Member(self.member_id, self.group_instance_id, self.client_id,
                      _host(self.client) if self.client else "", self.client,
                      self.first_ts_ns, self.last_ts_ns, self.joined_ts_ns, self.left_ts_ns,
                      self.left_reason, self.generation_id, self.member_epoch, self.assignment,
                      self.subscribed_topics, self.rack_id, self.session_timeout_ms,
                      self.rebalance_timeout_ms, self.exchanges, self.assignment_cut)


@dataclass(slots=True)
class _Round:
    """One open rebalance. Member collections are dicts used as ordered sets (member id ->
    None) and sets, so that every step of the replay is O(1) per member."""

    start_ts_ns: int
    prev_members: frozenset
    causes: list = field(default_factory=list)     # (ts_ns, kind, member or error, member)
    errors: list = field(default_factory=list)
    generation_id: int = -1
    protocol_name: str | None = None
    leader: str | None = None
    members: dict = field(default_factory=dict)    # the new generation, in order
    leader_members: bool = False                   # members came from the leader's answer
    joined: dict = field(default_factory=dict)
    left: dict = field(default_factory=dict)
    assignment: dict = field(default_factory=dict)
    planned: dict = field(default_factory=dict)    # the leader's SyncGroup assignments
    synced: set = field(default_factory=set)
    unsynced: int = 0                              # members not in synced
    last_sync_ts_ns: int | None = None             # the last SyncGroup answer of the round
    pending: dict = field(default_factory=dict)    # KIP-848: member -> assignment to ack
    #                                                (None: joined, no assignment yet)
    awaiting: bool = False                         # a leaver's partitions not given out yet
    refs: dict = field(default_factory=dict)       # (conn, correlation id, ts) -> ExchangeRef
    # members that may still be in the group (classic LeaveGroup: is the group empty?);
    # those found gone are dropped, so each is looked at once per time it left
    candidates: dict = field(default_factory=dict)
    partitions: int = 0                            # partitions of the assignments kept
    cut: dict = field(default_factory=dict)        # member -> partitions not kept

    def cause(self, ts_ns: int, kind: str, what: str | None, member: str | None = None
              ) -> None:
        self.causes.append((ts_ns, kind, what, member if kind == "error" else what))

    def error(self, name: str) -> None:
        if name not in self.errors:
            self.errors.append(name)

    def ref(self, ev: "_Ev") -> None:
        """The exchange ``ev`` is part of this round (once)."""
        key = (ev.conn_id, ev.correlation_id, ev.ts_ns)
        if key not in self.refs:
            self.refs[key] = ev.ref

    def add_member(self, mid: str) -> None:
        if mid not in self.members:
            self.members[mid] = None
            self.candidates[mid] = None
            if mid not in self.synced:
                self.unsynced += 1

    def remove_member(self, mid: str) -> None:
        if self.members.pop(mid, 0) is None and mid not in self.synced:
            self.unsynced -= 1

    def set_members(self, mids) -> None:
        """The leader's member list: the whole generation."""
        self.members = dict.fromkeys(mids)
        self.candidates.update(self.members)
        self.unsynced = sum(1 for x in self.members if x not in self.synced)

    def mark_synced(self, mid: str) -> None:
        if mid not in self.synced:
            self.synced.add(mid)
            if mid in self.members:
                self.unsynced -= 1


class _G:
    """The mutable state of one group while its exchanges are replayed."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.protocol = UNKNOWN
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.coordinator: str | None = None
        self.node_id = -1
        self.brokers: dict[str, None] = {}
        self.state: str | None = None
        self.first_ts_ns = -1
        self.last_ts_ns = -1
        self.generation_id = -1
        self.members: dict[str, _M] = {}
        self.current: set[str] = set()      # members of the current generation / epoch
        # a lower bound of the last_ts_ns of the members in current (KIP-848 timeouts;
        # None: not known, look at every member)
        self.current_seen_lb: int | None = None
        self.members_dropped: set[str] = set()   # member ids beyond the group_members budget
        self.members_dropped_more = 0            # ... beyond what that set keeps
        self.interned: dict = {}                 # assignments kept, each once
        self.rebalances: list[Rebalance] = []
        self.round: _Round | None = None
        self.commits: list[Commit] = []
        self.commits_dropped = 0
        self.committed: dict[tuple[str, int], tuple[int, int, str]] = {}
        self.errors: Counter = Counter()
        self.exchanges = 0

    def touch(self, ev: _Ev, coordinator_api: bool = True) -> None:
        self.exchanges += 1
        if self.first_ts_ns < 0 or ev.ts_ns < self.first_ts_ns:
            self.first_ts_ns = ev.ts_ns
        self.last_ts_ns = max(self.last_ts_ns, ev.end_ts_ns)
        if coordinator_api and ev.broker:
            self.brokers.setdefault(ev.broker, None)
        for e in ev.errors:
            self.errors[e] += 1

    def set_protocol(self, protocol: str) -> None:
        if self.protocol == UNKNOWN:
            self.protocol = protocol

    def tracked(self, member_id: str, max_members: int) -> bool:
        """``member_id`` is a member, or may become one within the ``group_members``
        budget (a member beyond it is counted in ``members_dropped``)."""
        if member_id in self.members or len(self.members) < max_members:
            return True
        if len(self.members_dropped) < max_members:
            self.members_dropped.add(member_id)
        elif member_id not in self.members_dropped:
            self.members_dropped_more += 1
        return False

    def new_member(self, member_id: str, ev: _Ev, max_members: int) -> _M | None:
        """The member ``member_id``, made (with the times of ``ev``) when new; None when it
        is beyond the ``group_members`` budget."""
        m = self.members.get(member_id)
        if m is None:
            if not self.tracked(member_id, max_members):
                return None
            m = self.members[member_id] = _M(member_id, ev.ts_ns, ev.end_ts_ns)
        return m

    def add_current(self, member_id: str) -> None:
        m = self.members.get(member_id)
        lb = self.current_seen_lb
        if m is None:
            self.current_seen_lb = None
        elif lb is not None and m.last_ts_ns < lb:
            self.current_seen_lb = m.last_ts_ns
        self.current.add(member_id)

    def intern(self, a: Assignment) -> Assignment:
        """One object for equal assignments (members keep theirs across rebalances)."""
        return self.interned.setdefault(a, a)

    def member(self, member_id: str, ev: _Ev, max_members: int) -> _M | None:
        """The member of an exchange (its times, connection and client_id updated), None
        when it is beyond the ``group_members`` budget."""
        m = self.new_member(member_id, ev, max_members)
        if m is None:
            return None
        m.first_ts_ns = min(m.first_ts_ns, ev.ts_ns)
        m.last_ts_ns = max(m.last_ts_ns, ev.end_ts_ns)
        if ev.client and not m.client:
            m.client = ev.client
        if ev.client_id is not None:
            m.client_id = ev.client_id
        m.exchanges += 1
        return m

    def open_round(self, ts_ns: int) -> _Round:
        if self.round is None:
            prev = frozenset(self.current)
            self.round = _Round(ts_ns, prev, candidates=dict.fromkeys(prev))
        return self.round


class GroupAnalyzer:
    """Consumer groups, rebalances, assignments, commits and lag from exchanges.

    Args:
        defs: definitions for error names (default: the installed ones).
        max_groups: group ids tracked; exchanges of further groups are counted in
            ``groups_dropped`` and otherwise ignored.
        max_commits: commit rows kept per group (later ones counted in ``commits_dropped``).
        max_hw_samples: high-watermark changes kept per partition (oldest dropped first).
        max_events: group API exchanges kept for the replay; further ones are counted in
            ``events_dropped`` and not analysed (the report says so).
        spill_events: kept exchanges held in memory; each time there are this many they are
            sorted and written to an anonymous temporary file (a run) and ``finish`` merges
            the runs, so memory does not grow with the capture (the disk use does: about
            300 bytes per exchange).
        budgets: the :class:`~kafkasniff.content.budgets.Budgets` whose
            ``group_assignment_partitions`` (partitions of assignments kept per exchange and
            per rebalance) and ``group_members`` (members tracked per group, and kept per
            member list of one exchange) bound the analysis (default: their defaults).
            Reaching one is one ``budget_exhausted`` issue in the report (``issues``).

    Feed :meth:`add` (or :meth:`add_record`) with the pipeline's records, then call
    :meth:`finish`. ``finish`` may be called again after more feeding (it rebuilds the report
    from scratch: a sort and a replay of every kept event, O(E log E) for E <= ``max_events``;
    a live caller should bound how often, as the TUI does). Memory: at most ``spill_events``
    group API bodies plus ``max_hw_samples`` per partition, plus the groups' state of the
    replay.
    """

    def __init__(self, defs=None, *, max_groups: int = 10_000, max_commits: int = 1_000_000,
                 max_hw_samples: int = 4096, max_events: int = 1_000_000,
                 spill_events: int = SPILL_EVENTS, budgets: Budgets | None = None) -> None:
        if defs is None:
            from kafkasniff.protocol.schema import load_definitions

            defs = load_definitions()
        self.defs = defs
        self.max_groups = max_groups
        self.max_commits = max_commits
        self.max_hw_samples = max_hw_samples
        self.max_events = max_events
        self.spill_events = max(1, spill_events)
        self.budgets = budgets or Budgets()
        self.max_partitions = self.budgets.limit("group_assignment_partitions")
        self.max_members = self.budgets.limit("group_members")
        # what the budgets cut from the bodies as they were kept: budget -> [items cut,
        # exchanges cut, first group id, first ts_ns]
        self.cut: dict[str, list] = {}
        self.events: list[_Ev] = []     # kept and not spilled yet, in arrival order
        self._runs: list = []           # spilled runs: (level, temporary file of sorted events)
        self.kept_events = 0            # in memory and spilled
        self.events_dropped = 0
        self.topic_names: dict[str, str] = {}
        # (topic name or id, partition) -> [(ts_ns, high_watermark)], changes only
        self.hw: dict[tuple[str, int], list[tuple[int, int]]] = {}

    # ------------------------------------------------------------------ feeding
    def add_record(self, rec) -> None:
        """Feed one pipeline record: exchanges and topic names are read, others ignored."""
        t = type(rec)
        if t is Exchange:
            self.add(rec)
        elif t is TopicName:
            self.add_topic_name(rec.topic_id, rec.name)

    def add_topic_name(self, topic_id: str, name: str) -> None:
        """Learn that ``topic_id`` (Kafka's text form) names ``name``."""
        if topic_id and name:
            self.topic_names[topic_id] = name

    def add(self, ex: Exchange, exchange_id: str | None = None) -> None:
        """Feed one exchange (any API: only group APIs, Metadata, Fetch and ListOffsets are
        read); ``exchange_id``: its id in the exported tables, kept in the
        :class:`~kafkasniff.groups.model.ExchangeRef` values of the report."""
        try:
            self._add(ex, exchange_id)
        except (AttributeError, KeyError, TypeError, ValueError):
            pass      # a body the analysis does not expect (a peer's departure): skipped

    def _add(self, ex: Exchange, exchange_id: str | None) -> None:
        k = ex.api_key
        req = ex.request.body if ex.request is not None else None
        rsp = ex.response.body if ex.response is not None else None
        if k in GROUP_APIS:
            if not isinstance(req, dict):
                return                     # an orphan answer: the group is in the request
            if self.kept_events >= self.max_events:
                self.events_dropped += 1
                return
            rsp = rsp if isinstance(rsp, dict) else None
            if k in _CUT_APIS:
                req, rsp = self._cut_bodies(ex.ts_ns, req, rsp)
            self._keep(_Ev(
                ex.ts_ns, ex.response.first_ts_ns if ex.response is not None else None, k,
                ex.api_name, ex.conn_id, ex.correlation_id, ex.client, ex.broker,
                ex.client_id, ex.latency_ns, ex.errors, req, rsp, exchange_id))
        elif k == FETCH and isinstance(rsp, dict):
            self._fetch_hw(ex, rsp)
        elif k == LIST_OFFSETS and isinstance(rsp, dict) and isinstance(req, dict):
            self._list_offsets_hw(ex, req, rsp)
        elif k == METADATA and isinstance(rsp, dict):
            for t in _list(rsp.get("topics")):
                if isinstance(t, dict) and isinstance(t.get("name"), str) and \
                        isinstance(t.get("topic_id"), str) and not t.get("error_code"):
                    self.add_topic_name(t["topic_id"], t["name"])

    def _cut_bodies(self, ts_ns: int, req: dict, rsp: dict | None) -> tuple[dict, dict | None]:
        """The request and answer bodies cut to the budgets (the same objects when nothing
        was cut); what was cut, here or already by the consumer-protocol decode
        (:data:`CUT_KEY`), is counted in :attr:`cut`."""
        cutter = _Cutter(self.max_partitions, self.max_members)
        req = cutter.cut(req)
        if rsp is not None:
            cutter.partitions_left = self.max_partitions       # each body its own budget
            rsp = cutter.cut(rsp)
        gid = _str(req.get("group_id")) or ""
        for name, n in (("group_assignment_partitions",
                         cutter.partitions_cut + cutter.decode_cut),
                        ("group_members", cutter.members_cut)):
            if n:
                c = self.cut.get(name)
                if c is None:
                    self.cut[name] = [n, 1, gid, ts_ns]
                else:
                    c[0] += n
                    c[1] += 1
                    if ts_ns < c[3]:
                        c[2], c[3] = gid, ts_ns
        return req, rsp

    def _keep(self, ev: _Ev) -> None:
        self.events.append(ev)
        self.kept_events += 1
        if len(self.events) >= self.spill_events:
            self._spill()

    def _spill(self) -> None:
        """Write the in-memory events, sorted, to a new run (level 0); each time a level
        holds ``_FAN_IN`` runs they are merged into one run of the next level, so open files
        and the chunks read at once stay few however many events are kept."""
        self.events.sort(key=_order)
        self._runs.append((0, _write_run(self.events)))
        self.events = []
        level = 0
        while True:
            same = [f for lv, f in self._runs if lv == level]
            if len(same) < _FAN_IN:
                return
            merged = _write_run(heapq.merge(*map(_read_run, same), key=_order))
            for f in same:
                f.close()
            self._runs = [r for r in self._runs if r[0] != level] + [(level + 1, merged)]
            level += 1

    def sorted_events(self) -> Iterator[_Ev]:
        """Every kept event in replay order (request time, connection, correlation_id): the
        spilled runs and the events in memory merged (one pass; not thread-safe)."""
        return heapq.merge(sorted(self.events, key=_order),
                           *(_read_run(f) for _, f in self._runs), key=_order)

    def close(self) -> None:
        """Remove the spilled runs (also done when the analyzer is garbage collected)."""
        for _, f in self._runs:
            f.close()
        self._runs = []

    def _hw_sample(self, topic: str, partition: int, ts_ns: int, hw: int) -> None:
        samples = self.hw.setdefault((topic, partition), [])
        if samples and samples[-1][1] == hw:
            return
        samples.append((ts_ns, hw))
        if len(samples) > self.max_hw_samples:
            del samples[0]

    def _fetch_hw(self, ex: Exchange, rsp: dict) -> None:
        ts = ex.response.first_ts_ns
        for t in _list(rsp.get("responses")):
            if not isinstance(t, dict):
                continue
            topic = _str(t.get("topic")) or _str(t.get("topic_id"))
            if not topic:
                continue
            for p in _list(t.get("partitions")):
                if isinstance(p, dict) and not p.get("error_code"):
                    hw = _int(p.get("high_watermark"))
                    part = _int(p.get("partition_index"))
                    if hw >= 0 and part >= 0:
                        self._hw_sample(topic, part, ts, hw)

    def _list_offsets_hw(self, ex: Exchange, req: dict, rsp: dict) -> None:
        latest = set()
        for t in _list(req.get("topics")):
            if isinstance(t, dict):
                for p in _list(t.get("partitions")):
                    if isinstance(p, dict) and p.get("timestamp") == -1:
                        latest.add((t.get("name"), p.get("partition_index")))
        if not latest:
            return
        ts = ex.response.first_ts_ns
        for t in _list(rsp.get("topics")):
            if not isinstance(t, dict):
                continue
            for p in _list(t.get("partitions")):
                if not isinstance(p, dict) or p.get("error_code") or \
                        (t.get("name"), p.get("partition_index")) not in latest:
                    continue
                off = p.get("offset")
                if off is None:           # v0: old_style_offsets
                    olds = _list(p.get("old_style_offsets"))
                    off = olds[0] if olds else None
                if type(off) is int and off >= 0 and isinstance(t.get("name"), str):
                    self._hw_sample(t["name"], p["partition_index"], ts, off)

    def snapshot(self) -> dict:
        """What this analyzer was fed, picklable and without the definitions (for
        :meth:`merge` in another process)."""
        return {"events": list(self.sorted_events()), "events_dropped": self.events_dropped,
                "topic_names": self.topic_names, "hw": self.hw, "cut": self.cut}

    def save(self, path, topic_names: Mapping[str, str] | None = None,
             first_ts_ns: int = 0) -> None:
        """Write :meth:`snapshot` to the file ``path``, atomically (pickled; for
        :func:`load_state` in another process). ``topic_names``: further topic id -> name
        pairs, taken as :meth:`finish` takes them (the analyzer's own names win);
        ``first_ts_ns``: the first packet time of what was fed (kept as ``first_ts_ns``)."""
        state = self.snapshot()
        if topic_names:
            state["topic_names"] = {**topic_names, **state["topic_names"]}
        state["first_ts_ns"] = first_ts_ns
        tmp = f"{path}.inprogress"
        with open(tmp, "wb") as f:
            pickle.dump(state, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)

    def merge(self, other: "GroupAnalyzer | dict") -> None:
        """Take in what another analyzer (of another part of the same capture, e.g. another
        ``--jobs`` decoder) was fed: the analyzer or its :meth:`snapshot`."""
        if isinstance(other, GroupAnalyzer):
            other = other.snapshot()
        room = max(self.max_events - self.kept_events, 0)
        for ev in other["events"][:room]:
            self._keep(ev)
        self.events_dropped += other.get("events_dropped", 0) + max(
            len(other["events"]) - room, 0)
        self.topic_names.update(other["topic_names"])
        for name, (n, x, gid, ts) in other.get("cut", {}).items():
            c = self.cut.get(name)
            if c is None:
                self.cut[name] = [n, x, gid, ts]
            else:
                c[0] += n
                c[1] += x
                if ts < c[3]:
                    c[2], c[3] = gid, ts
        for key, samples in other["hw"].items():
            mine = self.hw.setdefault(key, [])
            mine.extend(samples)
            mine.sort()
            del mine[:-self.max_hw_samples]

    # ------------------------------------------------------------------ replay
    def finish(self, topic_names: Mapping[str, str] | None = None) -> GroupsReport:
        """Replay the group exchanges in request order and build the report.

        ``topic_names``: further topic id -> name pairs (e.g. the pipeline's
        :class:`~kafkasniff.content.summary.TopicRegistry` ``names``) to name the topics of
        KIP-848 / share assignments and of topic-id commits.
        """
        if topic_names:
            for k, v in topic_names.items():
                self.topic_names.setdefault(k, v)
        self._hw_by_name = self._normalized_hw()
        groups: dict[str, _G] = {}
        self._groups = groups
        self._dropped: set[str] = set()
        self._list_groups: dict[str, tuple] = {}
        self._seq = 0                   # assignments set so far (Lag owners: the latest)
        self._round_cut: list = []      # [partitions, rebalances, first group, first ts]
        self._issues: list[DecodeIssue] = []
        self._undecoded_count = 0
        for ev in self.sorted_events():
            try:
                self._replay(ev)
            except (AttributeError, KeyError, TypeError, ValueError):
                # a body the replay does not expect (a peer's departure from the spec):
                # skipped, the analysis goes on
                continue
        for gid, (ptype, state, gtype) in self._list_groups.items():
            g = groups.get(gid)
            if g is None:
                continue
            g.state = g.state or state
            g.protocol_type = g.protocol_type or ptype
            if g.protocol == UNKNOWN and gtype in (CLASSIC, CONSUMER, SHARE):
                g.protocol = gtype
        out = tuple(self._freeze(groups[gid]) for gid in sorted(groups))
        return GroupsReport(out, self.kept_events + self.events_dropped, len(self._dropped),
                            self.events_dropped, tuple(self._report_issues(groups)))

    def _report_issues(self, groups: dict[str, _G]) -> list[DecodeIssue]:
        """The issues of the analysis: each budget reached (once), assignments that did not
        decode."""
        out = []
        cut = self.cut.get("group_assignment_partitions")
        rc = self._round_cut
        if cut or rc:
            limit = self.budgets.group_assignment_partitions
            n = (cut[0] if cut else 0) + (rc[0] if rc else 0)
            where = []
            if cut:
                where.append(f"{cut[1]:,} exchange(s) held more")
            if rc:
                where.append(f"{rc[1]:,} rebalance(s) gave out more")
            first = min((c for c in (cut, rc) if c), key=lambda c: c[3])
            out.append(DecodeIssue(
                IssueKind.BUDGET_EXHAUSTED, Severity.WARNING,
                f"budget group_assignment_partitions ({limit:,}) reached: {n:,} partitions "
                f"of consumer-group assignments not kept ({' and '.join(where)}; first in "
                f"group {first[2]!r}); the assignments shown hold the partitions kept; "
                f"raise it with --budget group_assignment_partitions=N (0 = unbounded)",
                first[3]))
        over = [g for g in groups.values() if g.members_dropped]
        cut = self.cut.get("group_members")
        if over or cut:
            limit = self.budgets.group_members
            n = sum(len(g.members_dropped) + g.members_dropped_more for g in over)
            first = min(over, key=lambda g: g.first_ts_ns).group_id if over else cut[2]
            what = [f"{n:,} member id(s) of {len(over):,} group(s) not tracked (first "
                    f"group {first!r}): their exchanges are counted, not analysed"] \
                if over else []
            if cut:
                what.append(f"{cut[0]:,} entries of member lists of {cut[1]:,} exchange(s) "
                            f"not kept")
            out.append(DecodeIssue(
                IssueKind.BUDGET_EXHAUSTED, Severity.WARNING,
                f"budget group_members ({limit:,}) reached: {'; '.join(what)}; raise it with "
                f"--budget group_members=N (0 = unbounded)",
                min([g.first_ts_ns for g in over] + ([cut[3]] if cut else []))))
        out.extend(self._issues)
        if self._undecoded_count > MAX_UNDECODED_ISSUES:
            more = self._undecoded_count - MAX_UNDECODED_ISSUES
            out.append(DecodeIssue(
                IssueKind.SPEC_DEPARTURE, Severity.WARNING,
                f"{more:,} more consumer-group assignments did not decode (not listed)"))
        return out

    def _group(self, gid) -> _G | None:
        if not isinstance(gid, str):
            return None
        g = self._groups.get(gid)
        if g is None:
            if len(self._groups) >= self.max_groups:
                self._dropped.add(gid)
                return None
            g = self._groups[gid] = _G(gid)
        return g

    def _name(self, topic_id: str | None) -> str:
        return self.topic_names.get(topic_id, topic_id) if topic_id else "?"

    def _err(self, code) -> str | None:
        return self.defs.error_name(code) if type(code) is int and code != 0 else None

    def _replay(self, ev: _Ev) -> None:
        k = ev.api_key
        if k == JOIN_GROUP:
            self._join(ev)
        elif k == SYNC_GROUP:
            self._sync(ev)
        elif k == HEARTBEAT:
            self._heartbeat(ev)
        elif k == LEAVE_GROUP:
            self._leave(ev)
        elif k in (CONSUMER_GROUP_HEARTBEAT, SHARE_GROUP_HEARTBEAT):
            self._kip848(ev, CONSUMER if k == CONSUMER_GROUP_HEARTBEAT else SHARE)
        elif k in (OFFSET_COMMIT, TXN_OFFSET_COMMIT):
            self._commit(ev)
        elif k == OFFSET_FETCH:
            self._offset_fetch(ev)
        elif k == FIND_COORDINATOR:
            self._find_coordinator(ev)
        elif k == DESCRIBE_GROUPS:
            self._describe(ev)
        elif k in (CONSUMER_GROUP_DESCRIBE, SHARE_GROUP_DESCRIBE):
            self._describe848(ev)
        elif k == LIST_GROUPS and ev.rsp:
            for g in _list(ev.rsp.get("groups")):
                if isinstance(g, dict) and isinstance(g.get("group_id"), str):
                    self._list_groups[g["group_id"]] = (
                        _str(g.get("protocol_type")) or None, _str(g.get("group_state")),
                        _str(g.get("group_type")))

    # -- classic
    def _round_error(self, g: _G, ev: _Ev, name: str, member: str | None) -> None:
        """An error answer: noted in the open round; REBALANCE_IN_PROGRESS and fencing
        errors open one when none is open."""
        if name in REBALANCE_ERRORS and g.round is None:
            g.open_round(ev.ts_ns)
            g.round.cause(ev.ts_ns, "error", name, member)
        r = g.round
        if r is not None:
            r.error(name)
            r.ref(ev)
        if name in FENCING_ERRORS and member in g.members:
            m = g.members[member]
            m.left_ts_ns, m.left_reason = ev.end_ts_ns, "fenced"

    def _known_member(self, g: _G, member_id, ev: _Ev) -> _M | None:
        """The member of an exchange that is not a join: a member not seen before was in
        the group before the capture began (None beyond the ``group_members`` budget)."""
        if not isinstance(member_id, str) or not member_id:
            return None
        new = member_id not in g.members
        m = g.member(member_id, ev, self.max_members)
        if m is not None and new and g.round is None:
            g.add_current(member_id)
        return m

    def _join(self, ev: _Ev) -> None:
        q, a = ev.req, ev.rsp
        g = self._group(q.get("group_id"))
        if g is None:
            return
        g.touch(ev)
        g.set_protocol(CLASSIC)
        g.protocol_type = _str(q.get("protocol_type")) or g.protocol_type
        if g.round is not None and g.round.synced:
            # members synced and a JoinGroup comes: the leader's answer (the generation's
            # member list) was not captured; the round ended at its last SyncGroup answer
            self._close(g, g.round.last_sync_ts_ns, complete=False)
        r = g.open_round(ev.ts_ns)
        r.ref(ev)
        mid = (_str(a.get("member_id")) if a else None) or _str(q.get("member_id"))
        err = self._err(a.get("error_code")) if a else None
        m = g.member(mid, ev, self.max_members) if mid else None
        if m is not None:
            m.group_instance_id = _str(q.get("group_instance_id")) or m.group_instance_id
            m.session_timeout_ms = _int(q.get("session_timeout_ms"), m.session_timeout_ms)
            m.rebalance_timeout_ms = _int(q.get("rebalance_timeout_ms"),
                                          m.rebalance_timeout_ms)
            for p in _list(q.get("protocols")):
                meta = p.get("metadata") if isinstance(p, dict) else None
                if isinstance(meta, dict):
                    m.subscribed_topics = tuple(t for t in _list(meta.get("topics"))
                                                if isinstance(t, str))
                    m.rack_id = _str(meta.get("rack_id")) or m.rack_id
                    break
            fenced = m.left_reason == "fenced"        # rejoins because of an error answer
            rejoin = m.left_ts_ns is not None and not fenced
            if m.joined_ts_ns is None or rejoin:
                m.joined_ts_ns = ev.ts_ns
            if m.left_ts_ns is not None and (mid in r.members or mid in g.current):
                r.candidates[mid] = None              # in the group again
            m.left_ts_ns = m.left_reason = None
            if (mid not in r.prev_members or rejoin) and mid not in r.joined and not fenced:
                r.joined[mid] = None
                r.cause(ev.ts_ns, "join", mid)
        if err is not None:
            if err != MEMBER_ID_REQUIRED:
                self._round_error(g, ev, err, mid)
            else:
                r.error(err)
            return
        if a is None:
            return
        r.generation_id = _int(a.get("generation_id"), r.generation_id)
        r.protocol_name = _str(a.get("protocol_name")) or r.protocol_name
        g.protocol_name = r.protocol_name or g.protocol_name
        r.leader = _str(a.get("leader")) or r.leader
        listed = [x for x in _list(a.get("members")) if isinstance(x, dict)]
        if listed:                              # the leader's answer: the whole generation
            r.leader_members = True
            kept = []
            for x in listed:
                xid = _str(x.get("member_id"))
                if not xid:
                    continue
                xm = g.members.get(xid)
                if xm is None:                   # a member whose connection is not captured
                    xm = g.new_member(xid, ev, self.max_members)
                    if xm is None:               # beyond the group_members budget
                        continue
                    if xid not in r.prev_members and xid not in r.joined:
                        r.joined[xid] = None
                        r.cause(ev.ts_ns, "join", xid)
                kept.append(xid)
                xm.group_instance_id = _str(x.get("group_instance_id")) or xm.group_instance_id
                meta = x.get("metadata")
                if isinstance(meta, dict) and not xm.subscribed_topics:
                    xm.subscribed_topics = tuple(t for t in _list(meta.get("topics"))
                                                 if isinstance(t, str))
            r.set_members(kept)
        elif m is not None and not r.leader_members:
            r.add_member(mid)
        if m is not None:
            m.generation_id = r.generation_id

    def _sync(self, ev: _Ev) -> None:
        q, a = ev.req, ev.rsp
        g = self._group(q.get("group_id"))
        if g is None:
            return
        g.touch(ev)
        g.set_protocol(CLASSIC)
        g.protocol_type = _str(q.get("protocol_type")) or g.protocol_type
        mid = _str(q.get("member_id"))
        m = self._known_member(g, mid, ev)
        r = g.round
        if r is None:                           # the capture began inside the rebalance
            r = g.open_round(ev.ts_ns)
            r.cause(ev.ts_ns, "unknown", None)
        r.ref(ev)
        gen = _int(q.get("generation_id"))
        if r.generation_id < 0:
            r.generation_id = gen
        r.protocol_name = _str(q.get("protocol_name")) or r.protocol_name
        for x in _list(q.get("assignments")):   # the leader's plan
            if isinstance(x, dict) and _str(x.get("member_id")):
                plan = self._consumer_assignment(x.get("assignment"))
                if plan is not None:
                    r.planned[x["member_id"]] = (plan, _cut_of(
                        x["assignment"].get("assigned_partitions")))
        if a is None or m is None:
            return
        err = self._err(a.get("error_code"))
        if err is not None:
            self._round_error(g, ev, err, mid)
            return
        raw = a.get("assignment")
        got = self._consumer_assignment(raw)
        if got is None and g.protocol_type == "consumer" and raw and \
                isinstance(raw, (bytes, bytearray, tuple)):
            # consumer-protocol bytes that did not decode: the assignment is not known
            self._undecoded(g, ev, mid, raw)
            self._drop_assignment(r, mid)
            m.assignment, m.assignment_cut = None, 0
        else:
            if got is not None:
                cut = _cut_of(raw.get("assigned_partitions"))
            else:                               # another protocol type: bytes, not decoded
                got, cut = r.planned.get(mid, ((), 0))
            got, cut = self._fit(g, r, mid, got, cut, ev)
            self._assign(m, got, cut)
            r.assignment[mid] = got
        m.generation_id = gen
        r.mark_synced(mid)
        r.last_sync_ts_ns = ev.rsp_ts_ns
        r.add_member(mid)
        if r.leader_members and not r.unsynced:
            self._close(g, ev.rsp_ts_ns)

    def _heartbeat(self, ev: _Ev) -> None:
        q, a = ev.req, ev.rsp
        g = self._group(q.get("group_id"))
        if g is None:
            return
        g.touch(ev)
        g.set_protocol(CLASSIC)
        mid = _str(q.get("member_id"))
        m = self._known_member(g, mid, ev)
        if m is not None:
            m.generation_id = _int(q.get("generation_id"), m.generation_id)
        err = self._err(a.get("error_code")) if a else None
        if err is not None:
            self._round_error(g, ev, err, mid)

    def _leave(self, ev: _Ev) -> None:
        q, a = ev.req, ev.rsp
        g = self._group(q.get("group_id"))
        if g is None:
            return
        g.touch(ev)
        g.set_protocol(CLASSIC)
        ids = [x.get("member_id") for x in _list(q.get("members")) if isinstance(x, dict)]
        if _str(q.get("member_id")):
            ids.append(q["member_id"])
        leaving = [i for i in ids if isinstance(i, str) and i]
        if not leaving:
            return
        r = g.open_round(ev.ts_ns)
        r.ref(ev)
        for mid in leaving:
            m = g.member(mid, ev, self.max_members)
            if m is None:                         # beyond the group_members budget
                continue
            m.left_ts_ns, m.left_reason = ev.ts_ns, "leave"
            if mid not in r.left:
                r.left[mid] = None
                r.cause(ev.ts_ns, "leave", mid)
            r.remove_member(mid)
            self._drop_assignment(r, mid)
        err = self._err(a.get("error_code")) if a else None
        if err is not None:
            r.error(err)
        if not self._anyone_in(g, r):             # the group is empty: done at once
            self._close(g, ev.end_ts_ns)

    @staticmethod
    def _anyone_in(g: _G, r: _Round) -> bool:
        """Is a member of the current generation or of the new one still in the group (not
        left in this round, not gone)? The candidates found gone are dropped, so a member
        is looked at once each time it leaves: linear over a round of many leaves."""
        cands = r.candidates
        while cands:
            x = next(iter(cands))
            if x not in r.left:
                m = g.members.get(x)
                if m is None or m.left_ts_ns is None:
                    return True
            del cands[x]
        return False

    def _consumer_assignment(self, v) -> Assignment | None:
        """A decoded ConsumerProtocolAssignment -> an :data:`Assignment` (None if not one)."""
        if not isinstance(v, dict) or "assigned_partitions" not in v:
            return None
        out: dict[str, set] = {}
        for tp in _list(v.get("assigned_partitions")):
            if isinstance(tp, dict) and isinstance(tp.get("topic"), str):
                out.setdefault(tp["topic"], set()).update(
                    p for p in _list(tp.get("partitions")) if type(p) is int)
        return tuple((t, tuple(sorted(ps))) for t, ps in sorted(out.items()))

    def _id_assignment(self, tps) -> Assignment:
        """KIP-848 / share ``topic_partitions`` ([{topic_id, partitions}]) -> an
        :data:`Assignment` with topic ids named where known."""
        out: dict[str, set] = {}
        for tp in _list(tps):
            if isinstance(tp, dict):
                name = _str(tp.get("topic_name")) or self._name(_str(tp.get("topic_id")))
                out.setdefault(name, set()).update(
                    p for p in _list(tp.get("partitions")) if type(p) is int)
        return tuple((t, tuple(sorted(ps))) for t, ps in sorted(out.items()))

    # -- budgets and assignments
    def _fit(self, g: _G, r: _Round, mid: str, a: Assignment, cut: int, ev: _Ev
             ) -> tuple[Assignment, int]:
        """``(a as kept in round r, partitions of it not kept)``: the round's assignments
        together keep at most ``group_assignment_partitions`` partitions (the rest are
        counted; ``cut``: partitions already cut from the exchange); one object for equal
        assignments of the group."""
        self._drop_assignment(r, mid)
        n = sum(len(ps) for _, ps in a)
        room = max(self.max_partitions - r.partitions, 0)
        if n > room:
            kept, left = [], room
            for t, ps in a:
                if left <= 0:
                    break
                kept.append((t, ps[:left]))
                left -= min(len(ps), left)
            a = tuple(kept)
            c = self._round_cut
            if not c:
                c.extend([0, 0, g.group_id, ev.ts_ns])
            c[0] += n - room
            c[1] += 1
            cut += n - room
            n = room
        r.partitions += n
        if cut:
            r.cut[mid] = cut
        return g.intern(a), cut

    @staticmethod
    def _drop_assignment(r: _Round, mid: str) -> None:
        """``mid``'s assignment is no longer the round's (it left, or a new one comes)."""
        old = r.assignment.pop(mid, None)
        r.cut.pop(mid, None)
        if old:
            r.partitions -= sum(len(ps) for _, ps in old)

    def _assign(self, m: _M, a: Assignment, cut: int = 0) -> None:
        """``m`` holds ``a`` now (the latest assignment of the group so far; ``cut``
        partitions of it not kept)."""
        self._seq += 1
        m.assignment = a
        m.assignment_cut = cut
        m.assigned_seq = self._seq

    def _undecoded(self, g: _G, ev: _Ev, mid: str, raw) -> None:
        """A consumer-protocol assignment whose bytes do not decode: an issue (the first
        :data:`MAX_UNDECODED_ISSUES`, then a count), the member's assignment unknown."""
        self._undecoded_count += 1
        if self._undecoded_count > MAX_UNDECODED_ISSUES:
            return
        self._issues.append(DecodeIssue(
            IssueKind.SPEC_DEPARTURE, Severity.WARNING,
            f"group {g.group_id!r}, member {mid!r}: the SyncGroup answer's assignment was "
            f"not decoded as ConsumerProtocolAssignment ({claimed_assignment(raw)}: bytes "
            f"that do not decode, or more partitions than the group_assignment_partitions "
            f"budget); the member's assignment is shown as unknown (-), not as empty",
            ev.rsp_ts_ns or ev.ts_ns, ev.conn_id, ev.client, ev.broker, "response",
            field_path="assignment", correlation_id=ev.correlation_id, api_key=ev.api_key))

    def _close(self, g: _G, end_ts_ns: int | None, complete: bool = True) -> None:
        r = g.round
        if r is None:
            return
        g.round = None
        left = r.left
        if g.protocol in (CONSUMER, SHARE):
            members = [x for x in g.current if x not in left]
            members.sort(key=lambda x: (g.members[x].first_ts_ns if x in g.members else 0, x))
        else:
            members = [x for x in r.members if x not in left]
        prev = r.prev_members
        now = set(members)
        missing = [x for x in prev if x not in now and x not in left]
        if g.protocol == CLASSIC and r.leader_members:
            for x in missing:
                m = g.members.get(x)
                if m is not None and m.left_ts_ns is None:
                    m.left_ts_ns, m.left_reason = m.last_ts_ns, "session_timeout"
        else:
            missing = [x for x in missing if x in g.members and
                       g.members[x].left_reason == "session_timeout"]
        missing.sort(key=lambda x: (g.members[x].first_ts_ns if x in g.members else 0, x))
        trigger, who, err = self._trigger(r, missing, g.protocol)
        assignment = tuple((x, r.assignment[x]) for x in members if x in r.assignment)
        if complete:
            complete = all(x in r.assignment for x in members) and not r.pending
        # the members gone in the round: those that left, then those that timed out
        gone = tuple(left) + tuple(x for x in missing if x in g.members and
                                   g.members[x].left_reason == "session_timeout")
        g.rebalances.append(Rebalance(
            g.group_id, len(g.rebalances) + 1, r.start_ts_ns, end_ts_ns, trigger, who, err,
            tuple(r.errors), r.generation_id, r.protocol_name or g.protocol_name, r.leader,
            tuple(members), tuple(r.joined), gone, assignment, complete,
            tuple(r.refs.values()),
            tuple((x, r.cut[x]) for x in members if x in r.cut)))
        g.current = now
        g.current_seen_lb = None
        if r.generation_id >= 0:
            g.generation_id = max(g.generation_id, r.generation_id) \
                if g.protocol != CLASSIC else r.generation_id

    @staticmethod
    def _trigger(r: _Round, missing: list, protocol: str) -> tuple[str, str | None, str | None]:
        """The earliest join, leave or error of the round; a session timeout when members
        are missing and the first sign was an error answer (or nothing)."""
        causes = sorted((c for c in r.causes if c[1] in ("join", "leave", "error")),
                        key=lambda c: c[0])
        first = causes[0] if causes else None
        if missing and (first is None or first[1] == "error"):
            return "session_timeout", missing[0], None
        if first is not None:
            return (first[1], first[3], None) if first[1] != "error" else \
                ("error", first[3], first[2])
        for ts, kind, what, _ in r.causes:
            if kind in ("assignment_change", "unknown"):
                return kind, None, None
        return ("rejoin" if protocol == CLASSIC else "assignment_change"), None, None

    # -- KIP-848 and share
    def _kip848(self, ev: _Ev, protocol: str) -> None:
        q, a = ev.req, ev.rsp
        g = self._group(q.get("group_id"))
        if g is None:
            return
        g.touch(ev)
        g.set_protocol(protocol)
        if g.protocol_type is None:
            g.protocol_type = "consumer" if protocol == CONSUMER else "share"
        g.protocol_name = _str(q.get("server_assignor")) or g.protocol_name
        mid = (_str(a.get("member_id")) if a else None) or _str(q.get("member_id"))
        if not mid:
            return
        epoch = _int(q.get("member_epoch"), 0)
        known = mid in g.members
        m = g.member(mid, ev, self.max_members)
        if m is None:                                            # beyond the budget
            return
        m.group_instance_id = _str(q.get("instance_id")) or m.group_instance_id
        m.rack_id = _str(q.get("rack_id")) or m.rack_id
        m.rebalance_timeout_ms = _int(q.get("rebalance_timeout_ms"), m.rebalance_timeout_ms) \
            if _int(q.get("rebalance_timeout_ms")) >= 0 else m.rebalance_timeout_ms
        subs = q.get("subscribed_topic_names")
        if isinstance(subs, list) and subs:
            m.subscribed_topics = tuple(t for t in subs if isinstance(t, str))
        if epoch == 0:                                           # a join
            self._timeouts(g, ev)
            fenced = m.left_reason == "fenced"                   # rejoins after an error
            r = g.open_round(ev.ts_ns)
            r.ref(ev)
            if mid not in r.joined and not fenced and mid not in r.pending:
                r.joined[mid] = None
                r.cause(ev.ts_ns, "join", mid)
                m.joined_ts_ns = ev.ts_ns
            r.pending.setdefault(mid, None)                      # until its assignment
            m.left_ts_ns = m.left_reason = None
            g.add_current(mid)
        elif epoch in (-1, -2):                                  # a leave
            r = g.open_round(ev.ts_ns)
            r.ref(ev)
            if mid not in r.left:
                r.left[mid] = None
            r.cause(ev.ts_ns, "leave", mid)
            m.left_ts_ns, m.left_reason = ev.ts_ns, "leave"
            r.pending.pop(mid, None)
            self._drop_assignment(r, mid)
            g.current.discard(mid)
            if m.assignment and g.current:     # its partitions go to the others: wait
                r.awaiting = True
            if not r.pending and not r.awaiting:
                self._close(g, ev.end_ts_ns)
            return
        else:
            if not known and g.round is None:
                g.add_current(mid)                               # a member before the capture
            m.member_epoch = max(m.member_epoch, epoch)
            owned = q.get("topic_partitions")
            r = g.round
            if protocol == CONSUMER and r is not None and r.pending.get(mid) is not None \
                    and isinstance(owned, list) and \
                    self._id_assignment(owned) == r.pending[mid]:
                r.pending.pop(mid)                               # acknowledged
                r.ref(ev)
                if not r.pending and not r.awaiting:
                    self._close(g, ev.ts_ns)
        if a is None:
            return
        err = self._err(a.get("error_code"))
        if err is not None:
            self._round_error(g, ev, err, mid)
            if err in FENCING_ERRORS:
                g.current.discard(mid)
                if g.round is not None:
                    g.round.pending.pop(mid, None)
            return
        m.heartbeat_interval_ms = _int(a.get("heartbeat_interval_ms"), m.heartbeat_interval_ms)
        new_epoch = _int(a.get("member_epoch"))
        asg = a.get("assignment")
        got = self._id_assignment(asg.get("topic_partitions")) \
            if isinstance(asg, dict) else None
        cut = _cut_of(asg.get("topic_partitions")) if got is not None else 0
        bumped = new_epoch > m.member_epoch
        m.member_epoch = max(m.member_epoch, new_epoch)
        if got is None and not bumped:
            return
        changed = got is not None and got != m.assignment
        if not changed and g.round is None:
            return
        if g.round is None:
            self._timeouts(g, ev)
            g.open_round(ev.ts_ns).cause(ev.ts_ns, "assignment_change", None)
        r = g.round
        r.ref(ev)
        r.generation_id = max(r.generation_id, new_epoch)
        if got is None:
            return
        got, cut = self._fit(g, r, mid, got, cut, ev)
        self._assign(m, got, cut)
        r.assignment[mid] = got
        r.awaiting = False
        if protocol == CONSUMER:
            r.pending[mid] = got
        else:                                       # share members do not acknowledge
            r.pending.pop(mid, None)
            if not r.pending:
                self._close(g, ev.rsp_ts_ns)

    def _timeouts(self, g: _G, ev: _Ev) -> None:
        """KIP-848 / share members silent for longer than the session timeout are gone.
        Looks at the members only when the oldest of them may have timed out (a lower
        bound of their last exchange times is kept): linear over a round of many joins."""
        lb = g.current_seen_lb
        if lb is not None and ev.ts_ns - lb <= KIP848_SESSION_TIMEOUT_NS:
            return
        low = None
        for x in list(g.current):
            m = g.members.get(x)
            if m is None:
                continue
            if m.left_ts_ns is None and ev.ts_ns - m.last_ts_ns > KIP848_SESSION_TIMEOUT_NS:
                m.left_ts_ns, m.left_reason = m.last_ts_ns, "session_timeout"
                g.current.discard(x)
            elif low is None or m.last_ts_ns < low:
                low = m.last_ts_ns
        g.current_seen_lb = low if low is not None else 1 << 62

    # -- offsets
    def _commit(self, ev: _Ev) -> None:
        q, a = ev.req, ev.rsp
        g = self._group(q.get("group_id"))
        if g is None:
            return
        g.touch(ev)
        mid = _str(q.get("member_id")) or ""
        if mid:
            self._known_member(g, mid, ev)
        gen = _int(q.get("generation_id_or_member_epoch"), _int(q.get("generation_id")))
        answers: dict[tuple, int] = {}
        for t in _list(a.get("topics")) if a else ():
            if isinstance(t, dict):
                key = _str(t.get("name")) or _str(t.get("topic_id"))
                for p in _list(t.get("partitions")):
                    if isinstance(p, dict):
                        answers[(key, p.get("partition_index"))] = _int(p.get("error_code"), 0)
        for name in set(answers.values()) - {0}:
            err = self._err(name)
            if err in REBALANCE_ERRORS:
                self._round_error(g, ev, err, mid)
        for t in _list(q.get("topics")):
            if not isinstance(t, dict):
                continue
            tid = _str(t.get("topic_id"))
            wire = _str(t.get("name")) or tid
            topic = _str(t.get("name")) or self._name(tid)
            for p in _list(t.get("partitions")):
                if not isinstance(p, dict):
                    continue
                part = _int(p.get("partition_index"))
                off = _int(p.get("committed_offset"))
                code = answers.get((wire, part))
                err = self._err(code)
                if a is not None and err is None:
                    g.committed[(topic, part)] = (off, ev.ts_ns, ev.api_name)
                if len(g.commits) >= self.max_commits:
                    g.commits_dropped += 1
                    continue
                g.commits.append(Commit(
                    g.group_id, ev.ts_ns, ev.api_name, mid, gen, topic, tid, part, off,
                    _int(p.get("committed_leader_epoch")), err, a is not None,
                    ev.latency_ns, self._lag_at(topic, part, ev.ts_ns, off), ev.client_id,
                    ev.ref))

    def _offset_fetch(self, ev: _Ev) -> None:
        q, a = ev.req, ev.rsp
        if not a:
            return
        if isinstance(q.get("groups"), list):            # v8+: several groups
            pairs = [(x.get("group_id"), x) for x in _list(a.get("groups"))
                     if isinstance(x, dict)]
        else:
            pairs = [(q.get("group_id"), a)]
        asked = {x.get("group_id"): x.get("member_id") for x in _list(q.get("groups"))
                 if isinstance(x, dict) and isinstance(x.get("group_id"), str)}
        for gid, body in pairs:
            g = self._group(gid)
            if g is None:
                continue
            g.touch(ev)
            if gid in asked:
                self._known_member(g, _str(asked[gid]), ev)
            for t in _list(body.get("topics")):
                if not isinstance(t, dict):
                    continue
                topic = _str(t.get("name")) or self._name(_str(t.get("topic_id")))
                for p in _list(t.get("partitions")):
                    if isinstance(p, dict) and not p.get("error_code"):
                        off = _int(p.get("committed_offset"))
                        part = _int(p.get("partition_index"))
                        if off >= 0:
                            prev = g.committed.get((topic, part))
                            if prev is None or prev[1] <= ev.ts_ns:
                                g.committed[(topic, part)] = (off, ev.ts_ns, "OffsetFetch")

    def _find_coordinator(self, ev: _Ev) -> None:
        q, a = ev.req, ev.rsp
        if _int(q.get("key_type"), 0) != 0:
            return
        if isinstance(q.get("coordinator_keys"), list):        # v4+
            answers = {c.get("key"): c for c in _list(a.get("coordinators") if a else None)
                       if isinstance(c, dict)}
            keys = [(k, answers.get(k)) for k in q["coordinator_keys"]]
        else:
            keys = [(q.get("key", q.get("group_id")), a)]
        for key, ans in keys:
            g = self._group(key)
            if g is None:
                continue
            g.touch(ev, coordinator_api=False)
            if isinstance(ans, dict) and not ans.get("error_code") and \
                    _int(ans.get("node_id")) >= 0:
                host, port = ans.get("host"), ans.get("port")
                g.coordinator = f"{host}:{port}" if ":" not in str(host) \
                    else f"[{host}]:{port}"
                g.node_id = ans["node_id"]

    def _describe(self, ev: _Ev) -> None:
        for d in _list(ev.rsp.get("groups") if ev.rsp else None):
            if not isinstance(d, dict) or d.get("error_code"):
                continue
            g = self._group(d.get("group_id"))
            if g is None:
                continue
            g.touch(ev)
            g.state = _str(d.get("group_state")) or g.state
            g.protocol_type = _str(d.get("protocol_type")) or g.protocol_type
            if g.protocol_type == "consumer":
                g.protocol_name = _str(d.get("protocol_data")) or g.protocol_name
            if d.get("protocol_type") is not None and g.protocol == UNKNOWN and \
                    d.get("members"):
                g.protocol = CLASSIC
            for x in _list(d.get("members")):
                got = self._consumer_assignment(x.get("member_assignment")) \
                    if isinstance(x, dict) else None
                self._described_member(g, ev, x, got, _cut_of(
                    x["member_assignment"].get("assigned_partitions")) if got is not None
                    else 0)

    def _describe848(self, ev: _Ev) -> None:
        protocol = CONSUMER if ev.api_key == CONSUMER_GROUP_DESCRIBE else SHARE
        for d in _list(ev.rsp.get("groups") if ev.rsp else None):
            if not isinstance(d, dict) or d.get("error_code"):
                continue
            g = self._group(d.get("group_id"))
            if g is None:
                continue
            g.touch(ev)
            g.set_protocol(protocol)
            g.state = _str(d.get("group_state")) or g.state
            g.protocol_name = _str(d.get("assignor_name")) or g.protocol_name
            for x in _list(d.get("members")):
                asg = x.get("assignment") if isinstance(x, dict) else None
                got = self._id_assignment(asg.get("topic_partitions")) \
                    if isinstance(asg, dict) else None
                self._described_member(g, ev, x, got, _cut_of(
                    asg.get("topic_partitions")) if got is not None else 0)

    def _described_member(self, g: _G, ev: _Ev, x, assignment: Assignment | None,
                          cut: int = 0) -> None:
        if not isinstance(x, dict) or not _str(x.get("member_id")):
            return
        m = g.new_member(x["member_id"], ev, self.max_members)
        if m is None:                            # beyond the group_members budget
            return
        m.client_id = m.client_id or _str(x.get("client_id"))
        if not m.client and _str(x.get("client_host")):
            m.client = x["client_host"].lstrip("/")
        m.group_instance_id = m.group_instance_id or _str(x.get("group_instance_id")) or \
            _str(x.get("instance_id"))
        if assignment is not None and m.assignment is None:
            self._assign(m, g.intern(assignment), cut)

    # ------------------------------------------------------------------ lag
    def _normalized_hw(self) -> dict[tuple[str, int], list[tuple[int, int]]]:
        out: dict[tuple[str, int], list[tuple[int, int]]] = {}
        for (topic, part), samples in self.hw.items():
            out.setdefault((self.topic_names.get(topic, topic), part), []).extend(samples)
        for samples in out.values():
            samples.sort()
        return out

    def _lag_at(self, topic: str, partition: int, ts_ns: int, offset: int) -> int | None:
        samples = self._hw_by_name.get((topic, partition))
        if not samples or offset < 0:
            return None
        i = bisect_right(samples, (ts_ns, float("inf")))
        if i == 0:
            return None
        return max(0, samples[i - 1][1] - offset)

    def _lags(self, g: _G) -> tuple[Lag, ...]:
        rows = []
        for (topic, part), (off, ts, src) in sorted(g.committed.items()):
            samples = self._hw_by_name.get((topic, part))
            if not samples or off < 0:
                continue
            rows.append((topic, part, off, ts, src, samples[-1]))
        owners = self._owners(g, {(r[0], r[1]) for r in rows})
        out = []
        for topic, part, off, ts, src, (hts, hw) in rows:
            m = owners.get((topic, part))
            out.append(Lag(g.group_id, topic, part, off, ts, src, hw, hts, max(0, hw - off),
                           m and m.member_id, m and m.client_id,
                           m and (_host(m.client) if m.client else None)))
        return tuple(out)

    @staticmethod
    def _owners(g: _G, wanted: set) -> dict[tuple[str, int], _M]:
        """(topic, partition) -> the member whose last assignment holds it, the latest
        assigned when several do (a member that left still owns what nobody got after
        it). One pass over the members' last assignments."""
        owners: dict[tuple[str, int], _M] = {}
        if not wanted:
            return owners
        for m in g.members.values():
            for t, ps in m.assignment or ():
                for p in ps:
                    key = (t, p)
                    if key in wanted:
                        o = owners.get(key)
                        if o is None or m.assigned_seq > o.assigned_seq:
                            owners[key] = m
        return owners

    # ------------------------------------------------------------------ output
    def _freeze(self, g: _G) -> Group:
        if g.round is not None:                              # did not end in the capture
            self._close(g, g.round.last_sync_ts_ns, complete=False)
        coordinator = g.coordinator or next(iter(g.brokers), None)
        errors = tuple(sorted(g.errors.items(), key=lambda kv: (-kv[1], kv[0])))
        members = sorted(g.members.values(), key=lambda m: (m.first_ts_ns, m.member_id))
        gen = g.generation_id
        if g.protocol in (CONSUMER, SHARE):
            gen = max([gen] + [m.member_epoch for m in members])
        elif not g.rebalances:                   # no JoinGroup captured: the members' own
            gen = max([gen] + [m.generation_id for m in members])
        return Group(
            g.group_id, g.protocol, g.protocol_type, g.protocol_name, coordinator, g.node_id,
            tuple(g.brokers), g.state, g.first_ts_ns, g.last_ts_ns, gen,
            tuple(m.freeze() for m in members), tuple(g.rebalances),
            tuple(sorted(g.commits, key=lambda c: (c.ts_ns, c.topic, c.partition))),
            self._lags(g), errors, g.exchanges, g.commits_dropped)


def analyze_groups(records, defs=None, topic_names: Mapping[str, str] | None = None
                   ) -> GroupsReport:
    """The :class:`GroupsReport` of an iterable of pipeline records (exchanges, topic names;
    others are ignored)."""
    an = GroupAnalyzer(defs)
    try:
        for rec in records:
            an.add_record(rec)
        return an.finish(topic_names)
    finally:
        an.close()
