"""Exports: decoded captures as Parquet (or JSON Lines) tables for Apache Spark and friends.

- :mod:`kafkasniff.export.schema`: the explicit, versioned Arrow schemas of every table
  (``SCHEMAS``, ``SCHEMA_VERSION``), their documentation (``schema_markdown``) and Spark DDL.
- :mod:`kafkasniff.export.rows`: pure functions turning exchanges, issues, connection
  summaries and topic names into rows (dicts keyed by column name).
- :mod:`kafkasniff.export.writer`: streaming writers with bounded memory
  (:class:`~kafkasniff.export.writer.TableWriter`, :class:`~kafkasniff.export.writer.ExportSink`,
  :func:`~kafkasniff.export.writer.export_captures`).
- :mod:`kafkasniff.export.paths`: where the table files go (names, partitions), shared with
  ``spark decode``.

The ``kafkasniff export`` command is :mod:`kafkasniff.cli.export`.
The table layout and every column are documented in ``docs/parquet-schema.md`` (generated
from :mod:`kafkasniff.export.schema`). Importing this package imports nothing heavy; pyarrow
is loaded by the modules that need it.
"""

from __future__ import annotations

__all__ = ["SCHEMAS", "SCHEMA_VERSION", "TABLES", "export_captures"]


def __getattr__(name: str):
    if name in ("SCHEMAS", "SCHEMA_VERSION", "TABLES"):
        from kafkasniff.export import schema

        return getattr(schema, name)
    if name == "export_captures":
        from kafkasniff.export.writer import export_captures

        return export_captures
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
