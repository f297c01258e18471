"""Which deployment a command acts on: the config file named explicitly, or an environment folder.

An *environment* is a folder ``envs/<name>/`` holding ``config.yaml``; the synthesized templates
(``cdk.out/``), the deploy outputs (``cdk-outputs.json``) and the manifests (``dist/``) of that config live
beside it, so that every command of one environment reads and writes the files of that config and no other.
A config passed with ``--config path.yaml`` gets the same layout in a folder next to it, named after the file:
``path.yaml`` -> ``path.out/``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from hyperpod_dpd.errors import UsageError
from hyperpod_infra.config import Config, load_config

#: Folder of the environments, relative to the working directory.
ENVS_DIR = Path("envs")
CONFIG_ENV_VAR = "HYPERPOD_CONFIG"


@dataclass(frozen=True, kw_only=True)
class Environment:
    """One config and the files that belong to it."""

    config_path: Path
    config: Config
    workdir: Path
    """Folder holding ``cdk.out/``, ``cdk-outputs.json`` and ``dist/`` of this config."""

    @property
    def cdk_out(self) -> Path:
        return self.workdir / "cdk.out"

    @property
    def outputs_file(self) -> Path:
        return self.workdir / "cdk-outputs.json"

    @property
    def dist(self) -> Path:
        return self.workdir / "dist"


def resolve(config: str | None = None, env: str | None = None) -> Environment:
    """The environment a command acts on: ``--env NAME``, else ``--config PATH``, else ``$HYPERPOD_CONFIG``.

    Naming both, or neither, is an error: a command never falls back to a config the user did not name.
    """
    if config and env:
        raise UsageError("pass either --config or --env, not both")
    if env:
        folder = ENVS_DIR / env
        path = folder / "config.yaml"
        if not path.is_file():
            raise UsageError(f"--env {env!r}: {path} does not exist (create it, or pass --config PATH)")
        return Environment(config_path=path, config=load_config(path), workdir=folder)
    chosen = config or os.environ.get(CONFIG_ENV_VAR)
    if not chosen:
        raise UsageError(f"name the config: --config PATH, --env NAME or ${CONFIG_ENV_VAR}")
    path = Path(chosen)
    return Environment(config_path=path, config=load_config(path), workdir=path.with_suffix(".out"))
