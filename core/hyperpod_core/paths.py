"""Where the repository checkout is, found once, and whether there is one.

The packages run either from a checkout (``./scripts/setup``'s editable install, ``python app.py``, the tests)
or from an installed wheel (site-packages, no checkout). What only a checkout has (``cdk.json`` with the CDK
feature flags, ``.cfnlintrc.yaml``, ``config/``, the ``.cache/`` that set-up fills, ``package-lock.json``
pinning the CDK CLI) is reached through :func:`checkout`, which says in one line (exit 2) that the command
needs the checkout when there is none. What an installed command needs comes with the wheel (package data).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Final

from hyperpod_core.errors import UsageError

#: This file, as it sits in a checkout (``<checkout>/core/hyperpod_core/paths.py``).
_HERE = Path(__file__).resolve()
#: Files every checkout has at its root; an installed wheel puts this module in site-packages, where the
#: folder two levels up (``lib/pythonX.Y``) has none of them.
_MARKERS = ("pyproject.toml", "cdk.json")

#: The config a checkout synthesizes when none is named, relative to the checkout.
DEFAULT_CONFIG: Final = Path("config", "default.yaml")


def _find_checkout() -> Path | None:
    root = _HERE.parents[2]
    inside = _HERE.relative_to(root).parts == ("core", "hyperpod_core", "paths.py")
    return root if inside and all((root / marker).is_file() for marker in _MARKERS) else None


CHECKOUT: Final[Path | None] = _find_checkout()
"""The checkout these packages run from, or ``None`` when they were installed from a wheel."""


class CheckoutRequired(UsageError):
    """Something that needs the checkout was asked for without one (exit 2); ``needed_for`` names it
    (e.g. ``"hyperpod-dpd synth"``)."""

    def __init__(self, needed_for: str) -> None:
        super().__init__(
            f"{needed_for} needs the repository checkout (cdk.json, config/, .cfnlintrc.yaml, package-lock.json), "
            f"and this copy is installed in {_HERE.parents[1]}: run it from a clone (after ./scripts/setup)")


def checkout(needed_for: str) -> Path:
    """The checkout's root, or :class:`CheckoutRequired` naming ``needed_for`` when there is none."""
    if CHECKOUT is None:
        raise CheckoutRequired(needed_for)
    return CHECKOUT


def origin_checkout(root: Path) -> Path | None:
    """The checkout ``root`` was cloned from, when its ``origin`` remote is a folder on this machine (a path or a
    ``file://`` URL); ``None`` otherwise (a network remote, no remote, no git)."""
    try:
        url = subprocess.run(["git", "-C", str(root), "config", "--get", "remote.origin.url"], capture_output=True,
                             text=True, timeout=10, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    if not url or ("://" in url and not url.startswith("file://")) or (":" in url and "://" not in url):
        return None  # https://, ssh://, or scp-like host:path
    folder = (root / url.removeprefix("file://")).resolve()
    return folder if folder.is_dir() and folder != root.resolve() else None


def beside_checkout(*parts: str, root: Path | None = None) -> tuple[Path, ...]:
    """``../<parts>`` beside the checkout (``root``, default :data:`CHECKOUT`), then beside the local checkout it was
    cloned from (:func:`origin_checkout`): where the shared, not-ours files a checkout reads live (the operator CRDs,
    the exporters' metric contract). A fresh ``git clone /work/main /tmp/x`` finds the copies its origin found."""
    root = root if root is not None else CHECKOUT
    if root is None:
        return ()
    origin = origin_checkout(root)
    return tuple(base.parent.joinpath(*parts) for base in (root, *((origin,) if origin else ())))
