"""Table models: what each view's :class:`~kafkasniff.tui.widgets.VirtualTable` shows.

Formatting reads the summary columns directly (no per-row objects), so drawing a screen of
the exchanges table costs the same with 100 or 10 million rows.
"""

from __future__ import annotations

import time as _time
from array import array
from typing import Sequence

from kafkasniff.groups.model import assignment_text
from kafkasniff.output.filters import STATUSES
from kafkasniff.output.render import format_ms
from kafkasniff.text import escape_text
from kafkasniff.tui.aggregates import ClientRow, ConnRow, StatRow, TopicRow
from kafkasniff.tui.store import F_LONG_POLL, SummaryStore
from kafkasniff.tui.widgets import Column

#: what marks a long-poll in the Status cell of the Exchanges table (``paired lp``)
LONG_POLL_MARK = " lp"


def status_cell(status: str, has_errors: bool, long_poll: bool = False) -> tuple[str, str]:
    """The Status cell: the :class:`~kafkasniff.model.ExchangeStatus` value as every output
    shows it, styled ``error`` when the response carried an error code, ``warning`` when
    the exchange is not paired; a long-poll (the broker held it by design, its latency is
    out of the percentiles) is marked ``paired lp`` (dimmed when without errors)."""
    if long_poll:
        return status + LONG_POLL_MARK, "error" if has_errors else "dim"
    return status, "error" if has_errors else "" if status == "paired" else "warning"


def fmt_time(ts_ns: int) -> str:
    """``HH:MM:SS.ffffff`` (UTC)."""
    if not ts_ns:
        return "-"
    sec, ns = divmod(ts_ns, 1_000_000_000)
    return _time.strftime("%H:%M:%S", _time.gmtime(sec)) + f".{ns // 1000:06d}"


def fmt_date_time(ts_ns: int) -> str:
    """``YYYY-MM-DD HH:MM:SS.ffffff`` (UTC)."""
    if not ts_ns:
        return "-"
    sec, ns = divmod(ts_ns, 1_000_000_000)
    return _time.strftime("%Y-%m-%d %H:%M:%S", _time.gmtime(sec)) + f".{ns // 1000:06d}"


def fmt_ms(ns: int | None) -> str:
    """Nanoseconds shown as milliseconds with 3 decimals, as ``read`` prints latencies
    (``-`` when unknown: ``None`` or negative)."""
    return format_ms(None if ns is not None and ns < 0 else ns)



