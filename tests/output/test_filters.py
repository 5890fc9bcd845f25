"""kafkasniff.output.filters: the one filter language of ``read``, ``live`` and the TUI
(patterns, API names and keys, every criterion over Exchange values, describe, active)."""

from __future__ import annotations

import pytest

from kafkasniff.issues import IssueKind, Severity
from kafkasniff.model import DecodeIssue, Exchange, ExchangeStatus
from kafkasniff.output.filters import (
    STATUSES,
    Filter,
    FilterError,
    api_names_and_keys,
    check_pattern,
    known_api_names,
    parse_apis,
    parse_filter,
    parse_min_latency,
    pattern_matcher,
)


def ex(**kw) -> Exchange:
    fields = dict(conn_id=1, client="10.0.0.1:40000", broker="10.0.0.2:9092",
                  status=ExchangeStatus.PAIRED, api_key=0, api_name="Produce", api_version=9,
                  correlation_id=5, client_id="ks-producer-1", request=None, response=None,
                  latency_ns=3_000_000, topics=("orders", "Payments"))
    fields.update(kw)
    return Exchange(**fields)


ISSUE = DecodeIssue(IssueKind.TRAILING_BYTES, Severity.WARNING, "2 trailing bytes")


def keeps(f: Filter, exchange: Exchange) -> bool:
    pred = f.predicate()
    return True if pred is None else pred(exchange)


# --------------------------------------------------------------------------- patterns

@pytest.mark.parametrize("pattern, value, match", [
    ("consumer", "ks-consumer-1", True),      # substring
    ("CONSUMER", "ks-Consumer-1", True),      # any case
    ("consumer", "ks-producer-1", False),
    ("", "anything", True),                   # empty substring
    ("ks-*", "ks-consumer-1", True),          # glob over the whole value
    ("consumer*", "ks-consumer-1", False),    # a glob is anchored
    ("KS-C?NSUMER-[0-9]", "ks-consumer-7", True),
    ("ks-consumer-[!0-9]", "ks-consumer-7", False),
    ("=ks-consumer-1", "ks-consumer-1", True),  # exact
    ("=ks-consumer", "ks-consumer-1", False),   # exact is not a substring
    ("=KS-consumer-1", "ks-consumer-1", False),  # exact is case-sensitive
    ("=", "", True),
])
def test_pattern_matcher(pattern, value, match):
    assert pattern_matcher(pattern)(value) is match


@pytest.mark.parametrize("pattern", ["x", "*", "=x", "="])
def test_pattern_never_matches_none(pattern):
    assert pattern_matcher(pattern)(None) is False


def test_api_names_and_keys():
    """Numbers are api_keys (negative too); every entry is also a lower-case name."""
    names, keys = api_names_and_keys(("Produce", "1", "-2", "FETCH"))
    assert names == {"produce", "1", "-2", "fetch"}
    assert keys == {1, -2}
    assert api_names_and_keys(()) == (set(), set())


def test_api_names_and_keys_non_numbers_are_names():
    """Text that is not a number is a name, whatever its characters."""
    assert api_names_and_keys(("--2", "²")) == ({"--2", "²"}, set())


# --------------------------------------------------------------------------- criteria

def test_no_criterion_has_no_predicate():
    assert Filter().predicate() is None
    assert not Filter().active and Filter().describe() == ""


@pytest.mark.parametrize("apis, kept", [
    (("Produce",), True),
    (("produce",), True),
    (("0",), True),
    (("Fetch", "0"), True),
    (("Fetch",), False),
    (("1",), False),
    (("Prod",), False),   # API names are whole names, not patterns
])
def test_apis(apis, kept):
    assert keeps(Filter(apis=apis), ex()) is kept


def test_apis_pseudo_keys():
    sasl = ex(api_key=-2, api_name="SaslToken", api_version=-1)
    assert keeps(Filter(apis=("-2",)), sasl) and keeps(Filter(apis=("saslTOKEN",)), sasl)
    assert not keeps(Filter(apis=("-1",)), sasl)


@pytest.mark.parametrize("client, kept", [
    ("producer", True),          # client_id substring
    ("=ks-producer-1", True),
    ("10.0.0.1", True),          # the client endpoint
    ("*:40000", True),
    ("=10.0.0.1:40000", True),
    ("10.0.0.2", False),         # the broker is not the client
    ("consumer", False),
])
def test_client_matches_client_id_or_endpoint(client, kept):
    assert keeps(Filter(client=client), ex()) is kept


