"""``kafkasniff live``: decode Kafka traffic as it happens (see docs/live.md).

Exit codes: 0 when the capture ended normally (Ctrl-C, SIGTERM, ``--duration``, ``-c``, end of
the ``-r`` stream); 2 when it cannot start (no permission, unknown interface, bad filter,
unreadable stream, bad options) or a capture/decoder process failed; 130 after a second
Ctrl-C (stopped without draining).
"""

from __future__ import annotations

import os
import signal
import sys
import time

import click

from kafkasniff.cli.inputs import (
    CAPTURE_PATH,
    budget_option,
    check_definitions_dir,
    fail,
    filter_options,
    output_dir,
    output_file,
    parse_filter_options,
    tls_keylog_option,
)
from kafkasniff.errors import KafkaSniffError

DEFAULT_BUFFER_MB = 64


def _tui_available() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("kafkasniff.tui.app") is not None and \
            importlib.util.find_spec("textual") is not None
    except (ImportError, ValueError):
        return False


@click.command("live")
@click.option("-i", "--interface", "iface", default=None, metavar="IFACE",
              help="Interface to capture on ('any' for all, cooked frames). Needs root or "
                   "CAP_NET_RAW.")
@click.option("-r", "--read-file", "read_file", default=None, type=CAPTURE_PATH,
              help="Read a pcap/pcapng stream instead: '-' for stdin "
                   "(tcpdump -i eth0 -U -w - | kafkasniff live -r -), or a file.")
@click.option("-f", "--filter", "bpf", default=None, metavar="BPF",
              help="Capture filter (tcpdump syntax), compiled by libpcap and run in the "
                   "kernel. Default: 'tcp port P' for each --port. '' captures everything.")
@click.option("--port", "ports", multiple=True, type=click.IntRange(1, 65535),
              default=(9092,), show_default=True,
              help="Kafka broker port (repeatable). The endpoint on it is the broker.")
@click.option("--detect/--no-detect", default=True, show_default=True,
              help="Also find Kafka on any port by recognising request headers (give a "
                   "wider -f to capture other ports).")
@click.option("--max-frame-bytes", type=click.IntRange(16), default=100 * 1024 * 1024,
              show_default=True, help="Largest Kafka frame accepted (bytes).")
@click.option("--definitions", type=click.Path(readable=False), default=None,
              callback=check_definitions_dir,
              help="Directory of generated definitions to decode with.")
@click.option("--max-uncompressed-bytes", type=click.IntRange(1024), default=64 * 1024 * 1024,
              show_default=True, help="Largest decompressed size of one record batch.")
@click.option("--wire-format", type=click.Choice(["auto", "modern", "0.7"]), default="auto",
              show_default=True, help="Kafka wire format.")
@click.option("--show-secrets", is_flag=True, help="Do not redact SASL secrets and tokens.")
@budget_option
@tls_keylog_option
@click.option("--tui/--no-tui", default=None,
              help="Terminal UI (default on a terminal) or lines like 'read'.")
@click.option("--json", "as_json", is_flag=True,
              help="JSON Lines like 'read --json', plus {\"type\": \"stats\"} objects.")
@click.option("--records", "with_records", is_flag=True,
              help="Decode and show every record, not only batch summaries.")
@click.option("--value-bytes", type=click.IntRange(0), default=256, show_default=True,
              help="Bytes of each record key/value shown (0: everything).")
@filter_options
@click.option("--no-issues", is_flag=True, help="Do not print standalone issues.")
@click.option("--color/--no-color", default=None, help="Colour errors (default: on a terminal).")
@click.option("-w", "--write", "write_path", default=None, metavar="FILE",
              help="Also write every captured packet to this pcapng file.")
@click.option("--ring", "ring_files", type=click.IntRange(1), default=None, metavar="N",
              help="With --write: keep only the last N files.")
@click.option("--ring-size", type=click.FloatRange(0.001), default=None, metavar="MB",
              help="With --write: start a new file (x-00001.pcapng, ...) every MB megabytes.")
@click.option("--export", "export_dir", default=None, metavar="DIR",
              help="Write the Parquet tables as rolling files into DIR (made when missing).")
