"""What every command that reads captures shares: the input options (tshark-like), the
progress bar, the checks of output paths made before any work starts, and the one-line
error exit."""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import dataclass
from typing import NoReturn

import click

from kafkasniff.content.budgets import budget_names, parse_budgets


@dataclass
class InputOptions:
    """Input options shared by every command that reads captures."""

    sources: list[str]
    ports: tuple[int, ...]
    detect: bool
    max_frame_bytes: int
    definitions: str | None
    max_uncompressed_bytes: int = 64 * 1024 * 1024
    show_secrets: bool = False
    wire_format: str = "auto"
    budgets: object = None      # kafkasniff.content.budgets.Budgets; None: the defaults
    tls_keylog: tuple[str, ...] = ()

    def pipeline_options(self, **extra):
        """The :class:`~kafkasniff.pipeline.PipelineOptions` of these inputs; ``extra`` sets
        further fields (e.g. ``with_records=True``)."""
        from kafkasniff.pipeline import PipelineOptions

        return PipelineOptions(ports=frozenset(self.ports), detect=self.detect,
                               max_frame_bytes=self.max_frame_bytes,
                               definitions_dir=self.definitions,
                               max_uncompressed_bytes=self.max_uncompressed_bytes,
                               show_secrets=self.show_secrets, wire_format=self.wire_format,
                               tls_keylog=tuple(self.tls_keylog),
                               **({"budgets": self.budgets} if self.budgets else {}), **extra)


def _store_budgets(ctx: click.Context, _param, specs: tuple[str, ...]):
    if specs:
        from kafkasniff.errors import KafkaSniffError

        try:
            ctx.meta["kafkasniff.budgets"] = parse_budgets(specs)
        except KafkaSniffError as exc:
            raise click.BadParameter(str(exc)) from None
    return specs


budget_option = click.option(
    "--budget", "budget_specs", multiple=True, metavar="NAME=VALUE", expose_value=False,
    callback=_store_budgets,
    help="Change a work/memory budget (repeatable; K/M/G suffixes, 0 = unbounded): "
         f"{', '.join(budget_names())} (docs/budgets.md).")


def _store_keylogs(ctx: click.Context, _param, paths: tuple[str, ...]):
    for path in paths:
        if os.path.isdir(path):
            fail(f"--tls-keylog {path}: is a directory")
    if paths:
        ctx.meta["kafkasniff.tls_keylog"] = tuple(paths)
    return paths


def check_definitions_dir(_ctx, _param, path: str | None) -> str | None:
    """Click callback of ``--definitions``: an existing directory, else one line (exit 2)."""
    if path is not None and not os.path.isdir(path):
        fail(f"--definitions {path}: "
             f"{'not a directory' if os.path.exists(path) else 'no such directory'}")
    return path


#: the type of a capture input (FILE..., -r): a path or '-', checked by the reader itself
#: (one-line errors: a directory, a missing or unreadable file; a FIFO is opened once)
CAPTURE_PATH = click.Path(allow_dash=True, readable=False)


tls_keylog_option = click.option(
    "--tls-keylog", "tls_keylog", multiple=True, metavar="FILE", expose_value=False,
    type=click.Path(readable=False), callback=_store_keylogs,
    help="NSS key log of TLS session secrets (repeatable; the format of Wireshark's "
         "tls.keylog_file, SSLKEYLOGFILE): decrypt TLS connections and decode the Kafka "
         "inside (docs/tls.md).")


