"""``python -m kafkasniff.cli``: the ``kafkasniff`` command."""

from kafkasniff.cli import run

run(prog_name=None)
