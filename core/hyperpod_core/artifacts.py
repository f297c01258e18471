"""Third-party files this project deploys but never commits: fetched once at set-up, verified every time.

One mechanism for every pinned upstream file (the operator CRD, the device plugin charts, the HyperPod
resiliency sub-charts):
:func:`fetch_verified` downloads a pinned URL and keeps it only when its SHA-256 equals the pin; synth only
reads local copies and checks them again (:func:`verified_chart_dir`). Synth never touches the network.

Chart cache: ``$HYPERPOD_CHART_CACHE`` or ``<repo>/.cache/charts``, one directory per chart,
``<cache>/<commit>/<chart name>/<files>``. ``./scripts/setup`` fills it (``python -m hyperpod_mainjob.charts
--fetch``); without network access to raw.githubusercontent.com it warns and synth marks the deployment as
not deployable (see :mod:`hyperpod_constructs.hyperpod_resiliency_charts`).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.request
from pathlib import Path, PurePosixPath

from hyperpod_core import paths, pins
from hyperpod_core.errors import ConfigError

CHART_CACHE_ENV = "HYPERPOD_CHART_CACHE"
#: The chart cache when ``$HYPERPOD_CHART_CACHE`` is not set, relative to the checkout.
DEFAULT_CHART_CACHE = Path(".cache", "charts")


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fetch_verified(url: str, sha256: str, target: Path, *, timeout_seconds: float = 30) -> Path:
    """Download ``url`` to ``target`` only if its SHA-256 is ``sha256`` (written through a temporary file,
    so a failed or mismatching download leaves nothing behind)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_seconds) as response:
            body = response.read()
    except OSError as exc:
        raise ConfigError(f"cannot download {url}: {exc}") from None
    digest = hashlib.sha256(body).hexdigest()
    if digest != sha256:
        raise ConfigError(f"downloaded {url} has sha256 {digest[:16]}..., expected the pinned {sha256[:16]}...; "
                          "refusing to use it")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=target.parent, delete=False) as tmp:
        tmp.write(body)
    Path(tmp.name).replace(target)
    return target


def chart_cache_dir() -> Path:
    given = os.environ.get(CHART_CACHE_ENV)
    return Path(given) if given else paths.checkout(f"the chart cache (or ${CHART_CACHE_ENV})") / DEFAULT_CHART_CACHE


def chart_dir(chart: pins.ChartArtifactPin, cache: Path | None = None) -> Path:
    return (cache or chart_cache_dir()) / chart.commit / chart.name


def verified_chart_dir(chart: pins.ChartArtifactPin, cache: Path | None = None) -> Path | None:
    """The local copy of ``chart`` if it holds exactly the pinned files with the pinned hashes; ``None``
    when it was never fetched. A copy that differs from the pins is an error, never silently used."""
    root = chart_dir(chart, cache)
    if not root.is_dir():
        return None
    wanted = {f.path: f.sha256 for f in chart.files}
    present = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    if present != set(wanted):
        raise ConfigError(f"chart cache {str(root)!r} does not hold exactly the pinned files of {chart.name} "
                          f"(extra {sorted(present - set(wanted))}, missing {sorted(set(wanted) - present)}): "
                          f"delete it and run ./scripts/setup")
    for path, digest in wanted.items():
        if sha256_of(root / path) != digest:
            raise ConfigError(f"chart cache file {str(root / path)!r} does not match its pinned sha256: "
                              "delete it and run ./scripts/setup")
    return root


def fetch_chart(chart: pins.ChartArtifactPin, cache: Path | None = None) -> Path:
    """Download every pinned file of ``chart`` (verified one by one), then move the directory into place."""
    final = chart_dir(chart, cache)
    if verified_chart_dir(chart, cache) is not None:
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=final.parent) as tmp:
        staging = Path(tmp) / chart.name
        for f in chart.files:
            if PurePosixPath(f.path).is_absolute() or ".." in PurePosixPath(f.path).parts:
                raise ConfigError(f"chart file path must stay inside the chart, got {f.path!r}")
            fetch_verified(chart.base_url + f.path, f.sha256, staging / f.path)
        staging.replace(final)
    return final
