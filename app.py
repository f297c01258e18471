#!/usr/bin/env python3
"""The only CDK entry point: load config -> build props -> stacks -> synth.

Config file: ``cdk synth -c config=path/to.yaml``, else ``$HYPERPOD_CONFIG``, else ``config/default.yaml``.
Run by the CDK CLI, it writes where the CLI says (``$CDK_OUTDIR``); run alone (``python app.py``), it writes what
``npx cdk synth`` would into the checkout's ``cdk.out/``. It leaves nothing in the temp folder.
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

from hyperpod_core.teardown import fast_exit  # noqa: E402


def main() -> None:
    from hyperpod_core import paths
    from hyperpod_core.config import load_config
    from hyperpod_infra.cdk_cli import config_from_context

    # The config is read before ``cdk.App()`` exists: constructing the App already creates the output folder,
    # and a bad config must leave nothing behind.
    path = Path(config_from_context() or os.environ.get("HYPERPOD_CONFIG") or paths.DEFAULT_CONFIG)
    config = load_config(path if path.is_absolute() else paths.checkout("app.py") / path)

    from hyperpod_infra.app_builder import synthesize

    if "CDK_OUTDIR" in os.environ:  # run by the CDK CLI: it names the output folder and hands over the context
        synthesize(config)
    else:  # run alone: what `npx cdk synth` writes, where it writes it (not a cdk.outXXXX the CDK would leave
        # in the temp folder)
        from hyperpod_infra.cdk_cli import cli_context

        synthesize(config, outdir=paths.checkout("app.py") / "cdk.out", context=cli_context(path))


if __name__ == "__main__":
    # The exit handlers run (jsii's removes its runtime folder from the temp folder), the interpreter's teardown
    # (~0.4 s of freeing aws-cdk-lib's modules) does not: the assembly is on disk by then.
    fast_exit(main)
