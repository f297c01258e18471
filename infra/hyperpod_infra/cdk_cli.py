"""What the CDK CLI hands the app, in the one place that knows it (imports no aws_cdk: read before the App exists).

* Run by the CLI (``npx cdk synth -c config=...``, cdk.json's ``"app"``): the context arrives as JSON in
  ``$CDK_CONTEXT_JSON``, or in a file named by ``$CONTEXT_OVERFLOW_LOCATION_ENV`` when it is large;
  :func:`config_from_context` reads the ``config`` key from there.
* Synthesized in-process (the main job): :func:`cli_context` assembles the same context the CLI would, from
  ``cdk.json`` and ``cdk.context.json`` of the checkout, plus the flags ``cdk synth`` sets.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from hyperpod_core import paths

#: What ``cdk synth`` sets besides the files' context (aws-cdk CLI 2.1148.1, ``contextFromSettings``): construct
#: paths and asset metadata in the templates (deploy errors name constructs). Version reporting stays off (the
#: CLI turns it on unless ``--no-version-reporting``): no ``CDKMetadata`` resource in the templates.
SYNTH_FLAGS: dict[str, Any] = {
    "aws:cdk:enable-path-metadata": True,
    "aws:cdk:enable-asset-metadata": True,
    "aws:cdk:version-reporting": False,
}

#: Defaults of every synth of this app, whoever runs it (a ``-c`` of the CDK CLI overrides them): no stack traces in
#: the cloud assembly's metadata. For a Python app they hold only frames of jsii's runtime and kernel folders in the
#: temp folder (aws-cdk-lib: "no user code in 10 frames"), gone when the synth ends; the CDK CLI printed one such
#: path above each warning. ``aws:`` keys cannot live in cdk.json: the CLI warns about a reserved key on every run
#: (aws-cdk CLI 2.1148.1, ``warnAboutContextKey``). ``cdk --debug`` brings the creation stacks back.
METADATA_DEFAULTS: dict[str, Any] = {
    "aws:cdk:disable-stack-trace": True,  # the trace of each warning and error (aws-cdk-lib ``Annotations``)
    "aws:cdk:disable-creation-stack-traces": True,  # ``aws:cdk:creationStack`` of every CfnElement and stack
}


def config_from_context() -> str | None:
    """``-c config=...`` as the CDK CLI hands it over (env JSON, or a file for large contexts); else ``None``."""
    raw = os.environ.get("CDK_CONTEXT_JSON")
    overflow = os.environ.get("CONTEXT_OVERFLOW_LOCATION_ENV")
    if raw is None and overflow and Path(overflow).is_file():
        raw = Path(overflow).read_text()
    value = json.loads(raw).get("config") if raw else None
    return str(value) if value else None


def cli_context(config_path: Path) -> dict[str, Any]:
    """The context ``cdk synth -c config=<config_path>`` hands the app: ``cdk.context.json``, overridden by
    ``cdk.json``'s ``context``, overridden by the config and :data:`SYNTH_FLAGS`.

    That precedence is the CLI's: its context bags are [command line, cdk.json, cdk.context.json, ~/.cdk.json],
    and ``Context.all`` merges them in reverse, so an earlier bag wins (aws-cdk 2.1148.1,
    ``lib/cli/user-configuration.js`` ``loadConfigFiles`` and ``Context.all`` in ``lib/index.js``). The user's
    ~/.cdk.json context is left out: a synth of this project must not depend on who runs it."""
    root = paths.checkout("synthesizing the CDK app in-process")
    context: dict[str, Any] = {}
    for name in ("cdk.context.json", "cdk.json"):
        path = root / name
        if path.is_file():
            data = json.loads(path.read_text())
            context.update(data.get("context", {}) if name == "cdk.json" else data)
    return {**context, "config": str(config_path), **SYNTH_FLAGS}
