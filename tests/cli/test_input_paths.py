"""Every command reads its inputs the same way (issue 45, items 6 and 16): named FIFOs and
``/dev/fd/N`` pipes (``<(cat x.pcap)``) are read once, never checked by a first read that
loses their first bytes, in ``read``, ``stats``, ``groups``, ``export`` (``-j 1`` and
``-j N``), ``live -r`` and ``tui``; a directory or a path that cannot be read is a one-line
``kafkasniff: error:`` (exit 2), never click's four-line usage error."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading

import pytest
from click.testing import CliRunner

from kafkasniff.cli import main
from tests.cli.common import KAFKASNIFF
from tests.conftest import CAPTURES
from tests.live.helpers import LIVE

JAVA = CAPTURES / "broker_java.pcap"
JAVA_EXCHANGES = 137


class FifoWriter:
    """``cat CAPTURE > FIFO`` in a shell: its exit status says whether the reader let it
    write everything (141: killed by SIGPIPE, the reader closed the FIFO early)."""

    def __init__(self, fifo, capture=JAVA) -> None:
        self.fifo = str(fifo)
        self.proc = subprocess.Popen(["sh", "-c", 'exec cat "$0" > "$1"', str(capture),
                                      self.fifo])

    def wait(self, timeout: float = 60) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            self.unblock()

    def unblock(self) -> None:
        """A reader still waiting in ``open`` for a writer gets one (and end of file), so that
        a failing test leaves no thread or process blocked."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        try:
            os.close(os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass


@pytest.fixture()
def fifo(tmp_path):
    path = tmp_path / "capture.fifo"
    os.mkfifo(path)
    return path


def lines_of(args: list[str], path) -> tuple[subprocess.CompletedProcess, list[str]]:
    p = subprocess.run(KAFKASNIFF + args + [str(path)], capture_output=True, text=True,
                       timeout=120)
    return p, p.stdout.splitlines()


COMMANDS = [["read", "-q", "-j", "1"], ["read", "-q", "-j", "2"], ["stats", "-j", "1"],
            ["stats", "-j", "2"], ["groups"]]


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_commands_read_a_named_fifo_as_the_file(fifo, args):
    _, want = lines_of(args, JAVA)
    writer = FifoWriter(fifo)
    p, got = lines_of(args, fifo)
    assert writer.wait() == 0, "the writer was cut off (SIGPIPE)"
    assert p.returncode == 0, p.stderr
    assert got == want


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_export_reads_a_fifo_and_dev_fd(tmp_path, fifo, jobs):
    writer = FifoWriter(fifo)
    p = subprocess.run(KAFKASNIFF + ["export", "-q", "--format", "jsonl", "-j", jobs,
                                     "-o", str(tmp_path / "t"), str(fifo)],
                       capture_output=True, text=True, timeout=120)
    assert writer.wait() == 0 and p.returncode == 0, p.stderr
    rows = sum(len(f.read_text().splitlines())
               for f in (tmp_path / "t" / "exchanges").glob("*.jsonl"))
    assert rows == JAVA_EXCHANGES
    # <(cat x.pcap): a /dev/fd/N path of a pipe
    p = subprocess.run(["bash", "-c", f'exec "$@" <(cat {JAVA})', "--"] + KAFKASNIFF +
                       ["export", "-q", "--format", "jsonl", "-j", jobs,
                        "-o", str(tmp_path / "u")], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    rows = sum(len(f.read_text().splitlines())
               for f in (tmp_path / "u" / "exchanges").glob("*.jsonl"))
    assert rows == JAVA_EXCHANGES


@pytest.mark.parametrize("args", COMMANDS[:2] + [["live", "--no-tui", "-q", "-r"]],
                         ids=" ".join)
def test_process_substitution(args):
    if args[0] == "live":
        cmd = LIVE + args[1:]
        _, want = lines_of(["read", "-q"], JAVA)
    else:
        cmd = KAFKASNIFF + args
        _, want = lines_of(args, JAVA)
    p = subprocess.run(["bash", "-c", f'exec "$@" <(cat {JAVA})', "--"] + cmd,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert sorted(p.stdout.splitlines()) == sorted(want)


# --------------------------------------------------------------------------- the TUI


def run_tui_headless(monkeypatch, args: list[str]) -> tuple[object, dict]:
    """``kafkasniff tui ARGS`` in this process with the app driven by Textual's Pilot (no
    terminal) until the capture is loaded; the click result and what the app showed."""
    import kafkasniff.tui.app as appmod
    from tests.tui.conftest import wait_loaded

    seen: dict = {}

    async def drive(app) -> None:
        async with app.run_test(size=(160, 40)) as pilot:
            await wait_loaded(pilot, timeout=60)
            seen["exchanges"] = len(app.store)
            seen["error"] = app.progress.error
            seen["tab"] = app.query_one("#tabs").active
            seen["status"] = str(app.query_one("#status").render())
            if len(app.store):
                # the detail finds the frames again: read once from the pipe, kept aside
                d = await asyncio.get_running_loop().run_in_executor(
                    None, lambda: app.source.detail(app.store.row(0),
                                                    app.store.row_issues(0)))
                seen["detail_frames"] = sorted(d.frames)

    def run(self, *a, **kw):
        asyncio.run(drive(self))

    monkeypatch.setattr(appmod.KafkaSniffApp, "run", run)
    monkeypatch.setattr(appmod, "configure_process", lambda: None)
    res = CliRunner().invoke(main, ["tui"] + args, catch_exceptions=False)
    return res, seen


def test_tui_loads_a_named_fifo(fifo, monkeypatch):
    writer = FifoWriter(fifo)
    try:
        res, seen = run_tui_headless(monkeypatch, [str(fifo)])
    finally:
        rc = writer.wait()
    assert rc == 0, "the writer was killed by SIGPIPE: the FIFO was read twice"
    assert res.exit_code == 0, res.output
    assert seen["exchanges"] == JAVA_EXCHANGES and seen["error"] is None, seen
    assert seen["detail_frames"] == ["request", "response"]


def test_tui_loads_a_dev_fd_pipe(monkeypatch):
    """``kafkasniff tui <(cat x.pcap)``: the path is /dev/fd/N of a pipe."""
    r, w = os.pipe()
    errors: list = []

    def write() -> None:
        try:
            with os.fdopen(w, "wb") as f:
                f.write(JAVA.read_bytes())
        except OSError as exc:
            errors.append(exc)

    t = threading.Thread(target=write, daemon=True)
    t.start()
    try:
        res, seen = run_tui_headless(monkeypatch, [f"/dev/fd/{r}"])
    finally:
        t.join(30)
        os.close(r)
    assert not errors
    assert res.exit_code == 0, res.output
    assert seen["exchanges"] == JAVA_EXCHANGES and seen["error"] is None, seen


def test_tui_not_a_capture_on_a_fifo_fails_before_the_terminal(tmp_path, fifo, monkeypatch):
    text = tmp_path / "x.txt"
    text.write_text("hello, this is not a capture\n")
    writer = FifoWriter(fifo, text)
    try:
        res, seen = run_tui_headless(monkeypatch, [str(fifo)])
    finally:
        writer.wait()
    assert res.exit_code == 2 and not seen
    assert res.output.strip() == (f"kafkasniff: error: {fifo}: not a pcap or pcapng file "
                                  f"(starts with 68 65 6c 6c)")


def test_tui_view_groups(monkeypatch):
    res, seen = run_tui_headless(monkeypatch, ["--view", "groups", str(JAVA)])
    assert res.exit_code == 0, res.output
    assert seen["tab"] == "groups"


# --------------------------------------------------------------------------- bad inputs


BAD_INPUT_COMMANDS = [["read"], ["read", "-j", "2"], ["stats"], ["stats", "-j", "2"],
                      ["groups"], ["export", "-o", "{tmp}/out"], ["tui"]]


@pytest.mark.parametrize("args", BAD_INPUT_COMMANDS, ids=" ".join)
def test_a_directory_as_input_is_a_one_line_error(tmp_path, args, monkeypatch):
    import kafkasniff.tui.app as appmod

    monkeypatch.setattr(appmod.KafkaSniffApp, "run",
                        lambda self: pytest.fail("the UI started on a directory"))
    d = tmp_path / "captures"
    d.mkdir()
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    for where in ([str(d)], ["-r", str(d)]):
        res = CliRunner().invoke(main, args + where)
        assert res.exit_code == 2, res.output
        assert res.output == f"kafkasniff: error: {d}: is a directory, not a capture file\n"


def test_live_directory_input_is_a_one_line_error(tmp_path):
    p = subprocess.run(LIVE + ["--no-tui", "-r", str(tmp_path)], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2
    assert p.stderr == f"kafkasniff: error: {tmp_path}: is a directory, not a capture file\n"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_an_unreadable_file_is_a_one_line_error(tmp_path):
    path = tmp_path / "secret.pcap"
    path.write_bytes(JAVA.read_bytes())
    path.chmod(0)
    res = CliRunner().invoke(main, ["read", str(path)])
    assert res.exit_code == 2
    assert res.output == f"kafkasniff: error: {path}: permission denied\n"


def test_key_log_and_definitions_paths_are_one_line_errors(tmp_path):
    res = CliRunner().invoke(main, ["read", "--tls-keylog", str(tmp_path), str(JAVA)])
    assert res.exit_code == 2
    assert res.output == f"kafkasniff: error: --tls-keylog {tmp_path}: is a directory\n"
    missing = tmp_path / "no-such-dir"
    res = CliRunner().invoke(main, ["read", "--definitions", str(missing), str(JAVA)])
    assert res.exit_code == 2
    assert res.output == f"kafkasniff: error: --definitions {missing}: no such directory\n"
    res = CliRunner().invoke(main, ["definitions", "list", "--definitions", str(JAVA)])
    assert res.exit_code == 2
    assert res.output == f"kafkasniff: error: --definitions {JAVA}: not a directory\n"


def test_groups_json_from_a_fifo_equals_the_file(fifo):
    _, want = lines_of(["groups", "--json"], JAVA)
    writer = FifoWriter(fifo)
    p, got = lines_of(["groups", "--json"], fifo)
    assert writer.wait() == 0 and p.returncode == 0, p.stderr
    assert json.loads("\n".join(got)) == json.loads("\n".join(want))