def test_client_with_null_client_id_matches_the_endpoint_only():
    anonymous = ex(client_id=None)
    assert keeps(Filter(client="10.0.0.1"), anonymous)
    assert not keeps(Filter(client="producer"), anonymous)


@pytest.mark.parametrize("broker, kept", [
    (":9092", True), ("=10.0.0.2:9092", True), ("10.0.0.1", False), ("9093", False),
])
def test_broker(broker, kept):
    assert keeps(Filter(broker=broker), ex()) is kept


@pytest.mark.parametrize("topic, kept", [
    ("pay", True),           # any topic, any case
    ("=Payments", True),
    ("=payments", False),    # exact is case-sensitive
    ("ord*", True),
    ("invoices", False),
])
def test_topic_matches_any_topic(topic, kept):
    assert keeps(Filter(topic=topic), ex()) is kept


def test_topic_without_topics():
    assert not keeps(Filter(topic="*"), ex(topics=()))


@pytest.mark.parametrize("status", STATUSES)
def test_status(status):
    """Each status selects exactly the exchanges of that status."""
    f = Filter(status=status)
    for s in ExchangeStatus:
        assert keeps(f, ex(status=s)) is (s.value == status)


def test_statuses_in_display_order():
    assert STATUSES == ("paired", "no_response_expected", "unanswered", "orphan_response")


def test_errors_only_and_issues_only():
    assert keeps(Filter(errors_only=True), ex(errors=("NOT_LEADER_OR_FOLLOWER",)))
    assert not keeps(Filter(errors_only=True), ex())
    assert keeps(Filter(issues_only=True), ex(issues=(ISSUE,)))
    assert not keeps(Filter(issues_only=True), ex(errors=("X",)))


@pytest.mark.parametrize("latency_ns, min_ms, kept", [
    (3_000_000, 3, True),        # at least: equal passes
    (2_999_999, 3, False),
    (2_500_000, 2.5, True),      # fractional milliseconds
    (2_499_999, 2.5, False),
    (0, 0, True),
    (None, 0, False),            # not paired: never slow enough
])
def test_min_latency(latency_ns, min_ms, kept):
    assert keeps(Filter(min_latency_ms=min_ms), ex(latency_ns=latency_ns)) is kept


def test_every_criterion_must_hold():
    f = Filter(apis=("Produce",), client="producer", broker=":9092", topic="orders",
               status="paired", errors_only=True, issues_only=True, min_latency_ms=1)
    full = ex(errors=("X",), issues=(ISSUE,))
    assert keeps(f, full)
    for change in (dict(api_name="Fetch", api_key=1), dict(client_id="c", client="1.1.1.1:1"),
                   dict(broker="10.0.0.2:9093"), dict(topics=("other",)),
                   dict(status=ExchangeStatus.UNANSWERED), dict(errors=()), dict(issues=()),
                   dict(latency_ns=999_999)):
        assert not keeps(f, ex(**{**dict(errors=("X",), issues=(ISSUE,)), **change})), change


def test_two_criteria():
    f = Filter(apis=("Fetch",), topic="orders")
    assert keeps(f, ex(api_key=1, api_name="Fetch"))
    assert not keeps(f, ex())
    assert not keeps(f, ex(api_key=1, api_name="Fetch", topics=("x",)))


# --------------------------------------------------------------------------- describe, active

def test_describe_every_criterion_in_order():
    f = Filter(apis=("Produce", "1"), client="ks-*", broker="=10.0.0.2:9092", topic="orders",
               status="unanswered", errors_only=True, issues_only=True, min_latency_ms=2.5)
    assert f.describe() == ("api=Produce,1 client=ks-* broker==10.0.0.2:9092 topic=orders "
                            "status=unanswered errors issues latency>=2.5ms")


@pytest.mark.parametrize("f, text", [
    (Filter(errors_only=True), "errors"),
    (Filter(min_latency_ms=100.0), "latency>=100ms"),
    (Filter(min_latency_ms=0), "latency>=0ms"),
    (Filter(topic="t"), "topic=t"),
])
def test_describe_single(f, text):
    assert f.describe() == text
    assert f.active


def test_active():
    assert not Filter().active
    assert not Filter(apis=(), client="", min_latency_ms=None).active
    assert Filter(status="paired").active and Filter(issues_only=True).active


