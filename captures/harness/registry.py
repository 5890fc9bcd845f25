"""Finds the scenarios: one module per scenario in ``captures/scenarios/``, no list to keep.

A scenario module ``scenarios/NAME.py`` defines

* ``SCENARIO = "NAME"`` (the capture's name: ``NAME.pcap``, ``NAME.truth.json``; it must
  equal the module's name, so a scenario is always found in the file of its name);
* ``run(out_dir: Path) -> ScenarioRun``: runs the scenario, writing ``out_dir/NAME.pcap``,
  and returns the run whose ``finish()`` writes ``out_dir/NAME.truth.json``;
* optionally ``check(name: str, out_dir: Path) -> dict``: its cross-check of the written
  files (default :func:`harness.checks.check_capture`, the tshark check of mock-cluster
  captures), returning a JSON-able summary and raising SystemExit on a problem.

Modules whose name starts with ``_`` are helpers, not scenarios. Scenarios are listed and
run in module-name order. Client libraries are imported inside ``run()``, so listing the
scenarios needs none of them.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.checks import check_capture
from harness.run import ScenarioRun


@dataclass(frozen=True)
class Scenario:
    """One registered scenario."""

    name: str
    #: the module defining it (``scenarios.NAME``)
    module: str
    run: Callable[[Path], ScenarioRun]
    check: Callable[[str, Path], dict[str, Any]]


def discover(package: str = "scenarios") -> dict[str, Scenario]:
    """Every scenario module of ``package``, by name, in module-name order.

    SystemExit when a module lacks ``SCENARIO`` or ``run``, or names itself differently.
    """
    pkg = importlib.import_module(package)
    found: dict[str, Scenario] = {}
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("_") or info.ispkg:
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        name = getattr(module, "SCENARIO", None)
        run = getattr(module, "run", None)
        if name != info.name or not callable(run):
            raise SystemExit(f"{module.__file__}: a scenario module defines "
                             f"SCENARIO = {info.name!r} and run(out_dir)")
        found[name] = Scenario(name=name, module=module.__name__, run=run,
                               check=getattr(module, "check", check_capture))
    return found