def input_options(func):
    """Decorate a command with the capture input options (tshark-like)."""
    opts = [
        click.argument("files", nargs=-1, type=CAPTURE_PATH),
        click.option("-r", "--read-file", "read_files", multiple=True, type=CAPTURE_PATH,
                     help="Capture file to read (repeatable; '-' for stdin), like tshark -r."),
        click.option("--port", "ports", multiple=True, type=click.IntRange(1, 65535),
                     default=(9092,), show_default=True,
                     help="Kafka broker port (repeatable). The endpoint on it is the broker."),
        click.option("--detect/--no-detect", default=True, show_default=True,
                     help="Also find Kafka on any port by recognising request headers."),
        click.option("--max-frame-bytes", type=click.IntRange(16), default=100 * 1024 * 1024,
                     show_default=True, help="Largest Kafka frame accepted (bytes)."),
        click.option("--definitions", type=click.Path(readable=False),
                     default=None, callback=check_definitions_dir,
                     help="Directory of generated definitions to decode with "
                          "(default: the installed ones)."),
        click.option("--max-uncompressed-bytes", type=click.IntRange(1024),
                     default=64 * 1024 * 1024, show_default=True,
                     help="Largest decompressed size of one record batch; beyond it the batch "
                          "is reported (decompression_limit), not decoded."),
        click.option("--wire-format", type=click.Choice(["auto", "modern", "0.7"]),
                     default="auto", show_default=True,
                     help="Kafka wire format: recognise 0.8+ and pre-0.8 (0.7) traffic "
                          "automatically, or force one."),
        click.option("--show-secrets", is_flag=True,
                     help="Show SASL passwords, SCRAM proofs, OAuth and GSSAPI tokens and "
                          "delegation-token HMACs instead of redacting them."),
        budget_option,
        tls_keylog_option,
    ]
    for o in reversed(opts):
        func = o(func)
    return func


#: the filter options' names, as errors name them
_FILTER_LABELS = {"client": "--client", "topic": "--topic",
                  "min_latency": "--min-latency"}


def filter_options(func):
    """Decorate a command with the exchange filter options of ``read`` and ``live`` (the
    language of :mod:`kafkasniff.output.filters`, the TUI's filter dialog's too); the
    command passes their values to :func:`parse_filter_options`."""
    opts = [
        click.option("--api", multiple=True, metavar="NAMES",
                     help="Only these APIs: names (any case) or api_keys, comma separated "
                          "and repeatable (--api Produce,Fetch).  An unknown name is an "
                          "error."),
        click.option("--client", default=None,
                     help="Only this client: a pattern over the client_id or the client's "
                          "ip:port (any case; plain text: substring, with * ? [ ]: glob, "
                          "=text: exact)."),
        click.option("--topic", default=None,
                     help="Only exchanges touching this topic (a pattern, as --client)."),
        click.option("--errors-only", is_flag=True,
                     help="Only exchanges with a Kafka error code."),
        click.option("--min-latency", default=None, metavar="MS",
                     help="Only exchanges at least this slow (milliseconds, e.g. 12.5)."),
    ]
    for o in reversed(opts):
        func = o(func)
    return func


def parse_filter_options(api, client, topic, errors_only, min_latency, definitions=None):
    """The :class:`~kafkasniff.output.filters.Filter` of :func:`filter_options`' values
    (API names of the ``--definitions`` directory); a criterion that could match nothing
    (an unknown API, an invalid pattern, a latency that is not a number) fails with one line
    naming the valid choices (exit 2)."""
    from kafkasniff.errors import KafkaSniffError
    from kafkasniff.output.filters import known_api_names, parse_filter

    try:
        return parse_filter(apis=api, client=client, topic=topic, errors_only=errors_only,
                            min_latency=min_latency, api_names=known_api_names(definitions),
                            labels=_FILTER_LABELS)
    except KafkaSniffError as exc:       # FilterError; DefinitionError: no index to name APIs
        fail(str(exc))


def parse_inputs(files, read_files, ports, detect, max_frame_bytes, definitions,
                 max_uncompressed_bytes=64 * 1024 * 1024, wire_format="auto",
                 show_secrets=False) -> InputOptions:
    """The :class:`InputOptions` of the values of :func:`input_options`; raises
    :class:`click.UsageError` when no capture is given or stdin is given twice."""
    sources = list(read_files) + list(files)
    if not sources:
        raise click.UsageError("no capture given: pass FILE... or -r FILE ('-' for stdin)")
    if sources.count("-") > 1:
        raise click.UsageError("stdin ('-') can be read only once")
    ctx = click.get_current_context(silent=True)
    budgets = ctx.meta.get("kafkasniff.budgets") if ctx is not None else None
    keylogs = ctx.meta.get("kafkasniff.tls_keylog", ()) if ctx is not None else ()
    return InputOptions(sources, tuple(ports), detect, max_frame_bytes, definitions,
                        max_uncompressed_bytes, show_secrets, wire_format, budgets, keylogs)