def parse_time(text: str, ref_ns: int) -> int:
    """A time typed by the user, as ns since the epoch (UTC): ``YYYY-MM-DD HH:MM:SS[.f]``
    (or with ``T``), or ``HH:MM:SS[.f]`` / ``HH:MM[.f]`` on the UTC date of ``ref_ns``.

    Raises:
        ValueError: not one of these forms.
    """
    import calendar
    import re

    m = re.fullmatch(r"\s*(?:(\d{4})-(\d{2})-(\d{2})[ T])?(\d{1,2}):(\d{2})(?::(\d{2}))?"
                     r"(?:\.(\d{1,9}))?\s*", text)
    if m is None:
        raise ValueError(f"not a time: {text.strip()!r} (HH:MM:SS[.ffffff] or "
                         f"YYYY-MM-DD HH:MM:SS[.ffffff], UTC)")
    y, mo, d, hh, mm, ss, frac = m.groups()
    if y is None:
        ref = _time.gmtime(ref_ns // 1_000_000_000)
        y, mo, d = ref.tm_year, ref.tm_mon, ref.tm_mday
    hh, mm, ss = int(hh), int(mm), int(ss or 0)
    if hh > 23 or mm > 59 or ss > 60:
        raise ValueError(f"not a time: {text.strip()!r}")
    sec = calendar.timegm((int(y), int(mo), int(d), hh, mm, ss, 0, 0, 0))
    return sec * 1_000_000_000 + (int((frac or "0").ljust(9, "0")) if frac else 0)


def parse_time_range(text: str, ref_ns: int) -> tuple[int, int] | None:
    """``from..to`` typed by the user (either side may be empty: open), as ``(from_ns,
    to_ns)`` for ``[from, to)``; ``None`` for an empty text (no range). Times as
    :func:`parse_time` reads them.

    Raises:
        ValueError: no ``..``, a side that is not a time, or ``to`` not after ``from``.
    """
    text = text.strip()
    if not text:
        return None
    if ".." not in text:
        raise ValueError("a time range is FROM..TO (either side may be left out)")
    a, _, b = text.partition("..")
    lo = parse_time(a, ref_ns) if a.strip() else 0
    hi = parse_time(b, ref_ns) if b.strip() else 1 << 62
    if hi <= lo:
        raise ValueError("the end of the range must come after its start")
    return lo, hi


def fmt_time_range(time_range: tuple[int, int]) -> str:
    """``00:56:17.000000..00:56:18.000000`` (an open side left empty)."""
    lo, hi = time_range
    return (fmt_time(lo) if lo > 0 else "") + ".." + (fmt_time(hi) if hi < 1 << 62 else "")


def fmt_bytes(n: float) -> str:
    """``812B``, ``1.2KB``, ``3.4MB`` (powers of 1024)."""
    n = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1024
    return f"{n:.1f}GB"


def fmt_count(n: int) -> str:
    """``1,234,567``."""
    return f"{n:,}"


def fmt_rate(r: float) -> str:
    """A rate per second: one decimal below 100 (``12.5/s``), none above (``1,234/s``)."""
    return f"{r:,.1f}/s" if r < 100 else f"{r:,.0f}/s"


def api_label(name: str, version: int) -> str:
    """``Produce v10``; the name alone when the version is unknown (negative)."""
    return name if version < 0 else f"{name} v{version}"


# ------------------------------------------------------------------------------------ exchanges

#: The Exchanges view's columns. At 80 columns: time, API, latency, status and errors (status
#: outlives client_id and the endpoints); errors grow to 22 cells (NOT_LEADER_OR_FOLLOWER)
#: before the less important columns are placed, and the spare width goes to errors first
#: (weight 3, up to 80 cells) and to topics. ``Err`` counts the non-zero error codes of the
#: response, Errors names them (``NAME×count`` when a name occurs more than once).
EXCHANGE_COLUMNS = [
    Column("time", "Time (UTC)", 15, priority=0),
    Column("api", "API", 18, priority=0, max_width=32, fit=True),
    Column("corr", "Corr", 6, "right", priority=4),
    Column("client_id", "Client id", 16, priority=2, max_width=40, fit=True),
    Column("client", "Client → broker", 34, priority=3),
    Column("latency", "Latency", 11, "right", priority=0),
    Column("status", "Status", 10, priority=0),
    Column("err_n", "Err", 4, "right", priority=2),
    Column("errors", "Errors", 14, priority=0, flex=3, max_width=80, grow_to=22),
    Column("throttle", "Thr ms", 6, "right", priority=4),
    Column("bytes", "Req/resp B", 13, "right", priority=4),
    Column("topics", "Topics", 14, priority=2, flex=1),
    Column("records", "Records", 16, priority=6),
    Column("issues", "Issues", 16, priority=3),
]


class ExchangeModel:
    """The rows of a view (``array`` of row numbers) of a :class:`SummaryStore`."""

    def __init__(self, store: SummaryStore, view: array) -> None:
        self.store = store
        self.view = view

    def __len__(self) -> int:
        return len(self.view)

    def content_width(self, column: int) -> int:
        """Cells the widest API label or client_id of the store needs (the columns that fit
        their content; the interned tables, not the rows, are measured)."""
        key = EXCHANGE_COLUMNS[column].key
        if key == "api":
            return self.store.api_label_width()
        if key == "client_id":
            return self.store.tables.client_ids.widest()
        return EXCHANGE_COLUMNS[column].width

    def cells(self, index: int) -> Sequence:
        r = self.view[index]
        c = self.store.columns
        t = self.store.tables
        tup = t.tuples.items
        api = api_label(t.names.items[c["name"][r]], c["api_version"][r])
        corr = c["corr"][r]
        cid = t.client_ids.items[c["client_id"][r]]
        status = STATUSES[c["status"][r]]
        errors = tup[c["errors"][r]]
        labels = tup[c["err_counts"][r]] or errors        # NAME×count when some count > 1
        thr = c["throttle"][r]
        topics = tup[c["topics"][r]]
        nrec = c["records"][r]
        issues = tup[c["issues"][r]]
        sev = c["severity"][r]
        if nrec >= 0:
            info = tup[c["rec_info"][r]]
            rec = f"{nrec} rec/{c['batches'][r]} b" + (" " + ",".join(info) if info else "")
        else:
            rec = ""
        return (
            fmt_time(c["ts"][r]),
            api,
            str(corr) if corr >= 0 else "-",
            cid if cid is not None else "-",
            f"{t.endpoints.items[c['client'][r]]} → {t.endpoints.items[c['broker'][r]]}",
            fmt_ms(c["latency"][r]),
            status_cell(status, bool(errors), bool(c["flags"][r] & F_LONG_POLL)),
            (str(c["err_n"][r]), "error") if errors else "",
            (", ".join(labels), "error") if errors else "",
            (str(thr), "warning" if thr > 0 else "dim") if thr >= 0 else "",
            f"{c['req_bytes'][r]}/{c['resp_bytes'][r]}",
            ",".join(topics),
            rec,
            (",".join(issues), "error" if sev >= 3 else "warning" if sev == 2 else "dim")
            if issues else "",
        )


# ------------------------------------------------------------------------------------ stat rows

def error_counts(errors) -> str:
    """``NOT_LEADER_OR_FOLLOWER×3, REQUEST_TIMED_OUT×1``: error names with the number of
    exchanges whose response carried each (most frequent first)."""
    return ", ".join(f"{name}×{n}" for name, n in errors)


def stat_columns(first: str, width: int = 20, max_width: int = 40,
                 errors_width: int = 22) -> list[Column]:
    """The columns of a :class:`StatRow` table; ``first`` labels the key column (API,
    broker, client id) of ``width`` cells, growing to its longest key (``max_width`` at
    most) when there is room; the rest of the spare width goes to the error names
    (``NAME×count``, ``errors_width`` cells at least). ``Err`` counts the
    exchanges with an error code; latencies are p50, p90, p99 and max of the paired
    exchanges that are not long-polls; ``LP`` counts the long-polls (the broker held them by
    design, :mod:`kafkasniff.content.waits`) and ``LP p50`` is their median."""
    return [
        Column("key", first, width, priority=0, flex=1, max_width=max_width, fit=True),
        Column("count", "Count", 9, "right", priority=0),
        Column("rate", "Rate", 9, "right", priority=2),
        Column("errors", "Err", 6, "right", priority=1),
        Column("error_names", "Errors", errors_width, priority=1, flex=4),
        Column("p50", "p50", 10, "right", priority=1),
        Column("p90", "p90", 10, "right", priority=3),
        Column("p99", "p99", 10, "right", priority=0),
        Column("max", "Max", 10, "right", priority=3),
        Column("long_polls", "LP", 6, "right", priority=2),
        Column("long_poll_p50", "LP p50", 10, "right", priority=4),
        Column("throttled", "Throttled", 9, "right", priority=3),
        Column("throttle_total", "Thr total", 10, "right", priority=4),
        Column("bytes", "Req/resp bytes", 16, "right", priority=4),
    ]


#: how many columns of :func:`stat_columns` the Overview's brokers and clients panels show
STAT_PANEL_COLUMNS = 8

STAT_SORT = {
    "key": lambda r: r.key.lower(), "count": lambda r: r.count, "rate": lambda r: r.rate_per_s,
    "errors": lambda r: r.error_exchanges,
    "error_names": lambda r: (r.errors[0][1] if r.errors else 0, r.error_exchanges),
    "p50": lambda r: r.p50_ns or -1, "p90": lambda r: r.p90_ns or -1,
    "p99": lambda r: r.p99_ns or -1, "max": lambda r: r.max_ns or -1,
    "long_polls": lambda r: r.long_polls,
    "long_poll_p50": lambda r: r.long_poll_p50_ns or -1,
    "throttled": lambda r: r.throttled, "throttle_total": lambda r: r.throttle_total_ms,
    "bytes": lambda r: r.request_bytes + r.response_bytes,
}


def stat_cells(r: StatRow) -> tuple:
    """The cells of a :class:`StatRow` in the order of :func:`stat_columns`."""
    errs = error_counts(r.errors)
    return (r.key, fmt_count(r.count), fmt_rate(r.rate_per_s),
            (fmt_count(r.error_exchanges), "error") if r.error_exchanges else "0",
            (errs, "error") if errs else "",
            fmt_ms(r.p50_ns), fmt_ms(r.p90_ns), fmt_ms(r.p99_ns), fmt_ms(r.max_ns),
            (fmt_count(r.long_polls), "dim") if r.long_polls else "0",
            (fmt_ms(r.long_poll_p50_ns), "dim") if r.long_polls else "-",
            (fmt_count(r.throttled), "warning") if r.throttled else "0",
            f"{r.throttle_total_ms}ms",
            f"{fmt_bytes(r.request_bytes)}/{fmt_bytes(r.response_bytes)}")


class RowsModel:
    """A model over a list of rows with a cells function, sortable by key functions."""

    #: rows measured for :meth:`content_width` (the first ones, in the order of the first
    #: call: a snapshot of 100,000 connections is not measured whole on the UI thread)
    MEASURED_ROWS = 2_000

    def __init__(self, rows: Sequence, cells, sort_keys: dict | None = None) -> None:
        self.rows = list(rows)
        self._cells = cells
        self.sort_keys = sort_keys or {}
        self._widths: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self.rows)

    def content_width(self, column: int) -> int:
        """Cells of the widest text of ``column`` as the table shows it (escaped), over the
        first :data:`MEASURED_ROWS` rows; computed once per model."""
        w = self._widths.get(column)
        if w is None:
            w = 1
            for row in self.rows[:self.MEASURED_ROWS]:
                cells = self._cells(row)
                cell = cells[column] if column < len(cells) else ""
                text = cell[0] if type(cell) is tuple else cell
                w = max(w, len(escape_text(text)))
            self._widths[column] = w
        return w

    def cells(self, index: int) -> Sequence:
        return self._cells(self.rows[index])

    def sort(self, key: str | None, reverse: bool) -> None:
        """Sort the rows in place by ``sort_keys[key]`` (unknown or ``None`` key: no-op)."""
        fn = self.sort_keys.get(key) if key else None
        if fn is not None:
            self.rows.sort(key=fn, reverse=reverse)


