"""``kafkasniff definitions``: regenerate and list the Kafka message definitions."""

from __future__ import annotations

import click

from kafkasniff.cli.inputs import check_definitions_dir, fail
from kafkasniff.errors import KafkaSniffError
from kafkasniff.text import plural


@click.group("definitions")
def definitions_group() -> None:
    """The Kafka message definitions kafkasniff decodes with."""


@definitions_group.command("generate")
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
@click.option("--decoders", "decoders_dir", default=None, type=click.Path(file_okay=False),
              help="Also write the decoders generated ahead of time here "
                   "(kafkasniff/protocol/prebuilt; docs/definitions.md).")
def definitions_generate(specs, dropped, errors_file, manifest_file, output, api_keys_file,
                         decoders_dir):
    """Regenerate the normalized definitions from Kafka's JSON specs."""
    from pathlib import Path

    from kafkasniff.generator.api_keys import write_api_keys
    from kafkasniff.generator.decoders import write_decoders
    from kafkasniff.generator.specs import generate
    from kafkasniff.protocol.schema import Definitions

    try:
        written = generate(Path(specs), Path(output), dropped_dir=Path(dropped) if dropped else None,
                           errors_file=Path(errors_file) if errors_file else None,
                           manifest_file=Path(manifest_file) if manifest_file else None)
        if api_keys_file:
            written.append(write_api_keys(Path(output) / "index.json", Path(api_keys_file)))
        if decoders_dir:
            written += write_decoders(Definitions(output, prebuilt=False), Path(decoders_dir))
    except KafkaSniffError as exc:
        fail(str(exc))
    click.echo(f"wrote {plural(len(written), 'file')} to {output}")


@definitions_group.command("list")
@click.option("--definitions", "directory", type=click.Path(readable=False), default=None,
              callback=check_definitions_dir,
              help="Definitions directory (default: the installed ones).")
def definitions_list(directory):
    """List every API key with its versions and first flexible version."""
    from kafkasniff.protocol.schema import Definitions

    try:
        defs = Definitions(directory)
    except KafkaSniffError as exc:
        fail(str(exc))
    for key, info in sorted(defs.apis.items()):
        flex = "never" if info.flexible_from is None else f"v{info.flexible_from}+"
        click.echo(f"{key:3d}  {info.name:40s} v{info.min_version}-v{info.max_version}  "
                   f"flexible {flex}")