#: below this many bytes of regular files, ``--jobs`` defaults to 1 (starting decoder
#: processes costs more than it saves)
SMALL_INPUT_BYTES = 16 << 20


def _parse_jobs(ctx, param, value):
    if value is None or value == "auto":
        return None
    try:
        n = int(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a number or 'auto'") from None
    if n < 1:
        raise click.BadParameter("must be at least 1")
    return n


jobs_option = click.option(
    "-j", "--jobs", "jobs", default="auto", show_default=True, metavar="N|auto",
    callback=_parse_jobs,
    help="Decoder processes: packets are routed by connection to N processes and the "
         "results merged in order (same output as 1). auto: one per usable core, 1 for "
         "inputs under 16 MiB (docs/performance.md).")


def resolve_jobs(jobs: int | None, sources: list) -> int:
    """``--jobs``: the number given, or for ``auto`` (``None``) the usable cores, except 1
    when every source is a regular file and together they are under
    :data:`SMALL_INPUT_BYTES`."""
    if jobs is not None:
        return jobs
    from kafkasniff.parallel.engine import default_jobs

    n = default_jobs()
    if n == 1:
        return 1
    total = 0
    for src in sources:
        try:
            st = os.stat(src)
        except (OSError, TypeError, ValueError):
            return n                      # stdin, a pipe, a file object: size unknown
        if not stat.S_ISREG(st.st_mode):
            return n
        total += st.st_size
    return 1 if total < SMALL_INPUT_BYTES else n


class Progress:
    """A progress bar on stderr for long files when stderr is a terminal."""

    def __init__(self, enabled: bool) -> None:
        self.bar = None
        self.enabled = enabled and sys.stderr.isatty()
        self.last = 0

    def __call__(self, done: int, total: int | None) -> None:
        if not self.enabled or not total:
            return
        if self.bar is None:
            self.bar = click.progressbar(length=total, file=sys.stderr, label="decoding",
                                         show_percent=True, show_eta=True)
            self.bar.__enter__()
        self.bar.update(max(0, done - self.last))
        self.last = done

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None


def fail(message: str) -> NoReturn:
    """Print ``kafkasniff: error: MESSAGE`` on stderr, on one line (the message escaped by
    :func:`kafkasniff.text.escape_text`: it may quote a file name or a name off the wire),
    and exit 2 (usage or unreadable input)."""
    from kafkasniff.text import escape_text

    click.echo(f"kafkasniff: error: {escape_text(message)}", err=True)
    sys.exit(2)


def output_dir(path: str, option: str) -> str:
    """The directory of an output option (``export -o``, ``live --export``, ``spark decode
    -o``, ``tui --save-dir``), made ready before any capture or decoding starts: created with
    its parents when missing. Fails with one line, ``kafkasniff: error: OPTION PATH: why``
    (exit 2), when it cannot be made (a file in the way, no permission, a read-only file
    system) or cannot be written. Returns ``path``."""
    try:
        os.makedirs(path, exist_ok=True)
    except FileExistsError:
        fail(f"{option} {path}: not a directory")
    except OSError as exc:
        fail(f"{option} {path}: {(exc.strerror or str(exc)).lower()}")
    if not os.path.isdir(path):
        fail(f"{option} {path}: not a directory")
    if not os.access(path, os.W_OK | os.X_OK):
        fail(f"{option} {path}: permission denied")
    return path


def output_file(path: str, option: str) -> str:
    """The file of an output option (``live -w``, ``stats --openmetrics``), checked before
    any capture or decoding starts (not created here): not a directory, in an existing
    directory that can be written, and writable when it exists. Fails with one line,
    ``kafkasniff: error: OPTION PATH: why`` (exit 2). Returns ``path``."""
    if os.path.isdir(path):
        fail(f"{option} {path}: is a directory")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        why = "not a directory" if os.path.exists(parent) else "no such directory"
        fail(f"{option} {path}: {why}: {parent}")
    if not os.access(parent, os.W_OK | os.X_OK) or (os.path.exists(path)
                                                    and not os.access(path, os.W_OK)):
        fail(f"{option} {path}: permission denied")
    return path
