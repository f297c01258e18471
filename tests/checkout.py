"""The checkout's own layout, which no test reads, and a copy of the checkout without it.

A developer's checkout holds files of one deployment beside the code: the default config's folder is the root
(``cdk.out/``, ``dist/``, ``cdk-outputs.json``, ``staged-model.json``; :mod:`hyperpod_core.environment`), an
environment's is ``envs/NAME/``, any other config's ``out/...``. A test that read them would depend on what the
developer last synthesized or deployed (a root ``cdk-outputs.json`` from the README's raw deploy turned a region-rule
message into the outputs file's). tests/conftest.py fails such a test, and its ``checkout_copy`` fixture gives a
test that needs the default config's folder a checkout of its own (:func:`copy_checkout`).
"""

from __future__ import annotations

import shutil
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
#: The checkout's entries that belong to a deployment, not to the code (git-ignored).
CHECKOUT_LAYOUT: tuple[str, ...] = ("cdk.out", "dist", "cdk-outputs.json", "staged-model.json", "envs", "out",
                                    "benchmark-results", "benchmark-report", ".cdk8s.out")


def in_the_checkouts_layout(folder: Path) -> bool:
    """``folder`` is the real checkout's root (the default config's folder) or inside its ``envs/`` or ``out/``,
    while the packages run from the real checkout (not a test's copy)."""
    from hyperpod_core import paths

    if paths.CHECKOUT is None or paths.CHECKOUT.resolve() != REPO_ROOT:
        return False
    folder = folder.resolve()
    return folder == REPO_ROOT or any(folder.is_relative_to(REPO_ROOT / d) for d in ("envs", "out"))


def copy_checkout(root: Path) -> Path:
    """``root`` made a checkout without :data:`CHECKOUT_LAYOUT`: every other entry of the repository linked,
    ``config/`` copied (its tracked files only: a stale ``config/*.out/`` stays behind). Cheap: links, and five YAML
    files and the schema. The caller points ``hyperpod_core.paths.CHECKOUT`` at it."""
    root.mkdir(parents=True)
    for entry in REPO_ROOT.iterdir():
        if entry.name in CHECKOUT_LAYOUT or entry.name in (".git", "config") or entry.name.startswith("cdk-"):
            continue
        (root / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    shutil.copytree(REPO_ROOT / "config", root / "config", ignore=shutil.ignore_patterns("*.out"))
    return root
