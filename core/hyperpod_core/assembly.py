"""Reading a synthesized cloud assembly (``cdk.out/``): what ``cdk deploy --app <cdk.out>`` will need."""

from __future__ import annotations

import json
from pathlib import Path


def required_parameters(cdk_out: Path, stack_ids: list[str]) -> dict[str, list[str]]:
    """``{stack name: [parameter]}`` of the selected templates' parameters that have no default.

    ``stack_ids`` are construct IDs or ``["--all"]``. The CDK's own ``BootstrapVersion`` always has a default
    (an SSM parameter path), so it never shows up here.
    """
    manifest = json.loads((cdk_out / "manifest.json").read_text())
    out: dict[str, list[str]] = {}
    for sid, artifact in manifest["artifacts"].items():
        if artifact.get("type") != "aws:cloudformation:stack" or (stack_ids != ["--all"] and sid not in stack_ids):
            continue
        props = artifact.get("properties", {})
        template = json.loads((cdk_out / props["templateFile"]).read_text())
        missing = [name for name, p in template.get("Parameters", {}).items() if "Default" not in p]
        if missing:
            out[props.get("stackName", sid)] = missing
    return out
