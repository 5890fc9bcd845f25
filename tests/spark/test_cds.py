"""The driver JVM's class-data-sharing archive (kafkasniff.spark.cds): used when present,
written by one process at a time, put in place only after a normal exit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafkasniff.spark import cds


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(cds.ENV, raising=False)
    monkeypatch.setattr(cds, "_pending", None)
    pytest.importorskip("pyspark")
    return tmp_path / "kafkasniff"


def test_written_once_then_used(cache: Path) -> None:
    java = sys.executable               # any binary: only its path and mtime name the archive
    opts = cds.archive_options(java)
    tmp, archive, lock = cds._pending
    assert opts.startswith(f"-XX:ArchiveClassesAtExit={tmp} ") and "-Xlog:cds=off" in opts
    assert lock.read_text() == str(os.getpid())
    assert cds.archive_options(java) == ""          # this process writes one already
    tmp.write_bytes(b"classes")                     # what the JVM writes at its exit
    cds.finish(0)
    assert archive.read_bytes() == b"classes" and not tmp.exists() and not lock.exists()
    assert cds.archive_options(java).startswith(f"-XX:SharedArchiveFile={archive} ")


def test_failed_exit_leaves_no_archive_and_another_writer_waits(cache: Path) -> None:
    java = sys.executable
    cds.archive_options(java)
    tmp, archive, lock = cds._pending
    tmp.write_bytes(b"half")
    cds.finish(-9)                                  # killed while writing
    assert not tmp.exists() and not archive.exists() and not lock.exists()
    # another live process holds the lock: start without the archive
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock.write_text(str(other.pid))
        assert cds.archive_options(java) == "" and cds._pending is None
    finally:
        other.kill()
        other.wait()
    # ... until it is gone: its lock and leftover file are taken over
    left = lock.with_name(f"{lock.stem}.{other.pid}.tmp")
    left.write_bytes(b"partial")
    assert cds.archive_options(java).startswith("-XX:ArchiveClassesAtExit=")
    assert not left.exists() and lock.read_text() == str(os.getpid())
    cds.finish(0)                                   # nothing written: no archive
    assert not archive.exists() and not lock.exists()


def test_turned_off(cache: Path, monkeypatch) -> None:
    monkeypatch.setenv(cds.ENV, "0")
    assert cds.archive_options(sys.executable) == "" and not cache.exists()
    monkeypatch.setenv(cds.ENV, "1")
    monkeypatch.setenv("XDG_CACHE_HOME", "/proc/no-such-dir")    # not writable
    assert cds.archive_options(sys.executable) == ""