# ------------------------------------------------------------------------------------ clients

CLIENT_COLUMNS = stat_columns("Client id", 20)[:5] + [
    Column("connections", "Conns", 6, "right", priority=2),
    Column("hosts", "Hosts", 6, "right", priority=3),
] + stat_columns("Client id", 20)[5:]

CLIENT_SORT = {**{k: (lambda f: lambda r: f(r.stats))(f) for k, f in STAT_SORT.items()},
               "connections": lambda r: r.connections, "hosts": lambda r: r.hosts}


def client_cells(r: ClientRow) -> tuple:
    """The cells of a :class:`ClientRow` in the order of :data:`CLIENT_COLUMNS`."""
    s = stat_cells(r.stats)
    return s[:5] + (fmt_count(r.connections), fmt_count(r.hosts)) + s[5:]


# ------------------------------------------------------------------------------------ connections

CONN_COLUMNS = [
    Column("conn_id", "Id", 6, "right", priority=0),
    Column("client", "Client", 22, priority=0),
    Column("broker", "Broker", 22, priority=1),
    Column("client_id", "Client id", 16, priority=0, flex=True, max_width=40, fit=True),
    Column("exchanges", "Exch", 7, "right", priority=0),
    Column("errors", "Errors", 6, "right", priority=1),
    Column("issues", "Issues", 6, "right", priority=2),
    Column("max_latency", "Max lat", 11, "right", priority=2),
    Column("long_polls", "LP", 5, "right", priority=2),
    Column("bytes", "Req/resp bytes", 16, "right", priority=3),
    Column("state", "State", 14, priority=1),
    Column("kind", "Kind", 7, priority=4),
    Column("sasl", "SASL", 16, priority=4),
    Column("gaps", "Gap B", 7, "right", priority=5),
    Column("first", "First (UTC)", 15, priority=5),
]

