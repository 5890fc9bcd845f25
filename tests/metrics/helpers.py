"""What the metrics tests share: parsing an exposition (strict OpenMetrics parser of
``prometheus_client``) and summing its series by label."""

from __future__ import annotations

from collections import defaultdict

from prometheus_client.openmetrics.parser import text_string_to_metric_families


def parse_openmetrics(text: str) -> list[tuple[str, dict, float]]:
    """Every sample of an OpenMetrics exposition as ``(name, labels, value)``; raises
    ``ValueError`` when the text is not valid OpenMetrics (``# EOF`` included)."""
    out = []
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.append((s.name, dict(s.labels), s.value))
    return out


def sum_by(samples, name: str, label: str | None = None, **where) -> dict | float:
    """Sum of the samples called ``name`` whose labels match ``where``, by the value of
    ``label`` (a dict), or altogether (a number) when ``label`` is None."""
    by: dict = defaultdict(float)
    total = 0.0
    for n, labels, v in samples:
        if n != name or any(labels.get(k, "") != w for k, w in where.items()):
            continue
        total += v
        if label is not None:
            by[labels.get(label, "")] += v
    return dict(by) if label is not None else total