@click.option("--export-every", type=click.FloatRange(0.1), default=60.0, show_default=True,
              metavar="S", help="With --export: close a file every S seconds.")
@click.option("--export-rows", type=click.IntRange(1), default=100_000, show_default=True,
              metavar="N", help="With --export: close a file every N exchanges.")
@click.option("--duration", type=click.FloatRange(0, min_open=True), default=None,
              metavar="S", help="Stop after S seconds.")
@click.option("-c", "--count", type=click.IntRange(1), default=None,
              help="Stop after this many exchanges (shown ones, after filters).")
@click.option("--stats-every", type=click.FloatRange(0.1), default=None, metavar="S",
              help="Print a stats line (packets, kernel drops, queue drops, exchanges, "
                   "issues) every S seconds (stderr; a JSON object with --json).")
@click.option("-q", "--quiet", is_flag=True, help="No summary line at the end.")
@click.option("--backend", type=click.Choice(["ring", "socket"]), default="ring",
              show_default=True,
              help="TPACKET_V3 mmap ring, or a plain AF_PACKET socket.")
@click.option("-B", "--buffer-mb", type=click.IntRange(1, 4096), default=DEFAULT_BUFFER_MB,
              show_default=True, help="Kernel ring / socket buffer size (MB).")
@click.option("-s", "--snaplen", type=click.IntRange(64, 1 << 20), default=262144,
              show_default=True, help="Bytes kept of each packet.")
@click.option("--workers", type=click.IntRange(1, 64), default=None,
              help="Decoder processes (default: one per core, at most 4).")
@click.option("--queue-mb", type=click.IntRange(1, 4096), default=64, show_default=True,
              help="Memory for packets waiting for the decoders (MB, all decoders).")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=None, metavar="PORT",
              help="Serve Prometheus / OpenMetrics metrics on http://HOST:PORT/metrics "
                   "(docs/metrics.md; 0: any free port).")
@click.option("--metrics-host", default="127.0.0.1", show_default=True, metavar="HOST",
              help="With --metrics-port: address to listen on (0.0.0.0 or :: for remote "
                   "scrapers).")
@click.option("--metrics-topics", is_flag=True,
              help="With --metrics-port: also the per-topic families.")
@click.option("--metrics-max-values", type=click.IntRange(1), default=100, show_default=True,
              metavar="N", help="With --metrics-port: distinct client_id, broker and topic "
                                "values kept each; later ones are labelled __other__.")
