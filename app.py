#!/usr/bin/env python3
"""The only CDK entry point: load config -> build props -> stacks -> synth.

Config file: ``cdk synth -c config=path/to.yaml``, else ``$HYPERPOD_CONFIG``, else ``config/default.yaml``.
A bad config prints one line on stderr and exits 2 before anything is written.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
for folder in ("infra", "constructs", "k8s"):  # source roots; works with or without `pip install -e .`
    if str(ROOT / folder) not in sys.path:
        sys.path.insert(0, str(ROOT / folder))

# jsii copies the environment into its node kernel at the first import: set these before aws_cdk loads.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from hyperpod_infra.errors import run_guarded  # noqa: E402


def main() -> None:
    import aws_cdk as cdk

    from hyperpod_infra.app_builder import build
    from hyperpod_infra.config import load_config
    from hyperpod_infra.nag import add_nag

    app = cdk.App()
    path = app.node.try_get_context("config") or os.environ.get("HYPERPOD_CONFIG") or "config/default.yaml"
    config = load_config(ROOT / path if not Path(path).is_absolute() else path)
    build(app, config)
    add_nag(app)
    app.synth()


if __name__ == "__main__":
    run_guarded(main)
