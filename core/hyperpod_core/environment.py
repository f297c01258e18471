"""Which deployment a command or an app acts on, and the ONE folder where that config's files live.

Every entry point (``./scripts/synth``, ``python app.py`` and ``npx cdk ...``, ``npx cdk8s synth``, every
``hyperpod-dpd`` command) asks :func:`folder_of` where a config's synthesized templates (``cdk.out/``), deploy
outputs (``cdk-outputs.json``), manifests (``dist/``) and staged-weights record live. The rule:

* the checkout's default config (``config/default.yaml``): the checkout's root (``cdk.out/``, ``dist/``,
  ``cdk-outputs.json``, as the README's raw-CLI commands write them);
* an environment, ``<envs>/NAME/config.yaml`` (``--env NAME``, or that file named with ``--config``): ``<envs>/NAME/``;
  ``<envs>`` is ``$HYPERPOD_ENVS_DIR``, else the checkout's ``envs/`` (wherever the command runs from), else
  ``./envs`` for a copy installed without a checkout;
* any other config inside the checkout: ``out/<its path without the extension>/`` (``config/examples/x.yaml`` ->
  ``out/config/examples/x/``; ``out/`` is git-ignored), never a folder inside ``config/``;
* a config outside the checkout (or without one): ``<name>.out/`` beside it (``my.yaml`` -> ``my.out/``).

A folder derived from the config's path keeps its form (relative or absolute, as given); the checkout's folders are
shown relative to the current folder when they are inside it (or both are inside the checkout), else absolute.

``synth`` (and the CDK app under the CDK CLI) stamps ``cdk.out/`` with the SHA-256 of the config it was built from
(:data:`STAMP_FILE`); ``deploy``/``diff``/``destroy``/``bench`` act only on a ``cdk.out/`` whose stamp matches the
config as it is now, so "deploy the config I just synthesized" is the only path the command line offers.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from hyperpod_core import paths
from hyperpod_core.config import Config, load_config
from hyperpod_core.errors import UsageError
from hyperpod_core.outputs import DEFAULT_OUTPUTS_FILE

#: Names the folder of the environments (default: the checkout's ``envs/``).
ENVS_ENV_VAR = "HYPERPOD_ENVS_DIR"
#: The environments' folder name in the checkout (and in the current folder without a checkout).
ENVS_DIR = Path("envs")
#: An environment's config file, in ``<envs>/NAME/``.
ENV_CONFIG = "config.yaml"
#: Folder, in the checkout, of the files of a config that is neither the default nor an environment's.
OUT_DIR = "out"
CONFIG_ENV_VAR = "HYPERPOD_CONFIG"
#: Written into ``cdk.out/`` by ``synth``: which config (path and SHA-256) the templates were built from.
STAMP_FILE = "hyperpod-dpd-source.json"
_ENV_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,30}$")


def shown(path: Path) -> Path:
    """``path`` relative to the current folder when it is inside it, or when both are inside the checkout (short,
    pasteable messages: ``../envs/prod`` from ``docs/``), else absolute."""
    absolute, cwd = path.resolve(), Path.cwd().resolve()
    if absolute.is_relative_to(cwd):
        return absolute.relative_to(cwd)
    root = paths.CHECKOUT
    if root is not None and absolute.is_relative_to(root.resolve()) and cwd.is_relative_to(root.resolve()):
        return Path(os.path.relpath(absolute, cwd))
    return absolute


def envs_dir() -> Path:
    """The folder of the environments: ``$HYPERPOD_ENVS_DIR``, else the checkout's ``envs/``, else ``./envs``."""
    given = os.environ.get(ENVS_ENV_VAR)
    if given:
        return shown(Path(given))
    return shown(paths.CHECKOUT / ENVS_DIR) if paths.CHECKOUT is not None else ENVS_DIR


def folder_of(config_path: Path) -> tuple[Path, str | None]:
    """The one folder of ``config_path``'s files (the rule in this module's docstring) and, when the config is an
    environment's, the environment's name."""
    path = config_path.resolve()
    if path.name == ENV_CONFIG and path.parent.parent == envs_dir().resolve() and _ENV_NAME_RE.fullmatch(
            path.parent.name):
        return config_path.parent, path.parent.name
    root = paths.CHECKOUT
    if root is not None:
        root = root.resolve()
        if path == root / paths.DEFAULT_CONFIG:
            return shown(root), None
        if path.is_relative_to(root):
            return shown(root / OUT_DIR / path.relative_to(root).with_suffix("")), None
    return config_path.with_suffix(".out"), None


def stamp(cdk_out: Path, config_path: Path, config: Config) -> None:
    """Record in ``cdk_out`` which config (path, SHA-256, name, region) it was synthesized from."""
    (cdk_out / STAMP_FILE).write_text(json.dumps(
        {"config": str(config_path.resolve()), "sha256": hashlib.sha256(config_path.read_bytes()).hexdigest(),
         "name": config.name, "region": config.region}, indent=2) + "\n")


