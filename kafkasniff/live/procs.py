"""What the child process bodies of the live engine (capture, decoders) share: terminal
signals ignored, optional profiling.

See :mod:`kafkasniff.live` for how the parts fit together.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import time

__all__ = ["ignore_signals", "profiled"]


def ignore_signals() -> None:
    """Ignore SIGINT, SIGTERM and SIGHUP in a child process: the terminal's signals go to
    the whole process group, and the main process coordinates the stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)


def profiled(fn):
    """Decorator of a process body, for benchmarks: with ``$KAFKASNIFF_PROFILE`` naming a
    directory the body runs under cProfile (one ``<process name>.prof`` file each there);
    with ``KAFKASNIFF_PROFILE=times`` the process prints its wall, user and system time
    (seconds) on stderr when the body returns; unset, the body runs as it is."""
    def wrapper(*args, **kwargs):
        out = os.environ.get("KAFKASNIFF_PROFILE")
        if not out:
            return fn(*args, **kwargs)
        if out == "times":
            t0 = time.monotonic()
            try:
                return fn(*args, **kwargs)
            finally:
                t = os.times()
                print(f"{mp.current_process().name}: wall {time.monotonic() - t0:.2f}s "
                      f"user {t.user:.2f}s sys {t.system:.2f}s", file=sys.stderr)
        import cProfile

        prof = cProfile.Profile()
        try:
            return prof.runcall(fn, *args, **kwargs)
        finally:
            prof.dump_stats(os.path.join(out, f"{mp.current_process().name}.prof"))
    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper
