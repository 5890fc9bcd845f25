"""TLS session secrets from NSS key log files (the format Wireshark's ``tls.keylog_file``,
OpenSSL's ``SSL_CTX_set_keylog_callback``, Python's ``SSLContext.keylog_filename``, Go's
``tls.Config.KeyLogWriter`` and NSS's ``SSLKEYLOGFILE`` write).

Each line is ``<LABEL> <client_random hex> <secret hex>``; ``#`` starts a comment. The labels
used here:

- ``CLIENT_RANDOM``: the TLS 1.2 (and earlier) master secret, 48 bytes;
- ``CLIENT_HANDSHAKE_TRAFFIC_SECRET``, ``SERVER_HANDSHAKE_TRAFFIC_SECRET``,
  ``CLIENT_TRAFFIC_SECRET_0``, ``SERVER_TRAFFIC_SECRET_0``: TLS 1.3 (RFC 8446 section 7.1).

Other labels (``EXPORTER_SECRET``, ``EARLY_EXPORTER_SECRET``, ``CLIENT_EARLY_TRAFFIC_SECRET``)
are kept but not needed. :class:`KeyLog` reads files incrementally: a file that grows (a
client still connecting while ``live`` runs) is read again from where it stopped, whole lines
only, whenever a secret is asked for that is not known yet. A line that does not parse is
counted in :attr:`KeyLog.bad_lines`, never an error. Secrets never leave this object except
to the decryption that asks for them.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["KeyLog", "TLS13_LABELS"]

#: the TLS 1.3 traffic secret labels
TLS13_LABELS = ("CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET",
                "CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0")


class KeyLog:
    """Secrets by client random, from one or more key log files and pcapng Decryption
    Secrets Blocks.

    Args:
        paths: key log files (read now; :meth:`refresh` reads what they gained since).

    Attributes:
        bad_lines: lines that were neither a comment nor ``LABEL hex hex``.
    """

    #: master secrets of TLS 1.2 sessions remembered for resumption (oldest dropped first)
    MAX_SESSIONS = 100_000

    def __init__(self, paths: list[str | os.PathLike[str]] = ()) -> None:
        self._secrets: dict[bytes, dict[str, bytes]] = {}
        self._sessions: dict[bytes, bytes] = {}
        self._files: dict[Path, int] = {}
        self.bad_lines = 0
        for p in paths:
            self._files[Path(p)] = 0
        self.refresh()

    def __len__(self) -> int:
        """Client randoms with at least one secret."""
        return len(self._secrets)

    def refresh(self) -> int:
        """Read the lines the files gained since the last call (a missing file is skipped
        until it appears; a file that shrank is read again from its start). Returns the
        number of secrets added."""
        added = 0
        for path, pos in list(self._files.items()):
            try:
                # unchanged since the last read: not opened (a live connection waiting
                # for its secret asks again on each of its packets)
                if os.stat(path).st_size == pos:
                    continue
                with open(path, "rb") as f:
                    size = os.fstat(f.fileno()).st_size
                    if size < pos:
                        pos = 0
                    f.seek(pos)
                    chunk = f.read()
            except OSError:
                continue
            end = chunk.rfind(b"\n") + 1     # whole lines only
            added += self.add_text(chunk[:end])
            self._files[path] = pos + end
        return added

    def add_text(self, text: bytes | str) -> int:
        """Add the secrets of key log text (a file's lines, or a pcapng Decryption Secrets
        Block's ``TLS_KEY_LOG`` payload). Returns the number of secrets added."""
        if isinstance(text, bytes):
            text = text.decode("ascii", "replace")
        added = 0
        for line in text.splitlines():
            line = line.strip().strip("\0")     # NUL: a secrets block's padding
            if not line or line.startswith("#"):
                continue
            parts = line.split()
            try:
                if len(parts) != 3:
                    raise ValueError(line)
                label = parts[0]
                random = bytes.fromhex(parts[1])
                secret = bytes.fromhex(parts[2])
                if len(random) != 32 or not secret:
                    raise ValueError(line)
            except ValueError:
                self.bad_lines += 1
                continue
            slot = self._secrets.setdefault(random, {})
            if slot.get(label) != secret:
                slot[label] = secret
                added += 1
        return added

    def get(self, client_random: bytes, label: str) -> bytes | None:
        """The secret of ``label`` for the session of ``client_random``, or ``None``. A
        secret not known yet makes the files be read again for lines added since (a client
        still writing its key log while ``live`` runs); ``None`` only after that."""
        slot = self._secrets.get(client_random)
        if (slot is None or label not in slot) and self._files and self.refresh():
            slot = self._secrets.get(client_random)
        return None if slot is None else slot.get(label)

    def remember_session(self, key: bytes, master_secret: bytes) -> None:
        """Remember the master secret of a TLS 1.2 session under ``key`` (its session
        ticket or session id, as :class:`~kafkasniff.tls.decrypt.TlsDecryptor` names
        them), so that a later connection resuming it is decrypted although its client
        wrote no line for it (Go does not log resumed TLS 1.2 sessions; RFC 5246 7.3 and
        RFC 5077: a resumed session keeps its master secret). At most
        :attr:`MAX_SESSIONS`."""
        if len(self._sessions) >= self.MAX_SESSIONS and key not in self._sessions:
            self._sessions.pop(next(iter(self._sessions)))
        self._sessions[key] = master_secret

    def session(self, key: bytes) -> bytes | None:
        """The master secret remembered under ``key``, or ``None``."""
        return self._sessions.get(key)

    def has(self, client_random: bytes) -> bool:
        """Whether any secret of this client random is known."""
        return client_random in self._secrets
