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

What a user types (``read``'s and ``live``'s options, the TUI's filter dialog) is read by the
same functions, :func:`parse_filter` and the ``parse_*`` / :func:`check_pattern` it is made
of: API lists are comma separated (``Produce,Fetch``, repeatable on the command line); a
criterion that could match nothing (an unknown API name, a glob with a ``[`` never closed, a
minimum latency that is not a number of milliseconds) raises :class:`FilterError` naming the
valid choices, instead of a filter that silently shows nothing.
"""

from __future__ import annotations

import difflib
import fnmatch
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable

from kafkasniff.errors import KafkaSniffError
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


class FilterError(KafkaSniffError):
    """A filter criterion as typed cannot be used (it could match nothing): an unknown API
    name, an invalid pattern, a minimum latency that is not a number. The message names the
    criterion and the valid choices."""


def split_list(values: str | Iterable[str] | None) -> tuple[str, ...]:
    """The items of comma lists: one text (``"Produce, Fetch"``) or several
    (``("Produce", "Fetch,3")``, a repeated option), stripped, empty ones left out."""
    if values is None:
        return ()
    if isinstance(values, str):
        values = (values,)
    return tuple(item.strip() for v in values for item in v.split(",") if item.strip())


#: API names outside the definitions that exchanges carry: raw SASL tokens (KIP-43), a
#: response whose API could not be told
EXTRA_API_NAMES = ("SaslToken", "Unknown")
#: ``Unknown(99)`` (an api_key the definitions do not name), ``UNKNOWN(9) (0.7)``
_UNKNOWN_NAME = re.compile(r"unknown\(-?\d+\)( \(0\.7\))?", re.IGNORECASE)


@lru_cache(maxsize=8)
def known_api_names(definitions_dir: str | None = None) -> tuple[str, ...]:
    """Every API name an exchange can carry: the definitions' (default: the installed ones,
    in api_key order), :data:`EXTRA_API_NAMES`, and Kafka 0.7's request types
    (``FETCH (0.7)``)."""
    from kafkasniff.protocol.legacy07 import REQUEST_TYPES
    from kafkasniff.protocol.schema import Definitions

    defs = Definitions(definitions_dir)
    names = [info.name for _, info in sorted(defs.apis.items())]
    return (*names, *EXTRA_API_NAMES, *(f"{n} (0.7)" for n in REQUEST_TYPES.values()),
            "Unknown (0.7)")


def parse_apis(values: str | Iterable[str] | None,
               names: Iterable[str] | None = None) -> tuple[str, ...]:
    """The ``apis`` criterion of comma lists (:func:`split_list`): each item an API name of
    ``names`` (default :func:`known_api_names`; any case) or an api_key number.

    Raises:
        FilterError: an item is neither, e.g. ``unknown API 'Prodce' (did you mean Produce?
            valid: Produce, Fetch, ..., or an api_key number)``.
    """
    items = split_list(values)
    if not items:
        return ()
    known = tuple(names) if names is not None else known_api_names()
    by_lower = {n.lower(): n for n in known}
    for item in items:
        if item.lower() in by_lower or _UNKNOWN_NAME.fullmatch(item):
            continue
        try:
            int(item)
            continue
        except ValueError:
            pass
        close = difflib.get_close_matches(item.lower(), list(by_lower), n=1, cutoff=0.6)
        hint = f"did you mean {by_lower[close[0]]}? " if close else ""
        raise FilterError(f"unknown API {item!r} ({hint}valid: {', '.join(known)}, "
                          f"or an api_key number)")
    return items


def _unclosed_bracket(pattern: str) -> bool:
    """A ``[`` that :mod:`fnmatch` would take as a literal character because no ``]`` closes
    it (the user meant a set, and the pattern would match nothing they meant)."""
    i, n = 0, len(pattern)
    while i < n:
        if pattern[i] == "[":
            j = i + 1
            if j < n and pattern[j] == "!":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                return True
            i = j
        i += 1
    return False


def check_pattern(pattern: str, what: str = "pattern") -> str:
    """``pattern`` (see the module docstring) when it is valid; ``what`` names the criterion
    in the error (``--client``, ``client``).

    Raises:
        FilterError: a glob whose ``[`` is never closed (``[abc``).
    """
    if pattern and not pattern.startswith("=") and _unclosed_bracket(pattern):
        raise FilterError(f"{what}: invalid pattern {pattern!r}: a '[' without its ']' "
                          f"(a set is [abc]; a literal '[' is [[]; =text matches exactly)")
    return pattern


def parse_min_latency(text: str | float | None,
                      what: str = "minimum latency") -> float | None:
    """A minimum latency in milliseconds (a finite number >= 0; ``None`` for an empty text:
    no minimum).

    Raises:
        FilterError: anything else (``12.5-``, ``-1``, ``nan``).
    """
    if text is None:
        return None
    if isinstance(text, (int, float)):
        value, shown = float(text), text
    else:
        shown = text.strip()
        if not shown:
            return None
        try:
            value = float(shown)
        except ValueError:
            value = math.nan
    if not math.isfinite(value) or value < 0:
        raise FilterError(f"{what}: not a minimum latency in milliseconds: {shown!r} "
                          f"(a number >= 0, e.g. 12.5)")
    return value


#: how the criteria are named in errors (the TUI's dialog); the command line passes its own
#: option names
LABELS = {"client": "client", "broker": "broker", "topic": "topic",
          "min_latency": "minimum latency"}


def parse_filter(*, apis: str | Iterable[str] | None = (), client: str | None = "",
                 broker: str | None = "", topic: str | None = "", status: str = "",
                 errors_only: bool = False, issues_only: bool = False,
                 min_latency: str | float | None = None, long_poll: bool | None = None,
                 api_names: Iterable[str] | None = None,
                 labels: dict[str, str] | None = None) -> "Filter":
    """A :class:`Filter` of criteria as typed (options, dialog fields): API comma lists
    (:func:`parse_apis`, names of ``api_names``), patterns (:func:`check_pattern`, stripped),
    a minimum latency (:func:`parse_min_latency`); ``labels`` names the criteria in errors
    (default :data:`LABELS`).

    Raises:
        FilterError: a criterion that could match nothing (its message says which and why).
    """
    lab = {**LABELS, **(labels or {})}
    return Filter(apis=parse_apis(apis, api_names),
                  client=check_pattern((client or "").strip(), lab["client"]),
                  broker=check_pattern((broker or "").strip(), lab["broker"]),
                  topic=check_pattern((topic or "").strip(), lab["topic"]),
                  status=status, errors_only=errors_only, issues_only=issues_only,
                  min_latency_ms=parse_min_latency(min_latency, lab["min_latency"]),
                  long_poll=long_poll)


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
