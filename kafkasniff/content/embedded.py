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


class EmbeddedDecoder:
    """Decodes consumer-protocol subscriptions and assignments in group API bodies.

    Args:
        defs: definitions holding the ConsumerProtocol data specs.
        max_groups: group ids whose protocol type is remembered (for SyncGroup < v5,
            whose requests do not carry it).
    """

    def __init__(self, defs: Definitions, max_groups: int = 100_000) -> None:
        self.defs = defs
        self.group_protocol: dict[str, str] = {}
        self.max_groups = max_groups

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
        try:
            holder[key] = self.decode(spec, bytes(data))
        except ValueError as exc:
            path = f"{base}.{key}" if base else key
            issues.append(BodyIssue(IssueKind.SPEC_DEPARTURE,
                                    f"consumer protocol {spec} does not decode ({exc}); kept raw",
                                    path, -1))


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
