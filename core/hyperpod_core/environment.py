"""Which deployment a command or the main job acts on: the config file named explicitly, or an environment folder.

An *environment* is a folder ``envs/<name>/`` holding ``config.yaml``; the synthesized templates
(``cdk.out/``), the deploy outputs (``cdk-outputs.json``) and the manifests (``dist/``) of that config live
beside it, so that every command of one environment reads and writes the files of that config and no other.
A config passed with ``--config path.yaml`` gets the same layout in a folder next to it, named after the file:
``path.yaml`` -> ``path.out/``.

``synth`` stamps ``cdk.out/`` with the SHA-256 of the config it was built from (:data:`STAMP_FILE`);
``deploy``/``diff``/``destroy`` act only on a ``cdk.out/`` whose stamp matches the config as it is now, so
"deploy the config I just synthesized" is the only path the command line offers.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from hyperpod_core.config import Config, load_config
from hyperpod_core.errors import UsageError

#: Folder of the environments, relative to the working directory.
ENVS_DIR = Path("envs")
CONFIG_ENV_VAR = "HYPERPOD_CONFIG"
#: Written into ``cdk.out/`` by ``synth``: which config (path and SHA-256) the templates were built from.
STAMP_FILE = "hyperpod-dpd-source.json"
_ENV_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,30}$")


@dataclass(frozen=True, kw_only=True)
class Environment:
    """One config and the files that belong to it."""

    config_path: Path
    config: Config
    workdir: Path
    """Folder holding ``cdk.out/``, ``cdk-outputs.json`` and ``dist/`` of this config."""
    name: str | None = None
    """The environment's name (``envs/<name>/``), or ``None`` for a config named with ``--config``."""

    @property
    def cdk_out(self) -> Path:
        return self.workdir / "cdk.out"

    @property
    def outputs_file(self) -> Path:
        return self.workdir / "cdk-outputs.json"

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
        (cdk_out / STAMP_FILE).write_text(json.dumps(
            {"config": str(self.config_path), "sha256": self.config_digest(), "name": self.config.name,
             "region": self.config.region}, indent=2) + "\n")

    def require_stamp(self) -> None:
        """The config file is the one ``synth`` stamped into ``cdk.out/`` (so ``cdk.out/`` and ``dist/`` are of the
        config as it is now); else a usage error naming the command to run."""
        stamp = self.cdk_out / STAMP_FILE
        if not stamp.is_file():
            raise UsageError(f"{self.cdk_out} holds no synthesized templates of {self.config_path}; "
                             f"run: hyperpod-dpd synth {self.selector}")
        try:
            recorded = json.loads(stamp.read_text()).get("sha256")
        except (OSError, ValueError):
            recorded = None
        if recorded != self.config_digest():
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
            raise UsageError(f"--env {env!r}: {path} does not exist (create it with: hyperpod-dpd init {env})")
        return Environment(config_path=path, config=load_config(path), workdir=folder, name=env)
    chosen = config or os.environ.get(CONFIG_ENV_VAR)
    if not chosen:
        raise UsageError(f"name the config: --config PATH, --env NAME or ${CONFIG_ENV_VAR}")
    path = Path(chosen)
    return Environment(config_path=path, config=load_config(path), workdir=path.with_suffix(".out"))
