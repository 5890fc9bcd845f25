"""The terminal UI (Textual): ``kafkasniff tui FILE...``.

- :mod:`kafkasniff.tui.source`: the data interface the app consumes (:class:`DataSource`),
  and :class:`FileSource` (capture files decoded in a worker thread);
- :mod:`kafkasniff.tui.store`: compact columnar exchange summaries, filters, sorting, search;
- :mod:`kafkasniff.tui.aggregates`: dashboard numbers (snapshots made in the source thread);
- :mod:`kafkasniff.tui.detail`: full decode of one exchange on demand, field byte spans;
- :mod:`kafkasniff.tui.widgets`: the virtual table and the hex view;
- :mod:`kafkasniff.tui.app`, :mod:`kafkasniff.tui.screens`: the app and its screens;
- :mod:`kafkasniff.tui.panes`: the app's views, one module per pane (styles of the app
  and its panes: ``app.tcss``);

The command is :mod:`kafkasniff.cli.tui`. Only :mod:`app`, :mod:`panes`, :mod:`screens`,
:mod:`widgets` and :mod:`models` import Textual; the data side (source, store, aggregates,
detail) does not.
"""
