"""A class-data-sharing archive for the Spark driver JVM: Spark starts in about half the time.

Starting the driver JVM loads and verifies some ten thousand classes of Spark's jars, every
time. The JDK can map them from an archive instead (application class-data sharing, dynamic
archives: JEP 350, JDK 13+): the first JVM writes the classes it loaded to a file when it
exits (``-XX:ArchiveClassesAtExit``), later JVMs map that file (``-XX:SharedArchiveFile``).
Measured on the project's 2-core machine (docs/benchmarks.md): a local session starts in
2.2 s instead of 4.3 s and the first query (``spark decode``'s verification) takes 3.0 s
instead of 4.8 s.

The archive lives in the user's cache directory (``$XDG_CACHE_HOME/kafkasniff``, else
``~/.cache/kafkasniff``), named by a digest of the ``java`` binary and the pyspark install
(its version and jar directory): another Java or pyspark makes a new one. The JVM itself
checks an archive against its class path and version and ignores one that does not match.
One process at a time writes one (a lock file with its process id; a lock of a process that
is gone is taken over), to a temporary name renamed by :func:`finish` once its JVM has
exited; other processes meanwhile start without. The JVM's own messages about the archive
are turned off (``-Xlog:cds*=off``): an archive that cannot be used only costs the time it
would have saved. ``KAFKASNIFF_SPARK_CDS=0`` turns all of it off.

Nothing here imports pyspark at module import.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

__all__ = ["ENV", "archive_options", "cache_dir", "finish"]

#: environment variable: ``0`` turns the archive off (neither used nor written)
ENV = "KAFKASNIFF_SPARK_CDS"
#: JVM options that keep the archive's messages (warnings about classes it skipped, a
#: mismatched archive) off the user's terminal
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"

#: (temporary file, archive, lock) of the archive this process's JVM writes at its exit
_pending: tuple[Path, Path, Path] | None = None


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/kafkasniff`` (``~/.cache/kafkasniff`` without it)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kafkasniff"


def _archive_name(java: str) -> str:
    import pyspark

    java = os.path.realpath(java)
    jars = str(Path(pyspark.__file__).parent / "jars")
    key = [java, pyspark.__version__, jars]
    for p in (java, jars):
        try:
            key.append(str(os.stat(p).st_mtime_ns))
        except OSError:
            key.append("-")
    digest = hashlib.sha256("\0".join(key).encode()).hexdigest()[:16]
    return f"spark-driver-{pyspark.__version__}-{digest}.jsa"


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _take_lock(lock: Path) -> bool:
    """Create ``lock`` holding our process id; take over the lock of a process that is
    gone (and remove the temporary archive it left). False: another process writes."""
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            try:
                pid = int(lock.read_text().strip() or "0")
            except (OSError, ValueError):
                pid = 0
            if pid and _alive(pid):
                return False
            for p in (lock, lock.with_name(f"{lock.stem}.{pid}.tmp")):
                try:
                    p.unlink()
                except OSError:
                    pass
            continue
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        return True
    return False


def archive_options(java: str) -> str:
    """JVM options for the driver about to start: use the archive when it exists, else
    write it at exit when no other process is writing it, else nothing (``""``; also with
    ``KAFKASNIFF_SPARK_CDS=0`` or an unwritable cache directory)."""
    global _pending
    if os.environ.get(ENV, "1").strip() == "0":
        return ""
    try:
        d = cache_dir()
        d.mkdir(parents=True, exist_ok=True)
        name = _archive_name(java)
        archive = d / name
        if archive.is_file():
            return f"-XX:SharedArchiveFile={archive} {_QUIET}"
        lock = d / f"{Path(name).stem}.lock"
        if _pending is not None or not _take_lock(lock):
            return ""
    except (OSError, ImportError):
        return ""
    tmp = d / f"{Path(name).stem}.{os.getpid()}.tmp"
    _pending = (tmp, archive, lock)
    return f"-XX:ArchiveClassesAtExit={tmp} {_QUIET}"


def finish(exit_code: int | None) -> None:
    """After the driver JVM has exited: put the archive it wrote in place (when it exited
    normally) and release the lock; a partial file is removed."""
    global _pending
    if _pending is None:
        return
    tmp, archive, lock = _pending
    _pending = None
    try:
        if exit_code == 0 and tmp.is_file() and tmp.stat().st_size > 0:
            os.replace(tmp, archive)
        else:
            tmp.unlink(missing_ok=True)
    except OSError:
        pass
    try:
        lock.unlink()
    except OSError:
        pass
