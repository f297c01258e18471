"""Stage a Hugging Face model folder in the model bucket: validated, parallel, resumable, verified.

Facts (``/work/shared/reference/operations.md``, "Model staging"):

* the operator mounts ``s3://<bucket>/<model.s3_prefix>`` through the S3 CSI driver; the folder's contents
  (``config.json``, tokenizer files, ``*.safetensors``, ``model.safetensors.index.json``) sit directly under
  the prefix;
* s3transfer uploads in parallel multipart; defaults are 8 MiB parts and 10 threads. For 5 GB shards we use
  64 MiB parts (80 requests per shard instead of 600) and more threads;
* passing the full-object checksum (``ChecksumCRC64NVME``) makes s3transfer create the multipart upload with
  ``ChecksumType=FULL_OBJECT``: S3 computes the checksum of the whole object from the parts and rejects the
  upload when it differs from ours (a single PUT is checked the same way);
* ``aws s3 sync`` compares size and mtime only; here an object is skipped only when its size *and* its
  CRC64NVME (returned by ``HeadObject`` with ``ChecksumMode=ENABLED``) match the local file.

A manifest of SHA-256 (the digest Hugging Face records for every LFS file) and CRC64NVME per file is written
beside the weights as :data:`MANIFEST_NAME`, last, so its presence means the upload completed.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from botocore.exceptions import ClientError

from hyperpod_core.errors import CommandFailed, UsageError

MIB = 1024 * 1024
MANIFEST_NAME = "hyperpod-dpd-manifest.json"
#: Large parts for multi-GB shards: 64 MiB keeps a 5 GB shard at 80 parts (s3transfer default: 8 MiB, 600).
PART_SIZE = 64 * MIB
MAX_CONCURRENCY = 16
_READ = 8 * MIB
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "tiktoken.model")

Action = Literal["upload", "skip", "conflict"]


@dataclass(frozen=True, kw_only=True)
class LocalFile:
    rel: str
    path: Path
    size: int
    sha256: str = ""
    crc64nvme: str = ""
    """Base64 of the big-endian CRC64NVME, the form S3 uses in ``ChecksumCRC64NVME``."""


@dataclass(frozen=True, kw_only=True)
class PlannedFile:
    file: LocalFile
    key: str
    action: Action
    reason: str


# --- the folder -------------------------------------------------------------------------------------------

def scan_model_dir(src: Path) -> list[LocalFile]:
    """Every file of a Hugging Face model folder, after checking it is one (config, tokenizer, all shards)."""
    if not src.is_dir():
        raise UsageError(f"SRC must be a Hugging Face model folder, got {str(src)!r} (not a folder)")
    what = f"SRC {str(src)!r} is not a Hugging Face model folder"
    config = src / "config.json"
    if not config.is_file():
        raise UsageError(f"{what}: config.json missing")
    try:
        json.loads(config.read_text())
    except (OSError, ValueError):
        raise UsageError(f"{what}: config.json is not valid JSON") from None
    if not any((src / name).is_file() for name in TOKENIZER_FILES):
        raise UsageError(f"{what}: no tokenizer (one of {', '.join(TOKENIZER_FILES)})")
    index = src / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            raise UsageError(f"{what}: model.safetensors.index.json has no weight_map") from None
        missing = [s for s in shards if not (src / s).is_file()]
        if missing:
            raise UsageError(f"{what}: {len(missing)} of {len(shards)} shards named by model.safetensors.index.json "
                             f"missing ({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''})")
    elif not (src / "model.safetensors").is_file():
        raise UsageError(f"{what}: no model.safetensors and no model.safetensors.index.json")
    files = []
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if path.is_file() and not any(part.startswith(".") for part in rel.parts) and rel.name != MANIFEST_NAME:
            files.append(LocalFile(rel=rel.as_posix(), path=path, size=path.stat().st_size))
    return files


def checksum(f: LocalFile, progress: Callable[[int], None] | None = None) -> LocalFile:
    """``f`` with its SHA-256 and CRC64NVME, from one read of the file."""
    from awscrt import checksums

    sha, crc = hashlib.sha256(), 0
    with f.path.open("rb") as fh:
        while chunk := fh.read(_READ):
            sha.update(chunk)
            crc = checksums.crc64nvme(chunk, crc)
            if progress is not None:
                progress(len(chunk))
    crc_b64 = base64.b64encode(crc.to_bytes(8, "big")).decode()
    return LocalFile(rel=f.rel, path=f.path, size=f.size, sha256=sha.hexdigest(), crc64nvme=crc_b64)


def checksum_all(files: list[LocalFile], progress: Callable[[int], None] | None = None,
                 workers: int = 4) -> list[LocalFile]:
    """Checksums of every file, several files at a time (hashlib and the CRT release the GIL)."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda f: checksum(f, progress), files))


