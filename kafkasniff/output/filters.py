"""The one filter language of ``read``, ``live`` and the TUI.

A :class:`Filter` says which exchanges to show. Text criteria are *patterns*, matched
case-insensitively:

- ``=value`` matches exactly that value (case-sensitive: what the TUI's jumps use);
- a pattern with a shell wildcard (``*``, ``?``, ``[...]``) is a glob over the whole value
  (``ks-consumer*``);
- any other pattern matches as a substring (``consumer`` matches ``ks-consumer-1``).

``apis`` are API names (any case) or api_key numbers; ``client`` matches the client_id or the
client's ``ip:port``; ``broker`` the broker's ``ip:port``; ``topic`` any topic of the
exchange. Every criterion set must hold.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Callable

from kafkasniff.model import Exchange, ExchangeStatus

#: exchange statuses a filter can select, in display order
STATUSES = tuple(s.value for s in ExchangeStatus)


def pattern_matcher(pattern: str) -> Callable[[str | None], bool]:
    """A predicate over text values (``None`` never matches) for one pattern (see the
    module docstring)."""
    if pattern.startswith("="):           # exact value (jumps from other views)
        exact = pattern[1:]
        return lambda s: s is not None and s == exact
    p = pattern.lower()
    if any(ch in p for ch in "*?["):
        return lambda s: s is not None and fnmatch.fnmatchcase(s.lower(), p)
    return lambda s: s is not None and p in s.lower()


def api_names_and_keys(apis: tuple[str, ...]) -> tuple[set[str], set[int]]:
    """``(lower-case API names, api_keys)`` of an ``apis`` criterion: integers (``"0"``,
    ``"-2"``) are api_keys, anything else a name."""
    keys = set()
    for a in apis:
        try:
            keys.add(int(a))
        except ValueError:
            pass
    return {a.lower() for a in apis}, keys


@dataclass(frozen=True)
class Filter:
    """Which exchanges to show (see the module docstring for patterns).

    Attributes:
        apis: API names or api_keys (as text) to keep; empty: all.
        client: pattern over the client_id or the client endpoint.
        broker: pattern over the broker endpoint.
        topic: pattern over any topic of the exchange.
        status: one of :data:`STATUSES`, or ``""``.
        errors_only: only exchanges with a Kafka error code.
        issues_only: only exchanges with an issue.
        min_latency_ms: only paired exchanges at least this slow (milliseconds).
        long_poll: ``True``: only long-polls (exchanges the broker held by design,
            :mod:`kafkasniff.content.waits`); ``False``: no long-polls; ``None``: either.
    """

    apis: tuple[str, ...] = ()
    client: str = ""
    broker: str = ""
    topic: str = ""
    status: str = ""
    errors_only: bool = False
    issues_only: bool = False
    min_latency_ms: float | None = None
    long_poll: bool | None = None

    @property
    def active(self) -> bool:
        """Some criterion is set (the view may hide exchanges)."""
        return self != Filter()

    def describe(self) -> str:
        """A short text of the active criteria (``""`` when none)."""
        parts = []
        if self.apis:
            parts.append("api=" + ",".join(self.apis))
        for k in ("client", "broker", "topic", "status"):
            v = getattr(self, k)
            if v:
                parts.append(f"{k}={v}")
        if self.errors_only:
            parts.append("errors")
        if self.issues_only:
            parts.append("issues")
        if self.min_latency_ms is not None:
            parts.append(f"latency>={self.min_latency_ms:g}ms")
        if self.long_poll is not None:
            parts.append("long-polls" if self.long_poll else "no-long-polls")
        return " ".join(parts)

    def predicate(self) -> Callable[[Exchange], bool] | None:
        """A predicate over :class:`~kafkasniff.model.Exchange` values, ``None`` when no
        criterion is set (everything passes)."""
        checks: list[Callable[[Exchange], bool]] = []
        if self.apis:
            names, keys = api_names_and_keys(self.apis)
            checks.append(lambda ex: ex.api_name.lower() in names or ex.api_key in keys)
        if self.client:
            client = pattern_matcher(self.client)
            checks.append(lambda ex: client(ex.client_id) or client(ex.client))
        if self.broker:
            broker = pattern_matcher(self.broker)
            checks.append(lambda ex: broker(ex.broker))
        if self.topic:
            topic = pattern_matcher(self.topic)
            checks.append(lambda ex: any(topic(t) for t in ex.topics))
        if self.status:
            status = self.status
            checks.append(lambda ex: ex.status == status)
        if self.errors_only:
            checks.append(lambda ex: bool(ex.errors))
        if self.issues_only:
            checks.append(lambda ex: bool(ex.issues))
        if self.min_latency_ms is not None:
            ns = int(self.min_latency_ms * 1e6)
            checks.append(lambda ex: ex.latency_ns is not None and ex.latency_ns >= ns)
        if self.long_poll is not None:
            lp = self.long_poll
            checks.append(lambda ex: bool(ex.long_poll) is lp)
        if not checks:
            return None
        if len(checks) == 1:
            return checks[0]
        return lambda ex: all(c(ex) for c in checks)