CONN_SORT = {
    "conn_id": lambda r: r.conn_id, "client": lambda r: r.client, "broker": lambda r: r.broker,
    "client_id": lambda r: r.client_id.lower(), "exchanges": lambda r: r.exchanges,
    "errors": lambda r: r.error_exchanges, "issues": lambda r: r.issues,
    "max_latency": lambda r: r.max_latency_ns or -1, "long_polls": lambda r: r.long_polls,
    "bytes": lambda r: r.request_bytes + r.response_bytes, "state": lambda r: r.state,
    "kind": lambda r: r.kind, "sasl": lambda r: r.sasl, "gaps": lambda r: r.gap_bytes,
    "first": lambda r: r.first_ts_ns,
}


def conn_cells(r: ConnRow) -> tuple:
    """The cells of a :class:`ConnRow` in the order of :data:`CONN_COLUMNS`."""
    return (str(r.conn_id), r.client, r.broker, r.client_id or "-", fmt_count(r.exchanges),
            (str(r.error_exchanges), "error") if r.error_exchanges else "0",
            (str(r.issues), "warning") if r.issues else "0", fmt_ms(r.max_latency_ns),
            (str(r.long_polls), "dim") if r.long_polls else "0",
            f"{fmt_bytes(r.request_bytes)}/{fmt_bytes(r.response_bytes)}",
            (r.state, "ok" if r.state == "open" else ""), r.kind, r.sasl,
            (str(r.gap_bytes), "warning") if r.gap_bytes else "0", fmt_time(r.first_ts_ns))


