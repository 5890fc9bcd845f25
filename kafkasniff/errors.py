"""Exception hierarchy.

Inside the sans-IO core these are raised; the pipeline turns them into
:class:`kafkasniff.issues.DecodeIssue` records. Only the CLI calls ``sys.exit``.
"""

from __future__ import annotations


class KafkaSniffError(Exception):
    """Base class of every error kafkasniff raises on purpose."""


class CaptureError(KafkaSniffError):
    """A capture source cannot be opened or read at all (not pcap/pcapng, unreadable file).

    Damage inside an otherwise readable capture (a truncated last record, a bad block) is
    not an error: it is reported as an issue and reading stops or continues.
    """


class DefinitionError(KafkaSniffError):
    """A Kafka JSON message spec or a generated definition is malformed or missing."""


class DecodeError(KafkaSniffError):
    """A Kafka frame does not decode with the layout it was decoded with.

    Attributes:
        field_path: dotted path of the field being read, e.g. ``responses[0].partitions[2].records``.
        offset: byte offset into the frame payload where decoding failed.
        expected: what the layout required (free text, e.g. ``"12 bytes"``), or ``None``.
        actual: what was found, or ``None``.
    """

    def __init__(self, message: str, *, field_path: str = "", offset: int = -1,
                 expected: str | None = None, actual: str | None = None) -> None:
        self.field_path = field_path
        self.offset = offset
        self.expected = expected
        self.actual = actual
        detail = message
        if field_path:
            detail += f" at {field_path}"
        if offset >= 0:
            detail += f" (offset {offset})"
        if expected is not None or actual is not None:
            detail += f": expected {expected}, got {actual}"
        super().__init__(detail)