def check_output_folder(config_path: Path, folder: Path, kind: str, flag: str) -> None:
    """Refuse to write ``config_path``'s ``kind`` (``cdk.out`` or ``dist``) into the checkout root's folder of that
    kind, which is the default config's, when the config is another: one config, one folder (:func:`folder_of`).
    ``flag``: how the raw CLI names another output folder (``-o``)."""
    root = paths.CHECKOUT
    if root is None or folder.resolve() != (root / kind).resolve():
        return
    own, _ = folder_of(config_path)
    if own.resolve() != root.resolve():
        named = shown(config_path)
        raise UsageError(f"{shown(folder)}/ holds the files of {paths.DEFAULT_CONFIG}, not of {named}, whose files "
                         f"live in {own}/ (README, Deploy): pass {flag} {own / kind}, or use hyperpod-dpd synth "
                         f"--config {named}")


@dataclass(frozen=True, kw_only=True)
class Environment:
    """One config and the files that belong to it."""

    config_path: Path
    config: Config
    workdir: Path
    """Folder holding ``cdk.out/``, ``cdk-outputs.json`` and ``dist/`` of this config (:func:`folder_of`)."""
    name: str | None = None
    """The environment's name (``envs/<name>/``), or ``None`` for another config."""
    outputs: Path | None = None
    """The deploy outputs file named with ``--outputs-file``; ``None``: ``cdk-outputs.json`` in :attr:`workdir`."""

    @property
    def cdk_out(self) -> Path:
        return self.workdir / "cdk.out"

    @property
    def outputs_file(self) -> Path:
        return self.outputs if self.outputs is not None else self.workdir / DEFAULT_OUTPUTS_FILE

    @property
    def dist(self) -> Path:
        return self.workdir / "dist"

    @property
    def selector(self) -> str:
        """How to name this environment on the command line again (for printed next steps)."""
        return f"--env {self.name}" if self.name else f"--config {self.config_path}"

    def config_digest(self) -> str:
        return hashlib.sha256(self.config_path.read_bytes()).hexdigest()

    def write_stamp(self, cdk_out: Path) -> None:
        """Record in ``cdk_out`` which config it was synthesized from."""
        stamp(cdk_out, self.config_path, self.config)

    def require_stamp(self) -> None:
        """The config file is the one ``synth`` stamped into ``cdk.out/`` (so ``cdk.out/`` and ``dist/`` are of the
        config as it is now); else a usage error naming the command to run."""
        path = self.cdk_out / STAMP_FILE
        if not path.is_file():
            raise UsageError(f"{self.cdk_out} holds no synthesized templates of {self.config_path}; "
                             f"run: hyperpod-dpd synth {self.selector}")
        try:
            recorded = json.loads(path.read_text())
        except (OSError, ValueError):
            recorded = None
        if not isinstance(recorded, dict):
            recorded = {}
        if recorded.get("sha256") == self.config_digest():  # the same bytes: the same config, wherever it was
            return
        source = recorded.get("config")
        if isinstance(source, str) and Path(source).is_absolute() and Path(source) != self.config_path.resolve():
            raise UsageError(f"{self.cdk_out} holds the templates of {source}, not of {self.config_path}; "
                             f"run: hyperpod-dpd synth {self.selector}")
        raise UsageError(f"{self.config_path} changed since {self.cdk_out} was synthesized; "
                         f"run: hyperpod-dpd synth {self.selector}")

    def require_synthesized(self) -> Path:
        """``cdk.out/`` of this config, synthesized from the config file as it is now; else a usage error."""
        if not (self.cdk_out / "manifest.json").is_file():
            raise UsageError(f"{self.cdk_out} holds no synthesized templates of {self.config_path}; "
                             f"run: hyperpod-dpd synth {self.selector}")
        self.require_stamp()
        return self.cdk_out


def check_env_name(name: str) -> str:
    if not _ENV_NAME_RE.fullmatch(name):
        raise UsageError(f"environment name must be 1-31 lowercase letters, digits or '-' starting with a "
                         f"letter, got {name!r}")
    return name


def resolve(config: str | None = None, env: str | None = None, *, outputs_file: Path | None = None) -> Environment:
    """The environment a command acts on: ``--env NAME``, else ``--config PATH``, else ``$HYPERPOD_CONFIG``;
    ``outputs_file`` (``--outputs-file``) replaces its ``cdk-outputs.json``.

    Naming both, or neither, is an error: a command never falls back to a config the user did not name.
    """
    if config and env:
        raise UsageError("pass either --config or --env, not both")
    if env:
        path = envs_dir() / env / ENV_CONFIG
        if not path.is_file():
            raise UsageError(f"--env {env!r}: {path} does not exist (create it with: hyperpod-dpd init {env})")
        return Environment(config_path=path, config=load_config(path), workdir=path.parent, name=env,
                           outputs=outputs_file)
    chosen = config or os.environ.get(CONFIG_ENV_VAR)
    if not chosen:
        raise UsageError(f"name the config: --config PATH, --env NAME or ${CONFIG_ENV_VAR}")
    path = Path(chosen)
    loaded = load_config(path)
    workdir, name = folder_of(path)
    return Environment(config_path=path, config=loaded, workdir=workdir, name=name, outputs=outputs_file)