@click.option("-D", "--list-interfaces", is_flag=True, help="List interfaces and exit.")
def live_command(iface, read_file, bpf, ports, detect, max_frame_bytes, definitions,
                 max_uncompressed_bytes, wire_format, show_secrets, tui, as_json, with_records,
                 value_bytes, api, client, topic, errors_only, min_latency, no_issues, color,
                 write_path, ring_files, ring_size, export_dir, export_every, export_rows,
                 duration, count, stats_every, quiet, backend, buffer_mb, snaplen, workers,
                 queue_mb, list_interfaces, metrics_port, metrics_host, metrics_topics,
                 metrics_max_values):
    """Capture and decode live Kafka traffic (lossless at high packet rates; drops counted).

    \b
      kafkasniff live -i eth0                      # TUI on a terminal
      kafkasniff live -i eth0 --no-tui             # lines, like 'read'
      kafkasniff live -i lo --port 9092 --json -c 100
      tcpdump -i eth0 -U -w - 'tcp port 9092' | kafkasniff live -r - --no-tui
    """
    from kafkasniff.live import bpf as bpfmod

    if list_interfaces:
        bpfmod.ensure_scapy_quiet()
        for it in bpfmod.list_interfaces():
            addrs = ", ".join(it["addresses"])
            click.echo(f"{it['index']:3d}  {it['name']:12s} {it['type']:22s} "
                       f"{it['state']:8s} {addrs}".rstrip())
        return
    if iface and read_file:
        fail("give either -i IFACE (live interface) or -r FILE|- (pcap stream), not both")
    if not iface and not read_file:
        fail("no interface given: use -i IFACE (interfaces: "
              f"{', '.join(bpfmod.interface_names())}) or -r - for a pcap stream on stdin")
    if (ring_files or ring_size) and not write_path:
        fail("--ring and --ring-size need --write FILE.pcapng")
    if ring_files and not ring_size:
        fail("--ring N needs --ring-size MB (when to start the next file)")
    if read_file and bpf:
        fail("-f applies to live interfaces; filter the stream where it is made "
              "(tcpdump ... 'filter' | kafkasniff live -r -)")
    # the one filter language (read's, the TUI's): checked before anything is captured
    keep = parse_filter_options(api, client, topic, errors_only, min_latency, definitions)

    # output paths: a bad one stops here, before anything is captured
    if write_path:
        output_file(write_path, "--write")
    export_factory = None
    if export_dir is not None:
        export_factory = _export_factory(export_dir, export_every, export_rows)

    # ------------------------------------------------------------------ outputs
    use_tui = tui if tui is not None else (sys.stdout.isatty() and not as_json)
    if use_tui and not _tui_available():
        if tui:
            fail("the terminal UI is not available in this installation; use --no-tui")
        click.echo("kafkasniff: the live terminal UI is not available here; printing lines "
                   "(--no-tui)", err=True)
        use_tui = False
    if use_tui and not sys.stdout.isatty():
        # the UI draws on standard output (not standard error, Textual's default)
        fail("the terminal UI needs a terminal on standard output; use --no-tui or --json")
    if color is None:
        color = sys.stdout.isatty() and not as_json

    from kafkasniff.live.collector import LiveSession
    from kafkasniff.live.config import LiveConfig, default_workers

    n_workers = workers or default_workers()
    batch_bytes = LiveConfig.batch_bytes
    output = "none" if use_tui else ("json" if as_json else "lines")
    if output == "none" and count:
        output = "count"
    write_cfg = None
    if write_path:
        write_cfg = {"path": write_path, "files": ring_files or 0,
                     "file_bytes": int(ring_size * (1 << 20)) if ring_size else 0,
                     "snaplen": snaplen}
    meta = click.get_current_context().meta
    cfg = LiveConfig(
        workers=n_workers, batch_bytes=batch_bytes,
        queue_bytes=max(queue_mb << 20, 4 * batch_bytes * n_workers),
        pipeline={"ports": frozenset(ports), "detect": detect,
                  "max_frame_bytes": max_frame_bytes, "definitions_dir": definitions,
                  "max_uncompressed_bytes": max_uncompressed_bytes,
                  "show_secrets": show_secrets, "wire_format": wire_format,
                  "with_records": with_records,
                  **({"budgets": meta["kafkasniff.budgets"]}
                     if "kafkasniff.budgets" in meta else {}),
                  # clients append to their key logs while the capture runs: connections
                  # wait for secrets not logged yet (docs/tls.md)
                  **({"tls_keylog": meta["kafkasniff.tls_keylog"], "tls_key_wait": True}
                     if "kafkasniff.tls_keylog" in meta else {})},
        output=output, color=color, with_records=with_records, value_bytes=value_bytes,
        show_issues=not no_issues,
        filters={"api": keep.apis, "client": keep.client, "topic": keep.topic,
                 "errors_only": keep.errors_only, "min_latency": keep.min_latency_ms},
        tui=use_tui, write=write_cfg, export=export_factory)

    # ------------------------------------------------------------------ source
    try:
        if read_file:
            from kafkasniff.live.backends import StreamBackend

            fd = 0
            if read_file == "-" and use_tui:
                # the UI reads the keyboard on stdin: read the capture from a duplicate of
                # stdin and point stdin at the terminal (as 'kafkasniff tui -' does)
                fd = os.dup(0)
                try:
                    tty = os.open("/dev/tty", os.O_RDONLY)
                    os.dup2(tty, 0)
                    os.close(tty)
                except OSError:
                    fail("reading a capture from stdin with the terminal UI needs a "
                          "terminal (/dev/tty); use --no-tui")
            source = StreamBackend(read_file, fd)
            cfg.block_when_full = not source.pipe
            if cfg.block_when_full:
                # a file is read much faster than real time: decoders can be far apart in
                # capture time, give topic ids learnt elsewhere longer to arrive
                cfg.topic_hold_s = 5.0
            source_name = source.name
        else:
            from kafkasniff.live.backends import open_live

            bpfmod.ensure_scapy_quiet()
            it = bpfmod.resolve_interface(iface)
            expr = bpf if bpf is not None else bpfmod.default_filter(ports)
            # loopback shows every packet twice (leaving and arriving): the outgoing copy is
            # rejected in the filter (PACKET_IGNORE_OUTGOING does not apply to the sockets of
            # a fanout group)
            prog = bpfmod.build_filter(expr, it, snaplen,
                                       bpfmod.loopback_index() if it.index == 0 or it.loopback
                                       else 0)
            source = open_live(it, prog, backend, snaplen, buffer_mb << 20, fanout=n_workers)
            source_name = f"{it.name} ({backend}, {buffer_mb} MB"
            source_name += f", filter {expr!r})" if expr else ", no filter)"
    except KafkaSniffError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        sys.exit(130)

    live_metrics = None
    if metrics_port is not None:
        live_metrics = _metrics_server(metrics_host, metrics_port, metrics_topics,
                                       metrics_max_values)
        cfg.metrics = live_metrics.settings()

    if cfg.export is not None:
        tag = "stdin" if read_file == "-" else os.path.basename(read_file) if read_file else iface
        cfg.export["capture"] = f"live-{tag}"
        cfg.export["with_records"] = with_records

    # ------------------------------------------------------------------ run
    out = _Stdout(sys.stdout)
    state = {"shown": 0, "broken": False, "prev": None, "next_stats": None}
    session = LiveSession(source, cfg)
    if live_metrics is not None:
        from kafkasniff.metrics.server import snapshot_runtime

        session.on_metrics = live_metrics.merge
        live_metrics.runtime = lambda: snapshot_runtime(session.snapshot())

    def write_items(items: list) -> None:
        if state["broken"]:
            return
        parts = []
        for kind, text in items:
            if kind == "e":
                if count is not None and state["shown"] >= count:
                    continue
                state["shown"] += 1
                if count is not None and state["shown"] >= count:
                    session.request_stop("count")
            if output in ("lines", "json"):
                parts.append(text)
        if parts:
            parts.append("")
            try:
                out.write("\n".join(parts))
            except BrokenPipeError:
                state["broken"] = True
                session.request_stop("broken pipe")

    session.on_output = write_items

    tui_app = None
    if use_tui:
        from kafkasniff.live.tui import LiveDataSource

        tui_app = LiveDataSource(session, source_name, show_secrets=show_secrets)

    def emit_stats(final: bool = False) -> None:
        snap = session.snapshot()
        if as_json and not state["broken"]:
            from kafkasniff.live.outputs import stats_json
            try:
                out.write(stats_json(snap, final) + "\n")
                out.flush()
            except BrokenPipeError:
                state["broken"] = True
        elif not final:
            from kafkasniff.live.outputs import stats_line
            click.echo(stats_line(snap, state["prev"]), err=True)
        state["prev"] = snap

    drain = {"since": None, "next": 0.0, "prev": None}

    def report_drain(s, now: float) -> None:
        """While an orderly stop goes on: a line on stderr after 0.5 s, then every 2 s, with
        what is left (not over the terminal UI)."""
        if drain["since"] is None:
            drain["since"] = now
            drain["next"] = now + 0.5
            return
        if now < drain["next"] or (tui_app is not None and tui_app.ui_running):
            return
        from kafkasniff.live.outputs import drain_line

        drain["next"] = now + 2.0
        snap = s.snapshot()
        click.echo(drain_line(snap, drain["prev"], s.stop_reason or "stop",
                              now - drain["since"], len(s.done), s.cfg.workers), err=True)
        drain["prev"] = snap

    def on_tick(s) -> None:
        now = time.monotonic()
        if duration is not None and not s.stopping and now - s.started_mono >= duration:
            s.request_stop("duration")
        if s.stopping:
            report_drain(s, now)
        if stats_every and not use_tui:
            if state["next_stats"] is None:
                state["next_stats"] = s.started_mono + stats_every
            if now >= state["next_stats"]:
                state["next_stats"] = now + stats_every
                emit_stats()

    signals = {"n": 0}

    def on_signal(signum, frame):  # noqa: ARG001
        signals["n"] += 1
        # a stop already under way (q or Ctrl-C in the TUI, -c, --duration): stop at once
        if signals["n"] == 1 and not session.stopping:
            session.request_stop(signal.Signals(signum).name)
            if tui_app is not None:
                tui_app.request_exit()
        else:
            session.kill()
            os._exit(130)

    # SIGHUP too: a closed terminal or ssh session stops the capture in order
    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM,
                                                    signal.SIGHUP)}
    try:
        session.start()
        if live_metrics is not None:            # after the fork: no thread in the children
            live_metrics.serve()
            click.echo(f"kafkasniff: metrics on {live_metrics.url}", err=True)
        # like tcpdump's "listening on": the socket is bound, packets are being kept from here
        click.echo(f"kafkasniff: capturing on {source_name}, {n_workers} decoder"
                   f"{'s' if n_workers > 1 else ''}", err=True)
        if tui_app is not None:
            snap = tui_app.run(on_tick)
        else:
            snap = session.run(on_tick)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    if as_json:
        emit_stats(final=True)
    try:
        out.flush()
    except BrokenPipeError:
        pass
    if not quiet:
        from kafkasniff.live.outputs import summary_line

        click.echo(summary_line(snap, state["shown"] if output in ("lines", "json") else None,
                                source_name), err=True)
    if session.errors:
        from kafkasniff.text import escape_text

        for e in session.errors:
            click.echo(f"kafkasniff: error: {escape_text(str(e))}", err=True)
        if os.environ.get("KAFKASNIFF_DEBUG"):
            click.echo(getattr(session, "_tb", ""), err=True)
        sys.exit(2)
    if state["broken"]:
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - avoid a flush error at exit
        except OSError:
            pass
    sys.exit(0)


