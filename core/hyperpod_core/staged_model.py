"""The local record of the weights ``hyperpod-dpd stage-model`` staged: which bucket, prefix and manifest digest.

The synth is offline and never reads S3, yet vLLM's ``--model`` (the weights' mount path) must say *which* weights
it serves: LMCache 0.4.3 puts that value into every cache key (``integration/vllm/utils.py:259-260``
``model_name=model_cfg.model``; ``v1/token_database.py:214-220`` ``CacheEngineKey(model_name, world_size,
worker_id, chunk_hash, kv_dtype)``), so a key must change whenever the weights do. ``stage-model`` therefore writes
:data:`RECORD_FILE` into the environment folder, beside the outputs file, once the manifest is in S3 (and
``stage-model --verify`` writes it when every object matches the manifest): the SHA-256 of the manifest's bytes.
The manifest names every file with its SHA-256, so its digest changes with any file of the weights.

The synth reads the record (:func:`hyperpod_core.inputs.resolve_inputs`) and turns it into the revision
``sha256-<first 16 hex>`` (:attr:`StagedModel.revision`), unless the config gives ``model.revision``. Without
either, the revision is a placeholder and the manifests are not deployable.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from hyperpod_core.atomic import write_text_atomic
from hyperpod_core.errors import ConfigError, shown

#: The record's file name, in the environment folder (``envs/<name>/``, ``<config>.out/``, or the working folder
#: of ``./scripts/synth``): beside ``cdk-outputs.json``.
RECORD_FILE: Final = "staged-model.json"
FORMAT: Final = 1
#: Hex digits of the manifest digest the revision carries: 64 bits tell any two stagings apart and keep the path,
#: the pod args and ``status`` readable.
REVISION_HEX: Final = 16
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True, kw_only=True)
class StagedModel:
    """What ``stage-model`` recorded."""

    bucket: str
    s3_prefix: str
    manifest_sha256: str
    """SHA-256 (hex) of the manifest object's bytes."""
    files: int

    @property
    def revision(self) -> str:
        """``sha256-<first 16 hex of the manifest digest>``: a valid ``model.revision``."""
        return f"sha256-{self.manifest_sha256[:REVISION_HEX]}"


def digest(manifest_bytes: bytes) -> str:
    return hashlib.sha256(manifest_bytes).hexdigest()


def write(path: Path, *, bucket: str, s3_prefix: str, manifest_bytes: bytes, files: int) -> StagedModel:
    """Record the staged weights at ``path`` (atomically); returns what was recorded."""
    staged = StagedModel(bucket=bucket, s3_prefix=s3_prefix, manifest_sha256=digest(manifest_bytes), files=files)
    write_text_atomic(path, json.dumps({"format": FORMAT, "bucket": bucket, "s3_prefix": s3_prefix,
                                        "manifest_sha256": staged.manifest_sha256, "files": files},
                                       indent=2, sort_keys=True) + "\n")
    return staged


def read(path: Path) -> StagedModel:
    """The record at ``path``; a file that is not one is bad input (one line naming it)."""
    where = f"staged-model record {str(path)!r}"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{where} cannot be read: {exc.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ConfigError(f"{where} is not JSON (write it again: hyperpod-dpd stage-model --verify)") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ConfigError(f"{where} must be a format-{FORMAT} record written by hyperpod-dpd stage-model, got "
                          f"{shown(data)}")
    sha, bucket, prefix, files = (data.get(k) for k in ("manifest_sha256", "bucket", "s3_prefix", "files"))
    if not isinstance(sha, str) or not _SHA256.fullmatch(sha):
        raise ConfigError(f"{where}: manifest_sha256 must be 64 lowercase hex digits, got {shown(sha)}")
    if not isinstance(bucket, str) or not isinstance(prefix, str) or not isinstance(files, int):
        raise ConfigError(f"{where}: bucket and s3_prefix must be strings and files a number, got "
                          f"{shown(bucket)}, {shown(prefix)}, {shown(files)}")
    return StagedModel(bucket=bucket, s3_prefix=prefix, manifest_sha256=sha, files=files)
