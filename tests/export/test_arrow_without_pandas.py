"""``kafkasniff export`` in its own process converts rows without importing pandas
(:func:`kafkasniff.export.writer.arrow_without_pandas`), writes the same tables as with
pandas imported, and leaves pyarrow's pandas support whole for a later call that needs it.
Each check runs in a fresh interpreter: this test process may have imported pandas already."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kafkasniff.export.schema import TABLES

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = ROOT / "captures" / "kafka_python_codecs.pcap"


def _python(code: str, *flags: str) -> tuple[object, str]:
    """Run ``code`` in a fresh interpreter: (the JSON of its last line of stdout, its
    stderr)."""
    res = subprocess.run([sys.executable, *flags, "-c", code], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1]), res.stderr


def _command(args: list[str], how: str) -> dict:
    """Run ``kafkasniff ARGS`` as the command's own process (``run``) or through click's
    test runner (a caller's process). Returns whether pandas was imported by the end, in
    this process, and whether any module of pandas was imported by it or by a process it
    forked (``-X importtime`` lines on stderr, which forked decoders write too)."""
    if how == "run":
        call = f"sys.argv = ['kafkasniff'] + {args!r}\ntry:\n    run()\nexcept SystemExit as e:\n" \
               "    assert not e.code, e.code\n"
    else:
        call = f"res = CliRunner().invoke(main, {args!r})\nassert res.exit_code == 0, res.output\n"
    code = ("import json, sys\nfrom click.testing import CliRunner\n"
            "from kafkasniff.cli import main, run\n" + call +
            "print(json.dumps({'pandas': 'pandas' in sys.modules}))")
    out, err = _python(code, "-X", "importtime")
    # a refused import leaves one line for the top-level name; an import, its submodules
    out["pandas modules"] = bool(re.search(r"\|\s+pandas\.", err))
    return out


def _tables(out: Path) -> dict:
    """Every table's rows as sorted JSON texts (the part files of ``--jobs 2`` split them)."""
    return {t: sorted(json.dumps(row, default=str, sort_keys=True)
                      for f in (out / t).glob("*.parquet")
                      for row in pq.read_table(f).to_pylist())
            for t in TABLES}


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_export_process_never_imports_pandas_and_writes_the_same_tables(tmp_path, jobs):
    own, called = tmp_path / "own", tmp_path / "called"
    assert _command(["export", "-q", "--jobs", jobs, "-o", str(own), str(CAPTURE)],
                    "run") == {"pandas": False, "pandas modules": False}
    # the same command invoked in a caller's process: pyarrow imports pandas as it always
    # did (the caller's process is left as it was)
    assert _command(["export", "-q", "--jobs", jobs, "-o", str(called), str(CAPTURE)],
                    "runner") == {"pandas": True, "pandas modules": True}
    got, want = _tables(own), _tables(called)
    assert sum(len(v) for v in want.values()) > 50
    assert got == want


def test_live_export_decoders_never_import_pandas(tmp_path):
    """``live --export``: the decoders, forked from the command's process, write their
    Parquet files without importing pandas (each imported it at its first rows)."""
    out = tmp_path / "live"
    assert _command(["live", "-r", str(CAPTURE), "--no-tui", "-q", "--workers", "2",
                     "--export", str(out)], "run") == {"pandas": False,
                                                       "pandas modules": False}
    rows = _tables(out)
    assert rows["exchanges"] and rows["connections"]


def test_pandas_support_is_whole_again_when_a_call_needs_it():
    out, _ = _python(
        "import json, math, sys\n"
        "import pyarrow as pa\n"
        "from kafkasniff.export.writer import arrow_without_pandas\n"
        "first = arrow_without_pandas()\n"
        "before = 'pandas' in sys.modules\n"
        "a = pa.array([{'x': 1}], type=pa.struct([('x', pa.int64())])).to_pylist()\n"
        "after_array = 'pandas' in sys.modules\n"
        "df = pa.table({'x': [1.5, None]}).to_pandas()\n"
        "import pandas as pd\n"
        "nan_is_null = pa.array(pd.Series([1.0, math.nan])).null_count == 1\n"
        "again = arrow_without_pandas()\n"
        "print(json.dumps([first, before, a, after_array, type(df).__name__, nan_is_null,"
        " again]))")
    # the check answered "no pandas"; a list converted without importing it; to_pandas
    # imports pandas, and pyarrow then knows a Series again (NaN -> null); once pandas is
    # imported there is nothing left to do
    assert out == [True, False, [{"x": 1}], False, "DataFrame", True, False]
