"""Where the exported tables' files go, shared by ``export``, ``live --export`` and
``spark decode`` (no pyarrow needed).

Layout: ``OUT/<table>/[date=YYYY-MM-DD/[hour=HH/]]part-<stem>-<n><extension>``; ``stem`` is
the capture name (and a tag), made safe by :func:`safe_name`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

#: file formats of the tables
FORMATS = ("parquet", "jsonl")
#: file name extension of each format
EXTENSIONS = {"parquet": ".parquet", "jsonl": ".jsonl"}
#: columns the tables can be partitioned by, in directory order
PARTITION_COLUMNS = ("date", "hour")


def safe_name(text: str) -> str:
    """``text`` usable in a file name: runs of characters other than letters, digits, ``.``,
    ``_`` and ``-`` become ``_``, no leading ``.``/``_`` (readers skip such files), at most
    120 characters; ``capture`` when nothing is left."""
    s = re.sub(r"[^A-Za-z0-9._-]+", "_", text).lstrip("._") or "capture"
    return s[:120]


def source_name(src) -> str:
    """The capture name of a source: a path's file name, ``stdin`` for ``"-"``, a file
    object's ``name`` when it has one, else ``capture``."""
    if isinstance(src, (str, os.PathLike)):
        return "stdin" if os.fspath(src) == "-" else Path(src).name
    name = getattr(src, "name", None)
    return Path(name).name if isinstance(name, str) and name else "capture"


def normalize_partition_by(partition_by) -> tuple[str, ...]:
    """``"date,hour"`` / ``("hour", "date")`` -> ``("date", "hour")``; raises ValueError for
    anything but ``date`` and ``hour``."""
    if isinstance(partition_by, str):
        partition_by = [p for p in partition_by.replace(" ", "").split(",") if p]
    cols = set(partition_by or ())
    bad = cols - set(PARTITION_COLUMNS)
    if bad:
        raise ValueError(f"cannot partition by {', '.join(sorted(bad))} (only date and hour)")
    return tuple(c for c in PARTITION_COLUMNS if c in cols)
