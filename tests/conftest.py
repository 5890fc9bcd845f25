"""Shared fixtures: decoded captures, cached per test session."""

from __future__ import annotations

import gc
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kafkasniff.model import DecodeIssue, Exchange
from kafkasniff.pipeline import Pipeline, PipelineOptions, analyze

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "captures"


def pytest_configure(config) -> None:
    """Byte-compile the package before the tests start the ``kafkasniff`` command (several
    hundred child processes). Where ``PYTHONDONTWRITEBYTECODE`` is set (this project's
    machines set it) no ``__pycache__`` is ever written, so every child compiled every
    module it imported again: 0.30 s per start of ``kafkasniff stats``, 0.19 s with the
    byte code written once here (only modules whose source changed are compiled again)."""
    import compileall

    compileall.compile_dir(str(ROOT / "kafkasniff"), quiet=2)


def public_captures_dir() -> Path | None:
    """``../shared/captures-public`` when present (third-party captures, not committed)."""
    for cand in (ROOT.parent / "shared" / "captures-public", Path("/work/shared/captures-public")):
        if cand.is_dir():
            return cand
    return None


@dataclass
class Decoded:
    """Everything the pipeline produced for one capture."""

    path: Path
    exchanges: list[Exchange] = field(default_factory=list)
    issues: list[DecodeIssue] = field(default_factory=list)
    pipeline: Pipeline | None = None

    def all_issues(self) -> list[tuple[Exchange | None, DecodeIssue]]:
        """(exchange or None, issue) for every issue, attached or standalone."""
        out = [(ex, i) for ex in self.exchanges for i in ex.issues]
        out.extend((None, i) for i in self.issues)
        return out


_CACHE: dict[tuple, Decoded] = {}


def decode_capture(path: Path, **options) -> Decoded:
    """Decode a capture once per session (per options)."""
    key = (str(path), tuple(sorted(options.items())))
    if key not in _CACHE:
        pipe = Pipeline(PipelineOptions(**options))
        d = Decoded(path, pipeline=pipe)
        for rec in analyze([path], pipeline=pipe):
            if type(rec) is Exchange:
                d.exchanges.append(rec)
            else:
                d.issues.append(rec)
        _CACHE[key] = d
    return _CACHE[key]


def update_golden() -> bool:
    """Tests rewrite golden files instead of comparing when KAFKASNIFF_UPDATE_GOLDEN=1."""
    return os.environ.get("KAFKASNIFF_UPDATE_GOLDEN") == "1"


@pytest.fixture(scope="session")
def public_dir() -> Path:
    d = public_captures_dir()
    if d is None:
        pytest.skip("../shared/captures-public is absent (third-party captures are not committed)")
    return d


@pytest.fixture
def gc_threshold():
    """The collector's thresholds, restored after the test."""
    saved = gc.get_threshold()
    yield
    gc.set_threshold(*saved)


@pytest.fixture
def collector_off():
    """The cyclic garbage collector off for the test (after one collection), on again after
    it if it was on: what a test sees in ``gc.collect()`` or ``gc.get_objects()`` is then
    what it made."""
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    yield
    if enabled:
        gc.enable()
