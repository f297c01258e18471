"""``hyperpod-dpd stage-model SRC``: upload a Hugging Face model folder to an endpoint's bucket and prefix.

The endpoint is the one ``--endpoint`` names, else the config's only one; its weights go to its ``model.bucket`` when
set, else to the deployment's bucket (``model_bucket.existing_name``, else the platform stack's ``ModelBucketName``),
under its ``model.s3_prefix``. The record holds one entry per model location (bucket and prefix): staging one
endpoint's model keeps the others'.

Content-addressed (:mod:`hyperpod_core.staged_model`): the checksums of every file come first, then the manifest and
its digest, the revision ``sha256-<16 hex>``; the files go to ``<model.s3_prefix><revision>/``, the manifest last,
and the record of the staged weights (``staged-model.json`` beside ``cdk-outputs.json``) after it. The next synth
puts the revision into vLLM's ``--model`` (the model identity of every LMCache key) and the prefix into the
endpoint's model location: the pods of an applied revision keep loading exactly its objects, whatever is staged
later. The same folder staged again finds every object in place and writes nothing. With ``model.revision`` in the
config the upload goes to ``model.s3_prefix`` itself (the revision is the config's word, one prefix per revision)
and no record is written. ``--dry-run`` before the bucket exists (no outputs file, no ``model_bucket.existing_name``)
lists the revision, the files, their sizes and keys, from the local files alone, without any AWS call; with a bucket
that cannot be read from here (no or expired credentials, no network) it lists the same, after one line saying why.

``--verify`` checks S3 against the manifest of the revision ``--revision`` names, else the one the record names,
else the only one staged, and writes the record when every object matches (a model staged from another machine).

Ctrl-C stops the upload after the parts in flight, leaves the incomplete uploads in S3 and prints one line with
what was done, until when S3 keeps the parts (the bucket's lifecycle rule) and the command that resumes (exit 130):
the same files give the same revision, hence the same prefix.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

from hyperpod_core import environment
from hyperpod_core.config.spec import EndpointSpec
from hyperpod_core.errors import EXIT_INTERRUPTED, CommandFailed, UsageError
from hyperpod_dpd.commands.options import (
    ConfigOption,
    DeploymentRegionOption,
    EndpointOption,
    EnvOption,
    OutputsFileOption,
    ProfileOption,
)
from hyperpod_dpd.deployment import endpoint_selector

err = Console(stderr=True)


def register(app: typer.Typer) -> None:
    app.command("stage-model")(stage_model)


def model_bucket(e: environment.Environment, spec: EndpointSpec) -> str:
    """The bucket of ``spec``'s model: its ``model.bucket``, else the deployment's (:func:`deployment_bucket`)."""
    return spec.model.bucket or deployment_bucket(e)


def deployment_bucket(e: environment.Environment) -> str:
    """``model_bucket.existing_name``, else ``ModelBucketName`` from this environment's outputs file."""
    if e.config.model_bucket.existing_name:
        return e.config.model_bucket.existing_name
    if not e.outputs_file.is_file():
        raise UsageError(f"no model bucket yet: {e.outputs_file} does not exist (run: hyperpod-dpd deploy "
                         f"{e.selector}), and model_bucket.existing_name is not set")
    from hyperpod_core import outputs
    from hyperpod_core.inputs import read_outputs_file

    found = read_outputs_file(e.outputs_file, e.config)
    if outputs.MODEL_BUCKET_NAME not in found:
        raise UsageError(f"{e.outputs_file} has no {outputs.MODEL_BUCKET_NAME} (deploy the platform stack: "
                         f"hyperpod-dpd deploy Platform {e.selector})")
    return found[outputs.MODEL_BUCKET_NAME][1]


def _check_arguments(src: Path | None, verify_only: bool, revision: str | None) -> None:
    """SRC to upload, or ``--verify`` (with ``--revision``, or not) without one."""
    from hyperpod_core import staged_model

    if verify_only and src is not None:
        raise UsageError("--verify checks what is in S3 against the manifest; pass no SRC")
    if not verify_only and src is None:
        raise UsageError("SRC is required: the Hugging Face model folder to upload")
    if revision is not None and not verify_only:
        raise UsageError(f"--revision {revision!r} goes with --verify; a staging derives its revision from the files")
    if revision is not None and not staged_model.is_staged_revision(revision):
        raise UsageError(f"--revision must be sha256-<16 lowercase hex digits>, got {revision!r}")