# ------------------------------------------------------------------------------------ topics

TOPIC_COLUMNS = [
    Column("topic", "Topic", 20, priority=0, flex=1, max_width=40, fit=True),
    Column("exchanges", "Exch", 7, "right", priority=0),
    Column("errors", "Err exch", 8, "right", priority=1),
    Column("partition_errors", "Partition errors", 30, priority=0, flex=4),
    Column("produce", "Produce rec/bytes", 18, "right", priority=1),
    Column("produce_rate", "Produce B/s", 11, "right", priority=2),
    Column("fetch", "Fetch rec/bytes", 18, "right", priority=1),
    Column("fetch_rate", "Fetch B/s", 11, "right", priority=2),
]

TOPIC_SORT = {
    "topic": lambda r: r.topic.lower(), "exchanges": lambda r: r.exchanges,
    "errors": lambda r: r.error_exchanges,
    "partition_errors": lambda r: sum(n for _, _, n in r.partition_errors),
    "produce": lambda r: r.produce_bytes, "produce_rate": lambda r: r.produce_rate_bps,
    "fetch": lambda r: r.fetch_bytes, "fetch_rate": lambda r: r.fetch_rate_bps,
}


def topic_cells(r: TopicRow) -> tuple:
    """The cells of a :class:`TopicRow` in the order of :data:`TOPIC_COLUMNS`."""
    perr = ", ".join(f"p{p if p is not None else '?'} {e}×{n}" for p, e, n in r.partition_errors)
    return (r.topic, fmt_count(r.exchanges),
            (str(r.error_exchanges), "error") if r.error_exchanges else "0",
            (perr, "error") if perr else "",
            f"{fmt_count(r.produce_records)}/{fmt_bytes(r.produce_bytes)}",
            fmt_bytes(r.produce_rate_bps) + "/s",
            f"{fmt_count(r.fetch_records)}/{fmt_bytes(r.fetch_bytes)}",
            fmt_bytes(r.fetch_rate_bps) + "/s")


# ------------------------------------------------------------------------------------ issues

ISSUE_COLUMNS = [
    Column("time", "Time (UTC)", 15, priority=0),
    Column("severity", "Severity", 8, priority=0),
    Column("kind", "Kind", 20, priority=0),
    Column("where", "Where", 34, priority=3),
    Column("exchange", "Exchange", 24, priority=2),
    Column("message", "Message", 30, priority=0, flex=True),
]


class IssueModel:
    """Issues of the store (all, or a filtered list of indices into ``store.issues``)."""

    def __init__(self, store: SummaryStore, indices: array | None = None) -> None:
        self.store = store
        self.indices = indices

    def __len__(self) -> int:
        return len(self.indices) if self.indices is not None else len(self.store.issues)

    def issue_at(self, index: int):
        """``(row of its exchange or -1, DecodeIssue)`` of the issue shown at ``index``."""
        k = self.indices[index] if self.indices is not None else index
        return self.store.issue_at(k)

    def cells(self, index: int) -> Sequence:
        row, iss = self.issue_at(index)
        sev = str(iss.severity)
        if row >= 0:
            c = self.store.columns
            exch = f"#{row} " + api_label(self.store.tables.names.items[c["name"][row]],
                                          c["api_version"][row])
        else:
            exch = "(standalone)"
        where = f"{iss.client} → {iss.broker}" if iss.client else "capture"
        return (fmt_time(iss.ts_ns),
                (sev, "error" if sev == "error" else "warning" if sev == "warning" else "dim"),
                str(iss.kind), where, exch, iss.message)


# ------------------------------------------------------------------------------------ groups

