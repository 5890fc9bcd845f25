"""``python -m kafkasniff``: the ``kafkasniff`` command (the same as ``python -m kafkasniff.cli``)."""

from kafkasniff.cli import run

run()