@contextmanager
def _bar(what: str, total: int) -> Iterator[Progress]:
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(binary_units=True),
               TransferSpeedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=err, transient=False) as progress:
        progress.add_task(what, total=total)
        yield progress


SrcArgument = Annotated[Path | None, typer.Argument(
    metavar="SRC", help="Hugging Face model folder (config.json, tokenizer, *.safetensors).", show_default=False)]
StageDryRunOption = Annotated[bool, typer.Option(
    "--dry-run", help="Say what would be uploaded; write nothing. Before the bucket exists, or when S3 cannot "
                      "be read from here (no credentials, no network): the revision, files, sizes and keys, from "
                      "the local files alone.")]
ForceOption = Annotated[bool, typer.Option(
    "--force", help="Overwrite objects under the target prefix that hold other content than the manifest says.")]
VerifyOption = Annotated[bool, typer.Option("--verify", help="Check S3 against the manifest; upload nothing.")]
RevisionOption = Annotated[str | None, typer.Option(
    "--revision", metavar="REVISION", show_default=False,
    help="With --verify: the staged revision to check (sha256-<16 hex>). Default: the one staged-model.json "
         "records for the endpoint's model, else the only one under its model.s3_prefix.")]


def stage_model(
        src: SrcArgument = None, config: ConfigOption = None, env: EnvOption = None, endpoint: EndpointOption = None,
        dry_run: StageDryRunOption = False, force: ForceOption = False, verify_only: VerifyOption = False,
        revision: RevisionOption = None, region: DeploymentRegionOption = None, profile: ProfileOption = None,
        outputs_file: OutputsFileOption = None,
) -> None:
    """Upload the weights to s3://<model bucket>/<model.s3_prefix>: parallel, resumable (inside a file too),
    checksummed by S3."""
    from hyperpod_dpd import aws, model_folder, staging
    from hyperpod_dpd.deployment import endpoint_of, require_region

    e = environment.resolve(config, env, outputs_file=outputs_file)
    home = require_region(e, region, "stage-model")  # the model bucket lives in the deployment's region
    spec = endpoint_of(e, endpoint, "stage-model")
    _check_arguments(src, verify_only, revision)
    files = model_folder.scan_model_dir(src) if src is not None else []
    base, configured = spec.model.s3_prefix, spec.model.revision
    resume_command = f"hyperpod-dpd stage-model {src} {endpoint_selector(e, spec)}" + (" --force" if force else "")
    if dry_run and not verify_only and (unknown := _bucket_unknown(e, spec)) is not None:
        _dry_run_offline(_checksummed(files, resume_command), base, configured,
                         f"no model bucket yet ({unknown}): S3 was not read")
        return
    bucket = model_bucket(e, spec)
    s3, unread = _bucket_client(bucket, home, dry_run=dry_run and not verify_only)
    if unread is not None:  # a dry run that cannot read S3 from here: the listing alone, and why
        _dry_run_offline(_checksummed(files, resume_command), base, configured, unread, bucket=bucket)
        return
    with aws.aws_errors(f"s3://{bucket}"):
        if verify_only:
            _verify(s3, bucket, e, spec, revision)
            return
        files = _checksummed(files, resume_command)
        body, rev, prefix = _revision(files, base, configured)
        planned = _plan(s3, bucket, prefix, files, rev, configured=configured, force=force)
        if dry_run:
            for p in planned:
                print(f"  {p.action:<8} {p.key} ({p.reason})")
            print("dry run: nothing written")
            return
        _upload(s3, bucket, prefix, planned, _created_bucket(e, spec), resume_command)
        key, written = staging.write_manifest(s3, bucket, prefix, files)
    print(f"staged: s3://{bucket}/{prefix} ({len(files)} files, S3-verified CRC64NVME); manifest s3://{bucket}/{key}"
          + ("" if written else " (already there: nothing changed)"))
    if configured:
        print(f"no record written: model.revision {configured!r} in the config names these weights")
    else:
        print(_record(e, bucket, base, body, len(files)))
    _next_steps(e, spec, rev)


