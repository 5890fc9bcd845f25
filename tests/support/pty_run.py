"""A real process on a pseudo-terminal, as a user's terminal runs it: what the TUI tests of
``kafkasniff tui`` and ``kafkasniff live`` share (start, read the screen, type keys, wait for
the exit)."""

from __future__ import annotations

import os
import pty
import re
import select
import time

ANSI = re.compile(r"\x1b\[[0-9;?<>=]*[a-zA-Z]")


class PtyProcess:
    """``argv`` started on a new pseudo-terminal of ``columns`` x ``lines`` (stdin, stdout
    and stderr on it; stderr into ``stderr_path`` instead when given)."""

    def __init__(self, argv: list[str], columns: int = 100, lines: int = 30,
                 stderr_path: str | None = None) -> None:
        pid, fd = pty.fork()
        if pid == 0:                                          # pragma: no cover - child
            os.environ.update(TERM="xterm-256color", COLUMNS=str(columns), LINES=str(lines))
            if stderr_path is not None:
                os.dup2(os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
            os.execv(argv[0], argv)
        self.pid, self.fd = pid, fd
        self.out = b""
        self.returncode: int | None = None

    def read_for(self, seconds: float) -> None:
        """Collect what the process draws for ``seconds`` (less when the terminal closes)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:
                    return
                if not chunk:
                    return
                self.out += chunk

    def text(self) -> str:
        """Everything drawn so far, without escape sequences."""
        return ANSI.sub("", self.out.decode(errors="replace"))

    def wait_for_text(self, needle: str, timeout: float) -> bool:
        """Read until ``needle`` is on screen (True) or ``timeout`` seconds passed."""
        deadline = time.monotonic() + timeout
        while needle not in self.text():
            if time.monotonic() >= deadline:
                return False
            self.read_for(0.5)
        return True

    def type(self, keys: bytes) -> None:
        os.write(self.fd, keys)

    def wait(self, timeout: float) -> int | None:
        """Read until the process ends (its exit code) or ``timeout`` seconds passed (then
        it is killed and ``None`` returned); the terminal is closed either way."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.read_for(0.2)
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self.returncode = os.waitstatus_to_exitcode(status)
                break
        else:
            os.kill(self.pid, 9)
            os.waitpid(self.pid, 0)
        self.read_for(0.3)
        os.close(self.fd)
        return self.returncode
