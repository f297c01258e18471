"""Where the operator CRD comes from. The file is not ours, so the repository never holds a copy.

Resolution order:
1. ``--crd-dir`` / ``HYPERPOD_CRD_DIR``: a directory holding the published CRD files (this repository's CI
   points it at ``../shared/crds``).
2. ``../shared/crds`` next to the repository, when it exists.
3. Only in the set-up command (``fetch=True``): download the pinned upstream file into ``.cache/crds``.

Whatever the source, the file's SHA-256 must equal the pin in :mod:`hyperpod_core.pins` before it is used.
Synth never touches the network.
"""

from __future__ import annotations

import argparse
import hashlib
import os
from pathlib import Path

from hyperpod_core import paths, pins
from hyperpod_core.artifacts import fetch_verified
from hyperpod_core.errors import ConfigError, guarded

#: Relative to the checkout: the shared CRD folder beside it, and where set-up downloads the pinned file.
SHARED_DIR = Path("..", "shared", "crds")
CACHE_DIR = Path(".cache", "crds")
ENV_VAR = "HYPERPOD_CRD_DIR"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _verified(path: Path, pin: pins.CrdPin) -> Path:
    digest = _sha256(path)
    if digest != pin.sha256:
        raise ConfigError(
            f"CRD {str(path)!r} has sha256 {digest[:16]}..., expected the pinned {pin.sha256[:16]}... "
            "(operator CRD version mismatch: update hyperpod_core.pins on purpose, or point "
            f"{ENV_VAR} at the pinned files)")
    return path


def resolve_crd(pin: pins.CrdPin = pins.INFERENCE_ENDPOINT_CONFIG_CRD, *, crd_dir: str | Path | None = None,
                fetch: bool = False) -> Path:
    """Return a verified local path of the pinned CRD file."""
    given = crd_dir or os.environ.get(ENV_VAR)
    if given:
        path = Path(given) / pin.file_name
        if not path.is_file():
            raise ConfigError(f"{ENV_VAR} / --crd-dir {str(given)!r} has no {pin.file_name}")
        return _verified(path, pin)
    root = paths.CHECKOUT
    for candidate in ((root / SHARED_DIR / pin.file_name, root / CACHE_DIR / pin.file_name) if root else ()):
        if candidate.is_file():
            return _verified(candidate, pin)
    if not fetch:
        raise ConfigError(
            f"no copy of {pin.file_name}: set {ENV_VAR} to a directory holding the operator CRDs, "
            "or run the set-up command once to download the pinned file")
    return fetch_verified(pin.url, pin.sha256, paths.checkout("downloading the CRD") / CACHE_DIR / pin.file_name)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Print the verified path of the pinned operator CRD.")
    parser.add_argument("--crd-dir", default=None)
    parser.add_argument("--fetch", action="store_true", help="download the pinned file if no copy exists")
    args = parser.parse_args(argv)
    print(resolve_crd(crd_dir=args.crd_dir, fetch=args.fetch))


if __name__ == "__main__":
    guarded(main)
