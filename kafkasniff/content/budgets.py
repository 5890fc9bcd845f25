"""Budgets: how much work and memory any input may cost, and what happens when it is spent.

Crafted input can ask for far more work than its size: a 2 MB capture once caused 60 GB of
decompression, a 6.7 KB one a million control records. Each budget below bounds one such
cost per batch, per frame or per capture; reaching it is **one** issue of kind
``budget_exhausted`` naming the budget and what was skipped (never one issue per item), and
what is skipped is still summarised from the headers that were read (batch counts, offsets,
timestamps) and counted (:attr:`BudgetMeter.skipped`).

=================================  =====================  ==========================================
budget                             default                what it bounds
=================================  =====================  ==========================================
``--max-uncompressed-bytes``       64 MiB                 one batch's decompressed size (with its
                                                          nested magic 0/1 wrappers); beyond it the
                                                          batch is a ``decompression_limit`` issue
``frame_uncompressed_bytes``       256 MiB                decompressed bytes of one frame's batches
``capture_uncompressed_bytes``     1 GiB, or 100 x the    decompressed bytes of the whole capture
                                   record bytes seen      (``capture_uncompressed_ratio``: real
                                   when that is more      codecs stay far below 100x; bombs do not)
``frame_records``                  1,000,000              records decoded per frame (``--records``)
``capture_records``                unbounded (0)          records decoded per capture; records are
                                                          streamed, so memory does not grow with it
``frame_issues``                   100                    issues attached to one exchange's frame
``capture_issues``                 10,000 per kind        issues listed per kind; the rest are
                                                          counted (``stats``) but not listed
``pending_bytes``                  256 MiB                bytes of requests waiting for a response,
                                                          all connections together
``group_assignment_partitions``    200,000                partitions of consumer-group assignments
                                                          kept per group API exchange and per
                                                          rebalance (``groups``, the export's
                                                          group tables); the rest are counted
``group_members``                  50,000                 members tracked per consumer group
=================================  =====================  ==========================================

Every budget is set with ``--budget NAME=VALUE`` (repeatable; ``K``/``M``/``G`` suffixes,
binary; ``0`` = unbounded) on the commands that decode traffic.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, fields, replace

from kafkasniff.errors import KafkaSniffError

__all__ = ["Budgets", "BudgetMeter", "budget_names", "parse_budgets", "UNBOUNDED"]

#: what a budget of 0 (unbounded) means in arithmetic
UNBOUNDED = 1 << 62

_KIB = 1024
_UNITS = {"": 1, "K": _KIB, "M": _KIB ** 2, "G": _KIB ** 3, "T": _KIB ** 4}


@dataclass(frozen=True, slots=True)
class Budgets:
    """The limits (see the module docstring for each; 0 = unbounded). Bytes are bytes."""

    frame_uncompressed_bytes: int = 256 * _KIB ** 2
    capture_uncompressed_bytes: int = _KIB ** 3
    capture_uncompressed_ratio: int = 100
    frame_records: int = 1_000_000
    capture_records: int = 0
    frame_issues: int = 100
    capture_issues: int = 10_000
    pending_bytes: int = 256 * _KIB ** 2
    group_assignment_partitions: int = 200_000
    group_members: int = 50_000

    def limit(self, name: str) -> int:
        """The budget ``name`` with 0 read as :data:`UNBOUNDED`."""
        v = getattr(self, name)
        return v if v > 0 else UNBOUNDED


def budget_names() -> tuple[str, ...]:
    """The names ``--budget NAME=VALUE`` takes, in the order of :class:`Budgets`."""
    return tuple(f.name for f in fields(Budgets))


def parse_budgets(specs: tuple[str, ...] | list[str], base: Budgets | None = None) -> Budgets:
    """``["frame_records=10000", "pending_bytes=64M"]`` -> :class:`Budgets`.

    Raises :class:`kafkasniff.errors.KafkaSniffError` for an unknown name or a bad value.
    """
    names = set(budget_names())
    changes: dict[str, int] = {}
    for spec in specs:
        name, sep, text = spec.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or name not in names:
            raise KafkaSniffError(f"--budget {spec!r}: expected NAME=VALUE with NAME one of "
                             f"{', '.join(sorted(names))}")
        text = text.strip().upper().removesuffix("IB").removesuffix("B")
        unit = text[-1:] if text[-1:] in _UNITS and text[-1:] else ""
        try:
            value = int(text[:-1] if unit else text) * _UNITS[unit]
        except ValueError:
            raise KafkaSniffError(f"--budget {spec!r}: {text!r} is not a whole number "
                             f"(K, M, G suffixes allowed)") from None
        if value < 0:
            raise KafkaSniffError(f"--budget {spec!r}: must be 0 (unbounded) or more")
        changes[name] = value
    return replace(base or Budgets(), **changes)


class BudgetMeter:
    """What one capture has spent of its :class:`Budgets` (shared by every connection of a
    pipeline).

    Attributes:
        budgets: the limits.
        record_bytes: bytes of record data seen (the base of the capture's ratio budget).
        uncompressed_bytes: bytes decompressed so far.
        records: records decoded so far.
        skipped: per budget name, the items it skipped (batches not decompressed or not
            decoded, issues not listed, requests given up).
        reported: budgets whose capture-wide issue was already given.
    """

    __slots__ = ("budgets", "record_bytes", "uncompressed_bytes", "records", "skipped",
                 "reported")

    def __init__(self, budgets: Budgets | None = None) -> None:
        self.budgets = budgets or Budgets()
        self.record_bytes = 0
        self.uncompressed_bytes = 0
        self.records = 0
        self.skipped: Counter = Counter()
        self.reported: set[str] = set()

    def capture_uncompressed_left(self) -> int:
        """Bytes the capture may still decompress (its floor, or its ratio of the record
        bytes seen, whichever is more)."""
        b = self.budgets
        if b.capture_uncompressed_bytes <= 0:
            return UNBOUNDED
        allowed = max(b.capture_uncompressed_bytes,
                      b.capture_uncompressed_ratio * self.record_bytes)
        return max(0, allowed - self.uncompressed_bytes)

    def capture_records_left(self) -> int:
        if self.budgets.capture_records <= 0:
            return UNBOUNDED
        return max(0, self.budgets.capture_records - self.records)

    def first_report(self, name: str) -> bool:
        """True the first time a capture-wide budget ``name`` is reported."""
        if name in self.reported:
            return False
        self.reported.add(name)
        return True

    def merge(self, other: "BudgetMeter") -> None:
        """Add what ``other`` spent and skipped (another decoder's share of the capture)."""
        self.record_bytes += other.record_bytes
        self.uncompressed_bytes += other.uncompressed_bytes
        self.records += other.records
        self.skipped.update(other.skipped)
        self.reported |= other.reported

    def to_dict(self) -> dict:
        """Spent and skipped, JSON-ready (``stats --json`` ``pipeline.budgets``)."""
        return {"record_bytes": self.record_bytes,
                "uncompressed_bytes": self.uncompressed_bytes, "records": self.records,
                "skipped": dict(self.skipped)}

