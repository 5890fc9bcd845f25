"""Build script of kafkasniff: the metadata is in pyproject.toml; this file adds what a
declarative configuration cannot say (docs/compiled.md):

* the compiled hot path: the modules in ``COMPILED`` are compiled by Cython from their ``.py``
  source (plain Python; the ``.pxd`` file beside each gives the C types) into extension
  modules. Every failure (no Cython, no C compiler, a compile error) is a warning: the
  install succeeds and the module runs as Python, with the same output.
  ``KAFKASNIFF_NO_COMPILE=1`` skips compiling; ``KAFKASNIFF_PURE_PYTHON=1`` at run time
  ignores extension modules that are installed.
* the wheel's ``kafkasniff/dissectors``: a copy of the repository's ``dissectors/`` (an
  editable install reads ``dissectors/`` in place, and byte-compiles the decoders generated
  ahead of time, ``kafkasniff/protocol/prebuilt``).
"""

from __future__ import annotations

import os
import shutil
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

#: modules compiled to extension modules, each with a ``.pxd`` beside its ``.py``
COMPILED = [
    "kafkasniff.capture.flows",
    "kafkasniff.capture.packet",
    "kafkasniff.capture.pcapfile",
    "kafkasniff.tcp.reassembly",
    "kafkasniff.protocol.framing",
    "kafkasniff.protocol.recordloop",
    "kafkasniff.protocol.walk",
    "kafkasniff.protocol.plandecode",
    "kafkasniff.export.rows",
    "kafkasniff.feeding",
    # compiled untyped (no .pxd): each, compiled alone, ran read or export with fewer
    # instructions than as Python (docs/compiled.md, "Compiled untyped, module by module")
    "kafkasniff.protocol.headers",
    "kafkasniff.protocol.decoder",
    "kafkasniff.protocol.records",
    "kafkasniff.content.records",
    "kafkasniff.content.summary",
    "kafkasniff.content.waits",
    "kafkasniff.content.redaction",
    "kafkasniff.pairing.base",
    "kafkasniff.output.render",
    "kafkasniff.export.writer",
    "kafkasniff.groups.analysis",
    "kafkasniff.tcp.types",
    "kafkasniff.slotfill",
    "kafkasniff.parallel.worker",
    "kafkasniff.parallel.engine",
]

#: Cython directives: Python semantics everywhere except where a .pxd declares C types
#: (annotations are documentation only; integers stay Python integers unless declared)
DIRECTIVES = {
    "language_level": 3,
    "annotation_typing": False,
    "binding": True,
    "embedsignature": True,
    "always_allow_keywords": True,
}

HERE = os.path.dirname(os.path.abspath(__file__))


def _warn(message: str) -> None:
    print(f"kafkasniff build: WARNING: {message}; the pure-Python modules will be used",
          file=sys.stderr)


def _extensions() -> list[Extension]:
    if os.environ.get("KAFKASNIFF_NO_COMPILE", "").strip() not in ("", "0"):
        print("kafkasniff build: KAFKASNIFF_NO_COMPILE is set: nothing compiled", file=sys.stderr)
        return []
    try:
        from Cython.Build import cythonize
    except ImportError as exc:
        _warn(f"Cython is not available ({exc})")
        return []
    exts = [Extension(name, [os.path.join(*name.split(".")) + ".py"], optional=True)
            for name in COMPILED]
    try:
        return cythonize(exts, compiler_directives=DIRECTIVES, quiet=True,
                         nthreads=min(4, os.cpu_count() or 1))
    except Exception as exc:  # noqa: BLE001 - any failure means: stay pure Python
        _warn(f"Cython failed ({exc})")
        return []


class OptionalBuildExt(build_ext):
    """``build_ext`` whose every failure (no compiler, a compile error) is a warning."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001
            _warn(f"building the extension modules failed ({exc})")

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            _warn(f"compiling {ext.name} failed ({exc})")


class BuildPyWithDissectors(build_py):
    """``build_py`` that also copies ``dissectors/`` to ``kafkasniff/dissectors``."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            # the package finds dissectors/ next to it (kafkasniff/protocol/schema.py); the
            # decoders generated ahead of time get their byte code now, which Python would
            # otherwise not write where PYTHONDONTWRITEBYTECODE is set (a wheel's installer
            # compiles every module anyway)
            import compileall

            compileall.compile_dir(os.path.join(HERE, "kafkasniff", "protocol", "prebuilt"),
                                   quiet=1)
            return
        src = os.path.join(HERE, "dissectors")
        dst = os.path.join(self.build_lib, "kafkasniff", "dissectors")
        if os.path.isdir(src):
            shutil.rmtree(dst, ignore_errors=True)
            shutil.copytree(src, dst)


setup(
    ext_modules=_extensions(),
    cmdclass={"build_ext": OptionalBuildExt, "build_py": BuildPyWithDissectors},
)