def _plan(s3: Any, bucket: str, prefix: str, files: list[Any], rev: str, *, configured: str | None,
          force: bool) -> list[Any]:
    """What each file needs (:func:`hyperpod_dpd.staging.plan`), summed up in one line; objects under the prefix that
    hold other content are refused (listed) without ``--force``."""
    from hyperpod_dpd import staging

    planned = staging.plan(s3, bucket, prefix, files)
    conflicts = [p for p in planned if p.action == "conflict"]
    todo = [p for p in planned if p.action != "skip"]
    resumed = [p for p in todo if p.resume is not None and p.resume.parts]
    in_s3 = sum(p.resume.bytes_done(p.file.size) for p in resumed if p.resume)
    print(f"s3://{bucket}/{prefix}: {len(files)} files, {len(todo)} to upload "
          f"({staging.bytes_to_upload(planned) / 2**30:.2f} GiB), {len(planned) - len(todo)} already there"
          + (f"; {len(resumed)} resumed inside the file ({in_s3 / 2**30:.2f} GiB of their parts already in S3, "
             "each checked against the local bytes)" if resumed else ""))
    if conflicts and not force:
        for p in conflicts:
            err.print(f"  {p.key}: {p.reason}", highlight=False)
        what = ("pods that restart or scale out would load them" if configured else
                "the objects of a revision are never changed in place")
        raise CommandFailed(f"{len(conflicts)} objects under s3://{bucket}/{prefix} hold other content than "
                            f"revision {rev}'s files (listed above; {what}); pass --force to overwrite them")
    return planned


def _created_bucket(e: environment.Environment, spec: EndpointSpec) -> bool:
    """The weights go to the bucket the platform stack created (with its lifecycle rule)."""
    return spec.model.bucket is None and not e.config.model_bucket.existing_name


def _upload(s3: Any, bucket: str, prefix: str, planned: list[Any], created: bool, resume_command: str) -> None:
    """Upload what :func:`_plan` found missing, with a progress bar. Ctrl-C ends the command (exit 130) with one line:
    what was uploaded, and until when S3 keeps the incomplete uploads (the bucket's lifecycle rule; ``created``: the
    platform stack's bucket, whose rule is known)."""
    from hyperpod_dpd import staging

    todo = [p for p in planned if p.action != "skip"]
    days = staging.abort_rule_days(s3, bucket, prefix)
    lifecycle = (f"the bucket's lifecycle rule {days[1] or '(unnamed)'} aborts an incomplete upload {days[0]} "
                 "days after it started" if days else
                 f"the platform stack's model bucket aborts an incomplete upload {staging.STACK_ABORT_DAYS} days "
                 "after it started" if created else
                 "the bucket has no lifecycle rule this command could read that aborts incomplete uploads: their "
                 "parts stay (and are billed) until resumed or aborted")
    if any(p.file.size >= staging.PART_SIZE for p in todo):
        print(f"  an interrupted upload resumes where it stopped (run the same command again); {lifecycle}",
              file=sys.stderr)
    state = staging.Progress()
    try:
        with _bar("upload", staging.bytes_to_upload(planned)) as bar:
            staging.upload(s3, bucket, planned, lambda n: bar.advance(bar.task_ids[0], n), state)
    except staging.Interrupted as stopped:
        done = stopped.progress
        when = (f"until {done.abort_date:%Y-%m-%d %H:%M} UTC (lifecycle rule {done.abort_rule})"
                if done.abort_date else f"({lifecycle})")
        _interrupted(f"interrupted: {done.done_bytes / 2**30:.2f} of {done.total_bytes / 2**30:.2f} GiB uploaded, "
                     f"{done.files_done} files complete; {len(done.started)} incomplete uploads stay in S3 {when}",
                     resume_command)


