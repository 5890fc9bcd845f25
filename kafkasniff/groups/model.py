"""The values of the consumer-group analysis: plain frozen dataclasses with ``to_dict()``.

A :class:`GroupsReport` holds one :class:`Group` per group id seen on the wire, each with its
:class:`Member` list, its :class:`Rebalance` list, its :class:`Commit` rows and its
:class:`Lag` rows. Times are integer ns since the epoch (UTC, capture time); Kafka integers
keep their sign. Names follow Kafka's JSON specs (``member_id``, ``group_instance_id``,
``generation_id``, ``member_epoch``, ``committed_offset``, ``high_watermark`` ...).

Each value also carries :class:`ExchangeRef` items (connection id, correlation id, request
time) that find the exchanges it was read from again, for drill-down views.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kafkasniff.model import DecodeIssue

__all__ = [
    "Assignment", "Commit", "ExchangeRef", "Group", "GroupsReport", "Lag", "Member",
    "Rebalance", "CLASSIC", "CONSUMER", "SHARE", "UNKNOWN",
]

#: group protocols: the classic JoinGroup/SyncGroup protocol (KIP-62/KIP-345 ...), the
#: KIP-848 consumer protocol (ConsumerGroupHeartbeat), KIP-932 share groups
#: (ShareGroupHeartbeat); ``unknown`` when only offsets or a FindCoordinator were seen
CLASSIC = "classic"
CONSUMER = "consumer"
SHARE = "share"
UNKNOWN = "unknown"

#: a topic-partition list: ``((topic, (partition, ...)), ...)``, topics and partitions sorted
Assignment = tuple[tuple[str, tuple[int, ...]], ...]


def assignment_dict(a: Assignment | None) -> dict[str, list[int]] | None:
    """``{topic: [partition, ...]}`` of an assignment (``None`` stays ``None``)."""
    return None if a is None else {t: list(ps) for t, ps in a}


def assignment_text(a: Assignment | None, cut: int = 0) -> str:
    """``topic[0,1] other[2]``; ``-`` for none, ``(none)`` for an empty assignment;
    ``cut``: partitions of it not kept (budget ``group_assignment_partitions``), said after
    it (``topic[0,1] (+5 partitions not kept)``)."""
    more = f"(+{cut} partition{'' if cut == 1 else 's'} not kept)" if cut > 0 else ""
    if a is None:
        return "-"
    if not a:
        return more or "(none)"
    text = " ".join(f"{t}[{','.join(str(p) for p in ps)}]" for t, ps in a)
    return f"{text} {more}" if more else text


@dataclass(frozen=True, slots=True)
class ExchangeRef:
    """Where an exchange is: its TCP connection id, correlation id and request time (ns),
    its endpoints, and the export's ``exchange_id`` when the analyzer was given it; with
    the pipeline's exchanges (or the exported ``exchanges`` table) these find it again."""

    conn_id: int
    correlation_id: int
    ts_ns: int
    client: str = ""
    broker: str = ""
    exchange_id: str | None = None

    def to_dict(self) -> dict:
        """``{"conn_id", "correlation_id", "ts_ns", "client", "broker", "exchange_id"}``."""
        return {"conn_id": self.conn_id, "correlation_id": self.correlation_id,
                "ts_ns": self.ts_ns, "client": self.client, "broker": self.broker,
                "exchange_id": self.exchange_id}


