"""A compiled module's ``.py`` file loaded as plain Python beside it (docs/compiled.md), so
that a test runs both and compares them in one process."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType


def as_python(module: ModuleType) -> ModuleType:
    """``module`` as plain Python: its ``.py`` file executed as a new module named
    ``<name>_as_python``; ``module`` itself when it already runs from its ``.py`` file (not
    compiled, or ``KAFKASNIFF_PURE_PYTHON=1``)."""
    path = Path(module.__file__)
    if path.suffix == ".py":
        return module
    name = module.__name__.rsplit(".", 1)[-1]
    spec = importlib.util.spec_from_file_location(f"{name}_as_python", path.parent / f"{name}.py")
    source = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(source)
    return source
