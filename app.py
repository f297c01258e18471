#!/usr/bin/env python3
"""The only CDK entry point: load config -> build props -> stacks -> synth.

Config file: ``cdk synth -c config=path/to.yaml``, else ``$HYPERPOD_CONFIG``, else ``config/default.yaml``.
A bad config prints one line on stderr and exits 2 before anything is written.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
for folder in ("core", "infra", "constructs", "k8s"):  # source roots; works with or without `pip install -e .`
    if str(ROOT / folder) not in sys.path:
        sys.path.insert(0, str(ROOT / folder))

# jsii copies the environment into its node kernel at the first import: set these before aws_cdk loads.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from hyperpod_core.errors import guarded  # noqa: E402


def _context_config() -> str | None:
    """``-c config=...`` as the CDK CLI hands it over (env JSON, or a file for large contexts).

    Read before ``cdk.App()`` exists, because constructing the App already creates the output folder and
    a bad config must leave nothing behind.
    """
    raw = os.environ.get("CDK_CONTEXT_JSON")
    overflow = os.environ.get("CONTEXT_OVERFLOW_LOCATION_ENV")
    if raw is None and overflow and Path(overflow).is_file():
        raw = Path(overflow).read_text()
    value = json.loads(raw).get("config") if raw else None
    return str(value) if value else None


def main() -> None:
    from hyperpod_core.config import load_config

    path = Path(_context_config() or os.environ.get("HYPERPOD_CONFIG") or "config/default.yaml")
    config = load_config(path if path.is_absolute() else ROOT / path)

    import aws_cdk as cdk

    from hyperpod_infra.app_builder import build
    from hyperpod_infra.nag import add_nag, write_findings_report

    app = cdk.App()
    build(app, config)
    add_nag(app)
    try:
        app.synth()
    finally:
        # Every cdk-nag finding with the acknowledgement (and reason) covering it, from the CDK's own
        # validation report of this synth: cdk.out/nag-findings.json.
        write_findings_report(Path(app.outdir))


if __name__ == "__main__":
    guarded(main)
    # Skip the interpreter's teardown (freeing aws-cdk-lib's modules, stopping the jsii kernel gracefully):
    # ~1 s of a 4 s synth. The assembly is on disk; the node kernel exits when its stdin closes.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
