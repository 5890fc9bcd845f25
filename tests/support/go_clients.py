"""The Go clients (franz-go and IBM sarama) as real peers.

``tests/broker/clients/go/`` is one Go module (versions pinned in its ``go.mod``/``go.sum``)
building one program, ``kclients``, with a command per client and scenario
(``franz-produce``, ``sarama-admin`` ...; see ``main.go``). :class:`GoClients` builds it with
``go build`` (``.ci/setup`` builds it once, which fetches the modules from the Go module proxy;
later builds only check that nothing changed) and runs it. Each run gives:

* what the program printed, one JSON object per line (records produced with their offsets,
  records consumed, each admin operation's Kafka error code);
* with ``-wire FILE``, every request header the client wrote on each connection, with the
  connection's local port (``wire.go`` wraps the client's dialer), read into
  :class:`~tests.support.client_truth.ClientRequest`.

Usage::

    go = GoClients(tmp_dir).build()              # pytest.skip when Go or the modules are missing
    run = go.run("franz-produce", bootstrap, topic, tag, "6", "zstd:all:plain")
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from tests.support.client_truth import ClientRequest, ClientRun

__all__ = ["GO_MODULE", "GoClients", "parse_wire_log"]

#: the Go module of the clients
GO_MODULE = Path(__file__).resolve().parents[1] / "broker" / "clients" / "go"


def parse_wire_log(path: Path) -> list[ClientRequest]:
    """The requests of a ``-wire`` file, in the order they were written."""
    out = []
    for line in path.read_text().splitlines():
        d = json.loads(line)
        out.append(ClientRequest(d["api_key"], d["api_version"], d["correlation_id"],
                                 d["client_id"], client_port=d["client_port"]))
    return out


class GoClients:
    """Builds and runs ``kclients``.

    Args:
        work_dir: where the wire logs go.
        binary: where the program is built (``tests/broker/clients/go/bin/kclients``,
            git-ignored).
    """

    def __init__(self, work_dir: Path, binary: Path = GO_MODULE / "bin" / "kclients") -> None:
        self.work_dir = Path(work_dir)
        self.binary = Path(binary)
        self.runs = 0

    def build(self) -> "GoClients":
        """``go build`` the program (quick once built: Go's build cache). Calls
        ``pytest.skip`` when Go is missing or the modules cannot be fetched (no Go module
        proxy: run ``.ci/setup`` where it is reachable); raises ``RuntimeError`` when the
        build fails otherwise."""
        import pytest

        if shutil.which("go") is None:
            pytest.skip("go is not installed: the Go client tests need Go 1.24+ (.ci/setup)")
        self.work_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "GOFLAGS": "-mod=readonly"}
        res = subprocess.run(["go", "build", "-o", str(self.binary), "."], cwd=GO_MODULE,
                             capture_output=True, text=True, timeout=600, env=env)
        if res.returncode != 0:
            if "dial tcp" in res.stderr or "proxy.golang.org" in res.stderr:
                pytest.skip(f"the Go clients' modules could not be fetched:\n{res.stderr}")
            raise RuntimeError(f"go build failed:\n{res.stdout}{res.stderr}")
        return self

    def run(self, *args: str, timeout: float = 120.0, flags: list[str] = ()) -> ClientRun:
        """Run ``kclients -wire <log> <flags> <args>`` (flags: ``-tls-ca`` ...); raises
        ``RuntimeError`` (with its output) when it exits non-zero."""
        self.runs += 1
        wire = self.work_dir / f"wire-{self.runs}-{args[0]}.jsonl"
        res = subprocess.run([str(self.binary), "-wire", str(wire), *flags, *args],
                             capture_output=True, text=True, timeout=timeout)
        if res.returncode != 0:
            raise RuntimeError(f"kclients {' '.join(args)} exited {res.returncode}:\n"
                               f"{res.stdout[-2000:]}\n{res.stderr[-3000:]}")
        lines = [json.loads(x) for x in res.stdout.splitlines() if x.startswith("{")]
        return ClientRun(lines, parse_wire_log(wire) if wire.exists() else [], wire)
