"""The app's views, one module per pane (a pane is the content of one tab of
:class:`~kafkasniff.tui.app.KafkaSniffApp`):

- :mod:`~kafkasniff.tui.panes.overview`: :class:`OverviewPane` (key 1);
- :mod:`~kafkasniff.tui.panes.exchanges`: :class:`ExchangesPane` (key 2);
- :mod:`~kafkasniff.tui.panes.tables`: :class:`TablePane` (keys 3-5: connections, clients,
  topics) and the helpers every snapshot table shares;
- :mod:`~kafkasniff.tui.panes.issues`: :class:`IssuesPane` (key 6);
- :mod:`~kafkasniff.tui.panes.groups`: :class:`GroupsPane` (key 7) and the drill-down
  :class:`GroupScreen`.

Panes reach the app's store, source and navigation through ``self.app`` and never import
:mod:`kafkasniff.tui.app`. Their styles are in ``kafkasniff/tui/app.tcss``.
"""

from kafkasniff.tui.panes.exchanges import ExchangesPane
from kafkasniff.tui.panes.groups import GroupScreen, GroupsPane
from kafkasniff.tui.panes.issues import IssuesPane
from kafkasniff.tui.panes.overview import OverviewPane
from kafkasniff.tui.panes.tables import TablePane

__all__ = ["ExchangesPane", "GroupScreen", "GroupsPane", "IssuesPane", "OverviewPane",
           "TablePane"]
