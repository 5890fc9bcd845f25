"""kafkasniff: a Kafka wire-traffic sniffer and protocol analyzer.

Packets (pcap, pcapng, live) -> TCP reassembly -> Kafka framing -> header decode and pairing
by correlation_id -> body decode -> sinks (console, stats, JSON Lines, Parquet, TUI).
See ``docs/architecture.md``.

The hot-path modules may be compiled to native extension modules at install time
(``docs/compiled.md``). Setting the environment variable ``KAFKASNIFF_PURE_PYTHON=1`` before
the package is imported makes every ``kafkasniff`` module load from its ``.py`` source
instead; :func:`compiled_modules` tells which modules are running compiled.
"""

from __future__ import annotations

import os
import sys
from importlib.machinery import (
    EXTENSION_SUFFIXES,
    SOURCE_SUFFIXES,
    ExtensionFileLoader,
    FileFinder,
    SourceFileLoader,
)

__version__ = "0.1.0"

__all__ = ["PURE_PYTHON", "compiled_modules", "compiled_available"]

#: True when ``KAFKASNIFF_PURE_PYTHON`` asked for the ``.py`` sources (read once, at import).
PURE_PYTHON = os.environ.get("KAFKASNIFF_PURE_PYTHON", "").strip().lower() not in (
    "", "0", "false", "no")


class _SourceFinder:
    """A meta path finder for ``kafkasniff.*`` submodules that has a say only when a module
    must not come from its compiled extension module:

    - under ``KAFKASNIFF_PURE_PYTHON``, every module loads from its ``.py`` file;
    - otherwise, in a source tree (an editable install: the ``.pxd`` file is next to the
      module; wheels carry none), a module whose ``.py`` or ``.pxd`` file (or the shared
      ``slotstore.pxd``) is newer than its extension module (edited or checked out since
      the last build: the compiled code is stale) loads from the ``.py`` file, with a
      warning to rebuild (``pip install -e .``).
      Everything else is left to the normal import machinery.
    """

    _loaders = [(SourceFileLoader, SOURCE_SUFFIXES)]
    pure = False
    #: the ``.pxd`` file of inline C that compiled modules share (cimported, never imported)
    shared_pxd = os.path.join(os.path.dirname(os.path.abspath(__file__)), "slotstore.pxd")

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):  # noqa: ARG003 - finder protocol
        if not fullname.startswith("kafkasniff.") or path is None:
            return None
        if not cls.pure and not cls._stale(fullname, path):
            return None
        for entry in path:
            spec = FileFinder(entry, *cls._loaders).find_spec(fullname)
            if spec is not None and spec.origin is not None:
                return spec
        return None

    @classmethod
    def _stale(cls, fullname, path) -> bool:
        leaf = fullname.rpartition(".")[2]
        for entry in path:
            base = os.path.join(entry, leaf)
            for suffix in EXTENSION_SUFFIXES:
                try:
                    compiled = os.stat(base + suffix).st_mtime
                except OSError:
                    continue
                try:
                    source = max(os.stat(base + ".py").st_mtime, os.stat(base + ".pxd").st_mtime)
                except OSError:
                    return False   # not a source tree (or no source at all)
                try:    # the inline C every compiled module may cimport
                    source = max(source, os.stat(cls.shared_pxd).st_mtime)
                except OSError:
                    pass
                if source <= compiled:
                    return False
                import warnings

                warnings.warn(f"{fullname}: {base}.py (or .pxd) is newer than its compiled "
                              f"extension module: running the .py file (rebuild with "
                              f"`pip install -e .`)", RuntimeWarning, stacklevel=2)
                return True
        return False


if not any(getattr(f, "__qualname__", None) == "_SourceFinder" for f in sys.meta_path):
    _SourceFinder.pure = PURE_PYTHON
    sys.meta_path.insert(0, _SourceFinder)


def compiled_modules() -> list[str]:
    """Names of the ``kafkasniff`` modules imported so far that run as compiled extension
    modules (empty under ``KAFKASNIFF_PURE_PYTHON=1`` or when nothing was compiled)."""
    return sorted(name for name, mod in list(sys.modules.items())
                  if name.startswith(__name__ + ".") and mod is not None
                  and isinstance(getattr(getattr(mod, "__spec__", None), "loader", None),
                                 ExtensionFileLoader))


def compiled_available() -> list[str]:
    """Names of the ``kafkasniff`` modules that have a compiled extension module installed
    next to their source (whether or not it is used: see :data:`PURE_PYTHON`)."""
    root = os.path.dirname(os.path.abspath(__file__))
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        rel = os.path.relpath(dirpath, root)
        prefix = __name__ if rel == "." else __name__ + "." + rel.replace(os.sep, ".")
        for fn in filenames:
            for suffix in EXTENSION_SUFFIXES:
                if fn.endswith(suffix) and os.path.exists(
                        os.path.join(dirpath, fn[:-len(suffix)] + ".py")):
                    found.append(prefix + "." + fn[:-len(suffix)])
                    break
    return sorted(found)
