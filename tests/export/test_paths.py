"""kafkasniff.export.paths: file-name safety, capture names of sources, partition columns."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from kafkasniff.export.paths import (
    EXTENSIONS,
    FORMATS,
    PARTITION_COLUMNS,
    normalize_partition_by,
    safe_name,
    source_name,
)


def test_formats_and_extensions():
    assert FORMATS == ("parquet", "jsonl")
    assert EXTENSIONS == {"parquet": ".parquet", "jsonl": ".jsonl"}
    assert set(EXTENSIONS) == set(FORMATS)
    assert PARTITION_COLUMNS == ("date", "hour")


# --------------------------------------------------------------------------- safe_name

@pytest.mark.parametrize("text, name", [
    ("capture-01_a.pcapng", "capture-01_a.pcapng"),      # allowed characters kept
    ("my capture (2).pcap", "my_capture_2_.pcap"),       # runs become one _
    ("a/b\\c:d", "a_b_c_d"),                             # no path separators
    ("rotated   *?.pcap", "rotated_.pcap"),
    ("caf\u00e9.pcap", "caf_.pcap"),                     # non-ASCII letters replaced
    (".hidden.pcap", "hidden.pcap"),                     # no leading dot (readers skip it)
    ("__x", "x"),                                        # no leading underscore
    ("._.-x", "-x"),
    ("\u00e9t\u00e9", "t_"),                             # leading _ from a replacement
    ("", "capture"),                                     # nothing left
    ("...", "capture"),
    ("///", "capture"),
    ("\u00e9\u00e9", "capture"),
])
def test_safe_name(text, name):
    assert safe_name(text) == name


def test_safe_name_is_at_most_120_characters():
    assert safe_name("a" * 300) == "a" * 120
    assert len(safe_name("x y" * 100)) == 120
    assert safe_name("b" * 120) == "b" * 120


def test_safe_name_is_idempotent():
    for text in ("my capture (2).pcap", ".hidden", "a" * 200, "", "caf\u00e9"):
        once = safe_name(text)
        assert safe_name(once) == once


# --------------------------------------------------------------------------- source_name

def test_source_name_of_paths(tmp_path):
    assert source_name("captures/librdkafka_errors_latency.pcap") == \
        "librdkafka_errors_latency.pcap"
    assert source_name(Path("/data/x/rotated-03.pcapng.gz")) == "rotated-03.pcapng.gz"
    assert source_name(tmp_path / "a.pcap") == "a.pcap"


def test_source_name_of_stdin():
    assert source_name("-") == "stdin"
    assert source_name(Path("-")) == "stdin"


def test_source_name_of_file_objects(tmp_path):
    p = tmp_path / "from-file.pcap"
    p.write_bytes(b"")
    with open(p, "rb") as f:
        assert source_name(f) == "from-file.pcap"
    assert source_name(io.BytesIO(b"")) == "capture"     # no name

    class Named:
        name = "/var/tmp/named.pcap"

    class NumberName:
        name = 3                                          # os.fdopen(3).name is an int

    class EmptyName:
        name = ""

    assert source_name(Named()) == "named.pcap"
    assert source_name(NumberName()) == "capture"
    assert source_name(EmptyName()) == "capture"


# --------------------------------------------------------------------------- partition_by

@pytest.mark.parametrize("value, cols", [
    ("date,hour", ("date", "hour")),
    ("hour,date", ("date", "hour")),          # directory order, whatever was given
    (" hour , date ", ("date", "hour")),
    ("hour", ("hour",)),
    ("date,,date", ("date",)),
    ("", ()),
    (None, ()),
    ((), ()),
    (("hour", "date"), ("date", "hour")),
    (["date"], ("date",)),
])
def test_normalize_partition_by(value, cols):
    assert normalize_partition_by(value) == cols


@pytest.mark.parametrize("value, bad", [
    ("day", "day"),
    ("date,minute,api", "api, minute"),
    (("Date",), "Date"),                      # column names are lower case
])
def test_normalize_partition_by_rejects_other_columns(value, bad):
    with pytest.raises(ValueError) as exc:
        normalize_partition_by(value)
    assert str(exc.value) == f"cannot partition by {bad} (only date and hour)"
