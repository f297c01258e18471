"""Reading a synthesized cloud assembly (``cdk.out/``): what ``cdk deploy --app <cdk.out>`` will need.

Two edges read it: the main job (its next steps) and the command line (``deploy``, ``preflight``); the command line
runs the main job as a child process and imports none of it, so the one copy lives here, below both."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def required_parameters(cdk_out: Path, stack_ids: list[str]) -> dict[str, list[str]]:
    """``{stack name: [parameter]}`` of the selected templates' parameters that have no default.

    ``stack_ids`` are construct IDs or ``["--all"]``. The CDK's own ``BootstrapVersion`` always has a default
    (an SSM parameter path), so it never shows up here.
    """
    out: dict[str, list[str]] = {}
    for stack, template in _stacks(cdk_out, stack_ids):
        missing = [name for name, p in template.get("Parameters", {}).items() if "Default" not in p]
        if missing:
            out[stack] = missing
    return out


def with_upstream(cdk_out: Path, stack_ids: list[str]) -> list[str]:
    """``stack_ids`` and every stack they depend on: what ``cdk deploy STACK`` deploys (the CDK CLI selects a
    stack's upstream dependencies unless ``--exclusively``); ``["--all"]`` stays as it is."""
    if stack_ids == ["--all"]:
        return stack_ids
    artifacts = json.loads((cdk_out / "manifest.json").read_text())["artifacts"]
    chosen: list[str] = []
    todo = list(stack_ids)
    while todo:
        sid = todo.pop()
        if sid in chosen or artifacts.get(sid, {}).get("type") != "aws:cloudformation:stack":
            continue
        chosen.append(sid)
        todo += artifacts[sid].get("dependencies", [])
    return [sid for sid in artifacts if sid in chosen]


def _stacks(cdk_out: Path, stack_ids: list[str]) -> list[tuple[str, dict[str, Any]]]:
    manifest = json.loads((cdk_out / "manifest.json").read_text())
    out = []
    for sid, artifact in manifest["artifacts"].items():
        if artifact.get("type") != "aws:cloudformation:stack" or (stack_ids != ["--all"] and sid not in stack_ids):
            continue
        props = artifact.get("properties", {})
        out.append((props.get("stackName", sid), json.loads((cdk_out / props["templateFile"]).read_text())))
    return out


def undeployable(cdk_out: Path, stack_ids: list[str]) -> dict[str, list[str]]:
    """``{stack name: [why]}`` of the selected templates that CloudFormation will refuse to create or update: a
    template rule asserting that a parameter equals a value its ``AllowedValues`` exclude can never hold, and its
    ``AssertDescription`` says why (the stand-in of a Helm chart set-up could not fetch:
    ``hyperpod_constructs.chart_assets.refuse_deploy_without``)."""
    out: dict[str, list[str]] = {}
    for stack, template in _stacks(cdk_out, stack_ids):
        parameters = template.get("Parameters", {})
        for rule in template.get("Rules", {}).values():
            for assertion in rule.get("Assertions", []):
                equals = (assertion.get("Assert") or {}).get("Fn::Equals")
                if not (isinstance(equals, list) and len(equals) == 2 and isinstance(equals[0], dict)):
                    continue
                allowed = parameters.get(str(equals[0].get("Ref")), {}).get("AllowedValues")
                if allowed is not None and equals[1] not in allowed:
                    out.setdefault(stack, []).append(str(assertion.get("AssertDescription", "")))
    return out


def undeployable_line(cdk_out: Path, stack_ids: list[str]) -> str | None:
    """One line saying which selected stack (with its upstream) CloudFormation will refuse and why, or ``None``."""
    found = undeployable(cdk_out, with_upstream(cdk_out, stack_ids))
    if not found:
        return None
    stack, reasons = next(iter(found.items()))
    more = sum(len(r) for r in found.values()) - 1
    return f"stack {stack} cannot deploy yet: {reasons[0]}" + (f" (and {more} more like it)" if more else "")
