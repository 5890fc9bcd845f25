"""Names off the wire on ``read``'s console lines (issue 45 item 1): control characters are
written as visible escapes through :func:`kafkasniff.text.escape_text`, one exchange, record
or issue per line; ``read --json`` keeps the exact names."""

from __future__ import annotations

import json

import pytest

from kafkasniff.output.values import describe_bytes, short
from tests.cli.common import run
from tests.support.terminal import (
    HOSTILE_NAMES,
    VISIBLE_ESCAPES,
    assert_terminal_safe,
    benign_twin,
    craft_regressions,
)

#: hostile_names.pcap: 9 exchanges and one standalone issue (the TLS connection); 2 records
#: in the Produce request and 2 in the Fetch response
LINES = {(): 10, ("--records",): 14}


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    return benign_twin(tmp_path_factory.mktemp("escaping") / "benign_names.pcap")


def read_lines(*args) -> str:
    # color=True: click strips nothing, as on a terminal
    from click.testing import CliRunner

    from kafkasniff.cli import main

    res = CliRunner().invoke(main, ["read", "-q", *map(str, args)], color=True,
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.stdout


@pytest.mark.parametrize("args", list(LINES))
def test_read_lines_escape_every_name(args, twin):
    out = read_lines(*args, HOSTILE_NAMES)
    assert_terminal_safe(out)
    lines = out.splitlines()
    assert len(lines) == LINES[args] == len(read_lines(*args, twin).splitlines())
    for escaped in VISIBLE_ESCAPES:
        assert escaped in out, escaped
    names = craft_regressions().HOSTILE
    from kafkasniff.text import escape_text

    assert sum(f"'{escape_text(names['client_id'])}'" in line for line in lines) == 3
    assert sum(f"topics={escape_text(names['topic'])},{escape_text(names['topic2'])}" in line
               for line in lines) == 4         # Metadata, JoinGroup, SyncGroup, DescribeGroups
    [issue] = [line for line in lines if line.startswith("! ")]
    assert r"SNI sni\x1b[2J\x1b]0;pwned-title\x07" in issue and r"\r\x7f\nforged" in issue
    if args:
        records = [line for line in lines if line.startswith("    ")]
        assert len(records) == 4
        assert all(line.startswith(f"    {escape_text(names['topic'])}[0] @") for line in records)
        assert sum(f"headers={escape_text(names['header_key'])}:'header-value'" in line
                   for line in records) == 2
        assert sum(r"value='value\r\nkafkasniff: forged record line'" in line
                   for line in records) == 2
        # a JSON value keeps JSON's own escapes; what JSON leaves raw is escaped too
        assert sum(r'value={"m":"json\u009b6n\u007f\u202egnp.exe\u001b[2J"}' in line
                   for line in records) == 2


def test_read_json_keeps_the_exact_names():
    names = craft_regressions().HOSTILE
    objs = [json.loads(line) for line in run("read", "-q", "--json", "--records",
                                             HOSTILE_NAMES).output.splitlines()]
    exchanges = [o for o in objs if o["type"] == "exchange"]
    assert {o["client_id"] for o in exchanges} == {names["client_id"],
                                                   names["consumer_client_id"]}
    metadata = exchanges[0]
    assert metadata["api_name"] == "Metadata"
    assert metadata["topics"] == [names["topic"], names["topic2"]]
    produce = exchanges[1]
    [batch] = produce["request"]["body"]["topic_data"][0]["partition_data"][0]["records"][
        "batches"]
    assert batch["records"][0]["headers"][0]["key"] == names["header_key"]
    join = next(o for o in exchanges if o["api_name"] == "JoinGroup")
    body = join["request"]["body"]
    assert (body["group_id"], body["group_instance_id"], body["protocols"][0]["name"]) == (
        names["group_id"], names["group_instance_id"], names["assignor"])
    [issue] = [o for o in objs if o["type"] == "issue"]
    sni = craft_regressions().HOSTILE_SNI.decode("ascii")
    assert f"SNI {sni}" in issue["message"]


def test_short_escapes_text_and_what_json_leaves_raw():
    assert short(describe_bytes(b"a\tb\r\n\\")) == r"'a\tb\r\n\\'"
    assert short(describe_bytes(b"it's")) == "'it's'"
    # JSON escapes controls below 0x20 itself, and leaves DEL, C1 and format characters raw
    assert short(describe_bytes('{"m": "\x9b\x7f\u202e\\u001b"}'.encode())) == \
        r'{"m":"\u009b\u007f\u202e\u001b"}'
    assert short(describe_bytes('{"m": "café"}'.encode())) == '{"m":"café"}'
    # the cut is made on the escaped text: the width holds
    assert len(short(describe_bytes(b"\t" * 100), 20)) == 20


def test_sasl_user_and_mechanism_are_escaped():
    import dataclasses

    from kafkasniff.output.render import exchange_line
    from tests.conftest import CAPTURES, decode_capture

    [ex] = [e for e in decode_capture(CAPTURES / "crafted_sasl.pcap").exchanges
            if e.api_name == "SaslAuthenticate"][:1]
    auth = dict(ex.request.body["auth_bytes"], mechanism="PLAIN\x1b]0;t\x07",
                username="alice\nkafkasniff: forged line\x9b")
    ex = dataclasses.replace(ex, request=dataclasses.replace(
        ex.request, body=dict(ex.request.body, auth_bytes=auth)))
    line = exchange_line(ex)
    assert_terminal_safe(line)
    assert r"sasl=PLAIN\x1b]0;t\x07 user=alice\nkafkasniff: forged line\x9b" in line
