"""A TLS connection as the pipeline sees it: its hellos, reported when it closes.

Nothing inside a TLS connection is decrypted yet: :class:`TlsConnection` keeps the first
bytes of each direction (at most :data:`HELLO_BYTES`) until they hold the ClientHello and
ServerHello (:func:`~kafkasniff.tls.hello.parse_hello`), and when the connection ends, a
connection on a broker port is reported as a ``tls_connection`` issue naming the versions,
SNI and ALPN the hellos show.
"""

from __future__ import annotations

from kafkasniff.issues import IssueKind, Severity
from kafkasniff.model import DecodeIssue
from kafkasniff.tcp.types import TcpConnection
from kafkasniff.tls.hello import parse_hello

#: first bytes of each direction kept to read the hellos
HELLO_BYTES = 16 * 1024


class TlsConnection:
    """The cleartext start of one TLS connection.

    Args:
        tcp: the TCP connection.
        client_dir: the direction (0/1) carrying the client's bytes when one endpoint is on
            a broker port, -1 when TLS was recognised on another port.
        first: the first bytes already seen of direction 0 and 1.

    Attributes:
        info: ``{"client_hello": ..., "server_hello": ...}`` (``None`` for a hello that did
            not parse) once the connection closed on a broker port, else ``None``.
    """

    __slots__ = ("tcp", "client_dir", "data", "info")

    def __init__(self, tcp: TcpConnection, client_dir: int, first: tuple[bytes, bytes]) -> None:
        self.tcp = tcp
        self.client_dir = client_dir
        self.data = [bytearray(first[0][:HELLO_BYTES]), bytearray(first[1][:HELLO_BYTES])]
        self.info: dict | None = None

    def on_data(self, direction: int, offset: int, data: bytes) -> None:
        """In-order bytes of ``direction`` at stream ``offset`` (kept while the hello
        window is not full and nothing was lost before them)."""
        buf = self.data[direction]
        if len(buf) < HELLO_BYTES and offset == len(buf):
            buf += data[:HELLO_BYTES - len(buf)]

    def on_close(self) -> list[DecodeIssue]:
        """The connection ended: the ``tls_connection`` issue of a connection on a broker
        port (none for TLS found on another port: it is counted, not reported)."""
        if self.client_dir < 0:
            return []
        tcp = self.tcp
        client = parse_hello(bytes(self.data[self.client_dir]))
        server = parse_hello(bytes(self.data[1 - self.client_dir]))
        parts = []
        if client is not None:
            parts.append(f"client offers {client.version()}")
            if client.sni:
                parts.append(f"SNI {client.sni}")
            if client.alpn:
                parts.append("ALPN " + ",".join(client.alpn))
        if server is not None:
            parts.append(f"server selected {server.version()}")
        msg = "TLS connection (not decoded as Kafka)" + (": " + ", ".join(parts) if parts else "")
        self.info = {"client_hello": client.to_json() if client else None,
                     "server_hello": server.to_json() if server else None}
        return [DecodeIssue(IssueKind.TLS_CONNECTION, Severity.INFO, msg, tcp.first_ts_ns,
                            tcp.conn_id, tcp.endpoint(self.client_dir),
                            tcp.endpoint(1 - self.client_dir))]
