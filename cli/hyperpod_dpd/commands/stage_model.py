"""``hyperpod-dpd stage-model SRC``: upload a Hugging Face model folder to the config's bucket and prefix."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

from hyperpod_core import environment
from hyperpod_core.errors import CommandFailed, UsageError
from hyperpod_dpd.commands.options import ConfigOption, EnvOption

err = Console(stderr=True)


def register(app: typer.Typer) -> None:
    app.command("stage-model")(stage_model)


def model_bucket(e: environment.Environment) -> str:
    """``model.existing_bucket_name``, else ``ModelBucketName`` from this environment's outputs file."""
    if e.config.model.existing_bucket_name:
        return e.config.model.existing_bucket_name
    if not e.outputs_file.is_file():
        raise UsageError(f"no model bucket yet: {e.outputs_file} does not exist (run: hyperpod-dpd deploy "
                         f"{e.selector}), and model.existing_bucket_name is not set")
    from hyperpod_core import outputs
    from hyperpod_core.inputs import read_outputs_file

    found = read_outputs_file(e.outputs_file, e.config)
    if outputs.MODEL_BUCKET_NAME not in found:
        raise UsageError(f"{e.outputs_file} has no {outputs.MODEL_BUCKET_NAME} (deploy the platform stack: "
                         f"hyperpod-dpd deploy Platform {e.selector})")
    return found[outputs.MODEL_BUCKET_NAME][1]


@contextmanager
def _bar(what: str, total: int) -> Iterator[Progress]:
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(binary_units=True),
               TransferSpeedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=err, transient=False) as progress:
        progress.add_task(what, total=total)
        yield progress


def stage_model(
        src: Annotated[Path | None, typer.Argument(help="Hugging Face model folder (config.json, tokenizer, "
                                                        "*.safetensors).", show_default=False)] = None,
        config: ConfigOption = None, env: EnvOption = None,
        dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would be uploaded; write nothing.")] = False,
        force: Annotated[bool, typer.Option("--force", help="Overwrite objects that hold different content.")] = False,
        verify_only: Annotated[bool, typer.Option("--verify", help="Check S3 against the manifest; upload nothing.")]
        = False,
) -> None:
    """Upload the weights to s3://<model bucket>/<model.s3_prefix>: parallel, resumable, checksummed by S3."""
    from hyperpod_dpd import aws, staging

    e = environment.resolve(config, env)
    if verify_only and src is not None:
        raise UsageError("--verify checks what is in S3 against the manifest; pass no SRC")
    if not verify_only and src is None:
        raise UsageError("SRC is required: the Hugging Face model folder to upload")
    files = staging.scan_model_dir(src) if src is not None else []
    bucket, prefix = model_bucket(e), e.config.model.s3_prefix
    s3 = aws.client("s3", e.config.region)
    with aws.aws_errors(f"s3://{bucket}"):
        staging.check_bucket(s3, bucket)
        if verify_only:
            results = staging.verify(s3, bucket, prefix)
            bad = [r for r in results if not r.ok]
            for r in bad:
                err.print(f"  {r.rel}: {r.detail}", highlight=False)
            print(f"s3://{bucket}/{prefix}: {len(results) - len(bad)} of {len(results)} files match the manifest")
            if bad:
                raise CommandFailed(f"{len(bad)} files in s3://{bucket}/{prefix} do not match the manifest")
            return
        total = sum(f.size for f in files)
        with _bar("checksums", total) as bar:
            files = staging.checksum_all(files, lambda n: bar.advance(bar.task_ids[0], n))
        planned = staging.plan(s3, bucket, prefix, files)
        conflicts = [p for p in planned if p.action == "conflict"]
        todo = [p for p in planned if p.action != "skip"]
        print(f"s3://{bucket}/{prefix}: {len(files)} files, {len(todo)} to upload "
              f"({sum(p.file.size for p in todo) / 2**30:.2f} GiB), {len(planned) - len(todo)} already there")
        if conflicts and not force:
            for p in conflicts:
                err.print(f"  {p.key}: {p.reason}", highlight=False)
            raise CommandFailed(f"{len(conflicts)} objects under s3://{bucket}/{prefix} hold different content "
                                f"(listed above); pass --force to overwrite them")
        if dry_run:
            for p in planned:
                print(f"  {p.action:<8} {p.key} ({p.reason})")
            print("dry run: nothing written")
            return
        with _bar("upload", sum(p.file.size for p in todo)) as bar:
            staging.upload(s3, bucket, planned, lambda n: bar.advance(bar.task_ids[0], n))
        key = staging.write_manifest(s3, bucket, prefix, files)
    print(f"staged: s3://{bucket}/{prefix} ({len(files)} files, S3-verified CRC64NVME); manifest s3://{bucket}/{key}")
    print(f"next: hyperpod-dpd stage-model --verify {e.selector}   (any time)")
    print(f"      kubectl apply -f {e.dist}/endpoint/   (the endpoint endpoint.apply chooses)")