#: The Groups view's columns (one row per group of the consumer-group analysis,
#: :class:`~kafkasniff.groups.model.Group`). ``Gen/epoch``: the last classic generation or the
#: largest KIP-848 / share member epoch; ``Longest`` / ``Last``: the longest and the last
#: rebalance's duration (``open`` when it did not end in the capture); ``Commits``: commit
#: requests (OffsetCommit, TxnOffsetCommit); Errors: the group's answers' error names.
GROUP_COLUMNS = [
    Column("group_id", "Group id", 20, priority=0, flex=1, max_width=40, fit=True),
    Column("protocol", "Protocol", 8, priority=0),
    Column("coordinator", "Coordinator", 21, priority=3),
    Column("members", "Members", 7, "right", priority=1),
    Column("generation", "Gen/epoch", 9, "right", priority=3),
    Column("rebalances", "Rebal", 5, "right", priority=0),
    Column("longest", "Longest", 11, "right", priority=1),
    Column("last", "Last", 11, "right", priority=2),
    Column("commits", "Commits", 7, "right", priority=2),
    Column("errors", "Errors", 14, priority=1, flex=3, grow_to=22),
]


def _longest(g):
    """The group's longest rebalance (one that never ended counts as the longest)."""
    if not g.rebalances:
        return None
    return max(g.rebalances, key=lambda r: (r.end_ts_ns is None, r.duration_ns or 0))


def group_commit_requests(g) -> int:
    """Commit requests of a group (its commit rows are per partition)."""
    return len({(c.exchange.conn_id, c.exchange.correlation_id, c.exchange.ts_ns)
                for c in g.commits})


GROUP_SORT = {
    "group_id": lambda g: g.group_id.lower(), "protocol": lambda g: g.protocol,
    "coordinator": lambda g: g.coordinator or "", "members": lambda g: len(g.members),
    "generation": lambda g: g.generation_id, "rebalances": lambda g: len(g.rebalances),
    "longest": lambda g: (lambda r: -1 if r is None else
                          (1 << 62) if r.duration_ns is None else r.duration_ns)(_longest(g)),
    "last": lambda g: -1 if not g.rebalances else (
        (1 << 62) if g.rebalances[-1].duration_ns is None else g.rebalances[-1].duration_ns),
    "commits": group_commit_requests,
    "errors": lambda g: sum(n for _, n in g.errors),
}


def group_cells(g) -> tuple:
    """The cells of a :class:`~kafkasniff.groups.model.Group` in the order of
    :data:`GROUP_COLUMNS`."""
    errs = error_counts(g.errors)

    def duration(r):
        if r is None:
            return "-"
        return ("open", "warning") if r.end_ts_ns is None else fmt_ms(r.duration_ns)
    return (g.group_id, g.protocol, g.coordinator or "-", fmt_count(len(g.members)),
            str(g.generation_id) if g.generation_id >= 0 else "-",
            fmt_count(len(g.rebalances)), duration(_longest(g)),
            duration(g.rebalances[-1] if g.rebalances else None),
            fmt_count(group_commit_requests(g)), (errs, "error") if errs else "")


#: Members of a group (drill-down).
MEMBER_COLUMNS = [
    Column("member_id", "Member id", 20, priority=0, flex=1, max_width=60),
    Column("instance", "Instance id", 14, priority=1, flex=1, max_width=30),
    Column("client_id", "Client id", 14, priority=0, flex=1, max_width=30),
    Column("host", "Host", 15, priority=2),
    Column("joined", "Joined", 15, priority=3),
    Column("left", "Left", 31, priority=3),
    Column("generation", "Gen/ep", 6, "right", priority=2),
    Column("assignment", "Assignment", 20, priority=0, flex=3),
]

MEMBER_SORT = {
    "member_id": lambda m: m.member_id, "instance": lambda m: m.group_instance_id or "",
    "client_id": lambda m: m.client_id or "", "host": lambda m: m.client_host,
    "joined": lambda m: m.joined_ts_ns or 0, "left": lambda m: m.left_ts_ns or 0,
    "generation": lambda m: max(m.generation_id, m.member_epoch),
    "assignment": lambda m: sum(len(ps) for _, ps in m.assignment or ()),
}