@dataclass(frozen=True, slots=True)
class Member:
    """One member of a group as the capture shows it.

    Attributes:
        member_id: as the coordinator named it (classic: ``client_id-uuid``; KIP-848 and
            share: a uuid, from the client since ConsumerGroupHeartbeat v1).
        group_instance_id: static membership id (KIP-345; ``instance_id`` of KIP-848), or None.
        client_id: the request header's client_id of its exchanges.
        client_host: IP address of its connection(s) to the coordinator.
        client: ``ip:port`` of the first connection it was seen on.
        first_ts_ns / last_ts_ns: first and last exchange of the member.
        joined_ts_ns: when it (first) joined in the capture (JoinGroup or heartbeat with
            epoch 0), None when it was already a member when the capture began.
        left_ts_ns / left_reason: when and how it left: ``leave`` (LeaveGroup or a heartbeat
            with epoch -1/-2), ``session_timeout`` (it stopped talking to the coordinator and
            a later generation lacks it), ``fenced`` (answered UNKNOWN_MEMBER_ID or
            FENCED_MEMBER_EPOCH and not seen again); None when still a member at the end.
            For a session timeout the time is its last exchange (the coordinator's timer is
            not on the wire).
        generation_id: its last classic generation (-1 for KIP-848 and share members).
        member_epoch: its last KIP-848 / share member epoch (-1 for classic members).
        assignment: its last known assignment (None when never seen).
        subscribed_topics: topics it subscribed to (JoinGroup metadata, heartbeats).
        rack_id: its rack (consumer protocol v3, KIP-848 heartbeats), or None.
        session_timeout_ms / rebalance_timeout_ms: from its JoinGroup or heartbeat (-1 when
            not on the wire).
        exchanges: group API exchanges of this member.
        assignment_cut: partitions of its last assignment not kept (beyond the budget
            ``group_assignment_partitions``; 0: the assignment is whole).
    """

    member_id: str
    group_instance_id: str | None
    client_id: str | None
    client_host: str
    client: str
    first_ts_ns: int
    last_ts_ns: int
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
    assignment_cut: int = 0

    def to_dict(self) -> dict:
        """A JSON-ready dict (assignment as ``{topic: [partitions]}``)."""
        return {
            "member_id": self.member_id, "group_instance_id": self.group_instance_id,
            "client_id": self.client_id, "client_host": self.client_host,
            "client": self.client, "first_ts_ns": self.first_ts_ns,
            "last_ts_ns": self.last_ts_ns, "joined_ts_ns": self.joined_ts_ns,
            "left_ts_ns": self.left_ts_ns, "left_reason": self.left_reason,
            "generation_id": self.generation_id, "member_epoch": self.member_epoch,
            "assignment": assignment_dict(self.assignment),
            "subscribed_topics": list(self.subscribed_topics), "rack_id": self.rack_id,
            "session_timeout_ms": self.session_timeout_ms,
            "rebalance_timeout_ms": self.rebalance_timeout_ms, "exchanges": self.exchanges,
            "assignment_cut": self.assignment_cut,
        }


