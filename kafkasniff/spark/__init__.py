"""The Spark pipeline: decode captures in parallel and analyze the tables with Spark SQL.

- :mod:`kafkasniff.spark.session`: ``get_spark()`` / ``spark_session()``: local mode,
  ``--master spark://...``, Spark Connect ``--remote sc://...``; clear errors when Java,
  PySpark or the Connect client packages are missing.
- :mod:`kafkasniff.spark.split`: split a large capture by TCP connection into pcapng shards,
  streaming (no PySpark needed).
- :mod:`kafkasniff.spark.decode`: ``spark_decode()``: split and decode in Spark tasks into
  the tables of ``kafkasniff export`` (same rows), verified by reading them back.
- :mod:`kafkasniff.spark.report`: views over the tables and the reports of ``spark report``.
- :mod:`kafkasniff.spark.watch`: the Structured Streaming query of ``spark watch``.

The ``kafkasniff spark`` click group is :mod:`kafkasniff.cli.spark`. Importing this package
(or that command module) does not import PySpark; the
functions that need it import it when called. See ``docs/spark.md``.
"""
