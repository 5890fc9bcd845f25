"""The capture scenarios of ``make_captures.py``, one module per capture (``NAME.py`` writes
``NAME.pcap`` and ``NAME.truth.json``), found by :func:`harness.registry.discover`.

Each module defines ``SCENARIO = "NAME"`` (its own module name) and
``run(out_dir: Path) -> ScenarioRun``, optionally ``check(name, out_dir) -> dict``; modules
whose name starts with ``_`` are helpers. See captures/README.md, "Adding a scenario".
"""
