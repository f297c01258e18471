"""Lambda code assembled at synth: a handler folder plus modules copied beside it.

A handler that imports shared modules (the endpoint janitor's cleanup logic, the EKS client of two handlers)
gets them as real files in its asset: the caller names them as ``{path inside the asset: source file}``
(``hyperpod_core.bundle.module_files`` resolves them from the imports), and :func:`handler_code` copies the
handler folder and those files into one folder. The folder is named after the SHA-256 of what it holds, so
the same content is staged once and the asset hash stays a function of the content.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from aws_cdk import aws_lambda as lambda_

_SKIP = ("__pycache__",)


def _handler_files(handler_dir: Path) -> dict[str, Path]:
    return {str(p.relative_to(handler_dir)): p for p in sorted(handler_dir.rglob("*"))
            if p.is_file() and not set(p.relative_to(handler_dir).parts) & set(_SKIP) and p.suffix != ".pyc"}


def staged_handler(handler_dir: Path, bundled: Mapping[str, Path] | None = None) -> Path:
    """The folder holding ``handler_dir``'s files and ``bundled`` (``{relative path: file}``)."""
    files = _handler_files(handler_dir)
    for rel, source in (bundled or {}).items():
        if rel in files and files[rel] != source:
            raise ValueError(f"bundled module {rel} would replace the handler's own {files[rel]}")
        files[rel] = source
    digest = hashlib.sha256()
    for rel in sorted(files):
        digest.update(rel.encode() + b"\0" + hashlib.sha256(files[rel].read_bytes()).digest())
    target = Path(tempfile.gettempdir()) / "hyperpod-lambda-code" / digest.hexdigest()[:32]
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".stage-", dir=target.parent))
    for rel, source in files.items():
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, tmp / rel)
    try:
        os.replace(tmp, target)
    except OSError:  # another synth staged the same content first
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def handler_code(handler_dir: Path, bundled: Mapping[str, Path] | None = None) -> lambda_.Code:
    """``lambda_.Code`` of :func:`staged_handler`."""
    return lambda_.Code.from_asset(str(staged_handler(handler_dir, bundled)))