class _Stdout:
    """Whole writes to standard output. A write blocked on a full pipe and interrupted by a
    signal (Ctrl-C, SIGTERM while the reader is slow) must not lose bytes: text is encoded and
    written with ``os.write`` until every byte is out (``os.write`` retries EINTR and reports
    partial writes; the text layer of ``sys.stdout`` was seen dropping the rest of a chunk).
    Falls back to ``stream.write`` for streams without a file descriptor (tests)."""

    def __init__(self, stream) -> None:
        self.stream = stream
        try:
            stream.flush()
            self.fd = stream.fileno()
        except (AttributeError, OSError, ValueError):
            self.fd = -1
        self.encoding = getattr(stream, "encoding", None) or "utf-8"

    def write(self, text: str) -> None:
        if self.fd < 0:
            self.stream.write(text)
            self.stream.flush()
            return
        view = memoryview(text.encode(self.encoding, "replace"))
        while view:
            n = os.write(self.fd, view)
            view = view[n:]

    def flush(self) -> None:
        if self.fd < 0:
            self.stream.flush()


def _metrics_server(host: str, port: int, topics: bool, max_values: int):
    """``--metrics-port``: the :class:`kafkasniff.metrics.server.LiveMetrics`, its socket
    bound (a port in use fails here, before capture starts)."""
    try:
        from kafkasniff.metrics.server import LiveMetrics
    except ImportError as exc:
        fail(f"--metrics-port needs the prometheus_client package ({exc})")
    try:
        return LiveMetrics(host, port, topics=topics, max_values=max_values)
    except OSError as exc:
        fail(f"--metrics-port {port} --metrics-host {host}: {exc.strerror or exc}")


def _export_factory(directory: str, every_s: float, rows: int):
    """``--export`` settings for the decoders (``capture`` is set once the source is known).
    The directory is created here, so that a bad path fails before capture starts."""
    import importlib.util

    if importlib.util.find_spec("kafkasniff.export.writer") is None:
        fail("--export: the Parquet export is not available in this installation")
    output_dir(directory, "--export")
    from kafkasniff.cli import arrow_without_pandas_in_own_process

    # before the decoders fork: none of them imports pandas (0.5 s each, at its first rows)
    # nor pyarrow itself; no process of this command holds a pandas object
    arrow_without_pandas_in_own_process()
    return {"dir": directory, "every_s": every_s, "rows": rows,
            "started": time.strftime("%Y%m%dT%H%M%S", time.gmtime())}


if __name__ == "__main__":  # pragma: no cover
    live_command()
