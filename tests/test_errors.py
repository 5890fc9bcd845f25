"""kafkasniff.errors: DecodeError messages carry the field path, offset, expected and actual
values (DESIGN convention 3), and the hierarchy has one base class."""

from __future__ import annotations

import pytest

from kafkasniff.errors import (
    CaptureError,
    DecodeError,
    DefinitionError,
    KafkaSniffError,
)


def test_message_only():
    """Without details the message is the text as given."""
    exc = DecodeError("bad frame")
    assert str(exc) == "bad frame"
    assert (exc.field_path, exc.offset, exc.expected, exc.actual) == ("", -1, None, None)


def test_every_detail_in_order():
    """Field path, then offset, then expected/actual, each in its documented form."""
    exc = DecodeError("client_id runs past the frame", field_path="header.client_id", offset=8,
                      expected="12 bytes", actual="3 bytes")
    assert str(exc) == ("client_id runs past the frame at header.client_id (offset 8): "
                        "expected 12 bytes, got 3 bytes")
    assert (exc.field_path, exc.offset, exc.expected, exc.actual) == (
        "header.client_id", 8, "12 bytes", "3 bytes")


def test_offset_zero_is_shown_and_negative_is_not():
    """Offset 0 is a real offset (shown); -1 means none."""
    assert str(DecodeError("short", offset=0)) == "short (offset 0)"
    assert str(DecodeError("short", offset=-1)) == "short"


def test_path_without_offset():
    assert str(DecodeError("bad", field_path="topics[0].name")) == "bad at topics[0].name"


@pytest.mark.parametrize("expected, actual, tail", [
    ("4 bytes", None, ": expected 4 bytes, got None"),
    (None, "2 bytes", ": expected None, got 2 bytes"),
])
def test_expected_or_actual_alone(expected, actual, tail):
    """Either of expected/actual alone still produces the expected/got clause."""
    assert str(DecodeError("x", expected=expected, actual=actual)) == "x" + tail


def test_hierarchy():
    """Every error kafkasniff raises on purpose is a KafkaSniffError."""
    for cls in (CaptureError, DefinitionError, DecodeError):
        assert issubclass(cls, KafkaSniffError)
    assert issubclass(KafkaSniffError, Exception)
    with pytest.raises(KafkaSniffError):
        raise DecodeError("x", offset=1)