@dataclass(frozen=True, slots=True)
class Rebalance:
    """One rebalance of a group: from its first sign on the wire to the moment every member
    of the new generation (classic) or epoch (KIP-848, share) holds its assignment.

    Attributes:
        index: 1, 2, ... in the group, in start order.
        start_ts_ns: its first sign: the first JoinGroup request of the round, a LeaveGroup
            request, a heartbeat or commit answered REBALANCE_IN_PROGRESS (classic); the
            heartbeat that joined, left, was fenced or was first answered with a new epoch
            or assignment (KIP-848, share).
        end_ts_ns: classic: the last SyncGroup response of the generation (every member of
            the leader's JoinGroup response synced); KIP-848: the heartbeat in which the last
            member acknowledged its new assignment (``topic_partitions``); share: the
            heartbeat response delivering the last new assignment. None when it did not end
            before the capture did.
        duration_ns: ``end_ts_ns - start_ts_ns`` (None when not ended).
        trigger: what started it: ``join`` (a member not in the previous generation joined,
            the group's first generation included), ``leave`` (LeaveGroup, or a KIP-848 /
            share heartbeat with epoch -1 or -2), ``session_timeout`` (a member of the
            previous generation is missing and never left), ``error`` (the first sign was an
            error answer: see ``trigger_error``), ``assignment_change`` (the coordinator gave
            a new epoch or assignment without a visible member change: a subscription or
            metadata change, or a member not in the capture), ``rejoin`` (known members
            rejoined a classic group without a visible cause).
        trigger_member: the member that joined, left, timed out, or got the error answer
            (None if n/a).
        trigger_error: the error name of an ``error`` trigger (REBALANCE_IN_PROGRESS,
            UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_MEMBER_EPOCH ...), else None.
        errors: error names of the group's answers during the rebalance, first seen first.
        generation_id: classic: the generation it produced (-1 if not seen); KIP-848 /
            share: the largest member epoch it produced (the group epoch as far as seen).
        protocol_name: the assignor (classic JoinGroup/SyncGroup ``protocol_name``; KIP-848
            ``server_assignor`` when a member named one), or None.
        leader: classic: the member the coordinator made leader, else None.
        members: member ids of the new generation / epoch.
        joined / left: member ids that joined / left in it.
        assignment: member id -> its assignment after the rebalance (members whose
            assignment the capture does not show are absent).
        complete: every member's assignment was seen (False when the capture ended first
            or some member's answers were not captured).
        exchanges: the group API exchanges of the rebalance.
        assignment_cut: member id -> partitions of its assignment not kept (beyond the
            budget ``group_assignment_partitions``), for the members whose assignment is cut.
    """

    group_id: str
    index: int
    start_ts_ns: int
    end_ts_ns: int | None
    trigger: str
    trigger_member: str | None = None
    trigger_error: str | None = None
    errors: tuple[str, ...] = ()
    generation_id: int = -1
    protocol_name: str | None = None
    leader: str | None = None
    members: tuple[str, ...] = ()
    joined: tuple[str, ...] = ()
    left: tuple[str, ...] = ()
    assignment: tuple[tuple[str, Assignment], ...] = ()
    complete: bool = False
    exchanges: tuple[ExchangeRef, ...] = field(default=())
    assignment_cut: tuple[tuple[str, int], ...] = ()

    @property
    def duration_ns(self) -> int | None:
        """``end_ts_ns - start_ts_ns``, None when it did not end in the capture."""
        return None if self.end_ts_ns is None else self.end_ts_ns - self.start_ts_ns

    def assignment_of(self, member_id: str) -> Assignment | None:
        """The assignment of one member after this rebalance (None when not seen)."""
        for m, a in self.assignment:
            if m == member_id:
                return a
        return None

    def to_dict(self) -> dict:
        """A JSON-ready dict (``duration_ns`` included, assignment as
        ``{member_id: {topic: [partitions]}}``)."""
        return {
            "group_id": self.group_id, "index": self.index, "start_ts_ns": self.start_ts_ns,
            "end_ts_ns": self.end_ts_ns, "duration_ns": self.duration_ns,
            "trigger": self.trigger, "trigger_member": self.trigger_member,
            "trigger_error": self.trigger_error, "errors": list(self.errors),
            "generation_id": self.generation_id, "protocol_name": self.protocol_name,
            "leader": self.leader, "members": list(self.members),
            "joined": list(self.joined), "left": list(self.left),
            "assignment": {m: assignment_dict(a) for m, a in self.assignment},
            "complete": self.complete,
            "exchanges": [x.to_dict() for x in self.exchanges],
            "assignment_cut": dict(self.assignment_cut),
        }


