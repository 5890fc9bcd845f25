"""A TLS connection as the pipeline sees it: its hellos, and, with a key log, its decryption.

:class:`TlsConnection` keeps the first bytes of each direction (at most :data:`HELLO_BYTES`)
until they hold the ClientHello and ServerHello (:func:`~kafkasniff.tls.hello.parse_hello`).
Without keys, when the connection ends, a connection on a broker port is reported as a
``tls_connection`` issue naming the versions, SNI and ALPN the hellos show. With a key log
(:meth:`TlsConnection.decrypt_with`) the pipeline feeds its bytes to a
:class:`~kafkasniff.tls.decrypt.TlsDecryptor` and the plaintext to an inner Kafka connection.
"""

from __future__ import annotations

from kafkasniff.issues import IssueKind, Severity
from kafkasniff.model import DecodeIssue
from kafkasniff.tcp.types import TcpConnection
from kafkasniff.tls.hello import TlsHello, parse_hello

#: first bytes of each direction kept to read the hellos
HELLO_BYTES = 16 * 1024


def client_hello_direction(first: tuple[bytes, bytes] | list) -> int:
    """The direction (0/1) whose first bytes are a TLS handshake record holding a
    ClientHello (handshake type 1), -1 when neither is (TLS joined mid-stream)."""
    for d in (0, 1):
        b = first[d]
        if len(b) >= 6 and b[0] == 22 and b[1] == 3 and b[5] == 1:
            return d
    return -1


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

    __slots__ = ("tcp", "client_dir", "data", "info", "decryptor", "kafka", "first", "held",
                 "not_kafka")

    def __init__(self, tcp: TcpConnection, client_dir: int, first: tuple[bytes, bytes]) -> None:
        self.tcp = tcp
        self.client_dir = client_dir
        self.data = [bytearray(first[0][:HELLO_BYTES]), bytearray(first[1][:HELLO_BYTES])]
        self.info: dict | None = None
        self.decryptor = None
        self.kafka = None
        #: TLS found on a port that is not a broker's: the classifier's
        #: :class:`~kafkasniff.classify.FirstBytes` of the decrypted plaintext, whose
        #: verdict says whether it is Kafka (set by the pipeline; ``None`` once decided);
        #: the plaintext is ``held`` until then
        self.first = None
        self.held: list = []
        #: found on another port, and its plaintext is not Kafka
        self.not_kafka = False

    def decrypt_with(self, keylog, kafka, wait=None) -> None:
        """Decrypt this connection with ``keylog``'s secrets
        (:class:`~kafkasniff.tls.keylog.KeyLog`), feeding the plaintext to ``kafka`` (the
        pipeline's Kafka connection for it, whose ``client_dir`` says which side is the
        client); ``wait``: the pipeline's :class:`~kafkasniff.tls.decrypt.KeyWait`, or
        ``None`` to give up at once on a missing secret. The caller replays the held events
        into the decryptor, which reads the hellos itself: no hello window is kept."""
        from kafkasniff.tls.decrypt import TlsDecryptor

        self.client_dir = kafka.client_dir
        self.decryptor = TlsDecryptor(keylog, wait)
        self.kafka = kafka
        self.data = None

    def side(self, direction: int) -> int:
        """The decryptor's side (0 client, 1 server) of a stream direction."""
        return 0 if direction == self.client_dir else 1

    def stream_direction(self, side: int) -> int:
        """The stream direction of a decryptor side."""
        return self.client_dir if side == 0 else 1 - self.client_dir

    def on_data(self, direction: int, offset: int, data: bytes) -> None:
        """In-order bytes of ``direction`` at stream ``offset`` (kept while the hello
        window is not full and nothing was lost before them)."""
        buf = self.data[direction]
        if len(buf) < HELLO_BYTES and offset == len(buf):
            buf += data[:HELLO_BYTES - len(buf)]

    def read_hellos(self) -> tuple[TlsHello | None, TlsHello | None]:
        """The client's and the server's hello from the kept first bytes, or from the
        decryptor when there is one (``None`` for one that did not parse); sets
        :attr:`info`. Needs ``client_dir`` >= 0."""
        if self.decryptor is not None:
            client, server = self.decryptor.hellos
        else:
            client = parse_hello(bytes(self.data[self.client_dir]))
            server = parse_hello(bytes(self.data[1 - self.client_dir]))
        self.info = {"client_hello": client.to_json() if client else None,
                     "server_hello": server.to_json() if server else None}
        return client, server

    def on_close(self) -> list[DecodeIssue]:
        """The connection ended: the ``tls_connection`` issue of a connection on a broker
        port (none for TLS found on another port: it is counted, not reported)."""
        if self.client_dir < 0:
            return []
        tcp = self.tcp
        client, server = self.read_hellos()
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
        return [DecodeIssue(IssueKind.TLS_CONNECTION, Severity.INFO, msg, tcp.first_ts_ns,
                            tcp.conn_id, tcp.endpoint(self.client_dir),
                            tcp.endpoint(1 - self.client_dir))]