def _next_steps(e: environment.Environment, spec: EndpointSpec, rev: str) -> None:
    """After staging: synthesize (the endpoint's manifests then name the revision), apply, verify any time."""
    print(f"next: hyperpod-dpd synth {e.selector}   (the manifests of {spec.name} then carry revision {rev})")
    from hyperpod_core.dist_layout import DistLayout, apply_commands

    for line in apply_commands(f"{DistLayout.of(e.dist, spec.name, spec.endpoint.apply).endpoint_dir}/",
                               f"hyperpod-dpd rollout {endpoint_selector(e, spec)}"):
        print(f"      {line}")
    print(f"      hyperpod-dpd stage-model --verify {endpoint_selector(e, spec)}   (any time)")


def _bucket_unknown(e: environment.Environment, spec: EndpointSpec) -> str | None:
    """Why no model bucket is known yet, or ``None`` when :func:`model_bucket` finds one."""
    if spec.model.bucket or e.config.model_bucket.existing_name:
        return None
    if not e.outputs_file.is_file():
        return f"{e.outputs_file} does not exist, and model_bucket.existing_name is not set"
    from hyperpod_core import outputs
    from hyperpod_core.inputs import read_outputs_file

    if outputs.MODEL_BUCKET_NAME not in read_outputs_file(e.outputs_file, e.config):
        return f"{e.outputs_file} has no {outputs.MODEL_BUCKET_NAME}"
    return None


def _checksummed(files: list[Any], resume_command: str) -> list[Any]:
    """``files`` with their SHA-256 and CRC64NVME (a progress bar on stderr); Ctrl-C ends the command (exit 130)."""
    from hyperpod_dpd import model_folder

    try:
        with _bar("checksums", sum(f.size for f in files)) as bar:
            return model_folder.checksum_all(files, lambda n: bar.advance(bar.task_ids[0], n))
    except KeyboardInterrupt:
        _interrupted("interrupted while computing the checksums; nothing was uploaded", resume_command)


def _revision(files: list[Any], base: str, configured: str | None) -> tuple[bytes, str, str]:
    """The manifest's bytes, the revision and the key prefix the files go to, decided before any upload (the
    manifest's digest names the prefix), and the line that says so."""
    from hyperpod_core import staged_model
    from hyperpod_dpd import model_folder

    body = model_folder.manifest_body(files)
    rev = configured or staged_model.revision_of(body)
    prefix = staged_model.weights_prefix(base, rev, configured=configured is not None)
    print(f"revision {rev}: " + (f"model.revision in the config; uploading to model.s3_prefix {base} as "
                                 "configured (give each revision its own prefix)" if configured else
                                 f"SHA-256 of the manifest of {len(files)} files; its own prefix {prefix}"))
    return body, rev, prefix


#: Why a dry run may list the upload without S3: nothing here can read it (no or stale credentials, no network).
#: A missing bucket or denied access stays an error: the upload itself would fail on it.
UNREADABLE = frozenset({"credentials", "expired", "invalid-credentials", "unreachable"})


def _bucket_client(bucket: str, region: str, *, dry_run: bool) -> tuple[Any, str | None]:
    """An S3 client once ``bucket`` answered (:func:`hyperpod_dpd.staging.check_bucket`), and ``None``. In a dry
    run, when S3 cannot be read from here (:data:`UNREADABLE`): no client, and the one line that says so (the
    listing needs no AWS call)."""
    from hyperpod_dpd import aws, staging

    try:
        s3 = aws.client("s3", region)
        with aws.aws_errors(f"s3://{bucket}"):
            staging.check_bucket(s3, bucket)
    except aws.AwsFailure as failure:
        if not dry_run or failure.kind not in UNREADABLE:
            raise
        why = f"{failure.code}: {failure.explained.message}; fix: {failure.fix}"
        return None, f"s3://{bucket} could not be read ({why}): every file is listed, whether S3 holds it already " \
                     "or not"
    return s3, None


