"""The ``kafkasniff`` command line (click).

Exit codes: 0 ok; 1 decode problems found and ``--strict`` was given; 2 usage error or an
input that cannot be read at all (one-line error on stderr). Only this module calls
``sys.exit``. Headless commands (``read``, ``stats``, ``export``) never import Textual.
"""

from __future__ import annotations

import fnmatch
import json
import sys
from dataclasses import dataclass

import click

from kafkasniff import __version__
from kafkasniff.errors import KafkaSniffError


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

    def pipeline_options(self, **extra):
        """The :class:`~kafkasniff.pipeline.PipelineOptions` of these inputs; ``extra`` sets
        further fields (e.g. ``with_records=True``)."""
        from kafkasniff.pipeline import PipelineOptions

        return PipelineOptions(ports=frozenset(self.ports), detect=self.detect,
                               max_frame_bytes=self.max_frame_bytes,
                               definitions_dir=self.definitions,
                               max_uncompressed_bytes=self.max_uncompressed_bytes,
                               show_secrets=self.show_secrets, wire_format=self.wire_format,
                               **extra)


def input_options(func):
    """Decorate a command with the capture input options (tshark-like)."""
    opts = [
        click.argument("files", nargs=-1, type=click.Path(allow_dash=True, dir_okay=False)),
        click.option("-r", "--read-file", "read_files", multiple=True,
                     type=click.Path(allow_dash=True, dir_okay=False),
                     help="Capture file to read (repeatable; '-' for stdin), like tshark -r."),
        click.option("--port", "ports", multiple=True, type=click.IntRange(1, 65535),
                     default=(9092,), show_default=True,
                     help="Kafka broker port (repeatable). The endpoint on it is the broker."),
        click.option("--detect/--no-detect", default=True, show_default=True,
                     help="Also find Kafka on any port by recognising request headers."),
        click.option("--max-frame-bytes", type=click.IntRange(16), default=100 * 1024 * 1024,
                     show_default=True, help="Largest Kafka frame accepted (bytes)."),
        click.option("--definitions", type=click.Path(file_okay=False, exists=True),
                     default=None, help="Directory of generated definitions to decode with "
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
    ]
    for o in reversed(opts):
        func = o(func)
    return func


def _inputs(files, read_files, ports, detect, max_frame_bytes, definitions,
            max_uncompressed_bytes=64 * 1024 * 1024, wire_format="auto",
            show_secrets=False) -> InputOptions:
    sources = list(read_files) + list(files)
    if not sources:
        raise click.UsageError("no capture given: pass FILE... or -r FILE ('-' for stdin)")
    if sources.count("-") > 1:
        raise click.UsageError("stdin ('-') can be read only once")
    return InputOptions(sources, tuple(ports), detect, max_frame_bytes, definitions,
                        max_uncompressed_bytes, show_secrets, wire_format)


class _Progress:
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


def _fail(message: str) -> None:
    click.echo(f"kafkasniff: error: {message}", err=True)
    sys.exit(2)


class LazyGroup(click.Group):
    """A click group whose heavier commands are imported only when used, so that ``read``
    and ``stats`` never load the modules (and libraries) of ``tui``, ``live``, ``export``
    or ``spark``."""

    lazy = {
        "export": ("kafkasniff.export.command", "export_command"),
        "tui": ("kafkasniff.tui.command", "tui_command"),
        "live": ("kafkasniff.live.command", "live_command"),
        "spark": ("kafkasniff.spark.command", "spark_group"),
    }

    def list_commands(self, ctx):
        """Every command name, the lazy ones included when their module is installed."""
        import importlib.util

        present = {name for name, (module, _) in self.lazy.items()
                   if importlib.util.find_spec(module) is not None}
        return sorted(set(super().list_commands(ctx)) | present)

    def get_command(self, ctx, name):
        """The command ``name``, importing a lazy one on first use; raises
        :class:`click.UsageError` when its module or libraries cannot be imported."""
        cmd = super().get_command(ctx, name)
        if cmd is None and name in self.lazy:
            import importlib

            module, attr = self.lazy[name]
            try:
                cmd = getattr(importlib.import_module(module), attr)
            except (ImportError, AttributeError) as exc:
                raise click.UsageError(f"the {name!r} command is not available: {exc}") from exc
        return cmd


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kafkasniff")
def main() -> None:
    """kafkasniff: Kafka wire-traffic sniffer and protocol analyzer.

    Reads pcap/pcapng captures, reassembles TCP, decodes every Kafka request and response
    of every API version, pairs them by correlation_id, and reports latency, errors and
    throttling.
    """


def _api_matcher(apis: tuple[str, ...]):
    if not apis:
        return None
    wanted = {a.lower() for a in apis}
    return lambda ex: ex.api_name.lower() in wanted or str(ex.api_key) in wanted


def build_filter(api, client, topic, errors_only, min_latency):
    """A predicate over exchanges for the ``read`` filters (``None`` when none is set).

    ``api``: API names (any case) or api_key numbers as strings; ``client`` / ``topic``:
    glob patterns on client_id / any topic; ``errors_only``: exchanges with an error code;
    ``min_latency``: milliseconds (float), paired exchanges at least that slow. All given
    filters must hold.
    """
    checks = []
    m = _api_matcher(api)
    if m:
        checks.append(m)
    if client is not None:
        checks.append(lambda ex: ex.client_id is not None and fnmatch.fnmatchcase(ex.client_id, client))
    if topic is not None:
        checks.append(lambda ex: any(fnmatch.fnmatchcase(t, topic) for t in ex.topics))
    if errors_only:
        checks.append(lambda ex: bool(ex.errors))
    if min_latency is not None:
        ns = int(min_latency * 1e6)
        checks.append(lambda ex: ex.latency_ns is not None and ex.latency_ns >= ns)
    if not checks:
        return None
    return lambda ex: all(c(ex) for c in checks)


def _summary_line(stats, shown: int | None = None) -> str:
    from kafkasniff.output.render import summary_parts

    return "summary: " + "; ".join(summary_parts(
        stats.exchanges, stats.issues, stats.packets, stats.skipped, stats.kafka_connections,
        stats.other_connections, shown))


@main.command()
@input_options
@click.option("--json", "as_json", is_flag=True, help="JSON Lines: one object per exchange "
              "(and per standalone issue), see docs/json.md.")
@click.option("--api", multiple=True, help="Only these APIs (name or key, repeatable).")
@click.option("--client", default=None, help="Only this client_id (glob pattern).")
@click.option("--topic", default=None, help="Only exchanges touching this topic (glob pattern).")
@click.option("--errors-only", is_flag=True, help="Only exchanges with a Kafka error code.")
@click.option("--min-latency", type=float, default=None, metavar="MS",
              help="Only exchanges at least this slow (milliseconds).")
@click.option("-c", "--count", type=click.IntRange(1), default=None,
              help="Stop after this many exchanges.")
@click.option("--no-issues", is_flag=True, help="Do not print standalone issues.")
@click.option("--strict", is_flag=True, help="Exit 1 if any warning or error issue was found.")
@click.option("--color/--no-color", default=None, help="Colour errors (default: on a terminal).")
@click.option("-q", "--quiet", is_flag=True, help="No summary line on stderr.")
@click.option("--records", "with_records", is_flag=True,
              help="Decode and show every record (partition, offset, timestamp, key, value, "
                   "headers), not only batch summaries.")
@click.option("--value-bytes", type=click.IntRange(0), default=256, show_default=True,
              help="Bytes of each record key/value shown (0: everything).")
def read(files, read_files, ports, detect, max_frame_bytes, definitions, max_uncompressed_bytes,
         wire_format, show_secrets, as_json, api, client, topic, errors_only, min_latency, count, no_issues,
         strict, color, quiet, with_records, value_bytes):
    """Print every exchange: one line each, or JSON Lines with --json."""
    from kafkasniff.model import Exchange
    from kafkasniff.output.render import (
        exchange_line,
        exchange_to_dict,
        issue_line,
        issue_to_dict,
        json_default,
        record_lines,
    )
    from kafkasniff.pipeline import Pipeline, analyze

    inp = _inputs(files, read_files, ports, detect, max_frame_bytes, definitions,
                  max_uncompressed_bytes, wire_format, show_secrets)
    keep = build_filter(api, client, topic, errors_only, min_latency)
    show_issues = not no_issues and keep is None
    if color is None:
        color = sys.stdout.isatty()
    progress = _Progress(enabled=not quiet)
    shown = 0
    bad = 0
    out = sys.stdout
    default = json_default(value_bytes)
    try:
        pipe = Pipeline(inp.pipeline_options(with_records=with_records))
        for rec in analyze(inp.sources, pipeline=pipe, on_progress=progress):
            if type(rec) is Exchange:
                bad += sum(1 for i in rec.issues if i.severity != "info")
                if keep is not None and not keep(rec):
                    continue
                if as_json:
                    out.write(json.dumps(exchange_to_dict(rec, value_bytes, convert=False),
                                         ensure_ascii=False, default=default))
                else:
                    out.write(exchange_line(rec, color))
                    if with_records:
                        for line in record_lines(rec, value_bytes):
                            out.write("\n")
                            out.write(line)
                out.write("\n")
                shown += 1
                if count is not None and shown >= count:
                    break
            else:
                if rec.severity != "info":
                    bad += 1
                if show_issues:
                    out.write(json.dumps(issue_to_dict(rec)) if as_json else issue_line(rec))
                    out.write("\n")
        out.flush()
    except KafkaSniffError as exc:
        progress.close()
        _fail(str(exc))
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(0)
    progress.close()
    if not quiet:
        out.flush()
        click.echo(_summary_line(pipe.stats, shown), err=True)
    sys.exit(1 if strict and bad else 0)


@main.command()
@input_options
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@click.option("--top", type=click.IntRange(1), default=20, show_default=True,
              help="Rows per table.")
@click.option("--strict", is_flag=True, help="Exit 1 if any warning or error issue was found.")
def stats(files, read_files, ports, detect, max_frame_bytes, definitions, max_uncompressed_bytes,
          wire_format, show_secrets, as_json, top, strict):
    """Latency percentiles, errors, throttling and bytes per API, client_id, broker and topic."""
    from kafkasniff.model import Exchange
    from kafkasniff.pipeline import Pipeline, analyze
    from kafkasniff.stats.aggregate import Aggregator
    from kafkasniff.stats.report import render_report

    inp = _inputs(files, read_files, ports, detect, max_frame_bytes, definitions,
                  max_uncompressed_bytes, wire_format, show_secrets)
    agg = Aggregator()
    progress = _Progress(enabled=True)
    try:
        pipe = Pipeline(inp.pipeline_options())
        for rec in analyze(inp.sources, pipeline=pipe, on_progress=progress):
            if type(rec) is Exchange:
                agg.add(rec)
            else:
                agg.add_issue(rec)
    except KafkaSniffError as exc:
        progress.close()
        _fail(str(exc))
    progress.close()
    pstats = pipe.stats.to_dict()
    report = agg.to_dict()
    try:
        if as_json:
            report["pipeline"] = pstats
            click.echo(json.dumps(report, indent=1))
        else:
            click.echo(render_report(report, pstats, top), nl=False)
    except BrokenPipeError:
        sys.exit(0)
    bad = sum(v for k, v in agg.issue_severity.items() if k != "info")
    sys.exit(1 if strict and bad else 0)


@main.group()
def definitions() -> None:
    """The Kafka message definitions kafkasniff decodes with."""


@definitions.command("generate")
@click.option("--specs", required=True, type=click.Path(file_okay=False, exists=True),
              help="Directory of Kafka JSON message specs (clients/src/main/resources/"
                   "common/message of a Kafka checkout).")
@click.option("--dropped", default=None, type=click.Path(file_okay=False, exists=True),
              help="Directory of older specs restoring versions the newest ones dropped.")
@click.option("--errors", "errors_file", default=None, type=click.Path(dir_okay=False, exists=True),
              help="errors.json error-code table (default: next to the specs directory).")
@click.option("--manifest", "manifest_file", default=None,
              type=click.Path(dir_okay=False, exists=True),
              help="manifest.json provenance of the specs (default: next to the specs "
                   "directory).")
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False),
              help="Output directory (e.g. dissectors/).")
