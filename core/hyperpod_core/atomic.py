"""Write a whole output folder or file atomically: build it in a temp place beside the target, then move it in.

A failed step leaves the previous output exactly as it was (and no temp folder behind); readers never see a
half-written folder. Used by the cdk8s app for ``dist/`` and by the main job for ``cdk.out/``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def staged_dir(target: Path) -> Iterator[Path]:
    """Yield an empty temp folder beside ``target``; on success it replaces ``target``, on error it is removed."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    replace_dir(tmp, target)


def replace_dir(new: Path, target: Path) -> None:
    """Move folder ``new`` to ``target``, replacing what was there with two renames (no window without it)."""
    umask = os.umask(0)
    os.umask(umask)
    new.chmod(0o777 & ~umask)
    old = None
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
        os.replace(target, old / target.name)
    os.replace(new, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temp file in the same folder and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