def member_cells(m) -> tuple:
    """The cells of a :class:`~kafkasniff.groups.model.Member` (:data:`MEMBER_COLUMNS`)."""
    left = "-"
    if m.left_ts_ns is not None:
        left = (f"{fmt_time(m.left_ts_ns)} {m.left_reason or ''}".rstrip(),
                "warning" if m.left_reason in ("session_timeout", "fenced") else "")
    gen = max(m.generation_id, m.member_epoch)
    return (m.member_id, m.group_instance_id or "-", m.client_id or "-", m.client_host or "-",
            fmt_time(m.joined_ts_ns) if m.joined_ts_ns is not None else "-", left,
            str(gen) if gen >= 0 else "-", assignment_text(m.assignment))


#: Rebalances of a group (drill-down); Enter shows the exchanges each was read from.
REBALANCE_COLUMNS = [
    Column("index", "#", 3, "right", priority=0),
    Column("start", "Start (UTC)", 15, priority=0),
    Column("end", "End (UTC)", 15, priority=3),
    Column("duration", "Duration", 11, "right", priority=0),
    Column("trigger", "Trigger", 18, priority=0, flex=1, max_width=50),
    Column("generation", "Gen/ep", 6, "right", priority=2),
    Column("members", "Memb", 4, "right", priority=2),
    Column("errors", "Errors", 14, priority=1, flex=1, max_width=60),
    Column("assignment", "Assignment after", 20, priority=1, flex=3),
]

REBALANCE_SORT = {
    "index": lambda r: r.index, "start": lambda r: r.start_ts_ns,
    "end": lambda r: r.end_ts_ns or (1 << 62),
    "duration": lambda r: (1 << 62) if r.duration_ns is None else r.duration_ns,
    "trigger": lambda r: r.trigger, "generation": lambda r: r.generation_id,
    "members": lambda r: len(r.members), "errors": lambda r: len(r.errors),
    "assignment": lambda r: len(r.assignment),
}


def rebalance_trigger(r) -> str:
    """``join 0x7f…``, ``error REBALANCE_IN_PROGRESS``: the trigger with its error or
    member."""
    return " ".join(x for x in (r.trigger, r.trigger_error, r.trigger_member) if x)


def rebalance_assignment(r) -> str:
    """``member: topic[0,1]; other: topic[2]`` (members of the assignment after ``r``)."""
    return "; ".join(f"{m}: {assignment_text(a)}" for m, a in r.assignment) or "-"


def rebalance_cells(r) -> tuple:
    """The cells of a :class:`~kafkasniff.groups.model.Rebalance`
    (:data:`REBALANCE_COLUMNS`)."""
    return (str(r.index), fmt_time(r.start_ts_ns),
            fmt_time(r.end_ts_ns) if r.end_ts_ns is not None else ("open", "warning"),
            (fmt_ms(r.duration_ns) if r.duration_ns is not None else "open",
             "" if r.complete else "warning"),
            (rebalance_trigger(r), "error" if r.trigger in ("error", "session_timeout")
             else ""),
            str(r.generation_id) if r.generation_id >= 0 else "-", str(len(r.members)),
            (", ".join(r.errors), "error") if r.errors else "", rebalance_assignment(r))


#: The last commits of a group (drill-down); Enter shows the commit's exchange.
COMMIT_COLUMNS = [
    Column("time", "Time (UTC)", 15, priority=0),
    Column("topic", "Topic", 16, priority=0, flex=1, max_width=40),
    Column("partition", "Part", 4, "right", priority=0),
    Column("offset", "Offset", 10, "right", priority=0),
    Column("latency", "Latency", 10, "right", priority=1),
    Column("lag", "Lag", 8, "right", priority=1),
    Column("error", "Error", 14, priority=1, flex=1, max_width=40),
    Column("member", "Member id", 16, priority=3, flex=1, max_width=60),
]

COMMIT_SORT = {
    "time": lambda c: c.ts_ns, "topic": lambda c: c.topic, "partition": lambda c: c.partition,
    "offset": lambda c: c.committed_offset, "latency": lambda c: c.latency_ns or -1,
    "lag": lambda c: -1 if c.lag is None else c.lag, "error": lambda c: c.error or "",
    "member": lambda c: c.member_id,
}


def commit_cells(c) -> tuple:
    """The cells of a :class:`~kafkasniff.groups.model.Commit` (:data:`COMMIT_COLUMNS`)."""
    return (fmt_time(c.ts_ns), c.topic, str(c.partition), str(c.committed_offset),
            fmt_ms(c.latency_ns) if c.answered else ("unanswered", "warning"),
            str(c.lag) if c.lag is not None else "-",
            (c.error, "error") if c.error else "", c.member_id or "-")
