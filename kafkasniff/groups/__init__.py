"""Consumer groups seen on the wire: members, rebalances, assignments, commits and lag.

- :mod:`kafkasniff.groups.model`: the values (frozen dataclasses with ``to_dict()``), what the
  ``groups`` command, the Parquet tables and views consume.
- :mod:`kafkasniff.groups.analysis`: :class:`~kafkasniff.groups.analysis.GroupAnalyzer`, fed
  the pipeline's exchanges, returns a :class:`~kafkasniff.groups.model.GroupsReport`.
- :mod:`kafkasniff.groups.report`: the text report of ``kafkasniff groups``.

See ``docs/groups.md``.
"""

from __future__ import annotations

from kafkasniff.groups.analysis import GroupAnalyzer, analyze_groups
from kafkasniff.groups.model import (
    Commit,
    ExchangeRef,
    Group,
    GroupsReport,
    Lag,
    Member,
    Rebalance,
)

__all__ = ["Commit", "ExchangeRef", "Group", "GroupAnalyzer", "GroupsReport", "Lag", "Member",
           "Rebalance", "analyze_groups"]
