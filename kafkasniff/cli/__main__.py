"""``python -m kafkasniff.cli``: the ``kafkasniff`` command."""

from kafkasniff.cli import main

main()