# --- S3 ------------------------------------------------------------------------------------------------------

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
                                f"model.existing_bucket_name)") from None
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
    out = []
    for f in files:
        key = key_of(prefix, f.rel)
        head = remote_state(s3, bucket, key)
        if head is None:
            out.append(PlannedFile(file=f, key=key, action="upload", reason="not in S3"))
        elif same_content(f, head):
            out.append(PlannedFile(file=f, key=key, action="skip", reason="same size and CRC64NVME"))
        else:
            out.append(PlannedFile(file=f, key=key, action="conflict",
                                   reason=f"S3 holds different content ({head.get('ContentLength')} bytes)"))
    return out


def transfer_config() -> Any:
    from boto3.s3.transfer import TransferConfig

    return TransferConfig(multipart_threshold=PART_SIZE, multipart_chunksize=PART_SIZE,
                          max_concurrency=MAX_CONCURRENCY, use_threads=True)


def upload(s3: Any, bucket: str, planned: list[PlannedFile], progress: Callable[[int], None] | None = None) -> None:
    """Upload the ``upload``/``conflict`` entries in parallel, each with its full-object CRC64NVME."""
    from s3transfer.manager import TransferManager
    from s3transfer.subscribers import BaseSubscriber

    class _Progress(BaseSubscriber):
        def on_progress(self, future: Any, bytes_transferred: int, **kwargs: Any) -> None:
            if progress is not None:
                progress(bytes_transferred)

    todo = [p for p in planned if p.action != "skip"]
    with TransferManager(s3, transfer_config()) as manager:
        futures = [manager.upload(str(p.file.path), bucket, p.key, extra_args={
            "ChecksumCRC64NVME": p.file.crc64nvme, "Metadata": {"sha256": p.file.sha256}},
            subscribers=[_Progress()]) for p in todo]
        for p, fut in zip(todo, futures, strict=True):
            try:
                fut.result()
            except ClientError as exc:
                err = exc.response.get("Error", {})
                if err.get("Code") in ("AccessDenied", "403"):
                    raise CommandFailed(f"access denied writing s3://{bucket}/{p.key} (need s3:PutObject and "
                                        f"kms:GenerateDataKey)") from None
                raise CommandFailed(f"upload of s3://{bucket}/{p.key} failed: {err.get('Code')}: "
                                    f"{err.get('Message')}") from None
    for p in todo:  # S3 verified the checksum on write; read back what it stored
        head = remote_state(s3, bucket, p.key)
        if head is None or not same_content(p.file, head):
            raise CommandFailed(f"s3://{bucket}/{p.key}: stored size/CRC64NVME differ from the local file")


def manifest(files: list[LocalFile]) -> dict[str, Any]:
    return {"format": 1, "files": {f.rel: {"size": f.size, "sha256": f.sha256, "crc64nvme": f.crc64nvme}
                                   for f in sorted(files, key=lambda f: f.rel)}}


def write_manifest(s3: Any, bucket: str, prefix: str, files: list[LocalFile]) -> str:
    key = key_of(prefix, MANIFEST_NAME)
    s3.put_object(Bucket=bucket, Key=key, Body=(json.dumps(manifest(files), indent=2) + "\n").encode(),
                  ContentType="application/json")
    return key


@dataclass(frozen=True, kw_only=True)
class Verified:
    rel: str
    ok: bool
    detail: str


def verify(s3: Any, bucket: str, prefix: str) -> list[Verified]:
    """Every file of the manifest against what S3 stores: size, full-object CRC64NVME and recorded SHA-256."""
    key = key_of(prefix, MANIFEST_NAME)
    try:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in ("NoSuchKey", "404"):
            raise CommandFailed(f"no manifest at s3://{bucket}/{key} (stage the model first)") from None
        raise
    files = json.loads(body)["files"]
    out = []
    for rel, want in sorted(files.items()):
        head = remote_state(s3, bucket, key_of(prefix, rel))
        f = LocalFile(rel=rel, path=Path(rel), size=want["size"], sha256=want["sha256"], crc64nvme=want["crc64nvme"])
        if head is None:
            out.append(Verified(rel=rel, ok=False, detail="missing"))
        elif not same_content(f, head):
            out.append(Verified(rel=rel, ok=False, detail=f"differs ({head.get('ContentLength')} bytes, CRC64NVME "
                                                         f"{head.get('ChecksumCRC64NVME')})"))
        elif head.get("Metadata", {}).get("sha256") not in (None, want["sha256"]):
            out.append(Verified(rel=rel, ok=False, detail="recorded SHA-256 differs from the manifest"))
        else:
            out.append(Verified(rel=rel, ok=True, detail=f"{want['size']} bytes, CRC64NVME {want['crc64nvme']}"))
    return out