@dataclass(frozen=True, slots=True)
class Commit:
    """One committed offset of one partition (OffsetCommit, or TxnOffsetCommit).

    Attributes:
        ts_ns: the request's first byte.
        api_name: ``OffsetCommit`` or ``TxnOffsetCommit``.
        member_id / generation_id: as in the request (``generation_id_or_member_epoch``
            since OffsetCommit v9); -1 / "" for simple (standalone) commits.
        topic: the topic name (resolved from a topic id when the name was learnt), or the id.
        topic_id: the topic id when the request carried one (OffsetCommit v10+), else None.
        partition / committed_offset / committed_leader_epoch: as in the request.
        error: the partition's error name in the response, None when it succeeded (or
            when no response was captured: see ``answered``).
        answered: the response was captured.
        latency_ns: the exchange's latency (response first byte minus request last byte).
        lag: the latest high watermark seen before the commit minus ``committed_offset``
            (None when no Fetch or ListOffsets response showed the partition's high
            watermark before it).
        client_id / exchange: of the request.
    """

    group_id: str
    ts_ns: int
    api_name: str
    member_id: str
    generation_id: int
    topic: str
    topic_id: str | None
    partition: int
    committed_offset: int
    committed_leader_epoch: int
    error: str | None
    answered: bool
    latency_ns: int | None
    lag: int | None
    client_id: str | None
    exchange: ExchangeRef

    def to_dict(self) -> dict:
        """A JSON-ready dict."""
        return {
            "group_id": self.group_id, "ts_ns": self.ts_ns, "api_name": self.api_name,
            "member_id": self.member_id, "generation_id": self.generation_id,
            "topic": self.topic, "topic_id": self.topic_id, "partition": self.partition,
            "committed_offset": self.committed_offset,
            "committed_leader_epoch": self.committed_leader_epoch, "error": self.error,
            "answered": self.answered, "latency_ns": self.latency_ns, "lag": self.lag,
            "client_id": self.client_id, "exchange": self.exchange.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class Lag:
    """The consumer lag of one partition of a group at the end of the capture.

    Attributes:
        committed_offset / committed_ts_ns: the group's last committed offset seen (an
            OffsetCommit that succeeded, or an OffsetFetch answer) and when.
        committed_from: ``OffsetCommit``, ``TxnOffsetCommit`` or ``OffsetFetch``.
        high_watermark / high_watermark_ts_ns: the last high watermark seen (a Fetch
            response's ``high_watermark``, a ListOffsets answer for the latest offset).
        lag: ``high_watermark - committed_offset`` (not below 0).
        member_id / client_id / client_host: the partition's owner, as
            ``kafka-consumer-groups --describe`` shows it (CONSUMER-ID, CLIENT-ID, HOST): the
            member whose last assignment holds the partition, the latest assigned when
            several do (a member that left still owns what nobody was given after it);
            None when no assignment seen holds it.
    """

    group_id: str
    topic: str
    partition: int
    committed_offset: int
    committed_ts_ns: int
    committed_from: str
    high_watermark: int
    high_watermark_ts_ns: int
    lag: int
    member_id: str | None = None
    client_id: str | None = None
    client_host: str | None = None

    def to_dict(self) -> dict:
        """A JSON-ready dict."""
        return {
            "group_id": self.group_id, "topic": self.topic, "partition": self.partition,
            "committed_offset": self.committed_offset, "committed_ts_ns": self.committed_ts_ns,
            "committed_from": self.committed_from, "high_watermark": self.high_watermark,
            "high_watermark_ts_ns": self.high_watermark_ts_ns, "lag": self.lag,
            "member_id": self.member_id, "client_id": self.client_id,
            "client_host": self.client_host,
        }


@dataclass(frozen=True, slots=True)
class Group:
    """One consumer group (or share group) as the capture shows it.

    Attributes:
        group_id: the group id.
        protocol: ``classic``, ``consumer`` (KIP-848), ``share`` (KIP-932) or ``unknown``.
        protocol_type: classic ``protocol_type`` (``consumer``, ``connect`` ...; ``share``
            for share groups; ``consumer`` for KIP-848), None when not seen.
        protocol_name: the assignor (classic ``protocol_name``, KIP-848 ``server_assignor``).
        coordinator: the coordinator as FindCoordinator answered (``host:port``), else the
            broker endpoint the group's requests went to; None when neither was seen.
        coordinator_node_id: its node id from FindCoordinator (-1 when not seen).
        coordinator_brokers: broker endpoints the group's requests went to, first first.
        state: the last ``group_state`` a DescribeGroups / ListGroups answer gave, or None.
        first_ts_ns / last_ts_ns: first and last group exchange.
        generation_id: the last classic generation, or the largest KIP-848 / share member
            epoch seen (-1 if none).
        members: every member seen, in order of first appearance.
        rebalances: its rebalances, in start order.
        commits: its committed offsets, in time order.
        lags: lag per partition at the end (where both offsets were seen).
        errors: error name -> count over the group's answers.
        exchanges: group API exchanges of the group.
        commits_dropped: commit rows not kept (beyond the analyzer's bound).
    """

    group_id: str
    protocol: str
    protocol_type: str | None
    protocol_name: str | None
    coordinator: str | None
    coordinator_node_id: int
    coordinator_brokers: tuple[str, ...]
    state: str | None
    first_ts_ns: int
    last_ts_ns: int
    generation_id: int
    members: tuple[Member, ...]
    rebalances: tuple[Rebalance, ...]
    commits: tuple[Commit, ...]
    lags: tuple[Lag, ...]
    errors: tuple[tuple[str, int], ...]
    exchanges: int
    commits_dropped: int = 0

    def commit_latencies_ns(self) -> list[int]:
        """Latencies of the answered commit requests (one per request, not per partition)."""
        seen: dict[tuple[int, int, int], int] = {}
        for c in self.commits:
            if c.latency_ns is not None:
                seen[(c.exchange.conn_id, c.exchange.correlation_id, c.exchange.ts_ns)] = \
                    c.latency_ns
        return list(seen.values())

    def commit_latency_stats(self) -> tuple[int, dict | None]:
        """``(commit requests answered, {"p50", "p90", "p99", "max"} ns or None)`` of
        :meth:`commit_latencies_ns` (nearest-rank percentiles)."""
        lat = sorted(self.commit_latencies_ns())
        return len(lat), _percentiles(lat)

    def to_dict(self) -> dict:
        """A JSON-ready dict of the group, its members, rebalances, commits and lags."""
        n_commits, pct = self.commit_latency_stats()
        return {
            "group_id": self.group_id, "protocol": self.protocol,
            "protocol_type": self.protocol_type, "protocol_name": self.protocol_name,
            "coordinator": self.coordinator, "coordinator_node_id": self.coordinator_node_id,
            "coordinator_brokers": list(self.coordinator_brokers), "state": self.state,
            "first_ts_ns": self.first_ts_ns, "last_ts_ns": self.last_ts_ns,
            "generation_id": self.generation_id, "exchanges": self.exchanges,
            "errors": dict(self.errors),
            "commit_requests": n_commits,
            "commit_latency_ns": pct,
            "commits_dropped": self.commits_dropped,
            "members": [m.to_dict() for m in self.members],
            "rebalances": [r.to_dict() for r in self.rebalances],
            "commits": [c.to_dict() for c in self.commits],
            "lags": [x.to_dict() for x in self.lags],
        }


def _percentiles(values: list[int]) -> dict | None:
    """``{"p50", "p90", "p99", "max"}`` (nearest rank) of sorted values, None when empty."""
    if not values:
        return None
    n = len(values)

    def q(p: float) -> int:
        return values[min(n - 1, max(0, -(-int(p * n * 1000) // 1000) - 1))]
    return {"p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "max": values[-1]}


@dataclass(frozen=True, slots=True)
class GroupsReport:
    """Every group of a capture, by group id (sorted).

    Attributes:
        groups: the groups.
        group_exchanges: group API exchanges read (FindCoordinator, JoinGroup, SyncGroup,
            Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, TxnOffsetCommit,
            DescribeGroups, ListGroups, ConsumerGroupHeartbeat, ShareGroupHeartbeat ...).
        groups_dropped: groups not tracked (beyond the analyzer's bound).
        events_dropped: group API exchanges not analysed (beyond the analyzer's
            ``max_events``: the report covers the ones before).
        issues: what the analysis found wrong or left out, as
            :class:`~kafkasniff.model.DecodeIssue` records: a budget reached
            (``budget_exhausted``: ``group_assignment_partitions``, ``group_members``; once
            each), an assignment whose bytes do not decode (``spec_departure``).
        capture_group_exchanges: for a report of some groups only (:meth:`only`), the
            group API exchanges of the whole capture; None for the whole capture's report.
    """

    groups: tuple[Group, ...]
    group_exchanges: int = 0
    groups_dropped: int = 0
    events_dropped: int = 0
    issues: tuple[DecodeIssue, ...] = ()
    capture_group_exchanges: int | None = None

    def group(self, group_id: str) -> Group | None:
        """The group ``group_id``, or None."""
        for g in self.groups:
            if g.group_id == group_id:
                return g
        return None

    def to_dict(self) -> dict:
        """``{"groups": [...], "group_exchanges", "groups_dropped", "events_dropped",
        "issues": [...], "capture_group_exchanges"}``."""
        return {"groups": [g.to_dict() for g in self.groups],
                "group_exchanges": self.group_exchanges,
                "groups_dropped": self.groups_dropped,
                "events_dropped": self.events_dropped,
                "issues": [i.to_dict() for i in self.issues],
                "capture_group_exchanges": self.capture_group_exchanges}

    def only(self, group_ids) -> "GroupsReport":
        """The report of the groups ``group_ids`` only: ``group_exchanges`` counts their
        exchanges (an exchange naming several of them counts for each), the issues are
        those of the whole analysis."""
        wanted = set(group_ids)
        groups = tuple(g for g in self.groups if g.group_id in wanted)
        return GroupsReport(groups, sum(g.exchanges for g in groups), self.groups_dropped,
                            self.events_dropped, self.issues,
                            self.group_exchanges if self.capture_group_exchanges is None
                            else self.capture_group_exchanges)
