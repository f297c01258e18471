#!/usr/bin/env python3
"""The only CDK entry point: load config -> build props -> stacks -> synth.

Config file: ``cdk synth -c config=path/to.yaml``, else ``$HYPERPOD_CONFIG``, else ``config/default.yaml``.
Run by the CDK CLI, it writes where the CLI says (``$CDK_OUTDIR``), but never another config's templates into the
checkout's ``cdk.out/`` (the default config's: :func:`hyperpod_core.environment.folder_of`); run alone (``python
app.py``), it writes what ``npx cdk synth`` would into the config's own ``cdk.out/``. Either way it stamps the folder
with the config it was built from. It leaves nothing in the temp folder.
A bad config prints one line on stderr and exits 2 before anything is written.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# app.py sits at the root of the checkout: put the source roots on sys.path so it runs with or without
# `pip install -e .`; everything else asks hyperpod_core.paths where the checkout is.
for folder in ("core", "runtime", "infra", "constructs", "k8s"):
    source_root = str(Path(__file__).resolve().parent / folder)
    if source_root not in sys.path:
        sys.path.insert(0, source_root)

from hyperpod_core import environment, paths  # noqa: E402
from hyperpod_core.config import load_config  # noqa: E402
from hyperpod_core.teardown import fast_exit  # noqa: E402
from hyperpod_infra.cdk_cli import cli_context, config_from_context  # noqa: E402


def main() -> None:
    # The config is read before ``cdk.App()`` exists: constructing the App already creates the output folder,
    # and a bad config must leave nothing behind.
    given = Path(config_from_context() or os.environ.get("HYPERPOD_CONFIG") or paths.DEFAULT_CONFIG)
    path = given if given.is_absolute() else paths.checkout("app.py") / given
    config = load_config(path)
    # aws-cdk-lib loads only now (~1.3 s): a bad config has failed before, in well under a second.
    from hyperpod_infra.app_builder import synthesize

    if "CDK_OUTDIR" in os.environ:  # run by the CDK CLI: it names the output folder and hands over the context
        outdir = Path(os.environ["CDK_OUTDIR"])
        # The checkout's cdk.out/ is the default config's (hyperpod_core.environment.folder_of): another config's
        # templates there would be deployed, and their outputs read, as the default config's.
        environment.check_output_folder(path, outdir, "cdk.out", "-o")
        synthesize(config)
    else:  # run alone: what `npx cdk synth` writes, into the config's own folder (not a cdk.outXXXX the CDK would
        # leave in the temp folder)
        outdir = environment.folder_of(path)[0] / "cdk.out"
        synthesize(config, outdir=outdir, context=cli_context(given))
    # Which config these templates are of: hyperpod-dpd diff/deploy/destroy/bench act only on a matching stamp.
    environment.stamp(outdir, path, config)


if __name__ == "__main__":
    from hyperpod_core import node_banner

    node_banner.silence()  # before the first jsii import
    # The exit handlers run (jsii's removes its runtime folder from the temp folder), the interpreter's teardown
    # (~0.4 s of freeing aws-cdk-lib's modules) does not: the assembly is on disk by then.
    fast_exit(main)
