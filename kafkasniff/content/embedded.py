"""Protocols carried inside ``bytes`` fields: the consumer group protocol.

Classic consumer groups (protocol type ``consumer``) exchange opaque bytes through the group
coordinator: JoinGroup request ``protocols[].metadata`` and response ``members[].metadata``
carry a *subscription*, SyncGroup request ``assignments[].assignment`` and response
``assignment`` carry an *assignment*, DescribeGroups response ``members[].member_metadata`` /
``member_assignment`` carry both. Their layouts are Kafka's data specs
``ConsumerProtocolSubscription`` and ``ConsumerProtocolAssignment``: an ``int16 version`` then
the struct at that version (non-flexible). A version newer than the specs is read with the
newest known one and trailing bytes are allowed, as Kafka's ``ConsumerProtocol`` does.

Other protocol types (``connect``, custom assignors' own formats) stay raw. KIP-848
ConsumerGroupHeartbeat carries its assignment as ordinary fields and needs nothing here.
"""

from __future__ import annotations

import struct

from kafkasniff.content.budgets import BudgetMeter
from kafkasniff.issues import IssueKind
from kafkasniff.protocol.apis import DESCRIBE_GROUPS, JOIN_GROUP, SYNC_GROUP
from kafkasniff.protocol.decoder import STRICT_ERRORS
from kafkasniff.protocol.lenient import BodyIssue
from kafkasniff.protocol.schema import Definitions

#: the group APIs that carry the consumer protocol in bytes fields
GROUP_APIS = (JOIN_GROUP, SYNC_GROUP, DESCRIBE_GROUPS)
CONSUMER = "consumer"
SUBSCRIPTION = "ConsumerProtocolSubscription"
ASSIGNMENT = "ConsumerProtocolAssignment"
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
#: the budget that bounds the partitions a decoded assignment or subscription may hold
PARTITIONS_BUDGET = "group_assignment_partitions"


#: the key a topic-partition dict gets when its partitions list was cut to a budget: how
#: many were not kept (the decoded list holds the first ones)
CUT_KEY = "_partitions_cut"


class _Layout:
    """Where the ``[]TopicPartition`` array of consumer-protocol bytes lies (read without
    decoding its ints): ``head`` ends before the array's count, ``topics`` are
    ``(start, count_end, count)`` (the topic name from ``start``, its int32 count ending at
    ``count_end``), ``tail`` starts after the array; ``claimed`` is the sum of the counts as
    written, ``whole`` whether the bytes hold everything they claim."""

    __slots__ = ("head", "topics", "tail", "claimed", "whole")

    def __init__(self, spec: str, data: bytes) -> None:
        """Raises struct.error when the bytes end before the array's topics do."""
        self.topics: list[tuple[int, int, int]] = []
        self.claimed = 0
        pos = 2
        version = _I16.unpack_from(data, 0)[0]
        if spec == SUBSCRIPTION:
            if version < 1:                      # no owned_partitions before v1
                self.head = self.tail = len(data)
                self.whole = True
                return
            (n,) = _I32.unpack_from(data, pos)
            pos += 4
            for _ in range(max(n, 0)):           # topics: []string
                pos += 2 + max(_I16.unpack_from(data, pos)[0], 0)
            pos += 4 + max(_I32.unpack_from(data, pos)[0], 0)     # user_data
        self.head = pos
        (n,) = _I32.unpack_from(data, pos)
        pos += 4
        for _ in range(max(n, 0)):
            start = pos
            pos += 2 + max(_I16.unpack_from(data, pos)[0], 0)
            (count,) = _I32.unpack_from(data, pos)
            pos += 4
            count = max(count, 0)
            self.topics.append((start, pos, count))
            self.claimed += count
            pos += 4 * count
            if pos > len(data):
                break
        self.tail = pos
        self.whole = pos <= len(data)

    def cut(self, data: bytes, keep: int) -> tuple[bytes, list[int]]:
        """The same bytes with at most ``keep`` partitions in the array (the first ones,
        topic by topic; every topic kept, emptied once ``keep`` is spent), and per topic how
        many were not kept."""
        parts = [data[:self.head], _I32.pack(len(self.topics))]
        cuts = []
        for start, count_end, count in self.topics:
            n = min(count, keep)
            keep -= n
            parts += (data[start:count_end - 4], _I32.pack(n),
                      data[count_end:count_end + 4 * n])
            cuts.append(count - n)
        parts.append(data[self.tail:])
        return b"".join(parts), cuts


