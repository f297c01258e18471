"""Where the operator CRDs come from. The files are not ours, so the repository never holds a copy.

The pinned operator is v3.3 (:data:`hyperpod_core.pins.INFERENCE_OPERATOR_APP_VERSION`); its CRDs are the
``v3.3`` folder of the shared CRD copies. Resolution order, for each pinned file:

1. ``--crd-dir`` / ``HYPERPOD_CRD_DIR``: a directory holding the published v3.3 CRD files.
2. ``../shared/crds/v3.3`` next to the repository, when it exists; else next to the checkout this one was cloned
   from, when its ``origin`` is a folder on this machine (``git clone /work/main /tmp/x``: a fresh clone anywhere
   finds the copies its origin found, without a download).
3. ``.cache/crds/v3.3``, what an earlier set-up downloaded.
4. Only in the set-up command (``fetch=True``): download the pinned upstream file into ``.cache/crds/v3.3``.

Whatever the source, the file's SHA-256 must equal the pin in :mod:`hyperpod_core.pins` before it is used.
Synth never touches the network.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Annotated

import typer

from hyperpod_core import paths, pins
from hyperpod_core.artifacts import fetch_verified
from hyperpod_core.errors import ConfigError, UsageError, guarded, run_app

#: Relative to the checkout: the shared CRD folder of the pinned operator version beside it, and where set-up
#: downloads the pinned files (a folder per version, so a file of another version is never picked up).
SHARED_DIR = Path("..", "shared", "crds", f"v{pins.INFERENCE_OPERATOR_APP_VERSION}")
CACHE_DIR = Path(".cache", "crds", f"v{pins.INFERENCE_OPERATOR_APP_VERSION}")
ENV_VAR = "HYPERPOD_CRD_DIR"
#: The pinned CRD files by name: the IEC (bindings, manifest schema) and the two cache CRDs v3.3 adds (the
#: objects ``status`` reads are checked against them in the tests).
CRDS = {pin.file_name: pin for pin in (pins.INFERENCE_ENDPOINT_CONFIG_CRD, pins.MODEL_WEIGHTS_CACHE_CONFIG_CRD,
                                       pins.MODEL_IMAGE_CACHE_CRD)}


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
    if root is not None:
        for candidate in (*paths.beside_checkout(*SHARED_DIR.parts[1:]), root / CACHE_DIR):
            if (candidate / pin.file_name).is_file():
                return _verified(candidate / pin.file_name, pin)
    if not fetch:
        raise ConfigError(
            f"no copy of {pin.file_name}: set {ENV_VAR} to a directory holding the operator CRDs, "
            "or run the set-up command once to download the pinned file")
    return fetch_verified(pin.url, pin.sha256, paths.checkout("downloading the CRD") / CACHE_DIR / pin.file_name)


PROG = "python -m hyperpod_k8s.crd_source"
app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]})


@app.command(help="Print the verified path of each pinned operator CRD named, one a line.")
def _print_paths(
        crd_dir: Annotated[str | None, typer.Option(metavar="DIR")] = None,
        fetch: Annotated[bool, typer.Option("--fetch", help="download the pinned file if no copy exists")] = False,
        file: Annotated[list[str] | None, typer.Option(
            metavar="NAME", help=f"which pinned CRD, one of {', '.join(sorted(CRDS))}; repeatable (default: the "
                                 "InferenceEndpointConfig, the one bound with cdk8s)")] = None,
) -> None:
    names = file or [pins.INFERENCE_ENDPOINT_CONFIG_CRD.file_name]
    for name in names:
        if name not in CRDS:
            raise UsageError(f"--file must be one of {', '.join(sorted(CRDS))}, got {name!r}")
    for name in names:
        print(resolve_crd(CRDS[name], crd_dir=crd_dir, fetch=fetch))


def main(argv: list[str] | None = None) -> None:
    run_app(app, argv, PROG)


if __name__ == "__main__":
    guarded(main)
