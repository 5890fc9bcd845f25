"""What a real client program tells about its own run (client-side truth), the same shape
for every language: the JSON lines it printed and the requests it sent."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["ClientRequest", "ClientRun"]


@dataclass(frozen=True)
class ClientRequest:
    """One request a client says it sent.

    Attributes:
        api_key, api_version, correlation_id, client_id: its request header.
        client_port: the local port of the connection it went on, when the client's record
            says (the Go clients' wire log); ``None`` otherwise (the Java client's log).
        api_name: the client's own name of the API, when it gives one (Java: ``ApiKeys``).
    """

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_port: int | None = None
    api_name: str | None = None


@dataclass
class ClientRun:
    """One run of a client program: ``lines`` it printed (JSON objects: ``produced``,
    ``consumed``, ``committed``, ``admin`` events), ``requests`` it sent, ``log`` the file
    the requests were read from."""

    lines: list[dict]
    requests: list[ClientRequest]
    log: Path

    def events(self, kind: str) -> list[dict]:
        """The printed lines whose ``event`` is ``kind``."""
        return [x for x in self.lines if x.get("event") == kind]
