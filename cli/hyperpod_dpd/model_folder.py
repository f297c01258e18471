"""A Hugging Face model folder on this machine: checked to be one, its files checksummed, their manifest.

The manifest holds the SHA-256 (the digest Hugging Face records for every LFS file) and the CRC64NVME (the checksum
S3 computes of a whole object) of each file; its digest is the staged weights' revision
(:mod:`hyperpod_core.staged_model`), known before anything is uploaded.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from hyperpod_core.errors import UsageError
from hyperpod_dpd.work_pool import run_pool

MIB = 1024 * 1024
MANIFEST_NAME = "hyperpod-dpd-manifest.json"
_READ = 8 * MIB
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "tiktoken.model")


@dataclass(frozen=True, kw_only=True)
class LocalFile:
    rel: str
    path: Path
    size: int
    sha256: str = ""
    crc64nvme: str = ""
    """Base64 of the big-endian CRC64NVME, the form S3 uses in ``ChecksumCRC64NVME``."""


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


def _b64(crc: int) -> str:
    return base64.b64encode(crc.to_bytes(8, "big")).decode()


class Stopped(Exception):
    """The work was stopped (interrupted) before it finished."""


def checksum(f: LocalFile, progress: Callable[[int], None] | None = None,
             stop: threading.Event | None = None) -> LocalFile:
    """``f`` with its SHA-256 and CRC64NVME, from one read of the file."""
    from awscrt import checksums

    sha, crc = hashlib.sha256(), 0
    with f.path.open("rb") as fh:
        while chunk := fh.read(_READ):
            if stop is not None and stop.is_set():
                raise Stopped(f.rel)
            sha.update(chunk)
            crc = checksums.crc64nvme(chunk, crc)
            if progress is not None:
                progress(len(chunk))
    return LocalFile(rel=f.rel, path=f.path, size=f.size, sha256=sha.hexdigest(), crc64nvme=_b64(crc))


def checksum_all(files: list[LocalFile], progress: Callable[[int], None] | None = None,
                 workers: int = 4) -> list[LocalFile]:
    """Checksums of every file, several files at a time (hashlib and the CRT release the GIL). On an interrupt the
    workers stop at their next chunk (daemon threads: the process does not wait for a file to finish)."""
    stop = threading.Event()
    return run_pool([partial(checksum, f, progress, stop) for f in files], workers, stop)


def read_range(path: Path, offset: int, length: int) -> tuple[str, str]:
    """CRC64NVME (base64, as S3 gives it) and MD5 (hex) of ``length`` bytes of ``path`` from ``offset``."""
    from awscrt import checksums

    crc, md5 = 0, hashlib.md5(usedforsecurity=False)
    with path.open("rb") as fh:
        fh.seek(offset)
        left = length
        while left > 0 and (chunk := fh.read(min(_READ, left))):
            crc = checksums.crc64nvme(chunk, crc)
            md5.update(chunk)
            left -= len(chunk)
    return _b64(crc), md5.hexdigest()


def manifest(files: list[LocalFile]) -> dict[str, Any]:
    return {"format": 1, "files": {f.rel: {"size": f.size, "sha256": f.sha256, "crc64nvme": f.crc64nvme}
                                   for f in sorted(files, key=lambda f: f.rel)}}


def manifest_body(files: list[LocalFile]) -> bytes:
    """The manifest object's bytes (deterministic: the same files give the same bytes, hence the same digest)."""
    return (json.dumps(manifest(files), indent=2) + "\n").encode()
