"""``python -m kafkasniff``: the ``kafkasniff`` command (the same as ``python -m kafkasniff.cli``)."""

from kafkasniff.cli import main

main(prog_name="kafkasniff")
