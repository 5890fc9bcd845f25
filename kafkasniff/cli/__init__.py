"""The ``kafkasniff`` command line (click): one module per command in this package.

Exit codes: 0 ok; 1 decode problems found and ``--strict`` was given; 2 usage error or an
input that cannot be read at all (one-line error on stderr). Only this package calls
``sys.exit``. Headless commands (``read``, ``stats``, ``export``) never import Textual, and
``read`` / ``stats`` never import pyarrow or PySpark: the heavier commands are imported only
when used (:class:`LazyGroup`).
"""

from __future__ import annotations

import click

from kafkasniff import __version__
from kafkasniff.cli.definitions import definitions_group
from kafkasniff.cli.read import read_command
from kafkasniff.cli.stats import stats_command


class LazyGroup(click.Group):
    """A click group whose heavier commands are imported only when used, so that ``read``
    and ``stats`` never load the modules (and libraries) of ``tui``, ``live``, ``export``
    or ``spark``."""

    lazy = {
        "export": ("kafkasniff.cli.export", "export_command"),
        "groups": ("kafkasniff.cli.groups", "groups_command"),
        "tui": ("kafkasniff.cli.tui", "tui_command"),
        "live": ("kafkasniff.cli.live", "live_command"),
        "spark": ("kafkasniff.cli.spark", "spark_group"),
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


#: True in the ``kafkasniff`` command's own process (started by :func:`run`); False when a
#: caller invokes :func:`main` in its process (click's test runner, a script): a command
#: then leaves the process's libraries as it found them
OWN_PROCESS = False


def run(prog_name: str | None = "kafkasniff") -> None:
    """The ``kafkasniff`` command as a process of its own: the console script,
    ``python -m kafkasniff`` and ``python -m kafkasniff.cli``. Never returns: exits
    (``SystemExit``) with the command's status (module docstring)."""
    global OWN_PROCESS
    OWN_PROCESS = True
    main(prog_name=prog_name)


def arrow_without_pandas_in_own_process() -> None:
    """In the command's own process (:data:`OWN_PROCESS`), answer pyarrow's pandas check
    without importing pandas (:func:`kafkasniff.export.writer.arrow_without_pandas`); call
    it before forking decoders, which inherit the answer. In a caller's process: nothing."""
    if OWN_PROCESS:
        from kafkasniff.export.writer import arrow_without_pandas

        arrow_without_pandas()


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kafkasniff")
def main() -> None:
    """kafkasniff: Kafka wire-traffic sniffer and protocol analyzer.

    Reads pcap/pcapng captures, reassembles TCP, decodes every Kafka request and response
    of every API version, pairs them by correlation_id, and reports latency, errors and
    throttling.
    """
    from kafkasniff.pipeline import tune_gc_for_decoding

    tune_gc_for_decoding()      # each command is a process of its own (and forks decoders)


main.add_command(read_command)
main.add_command(stats_command)
main.add_command(definitions_group)