@click.option("--api-keys", "api_keys_file", default=None, type=click.Path(dir_okay=False),
              help="Also write the API-key constants module here "
                   "(kafkasniff/protocol/apis.py).")
def definitions_generate(specs, dropped, errors_file, manifest_file, output, api_keys_file):
    """Regenerate the normalized definitions from Kafka's JSON specs."""
    from pathlib import Path

    from kafkasniff.generator.api_keys import write_api_keys
    from kafkasniff.generator.specs import generate

    try:
        written = generate(Path(specs), Path(output), dropped_dir=Path(dropped) if dropped else None,
                           errors_file=Path(errors_file) if errors_file else None,
                           manifest_file=Path(manifest_file) if manifest_file else None)
        if api_keys_file:
            written.append(write_api_keys(Path(output) / "index.json", Path(api_keys_file)))
    except KafkaSniffError as exc:
        _fail(str(exc))
    click.echo(f"wrote {len(written)} files to {output}")


@definitions.command("list")
@click.option("--definitions", "directory", type=click.Path(file_okay=False, exists=True),
              default=None, help="Definitions directory (default: the installed ones).")
def definitions_list(directory):
    """List every API key with its versions and first flexible version."""
    from kafkasniff.protocol.schema import Definitions

    try:
        defs = Definitions(directory)
    except KafkaSniffError as exc:
        _fail(str(exc))
    for key, info in sorted(defs.apis.items()):
        flex = "never" if info.flexible_from is None else f"v{info.flexible_from}+"
        click.echo(f"{key:3d}  {info.name:40s} v{info.min_version}-v{info.max_version}  "
                   f"flexible {flex}")


if __name__ == "__main__":
    main()
