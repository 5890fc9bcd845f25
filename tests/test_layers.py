"""The layering of the package (docs/architecture.md, "Layers"): import-linter contracts, and
what each command loads."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import grimp

from tests.conftest import CAPTURES
from tests.support.import_contracts import PrivateNamesContract

ROOT = Path(__file__).resolve().parents[1]
PC = CAPTURES / "librdkafka_produce_consume.pcap"


def test_import_contracts_hold():
    """Layers import downward only, the core imports no UI/table/Spark/CLI/socket library,
    nothing imports test support, no private name crosses a package (pyproject.toml)."""
    lint = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "4 kept, 0 broken" in out.stdout


def test_private_names_contract_catches_a_crossing(tmp_path, monkeypatch):
    pkg = tmp_path / "toypkg"
    (pkg / "a").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a" / "__init__.py").write_text("")
    (pkg / "a" / "m.py").write_text("_hidden = 1\npublic = 2\n__version__ = '1'\n")
    (pkg / "a" / "n.py").write_text("from toypkg.a.m import _hidden\n")     # same package
    (pkg / "b.py").write_text(textwrap.dedent("""\
        from toypkg.a.m import public, __version__
        from toypkg.a.m import (public,
                                _hidden)
        """))
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("toypkg")
    contract = PrivateNamesContract("t", {}, {"containers": ["toypkg"]})
    check = contract.check(graph, verbose=False)
    assert not check.kept
    assert check.metadata["violations"] == ["toypkg.b:2 imports toypkg.a.m._hidden"]
    (pkg / "b.py").write_text("from toypkg.a.m import public\n")
    assert contract.check(grimp.build_graph("toypkg", cache_dir=None), verbose=False).kept


def _loaded_by(args: list[str]) -> set[str]:
    code = ("import sys, json; from click.testing import CliRunner; "
            "from kafkasniff.cli import main; "
            f"r = CliRunner().invoke(main, {args!r}); assert r.exit_code == 0, r.output; "
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} | "
            "{m for m in sys.modules if m.startswith('kafkasniff.')})))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    import json
    return set(json.loads(out.stdout))


def test_read_and_stats_load_no_ui_table_or_spark_library(tmp_path):
    for args in (["read", "--json", str(PC)], ["stats", str(PC)]):
        loaded = _loaded_by(args)
        assert not loaded & {"textual", "rich", "pyarrow", "pyspark", "py4j"}, args
        assert not {m for m in loaded if m.startswith(("kafkasniff.tui", "kafkasniff.export",
                                                       "kafkasniff.spark", "kafkasniff.live"))}
    loaded = _loaded_by(["export", "-q", "-o", str(tmp_path), str(PC)])
    assert "pyarrow" in loaded                      # the check sees what a command loads
    assert not loaded & {"textual", "pyspark"}
