"""``kafkasniff tui FILE...``: the terminal UI over capture files.

Loaded by :class:`kafkasniff.cli.LazyGroup` when the command is used. Textual is imported
only when the command runs, so ``read``, ``stats`` and ``export`` never load it.
"""

from __future__ import annotations

import sys

import click

from kafkasniff.cli.inputs import fail, input_options, output_dir, parse_inputs


@click.command("tui")
@input_options
@click.option("--save-dir", default=None, metavar="DIR",
              help="Where saved views and copied exchanges go (default: the current "
                   "directory; made when missing).")
@click.option("--view", "initial_tab", default="exchanges", show_default=True,
              type=click.Choice(["overview", "exchanges", "connections", "clients", "topics",
                                 "issues", "groups"]), help="View shown first.")
def tui_command(files, read_files, ports, detect, max_frame_bytes, definitions,
                max_uncompressed_bytes, wire_format, show_secrets, save_dir, initial_tab):
    """Browse captures in a terminal UI: dashboards, exchanges, detail with hex view.

    The capture loads progressively in the background; press ? for every key.
    Secrets stay redacted unless --show-secrets.
    """
    inp = parse_inputs(files, read_files, ports, detect, max_frame_bytes, definitions,
                  max_uncompressed_bytes, wire_format, show_secrets)
    if "-" in inp.sources and sys.stdin.isatty():
        raise click.UsageError("'-' reads a capture from stdin, but stdin is a terminal")
    if save_dir is not None:
        output_dir(save_dir, "--save-dir")      # before the terminal is taken
    import os

    from kafkasniff.capture.pcapfile import probe_capture
    from kafkasniff.errors import KafkaSniffError

    stdin = None
    if "-" in inp.sources:
        # the UI needs the terminal: the capture is read from a duplicate of stdin, and
        # stdin then points at the terminal
        stdin = os.fdopen(os.dup(0), "rb", buffering=0)
    # every input checked like the other commands do, before the terminal is taken; what
    # can be read only once (stdin, a FIFO, <(cat x.pcap)) comes back as a stream that
    # replays the bytes the check read, and the source reads that stream, never the path
    inputs = []
    for src in inp.sources:
        try:
            inputs.append(probe_capture(stdin, "<stdin>") if src == "-" else
                          probe_capture(src))
        except KafkaSniffError as exc:
            fail(str(exc))
    if stdin is not None:
        try:
            tty = open("/dev/tty", "rb")  # noqa: SIM115 - kept open for the app's lifetime
            os.dup2(tty.fileno(), 0)
        except OSError:
            raise click.UsageError("reading the capture from stdin needs a terminal "
                                   "(/dev/tty) for the UI") from None

    from kafkasniff.tui.app import KafkaSniffApp, configure_process
    from kafkasniff.tui.source import FileSource

    source = FileSource(inputs, inp.pipeline_options())
    app = KafkaSniffApp(source, save_dir=save_dir, initial_tab=initial_tab)
    configure_process()
    app.run()
    if source.error:
        fail(str(source.error))
    if app.return_code:
        # the app crashed (Textual printed the traceback when it left the terminal): never
        # exit 0 after a crash
        click.echo("kafkasniff: error: the terminal UI stopped on an unexpected error "
                   "(traceback above)", err=True)
        sys.exit(app.return_code)
