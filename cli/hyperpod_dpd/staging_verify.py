"""Staged weights against their manifest (``stage-model --verify``).

Every object the manifest names is compared with it (size and the CRC64NVME S3 stores, printed), the manifest's
digest must be the revision its prefix names, and the objects under the prefix that it does not name are listed (the
S3 CSI mount shows them to vLLM too).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from hyperpod_core.errors import CommandFailed
from hyperpod_dpd.model_folder import MANIFEST_NAME, LocalFile
from hyperpod_dpd.staging import key_of, remote_state, same_content


def staged_revisions(s3: Any, bucket: str, s3_prefix: str) -> list[str]:
    """The revisions staged under ``s3_prefix``: its ``sha256-<16 hex>/`` folders that hold a manifest, sorted."""
    from hyperpod_core.staged_model import REVISION_HEX, REVISION_PREFIX

    pattern = re.compile(rf"^{re.escape(REVISION_PREFIX)}[0-9a-f]{{{REVISION_HEX}}}$")
    found: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=s3_prefix, Delimiter="/"):
        for common in page.get("CommonPrefixes", []):
            name = str(common["Prefix"])[len(s3_prefix):].rstrip("/")
            if pattern.fullmatch(name) and remote_state(s3, bucket, key_of(f"{s3_prefix}{name}/", MANIFEST_NAME)):
                found.append(name)
    return sorted(found)


@dataclass(frozen=True, kw_only=True)
class Verified:
    rel: str
    ok: bool
    detail: str


@dataclass(frozen=True, kw_only=True)
class Verification:
    files: list[Verified]
    """Every file of the manifest against the object S3 holds."""
    extra: list[tuple[str, int]]
    """``(key, size)`` of the objects under the prefix the manifest does not name."""
    manifest_body: bytes = b""
    """The manifest object's bytes as S3 holds them (their digest is the staged weights' revision)."""


def _stored(head: dict[str, Any]) -> str:
    crc = head.get("ChecksumCRC64NVME")
    kind = head.get("ChecksumType")
    if crc:
        return f"CRC64NVME {crc}" + (f" ({kind.lower().replace('_', '-')})" if kind else "")
    sha = (head.get("Metadata") or {}).get("sha256")
    return "no CRC64NVME stored" + (f", SHA-256 {sha[:16]}... in its metadata" if sha else "")


def verify(s3: Any, bucket: str, prefix: str, revision: str | None = None) -> Verification:
    """Every file of the manifest against what S3 stores (size, full-object CRC64NVME and the recorded SHA-256),
    each with the checksum S3 holds; and the objects under the prefix that the manifest does not name. With
    ``revision`` (a content-addressed prefix), the manifest's own digest must be that revision: a manifest of other
    weights under it is a failure, not a match."""
    from hyperpod_core.staged_model import revision_of

    key = key_of(prefix, MANIFEST_NAME)
    try:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in ("NoSuchKey", "404"):
            raise CommandFailed(f"no manifest at s3://{bucket}/{key} (stage the model first)") from None
        raise
    if revision is not None and revision_of(body) != revision:
        raise CommandFailed(f"s3://{bucket}/{key} is the manifest of revision {revision_of(body)}, not of {revision} "
                            "its prefix names: the objects under it are not that revision's; stage the model again")
    files = json.loads(body)["files"]
    out = []
    for rel, want in sorted(files.items()):
        head = remote_state(s3, bucket, key_of(prefix, rel))
        f = LocalFile(rel=rel, path=Path(rel), size=want["size"], sha256=want["sha256"], crc64nvme=want["crc64nvme"])
        if head is None:
            out.append(Verified(rel=rel, ok=False, detail="missing"))
        elif not same_content(f, head):
            out.append(Verified(rel=rel, ok=False, detail=f"differs: S3 holds {head.get('ContentLength')} bytes, "
                                                         f"{_stored(head)}; the manifest says {want['size']} bytes, "
                                                         f"CRC64NVME {want['crc64nvme']}"))
        elif head.get("Metadata", {}).get("sha256") not in (None, want["sha256"]):
            out.append(Verified(rel=rel, ok=False, detail="recorded SHA-256 differs from the manifest"))
        else:
            out.append(Verified(rel=rel, ok=True, detail=f"{want['size']} bytes, {_stored(head)}"))
    named = {key_of(prefix, rel) for rel in files} | {key}
    extra: list[tuple[str, int]] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        extra += [(o["Key"], int(o.get("Size", 0))) for o in page.get("Contents", []) if o["Key"] not in named]
    return Verification(files=out, extra=sorted(extra), manifest_body=body)
