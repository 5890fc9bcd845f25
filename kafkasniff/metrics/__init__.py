"""Prometheus / OpenMetrics metrics of Kafka exchanges (docs/metrics.md).

* :mod:`kafkasniff.metrics.families` - every metric family, its labels, units, buckets and
  cardinality caps, in one place: :class:`~kafkasniff.metrics.families.ExchangeMetrics`
  counts exchanges (mergeable: live decoders send deltas, ``stats --jobs N`` decoders send
  their totals), :func:`~kafkasniff.metrics.families.metric_families` turns it into
  ``prometheus_client`` metric families, :func:`~kafkasniff.metrics.families.openmetrics_text`
  writes them as OpenMetrics text (``kafkasniff stats --openmetrics FILE``);
* :mod:`kafkasniff.metrics.server` - the HTTP endpoint of ``kafkasniff live --metrics-port``.

The counting side imports nothing but :mod:`kafkasniff.model`; ``prometheus_client`` is
imported only where families are exposed.
"""
