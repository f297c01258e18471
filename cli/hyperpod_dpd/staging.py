"""Stage a Hugging Face model folder in the model bucket: validated, parallel, resumable, verified.

Facts (``/work/shared/reference/operations.md``, "Model staging"):

* the operator mounts the InferenceEndpointConfig's ``s3://<bucket>/<modelLocation>`` through the S3 CSI driver;
  the folder's contents (``config.json``, tokenizer files, ``*.safetensors``, ``model.safetensors.index.json``) sit
  directly under it. That location is content-addressed (:mod:`hyperpod_core.staged_model`):
  ``<model.s3_prefix><revision>/``, the revision derived from the manifest, which is computed from the local files
  *before* anything is uploaded. Staging other weights therefore writes under another prefix and never changes what
  a pod of an applied revision mounts when it restarts or scales out; staging the same weights again finds every
  object in place (``model.revision`` in the config instead names the location ``model.s3_prefix`` itself);
* multipart: 64 MiB parts (a 5 GB shard in 80 parts; s3transfer's default is 8 MiB, 600 parts) and 16 parts in
  flight across the files. The upload is created with ``ChecksumAlgorithm=CRC64NVME, ChecksumType=FULL_OBJECT``,
  every part carries its CRC64NVME, and ``CompleteMultipartUpload`` passes the whole file's: S3 computes the checksum
  of the whole object from the parts and rejects the upload when it differs from ours (a single PUT is checked the
  same way). This is what s3transfer does too (``upload.py``, FULL_OBJECT_CHECKSUM_ARGS), but s3transfer aborts
  the multipart upload when it is interrupted and cannot resume one across processes; the upload here is the
  low-level client's, so an interrupted upload stays in S3 and the next run resumes it *inside* the file:
  ``ListMultipartUploads`` finds the incomplete upload of the key, ``ListParts`` its parts, and each listed part is
  trusted only when its size and its CRC64NVME (or, when S3 lists none, its ETag, the MD5 of the part for
  SSE-S3) match the local bytes; only the other parts are uploaded;
* an incomplete upload is not free and not forever: the bucket's lifecycle rule ``AbortIncompleteMultipartUpload``
  aborts it N days after it started (the platform stack's model bucket: 7 days,
  ``hyperpod_constructs.model_bucket``; ``AbortDate`` in the ``CreateMultipartUpload`` answer when a rule applies);
* ``aws s3 sync`` compares size and mtime only; here an object is skipped only when its size *and* its
  CRC64NVME (returned by ``HeadObject`` with ``ChecksumMode=ENABLED``) match the local file.

The manifest of the files (:mod:`hyperpod_dpd.model_folder`) is written beside the weights as
:data:`~hyperpod_dpd.model_folder.MANIFEST_NAME`, last, so its presence means the upload completed
(:mod:`hyperpod_dpd.staging_verify` checks S3 against it).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

from botocore.exceptions import ClientError

from hyperpod_core.errors import CommandFailed
from hyperpod_dpd.model_folder import MANIFEST_NAME, MIB, LocalFile, manifest_body, read_range
from hyperpod_dpd.work_pool import run_pool

#: Large parts for multi-GB shards: 64 MiB keeps a 5 GB shard at 80 parts (s3transfer default: 8 MiB, 600).
PART_SIZE = 64 * MIB
MAX_CONCURRENCY = 16
#: S3's smallest part (all but the last); S3 allows at most 10,000 parts (Amazon S3 multipart upload limits).
MIN_PART_SIZE = 5 * MIB
MAX_PARTS = 10_000
#: Days after which the platform stack's model bucket aborts an incomplete multipart upload (its lifecycle rule
#: ``AbortIncompleteMultipartUploads``, hyperpod_constructs.model_bucket; tests/cli/test_stage_model.py compares the
#: synthesized template): what is said when the bucket's own rule cannot be read.
STACK_ABORT_DAYS = 7

Action = Literal["upload", "skip", "conflict"]


@dataclass(frozen=True, kw_only=True)
class Resume:
    """An incomplete multipart upload of the file found in S3, and its parts that hold the local bytes."""

    upload_id: str
    part_size: int
    parts: dict[int, dict[str, str]]
    """Part number -> ``{"ETag": ..., "ChecksumCRC64NVME": ...}`` (as ``CompleteMultipartUpload`` takes them) of the
    listed parts whose size and checksum match the local bytes."""
    rejected: int = 0
    """Listed parts that did not match (uploaded again)."""

    def bytes_done(self, size: int) -> int:
        return sum(min(self.part_size, size - (n - 1) * self.part_size) for n in self.parts)


@dataclass(frozen=True, kw_only=True)
class PlannedFile:
    file: LocalFile
    key: str
    action: Action
    reason: str
    resume: Resume | None = None





def key_of(prefix: str, rel: str) -> str:
    return f"{prefix}{rel}"


def check_bucket(s3: Any, bucket: str) -> None:
    """One-line failures for a bucket that is missing or not ours to write."""
    try:
        s3.head_bucket(Bucket=bucket)
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in ("404", "NoSuchBucket", "NotFound"):
            raise CommandFailed(f"bucket {bucket!r} does not exist (deploy the platform stack first, or fix "
                                f"model_bucket.existing_name)") from None
        if code in ("403", "AccessDenied", "Forbidden"):
            raise CommandFailed(f"access denied to bucket {bucket!r} (need s3:ListBucket, s3:GetObject, "
                                f"s3:PutObject and kms:GenerateDataKey on its key)") from None
        raise


def remote_state(s3: Any, bucket: str, key: str) -> dict[str, Any] | None:
    """HeadObject with the stored checksum, or ``None`` when there is no such object."""
    try:
        return dict(s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED"))
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in ("404", "NoSuchKey", "NotFound"):
            return None
        if code in ("403", "AccessDenied", "Forbidden"):
            raise CommandFailed(f"access denied to s3://{bucket}/{key} (need s3:GetObject)") from None
        raise


def same_content(f: LocalFile, head: dict[str, Any]) -> bool:
    """Same size and same full-object CRC64NVME (or the SHA-256 we stored in the object's metadata)."""
    if int(head.get("ContentLength", -1)) != f.size:
        return False
    if head.get("ChecksumCRC64NVME") and head.get("ChecksumType", "FULL_OBJECT") == "FULL_OBJECT":
        return bool(head["ChecksumCRC64NVME"] == f.crc64nvme)
    return bool(head.get("Metadata", {}).get("sha256") == f.sha256)


def plan(s3: Any, bucket: str, prefix: str, files: Iterable[LocalFile]) -> list[PlannedFile]:
    """What each file needs: ``skip`` (S3 holds it), ``upload`` or ``conflict`` (S3 holds other content); a file to
    upload in parts whose interrupted upload S3 still holds gets its :class:`Resume`."""
    out = []
    incomplete: dict[str, list[dict[str, Any]]] | None = None
    for f in files:
        key = key_of(prefix, f.rel)
        head = remote_state(s3, bucket, key)
        if head is not None and same_content(f, head):
            out.append(PlannedFile(file=f, key=key, action="skip", reason="same size and CRC64NVME"))
            continue
        action: Action = "upload" if head is None else "conflict"
        reason = "not in S3" if head is None else f"S3 holds different content ({head.get('ContentLength')} bytes)"
        resume = None
        if f.size >= PART_SIZE:
            if incomplete is None:
                incomplete = incomplete_uploads(s3, bucket, prefix)
            resume = find_resume(s3, bucket, key, f, incomplete.get(key, []))
            if resume is not None and resume.parts:
                reason += (f"; resuming an interrupted upload: {len(resume.parts)} parts "
                           f"({resume.bytes_done(f.size) / 2**30:.2f} GiB) already in S3")
        out.append(PlannedFile(file=f, key=key, action=action, reason=reason, resume=resume))
    return out


def incomplete_uploads(s3: Any, bucket: str, prefix: str) -> dict[str, list[dict[str, Any]]]:
    """``{key: [upload]}`` of the multipart uploads started and neither completed nor aborted under ``prefix``
    (``ListMultipartUploads``, all pages), newest first."""
    found: dict[str, list[dict[str, Any]]] = {}
    for page in s3.get_paginator("list_multipart_uploads").paginate(Bucket=bucket, Prefix=prefix):
        for upload in page.get("Uploads", []):
            found.setdefault(upload["Key"], []).append(upload)
    epoch = dt.datetime.min.replace(tzinfo=dt.UTC)
    for uploads in found.values():
        uploads.sort(key=lambda u: u.get("Initiated") or epoch, reverse=True)
    return found


def list_parts(s3: Any, bucket: str, key: str, upload_id: str) -> list[dict[str, Any]]:
    """Every part S3 holds for an upload (``ListParts``, all pages)."""
    parts: list[dict[str, Any]] = []
    for page in s3.get_paginator("list_parts").paginate(Bucket=bucket, Key=key, UploadId=upload_id):
        parts += page.get("Parts", [])
    return parts



def find_resume(s3: Any, bucket: str, key: str, f: LocalFile, uploads: list[dict[str, Any]]) -> Resume | None:
    """The newest incomplete upload of ``key`` this command can finish (created with a full-object CRC64NVME, as
    :func:`upload` creates them), with the listed parts that hold the local bytes; ``None`` without one.

    The part size is the first part's (a run with another part size stays resumable); a listed part counts only
    when its size is the one its number implies and its CRC64NVME (else its ETag, the MD5 of the part under SSE-S3)
    matches the local bytes: a changed file, or a part of another file, is uploaded again.
    """
    ours = [u for u in uploads if str(u.get("ChecksumAlgorithm") or "").upper() == "CRC64NVME"
            and str(u.get("ChecksumType") or "FULL_OBJECT").upper() == "FULL_OBJECT"]
    if not ours:
        return None
    upload_id = ours[0]["UploadId"]
    listed = {int(p["PartNumber"]): p for p in list_parts(s3, bucket, key, upload_id)}
    part_size = PART_SIZE
    first = listed.get(1)
    if first is not None and int(first["Size"]) < f.size:
        part_size = int(first["Size"])
    if part_size < MIN_PART_SIZE or -(-f.size // part_size) > MAX_PARTS:
        part_size = PART_SIZE
    verified: dict[int, dict[str, str]] = {}
    for n, part in sorted(listed.items()):
        offset = (n - 1) * part_size
        length = min(part_size, f.size - offset)
        if length <= 0 or int(part["Size"]) != length:
            continue
        crc, md5 = read_range(f.path, offset, length)
        listed_crc = part.get("ChecksumCRC64NVME")
        if (listed_crc == crc) if listed_crc else str(part.get("ETag", "")).strip('"') == md5:
            verified[n] = {"ETag": str(part["ETag"]), "ChecksumCRC64NVME": crc}
    return Resume(upload_id=upload_id, part_size=part_size, parts=verified, rejected=len(listed) - len(verified))


@dataclass(kw_only=True)
class Progress:
    """What an upload has done so far (for the interrupt message)."""

    total_bytes: int = 0
    done_bytes: int = 0
    files_done: int = 0
    started: dict[str, str] = field(default_factory=dict)
    """Key -> upload id of the multipart uploads this run created or resumed and did not complete."""
    abort_date: dt.datetime | None = None
    """When the bucket's lifecycle rule aborts the uploads (``AbortDate`` of ``CreateMultipartUpload``)."""
    abort_rule: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)


class Interrupted(Exception):
    """The upload was interrupted; :attr:`progress` says what is in S3."""

    def __init__(self, progress: Progress) -> None:
        super().__init__("interrupted")
        self.progress = progress


def _access_denied(bucket: str, key: str, exc: ClientError) -> CommandFailed:
    err = exc.response.get("Error", {})
    if err.get("Code") in ("AccessDenied", "403"):
        return CommandFailed(f"access denied writing s3://{bucket}/{key} (need s3:PutObject and kms:GenerateDataKey)")
    return CommandFailed(f"upload of s3://{bucket}/{key} failed: {err.get('Code')}: {err.get('Message')}")


def bytes_to_upload(planned: list[PlannedFile]) -> int:
    """Bytes still to upload: whole files, less the parts of a resumed upload that S3 already holds."""
    return sum(p.file.size - (p.resume.bytes_done(p.file.size) if p.resume else 0)
               for p in planned if p.action != "skip")


def upload(s3: Any, bucket: str, planned: list[PlannedFile], progress: Callable[[int], None] | None = None,
           state: Progress | None = None) -> Progress:
    """Upload the ``upload``/``conflict`` entries: files below :data:`PART_SIZE` in one ``PutObject``, the others in
    parts (:data:`MAX_CONCURRENCY` in flight over all files), resuming an interrupted upload where S3 holds one.
    Each object carries its full-object CRC64NVME, which S3 checks. On an interrupt (Ctrl-C) the workers stop after
    their current part, nothing is aborted, and :class:`Interrupted` tells what S3 holds."""
    state = state or Progress()
    todo = [p for p in planned if p.action != "skip"]
    state.total_bytes = bytes_to_upload(planned)
    run = _Upload(s3, bucket, state, progress)
    tasks = [task for p in todo for task in run.tasks(p)]
    try:
        run_pool(tasks, MAX_CONCURRENCY, run.stop)
    except KeyboardInterrupt:
        raise Interrupted(state) from None
    for p in todo:  # S3 verified the checksum on write; read back what it stored
        head = remote_state(s3, bucket, p.key)
        if head is None or not same_content(p.file, head):
            raise CommandFailed(f"s3://{bucket}/{p.key}: stored size/CRC64NVME differ from the local file")
    return state


class _Upload:
    """One :func:`upload`: its tasks (a ``PutObject``, an ``UploadPart``, a ``CompleteMultipartUpload``) and what
    they share: the parts done per key, the parts left, the progress and the stop signal."""

    def __init__(self, s3: Any, bucket: str, state: Progress, progress: Callable[[int], None] | None) -> None:
        self.s3, self.bucket, self.state, self.progress = s3, bucket, state, progress
        self.parts_of: dict[str, dict[int, dict[str, str]]] = {}
        self.left: dict[str, int] = {}
        self.stop = threading.Event()

    def tasks(self, p: PlannedFile) -> list[Callable[[], Any]]:
        """One ``PutObject`` below :data:`PART_SIZE`; else the parts S3 does not hold yet of the file's multipart upload
        (resumed, or created here), or only its completion when S3 holds them all."""
        if p.file.size < PART_SIZE:
            return [partial(self.put, p)]
        if p.resume is not None:
            upload_id, part_size = p.resume.upload_id, p.resume.part_size
            self.parts_of[p.key] = dict(p.resume.parts)
        else:
            upload_id, part_size = self.create(p), PART_SIZE
        self.state.started[p.key] = upload_id
        numbers = [n for n in range(1, -(-p.file.size // part_size) + 1) if n not in self.parts_of[p.key]]
        self.left[p.key] = len(numbers)
        tasks: list[Callable[[], Any]] = []
        if not numbers:  # every part was already there: only the completion was missing
            tasks.append(partial(self.complete, p, upload_id))
        return tasks + [partial(self.part, p, upload_id, part_size, n) for n in numbers]

    def create(self, p: PlannedFile) -> Any:
        """A new multipart upload of ``p`` with a full-object CRC64NVME; its upload id."""
        try:
            created = self.s3.create_multipart_upload(Bucket=self.bucket, Key=p.key, ChecksumAlgorithm="CRC64NVME",
                                                      ChecksumType="FULL_OBJECT")
        except ClientError as exc:
            raise _access_denied(self.bucket, p.key, exc) from None
        self.parts_of[p.key] = {}
        if created.get("AbortDate"):
            self.state.abort_date, self.state.abort_rule = created["AbortDate"], str(created.get("AbortRuleId", ""))
        return created["UploadId"]

    def advanced(self, n: int) -> None:
        with self.state.lock:
            self.state.done_bytes += n
        if self.progress is not None:
            self.progress(n)

    def put(self, p: PlannedFile) -> None:
        from s3transfer.utils import ReadFileChunk

        with ReadFileChunk.from_filename(str(p.file.path), 0, p.file.size) as body:
            try:
                self.s3.put_object(Bucket=self.bucket, Key=p.key, Body=body, ChecksumCRC64NVME=p.file.crc64nvme,
                                   Metadata={"sha256": p.file.sha256})
            except ClientError as exc:
                raise _access_denied(self.bucket, p.key, exc) from None
        self.advanced(p.file.size)
        with self.state.lock:
            self.state.files_done += 1

    def complete(self, p: PlannedFile, upload_id: str) -> None:
        parts = [{"PartNumber": n, **meta} for n, meta in sorted(self.parts_of[p.key].items())]
        try:
            self.s3.complete_multipart_upload(Bucket=self.bucket, Key=p.key, UploadId=upload_id,
                                              MultipartUpload={"Parts": parts}, ChecksumCRC64NVME=p.file.crc64nvme,
                                              ChecksumType="FULL_OBJECT")
        except ClientError as exc:
            raise _access_denied(self.bucket, p.key, exc) from None
        with self.state.lock:
            self.state.files_done += 1
            self.state.started.pop(p.key, None)

    def part(self, p: PlannedFile, upload_id: str, part_size: int, n: int) -> None:
        """Part ``n``; the last part of the file completes its upload (unless the upload was stopped)."""
        from s3transfer.utils import ReadFileChunk

        offset = (n - 1) * part_size
        length = min(part_size, p.file.size - offset)
        with ReadFileChunk.from_filename(str(p.file.path), offset, length) as body:
            try:
                response = self.s3.upload_part(Bucket=self.bucket, Key=p.key, UploadId=upload_id, PartNumber=n,
                                               Body=body, ChecksumAlgorithm="CRC64NVME")
            except ClientError as exc:
                raise _access_denied(self.bucket, p.key, exc) from None
        meta = {"ETag": str(response["ETag"])}
        if response.get("ChecksumCRC64NVME"):
            meta["ChecksumCRC64NVME"] = str(response["ChecksumCRC64NVME"])
        self.advanced(length)
        with self.state.lock:
            self.parts_of[p.key][n] = meta
            self.left[p.key] -= 1
            last = self.left[p.key] == 0
        if last and not self.stop.is_set():  # interrupted: the upload stays incomplete, to be resumed
            self.complete(p, upload_id)


def abort_rule_days(s3: Any, bucket: str, prefix: str) -> tuple[int, str] | None:
    """Days after which the bucket's lifecycle aborts an incomplete upload under ``prefix``, and the rule's id, from
    ``GetBucketLifecycleConfiguration``; ``None`` when no enabled rule does (or the rules cannot be read)."""
    try:
        rules = s3.get_bucket_lifecycle_configuration(Bucket=bucket).get("Rules", [])
    except ClientError:
        return None
    for rule in rules:
        days = (rule.get("AbortIncompleteMultipartUpload") or {}).get("DaysAfterInitiation")
        rule_prefix = ((rule.get("Filter") or {}).get("Prefix") if "Filter" in rule else rule.get("Prefix")) or ""
        if rule.get("Status") == "Enabled" and days and prefix.startswith(rule_prefix):
            return int(days), str(rule.get("ID", ""))
    return None



def write_manifest(s3: Any, bucket: str, prefix: str, files: list[LocalFile]) -> tuple[str, bool]:
    """The manifest object under ``prefix`` (its SHA-256 in the object's metadata); ``(key, written)``: an object of
    the same digest is left as it is, so staging the same weights again writes nothing."""
    key = key_of(prefix, MANIFEST_NAME)
    body = manifest_body(files)
    sha = hashlib.sha256(body).hexdigest()
    head = remote_state(s3, bucket, key)
    if head is not None and (head.get("Metadata") or {}).get("sha256") == sha and \
            int(head.get("ContentLength", -1)) == len(body):
        return key, False
    try:
        s3.put_object(Bucket=bucket, Key=key, Body=body, ContentType="application/json", Metadata={"sha256": sha})
    except ClientError as exc:
        raise _access_denied(bucket, key, exc) from None
    return key, True
