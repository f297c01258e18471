"""The weights ``hyperpod-dpd stage-model`` staged, content-addressed: where they are and what identifies them.

The synth is offline and never reads S3, yet vLLM's ``--model`` (the weights' mount path) must say *which* weights
it serves: LMCache 0.4.3 puts that value into every cache key (``integration/vllm/utils.py:260``
``model_name=model_cfg.model``; ``v1/token_database.py:214-221`` ``CacheEngineKey(model_name, world_size,
worker_id, chunk_hash, kv_dtype, request_configs)``), so a key must change whenever the weights do. And the revision
must name the *weights*, not a folder that can change under it: a pod that restarts or scales out mounts whatever the
S3 location holds at that moment.

So ``stage-model`` stages content-addressed. It computes every file's SHA-256 locally, builds the manifest (every
file with its size, SHA-256 and CRC64NVME; the same files always give the same bytes), and derives the revision
``sha256-<first 16 hex of the manifest's SHA-256>`` (:func:`revision_of`) *before* it uploads. It then uploads under
``<model.s3_prefix><revision>/`` (:func:`weights_prefix`), the manifest last, and writes :data:`RECORD_FILE` into
the environment folder, beside the outputs file, after that. Staging other weights never writes into the prefix of
a revision an endpoint mounts; staging the same weights again finds them there.

The synth reads the record (:func:`hyperpod_core.inputs.resolve_inputs`) and puts the revision into ``--model`` and
the weights' S3 location (the InferenceEndpointConfig's ``modelSourceConfig.modelLocation``) alike. When the config
gives ``model.revision`` the revision is the user's word: the location is ``model.s3_prefix`` as configured, and each
revision needs a prefix of its own (docs/endpoint.md). Without either, the revision is a placeholder and the
manifests are not deployable.
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
#: 3: one entry per model location (bucket and ``s3_prefix``: the endpoints of a fleet each stage their own), in
#: ``models``. 2: one such entry at the top level (still read, as a one-entry record). The weights are under
#: ``<s3_prefix><revision>/``. Format 1 (in place under ``s3_prefix``) is refused.
FORMAT: Final = 3
ONE_MODEL_FORMAT: Final = 2
#: Hex digits of the manifest digest the revision carries: 64 bits tell any two stagings apart and keep the path,
#: the pod args and ``status`` readable.
REVISION_HEX: Final = 16
REVISION_PREFIX: Final = "sha256-"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def digest(manifest_bytes: bytes) -> str:
    return hashlib.sha256(manifest_bytes).hexdigest()


def revision_of(manifest_bytes: bytes) -> str:
    """``sha256-<first 16 hex of the manifest's SHA-256>``: the staged weights' revision (a valid
    ``model.revision``)."""
    return f"{REVISION_PREFIX}{digest(manifest_bytes)[:REVISION_HEX]}"


def is_staged_revision(value: str) -> bool:
    """``value`` has the form of a revision ``stage-model`` derives: ``sha256-<16 lowercase hex>``."""
    return re.fullmatch(rf"{REVISION_PREFIX}[0-9a-f]{{{REVISION_HEX}}}", value) is not None


def weights_prefix(s3_prefix: str, revision: str, *, configured: bool) -> str:
    """The S3 key prefix the weights of ``revision`` are under: ``<s3_prefix><revision>/`` for a staged revision
    (content-addressed); ``s3_prefix`` itself when the config names the revision (``configured``: ``model.revision``,
    the user's word, one prefix per revision). ``s3_prefix`` ends with '/' (config type ``S3Prefix``)."""
    return s3_prefix if configured else f"{s3_prefix}{revision}/"


@dataclass(frozen=True, kw_only=True)
class StagedModel:
    """What ``stage-model`` recorded."""

    bucket: str
    s3_prefix: str
    """``model.s3_prefix`` at staging time; the weights are under :attr:`location`."""
    manifest_sha256: str
    """SHA-256 (hex) of the manifest object's bytes."""
    files: int

    @property
    def revision(self) -> str:
        return f"{REVISION_PREFIX}{self.manifest_sha256[:REVISION_HEX]}"

    @property
    def location(self) -> str:
        """``<s3_prefix><revision>/``: where the weights and their manifest are."""
        return weights_prefix(self.s3_prefix, self.revision, configured=False)


def _entry(staged: StagedModel) -> dict[str, object]:
    return {"bucket": staged.bucket, "s3_prefix": staged.s3_prefix, "location": staged.location,
            "manifest_sha256": staged.manifest_sha256, "files": staged.files}


def write(path: Path, *, bucket: str, s3_prefix: str, manifest_bytes: bytes, files: int) -> StagedModel:
    """Record the staged weights at ``path`` (atomically), replacing the entry of the same bucket and prefix and
    keeping the others (the fleet's other models); returns what was recorded."""
    staged = StagedModel(bucket=bucket, s3_prefix=s3_prefix, manifest_sha256=digest(manifest_bytes), files=files)
    kept = [m for m in (read_all(path) if path.is_file() else ())
            if (m.bucket, m.s3_prefix) != (bucket, s3_prefix)]
    models = sorted([*kept, staged], key=lambda m: (m.bucket, m.s3_prefix))
    write_text_atomic(path, json.dumps({"format": FORMAT, "models": [_entry(m) for m in models]},
                                       indent=2, sort_keys=True) + "\n")
    return staged


def find(path: Path, *, s3_prefix: str, bucket: str | None) -> StagedModel | None:
    """The entry of ``path`` for ``s3_prefix`` in ``bucket`` (any bucket when ``None``: the bucket is not known
    offline), or ``None``."""
    for m in read_all(path):
        if m.s3_prefix == s3_prefix and bucket in (None, m.bucket):
            return m
    return None


def read(path: Path) -> StagedModel:
    """The only entry of the record at ``path`` (:func:`read_all`); a record of several models is bad input here
    (name the model: :func:`find`)."""
    models = read_all(path)
    if len(models) != 1:
        raise ConfigError(f"staged-model record {str(path)!r} must hold one model here, got {len(models)} ("
                          + ", ".join(f"s3://{m.bucket}/{m.s3_prefix}" for m in models) + "): name the endpoint")
    return models[0]


def read_all(path: Path) -> tuple[StagedModel, ...]:
    """Every entry of the record at ``path``; a file that is not one is bad input (one line naming it)."""
    where = f"staged-model record {str(path)!r}"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{where} cannot be read: {exc.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ConfigError(f"{where} is not JSON (write it again: hyperpod-dpd stage-model --verify)") from None
    if isinstance(data, dict) and data.get("format") == 1:
        raise ConfigError(f"{where} is a format-1 record: its weights were staged in place under s3_prefix, where a "
                          f"later staging overwrites them; stage them again (hyperpod-dpd stage-model SRC) to put "
                          f"them under their own prefix <s3_prefix>sha256-<16 hex>/")
    if isinstance(data, dict) and data.get("format") == ONE_MODEL_FORMAT:
        return (_model(where, data),)
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("models"), list):
        raise ConfigError(f"{where} must be a format-{FORMAT} record written by hyperpod-dpd stage-model, got "
                          f"{shown(data)}")
    return tuple(_model(f"{where} models[{i}]", m) for i, m in enumerate(data["models"]))


def _model(where: str, data: object) -> StagedModel:
    if not isinstance(data, dict):
        raise ConfigError(f"{where} must be a mapping, got {shown(data)}")
    sha, bucket, prefix, files = (data.get(k) for k in ("manifest_sha256", "bucket", "s3_prefix", "files"))
    if not isinstance(sha, str) or not _SHA256.fullmatch(sha):
        raise ConfigError(f"{where}: manifest_sha256 must be 64 lowercase hex digits, got {shown(sha)}")
    if not isinstance(bucket, str) or not isinstance(prefix, str) or not isinstance(files, int):
        raise ConfigError(f"{where}: bucket and s3_prefix must be strings and files a number, got "
                          f"{shown(bucket)}, {shown(prefix)}, {shown(files)}")
    return StagedModel(bucket=bucket, s3_prefix=prefix, manifest_sha256=sha, files=files)
