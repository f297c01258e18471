#!/usr/bin/env python3
"""The only CDK entry point: load config -> build props -> stacks -> synth.

Config file: ``cdk synth -c config=path/to.yaml``, else ``$HYPERPOD_CONFIG``, else ``config/default.yaml``.
A bad config prints one line on stderr and exits 2 before anything is written.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# app.py sits at the root of the checkout: put the source roots on sys.path so it runs with or without
# `pip install -e .`; everything else asks hyperpod_core.paths where the checkout is.
for folder in ("core", "infra", "constructs", "k8s"):
    source_root = str(Path(__file__).resolve().parent / folder)
    if source_root not in sys.path:
        sys.path.insert(0, source_root)

from hyperpod_core.errors import guarded  # noqa: E402


def main() -> None:
    from hyperpod_core import paths
    from hyperpod_core.config import load_config
    from hyperpod_infra.cdk_cli import config_from_context

    # The config is read before ``cdk.App()`` exists: constructing the App already creates the output folder,
    # and a bad config must leave nothing behind.
    path = Path(config_from_context() or os.environ.get("HYPERPOD_CONFIG") or paths.DEFAULT_CONFIG)
    config = load_config(path if path.is_absolute() else paths.checkout("app.py") / path)

    from hyperpod_infra.app_builder import synthesize

    synthesize(config)


if __name__ == "__main__":
    guarded(main)
    # Skip the interpreter's teardown (freeing aws-cdk-lib's modules, stopping the jsii kernel gracefully):
    # ~1 s of a 4 s synth. The assembly is on disk; the node kernel exits when its stdin closes.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
