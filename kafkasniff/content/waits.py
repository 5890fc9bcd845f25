"""Requests the broker holds by design: long-polls told apart from slowness.

An idle consumer's Fetch waits ``max_wait_ms`` (500 ms by default) for data; a JoinGroup is
answered when the rebalance's join phase ends. Their latency measures waiting, not the
broker. :func:`long_poll_rule` names the rule an exchange matches, and the exchange is marked
``long_poll`` (:class:`kafkasniff.model.Exchange`): statistics, the TUI, the metrics and
``spark report`` keep long-polls out of the default latency percentiles and count them
apart. Each rule uses the Kafka spec fields named below (docs/long-polls.md):

``fetch_max_wait``
    Fetch (api_key 1; consumers, follower replicas and KRaft voters alike): the broker
    answers when ``MinBytes`` are available or ``MaxWaitMs`` expire. A response that came
    after at least :data:`WAIT_FRACTION` of ``max_wait_ms`` with no more than ``min_bytes``
    of record data waited the timeout out.
``share_fetch_max_wait``
    ShareFetch (api_key 78, KIP-932): the same rule with its ``MaxWaitMs`` and ``MinBytes``.
``join_group_held``
    JoinGroup (api_key 11) answered without error: the coordinator holds every member's
    JoinGroup until all known members have joined or ``RebalanceTimeoutMs`` (v0:
    ``SessionTimeoutMs``) expires, so its latency is the group's join phase. A
    ``MEMBER_ID_REQUIRED`` answer (v4+, immediate) is not held.
``sync_group_follower``
    SyncGroup (api_key 14) of a follower (empty ``Assignments``) answered without error: the
    coordinator holds it until the leader's SyncGroup brings the assignment.
``produce_timeout``
    Produce (api_key 0) with ``Acks`` -1 answered after at least :data:`WAIT_FRACTION` of
    ``TimeoutMs``: the broker waited the replication timeout out (its error, usually
    ``REQUEST_TIMED_OUT``, still counts).

Heartbeat, ConsumerGroupHeartbeat (KIP-848) and ShareGroupHeartbeat are answered at once
(their interval lies between requests, not inside one), so no rule applies to them.
"""

from __future__ import annotations

from kafkasniff.model import RecordsSummary
from kafkasniff.protocol.apis import FETCH, JOIN_GROUP, PRODUCE, SHARE_FETCH, SYNC_GROUP

#: APIs a rule may apply to (the hot path tests membership before anything else).
WAIT_APIS = frozenset((FETCH, SHARE_FETCH, JOIN_GROUP, SYNC_GROUP, PRODUCE))

#: A response after this fraction of the timeout waited it out (the broker's timer starts
#: when it has read the request, so a capture on either host sees at least the timeout; the
#: slack covers timer granularity).
WAIT_FRACTION = 0.9

#: The rule names, in the order the docs list them.
RULES = ("fetch_max_wait", "share_fetch_max_wait", "join_group_held", "sync_group_follower",
         "produce_timeout")


def _waited(latency_ns: int, timeout_ms) -> bool:
    """Whether ``latency_ns`` reached :data:`WAIT_FRACTION` of a positive ``timeout_ms``."""
    return type(timeout_ms) is int and timeout_ms > 0 and \
        latency_ns >= timeout_ms * (1_000_000 * WAIT_FRACTION)


def long_poll_rule(api_key: int, request_body: dict | None, response_body: dict | None,
                   latency_ns: int | None, records: RecordsSummary | None) -> str | None:
    """The rule (one of :data:`RULES`) under which a paired exchange was held by design, or
    ``None``.

    Args:
        api_key: the exchange's Kafka api_key.
        request_body / response_body: the decoded bodies (``None``, raw or redacted bodies
            match no rule).
        latency_ns: response first byte minus request last byte (``None``: not paired).
        records: the exchange's record data (Fetch / ShareFetch: the response's), or
            ``None`` when it carries none.
    """
    if latency_ns is None or not isinstance(request_body, dict) or \
            not isinstance(response_body, dict):
        return None
    if api_key == FETCH or api_key == SHARE_FETCH:
        if not _waited(latency_ns, request_body.get("max_wait_ms")):
            return None
        got = records.records_bytes if records is not None else 0
        min_bytes = request_body.get("min_bytes")
        if got > (min_bytes if type(min_bytes) is int and min_bytes > 0 else 0):
            return None
        return "fetch_max_wait" if api_key == FETCH else "share_fetch_max_wait"
    if api_key == JOIN_GROUP:
        return "join_group_held" if response_body.get("error_code") == 0 else None
    if api_key == SYNC_GROUP:
        if request_body.get("assignments") or response_body.get("error_code") != 0:
            return None
        return "sync_group_follower"
    if api_key == PRODUCE:
        if request_body.get("acks") == -1 and _waited(latency_ns,
                                                      request_body.get("timeout_ms")):
            return "produce_timeout"
    return None