def _dry_run_offline(files: list[Any], base: str, configured: str | None, note: str, *,
                     bucket: str | None = None) -> None:
    """``--dry-run`` without S3 (before the bucket exists, or S3 cannot be read from here: ``note`` says which):
    what would be uploaded, from the local files alone. The keys are under the revision's prefix; what S3 already
    holds is compared only when it can be read. ``bucket``: ``None`` before it exists (then no AWS call was made)."""
    from hyperpod_dpd import model_folder

    _, _, prefix = _revision(files, base, configured)
    print(note)
    print(f"s3://{bucket or '<model bucket>'}/{prefix}: {len(files)} files, {sum(f.size for f in files):,} bytes, "
          f"then {model_folder.MANIFEST_NAME}")
    width = max((len(f.rel) for f in files), default=0)
    for f in sorted(files, key=lambda f: f.rel):
        print(f"  {f.rel:<{width}}  {f.size:>15,} bytes")
    print("dry run: nothing written" + (", no AWS call" if bucket is None else ""))


def _record(e: environment.Environment, bucket: str, s3_prefix: str, body: bytes, files: int) -> str:
    """Write the staged-weights record into the environment folder; the line that says so."""
    from hyperpod_core import staged_model

    path = e.workdir / staged_model.RECORD_FILE
    staged = staged_model.write(path, bucket=bucket, s3_prefix=s3_prefix, manifest_bytes=body, files=files)
    return f"recorded: {path}: revision {staged.revision} (SHA-256 of the manifest), weights under {staged.location}"


def _interrupted(what: str, resume_command: str) -> NoReturn:
    """One line on stderr with the command that resumes, and exit 130 (interrupted)."""
    print(f"{what}; resume with: {resume_command}", file=sys.stderr)
    raise SystemExit(EXIT_INTERRUPTED)


def _verify(s3: Any, bucket: str, e: environment.Environment, spec: EndpointSpec, revision: str | None) -> None:
    """Check staged weights against their manifest: ``model.s3_prefix`` itself when the config names the revision,
    else the revision ``--revision`` names, the record names, or the only one staged; record them when they match."""
    from hyperpod_core import staged_model
    from hyperpod_dpd import staging_verify

    base, configured = spec.model.s3_prefix, spec.model.revision
    rev: str | None = None
    if configured is None:
        rev = revision or _recorded_revision(e, bucket, base)
        if rev is None:
            found = staging_verify.staged_revisions(s3, bucket, base)
            if not found:
                raise CommandFailed(f"no staged revision under s3://{bucket}/{base} (stage the model first: "
                                    f"hyperpod-dpd stage-model SRC {endpoint_selector(e, spec)})")
            if len(found) > 1:
                raise UsageError(f"{len(found)} revisions are staged under s3://{bucket}/{base} ({', '.join(found)}) "
                                 f"and {staged_model.RECORD_FILE} names none of them: pass --revision")
            rev = found[0]
    prefix = staged_model.weights_prefix(base, rev or "", configured=configured is not None)
    report = staging_verify.verify(s3, bucket, prefix, rev)
    bad = [r for r in report.files if not r.ok]
    for r in report.files:
        print(f"  {'ok' if r.ok else 'BAD':<4} {r.rel}: {r.detail}")
    for key, size in report.extra:
        print(f"  not in the manifest: {key} ({size} bytes): not part of the staged model, but the S3 CSI mount "
              "shows it to vLLM too; delete it if it is stale (aws s3 rm)")
    if not bad and rev is not None:  # the weights are as the manifest says: record them for the synth
        print(_record(e, bucket, base, report.manifest_body, len(report.files)))
    print(f"s3://{bucket}/{prefix}: {len(report.files) - len(bad)} of {len(report.files)} files match the manifest"
          + (f"; {len(report.extra)} objects under the prefix are not in it" if report.extra else ""))
    if bad:
        raise CommandFailed(f"{len(bad)} files in s3://{bucket}/{prefix} do not match the manifest (listed above)")


def _recorded_revision(e: environment.Environment, bucket: str, s3_prefix: str) -> str | None:
    """The revision ``staged-model.json`` records for ``s3_prefix`` in ``bucket`` (an endpoint's model), else
    ``None``."""
    from hyperpod_core import staged_model

    path = e.workdir / staged_model.RECORD_FILE
    if not path.is_file():
        return None
    record = staged_model.find(path, s3_prefix=s3_prefix, bucket=bucket)
    return record.revision if record is not None else None