def claimed_partitions(spec: str, data: bytes) -> int | None:
    """How many partitions the consumer-protocol bytes ``data`` of ``spec``
    (:data:`ASSIGNMENT`: ``assigned_partitions``; :data:`SUBSCRIPTION`: ``owned_partitions``,
    v1+) claim: the sum of their ``[]int32`` array lengths as written, read without
    decoding them. ``None`` when the bytes end before the array's topics do. A count is
    claimed even when the bytes end before its ints (a crafted count of 2^31-1)."""
    try:
        return _Layout(spec, data).claimed
    except struct.error:
        return None


class EmbeddedDecoder:
    """Decodes consumer-protocol subscriptions and assignments in group API bodies.

    Args:
        defs: definitions holding the ConsumerProtocol data specs.
        max_groups: group ids whose protocol type is remembered (for SyncGroup < v5,
            whose requests do not carry it).
        meter: the analysis' budget meter. Its ``group_assignment_partitions`` budget bounds
            the partitions decoded per body: beyond it the partitions lists hold their first
            ones and each cut topic-partition dict says how many it lost (:data:`CUT_KEY`),
            never decoding the rest into ints (a 40 MB SyncGroup answer claiming 10M
            partitions took 360 MB as Python ints). Counted in ``meter.skipped``; the first
            cut of the capture is a ``budget_exhausted`` issue. None: unbounded.
    """

    def __init__(self, defs: Definitions, max_groups: int = 100_000,
                 meter: BudgetMeter | None = None) -> None:
        self.defs = defs
        self.group_protocol: dict[str, str] = {}
        self.max_groups = max_groups
        self.meter = meter
        #: partitions the body being decoded may still hold (the budget, per body)
        self._left = 0

    def decode(self, spec: str, data: bytes) -> dict:
        """``{"protocol_type": "consumer", "version": v, ...fields}``; raises ValueError if the
        bytes do not hold that spec."""
        if len(data) < 2:
            raise ValueError("shorter than the int16 version")
        version = _I16.unpack_from(data, 0)[0]
        versions = self.defs.message_versions(spec)
        if version < 0:
            raise ValueError(f"negative version {version}")
        try:
            value, end = self.defs.compiled(spec, min(version, versions[-1]))(data, 2)
        except STRICT_ERRORS as exc:
            raise ValueError(f"{spec} v{version}: {type(exc).__name__}") from None
        if end != len(data) and version <= versions[-1]:
            raise ValueError(f"{spec} v{version}: {len(data) - end} trailing bytes")
        out = {"protocol_type": CONSUMER, "version": version}
        out.update(value)
        return out

    def _remember(self, group_id: str | None, protocol_type: str | None) -> None:
        if group_id is None or not protocol_type:
            return
        if group_id not in self.group_protocol and len(self.group_protocol) >= self.max_groups:
            self.group_protocol.pop(next(iter(self.group_protocol)))
        self.group_protocol[group_id] = protocol_type

    def apply(self, api_key: int, is_response: bool, body: dict | None,
              request_body: dict | None = None) -> list[BodyIssue]:
        """Replace consumer-protocol bytes in ``body`` by their decode, in place.

        ``request_body`` is the request of a response (for its group id / protocol type).
        Returns departures (bytes that claim the consumer protocol but do not decode).
        """
        if not body or api_key not in GROUP_APIS:
            return []
        if self.meter is not None:
            self._left = self.meter.budgets.limit(PARTITIONS_BUDGET)
        issues: list[BodyIssue] = []
        req = request_body or {}
        if api_key == DESCRIBE_GROUPS:
            if not is_response:
                return []
            for gi, g in enumerate(body.get("groups") or ()):
                if g.get("protocol_type") != CONSUMER:
                    continue
                for mi, m in enumerate(g.get("members") or ()):
                    base = f"groups[{gi}].members[{mi}]"
                    self._field(m, "member_metadata", SUBSCRIPTION, base, issues)
                    self._field(m, "member_assignment", ASSIGNMENT, base, issues)
            return issues
        group_id = body.get("group_id", req.get("group_id"))
        ptype = body.get("protocol_type") or req.get("protocol_type")
        if ptype:
            self._remember(group_id, ptype)
        else:
            ptype = self.group_protocol.get(group_id)
        if ptype != CONSUMER:
            return []
        if api_key == JOIN_GROUP:
            key, items = ("members", "metadata") if is_response else ("protocols", "metadata")
            for i, item in enumerate(body.get(key) or ()):
                self._field(item, items, SUBSCRIPTION, f"{key}[{i}]", issues)
        elif is_response:
            self._field(body, "assignment", ASSIGNMENT, "", issues)
        else:
            for i, item in enumerate(body.get("assignments") or ()):
                self._field(item, "assignment", ASSIGNMENT, f"assignments[{i}]", issues)
        return issues

    def _field(self, holder: dict, key: str, spec: str, base: str, issues: list) -> None:
        data = holder.get(key)
        if not isinstance(data, (bytes, bytearray)) or not data:
            return
        data = bytes(data)
        cuts = None
        if self.meter is not None:
            data, cuts = self._fit(spec, data, f"{base}.{key}" if base else key, issues)
            if data is None:
                return
        try:
            holder[key] = value = self.decode(spec, data)
            if cuts:
                _mark_cuts(value, spec, cuts)
        except ValueError as exc:
            path = f"{base}.{key}" if base else key
            issues.append(BodyIssue(IssueKind.SPEC_DEPARTURE,
                                    f"consumer protocol {spec} does not decode ({exc}); kept raw",
                                    path, -1))


    def _fit(self, spec: str, data: bytes, path: str, issues: list
             ) -> tuple[bytes | None, list[int] | None]:
        """``data`` to decode, cut to the partitions the body may still hold, and per topic
        how many were cut (None when nothing was); ``(None, None)`` to keep the bytes raw
        (they claim more than the budget and do not hold it: a crafted count)."""
        left = self._left
        if (len(data) - 2) // 4 <= left:        # cannot hold more ints than that
            self._left = left - min((len(data) - 2) // 4, left)
            return data, None
        try:
            layout = _Layout(spec, data)
        except struct.error:
            return data, None                   # the decode reports what does not fit
        if layout.claimed <= left:
            self._left = left - layout.claimed
            return data, None
        self._left = 0
        meter = self.meter
        meter.skipped[PARTITIONS_BUDGET] += 1
        if meter.first_report(PARTITIONS_BUDGET):
            limit = meter.budgets.limit(PARTITIONS_BUDGET)
            what = (f"holds its first {left} partitions" if layout.whole else
                    "is kept raw (its bytes end before what it claims)")
            issues.append(BodyIssue(
                IssueKind.BUDGET_EXHAUSTED,
                f"budget {PARTITIONS_BUDGET} ({limit} per frame) spent: a consumer "
                f"protocol {spec} claiming {layout.claimed} partitions in {len(data)} bytes "
                f"{what}; later ones in this capture too (counted in the budgets summary); "
                f"raise it with --budget {PARTITIONS_BUDGET}=N", path, -1))
        if not layout.whole:
            return None, None
        return layout.cut(data, left)


def _mark_cuts(value: dict, spec: str, cuts: list[int]) -> None:
    """Write each topic's cut count (:data:`CUT_KEY`) into the decoded partitions list."""
    key = "assigned_partitions" if spec == ASSIGNMENT else "owned_partitions"
    for tp, n in zip(value.get(key) or (), cuts):
        if n and isinstance(tp, dict):
            tp[CUT_KEY] = n


def embedded_topics(body: dict | None) -> list[str]:
    """Topic names inside decoded consumer-protocol values of a group API body."""
    out: list[str] = []
    _embedded_walk(body, out)
    return out


def _embedded_walk(v, out: list[str]) -> None:
    # a module function, not a closure: a closure calling itself is a reference cycle,
    # left for the garbage collector after every call
    if isinstance(v, dict):
        if v.get("protocol_type") == CONSUMER and "version" in v:
            out.extend(t for t in v.get("topics") or () if t)
            for tp in list(v.get("owned_partitions") or ()) + \
                    list(v.get("assigned_partitions") or ()):
                if tp.get("topic"):
                    out.append(tp["topic"])
            return
        for x in v.values():
            _embedded_walk(x, out)
    elif isinstance(v, list):
        for x in v:
            _embedded_walk(x, out)