def test_long_poll_tri_state():
    """``long_poll`` True keeps only long-polls, False only the others, None either (the
    TUI's "hide long-polls" next to a minimum latency)."""
    lp = ex(api_key=1, api_name="Fetch", latency_ns=500_000_000, long_poll=True,
            long_poll_rule="fetch_max_wait")
    served = ex(api_key=1, api_name="Fetch", latency_ns=500_000_000)
    assert keeps(Filter(long_poll=True), lp) and not keeps(Filter(long_poll=True), served)
    assert keeps(Filter(long_poll=False), served) and not keeps(Filter(long_poll=False), lp)
    assert Filter().long_poll is None and Filter().predicate() is None
    slow = Filter(min_latency_ms=100, long_poll=False)
    assert keeps(slow, served) and not keeps(slow, lp)
    assert Filter(long_poll=True).active and Filter(long_poll=False).active
    assert Filter(long_poll=True).describe() == "long-polls"
    assert Filter(long_poll=False).describe() == "no-long-polls"


# ------------------------------------------------------------ parsing (issue 45, item 12)
# One grammar for ``read``/``live`` options and the TUI's filter dialog: a criterion that can
# match nothing (an unknown API name, an invalid glob, a latency that is not a number) is an
# error naming the valid choices, never a filter that silently shows nothing.


@pytest.mark.parametrize("values, apis", [
    (("Produce",), ("Produce",)),
    (("Produce,Fetch",), ("Produce", "Fetch")),             # a comma list
    ((" produce , FETCH ",), ("produce", "FETCH")),         # any case, spaces around
    (("Produce", "Fetch,3"), ("Produce", "Fetch", "3")),    # repeated and comma lists
    ("Produce,Fetch", ("Produce", "Fetch")),                # one text (the TUI's input)
    (("0", "-2"), ("0", "-2")),                             # api_keys, pseudo keys too
    (("SaslToken", "FETCH (0.7)", "Unknown(99)"), ("SaslToken", "FETCH (0.7)", "Unknown(99)")),
    ((), ()), ("", ()), ((",",), ()),
])
def test_parse_apis(values, apis):
    assert parse_apis(values) == apis


def test_parse_apis_unknown_name_says_the_valid_ones():
    with pytest.raises(FilterError) as e:
        parse_apis(("Produce", "Prodce"))
    msg = str(e.value)
    assert msg.startswith("unknown API 'Prodce' (did you mean Produce? valid: ")
    assert "Fetch" in msg and "SaslAuthenticate" in msg and "api_key" in msg
    with pytest.raises(FilterError, match=r"^unknown API 'xyzzy' \(valid: "):
        parse_apis("xyzzy")


def test_known_api_names():
    names = known_api_names()
    assert {"Produce", "Fetch", "ElectLeaders", "SaslToken"} <= set(names)


@pytest.mark.parametrize("pattern", ["", "ks", "ks-*", "[abc]", "ks-[!0-9]", "[]]", "=[abc",
                                     "a]b", "[[]x"])
def test_check_pattern_valid(pattern):
    assert check_pattern(pattern) == pattern


@pytest.mark.parametrize("pattern", ["[abc", "ks-[0-9", "x[", "[!"])
def test_check_pattern_invalid(pattern):
    with pytest.raises(FilterError, match=r"invalid pattern .*'\['"):
        check_pattern(pattern, "--client")


@pytest.mark.parametrize("text, ms", [("", None), ("  ", None), (None, None), ("12.5", 12.5),
                                      ("0", 0.0), (" 30 ", 30.0), (7, 7.0), (2.5, 2.5)])
def test_parse_min_latency(text, ms):
    assert parse_min_latency(text) == ms


@pytest.mark.parametrize("text", ["12.5-", "abc", "-1", "nan", "inf", "1e400"])
def test_parse_min_latency_invalid(text):
    with pytest.raises(FilterError, match="minimum latency"):
        parse_min_latency(text)


def test_parse_filter():
    f = parse_filter(apis="Produce,1", client="ks-*", topic="=orders", min_latency="2.5",
                     errors_only=True)
    assert f == Filter(apis=("Produce", "1"), client="ks-*", topic="=orders",
                       min_latency_ms=2.5, errors_only=True)
    assert parse_filter() == Filter()
    with pytest.raises(FilterError, match="topic"):
        parse_filter(topic="[x")
