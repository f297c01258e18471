"""The pinned CDK CLI as ``diff``, ``deploy`` and ``destroy`` run it, and the assembly's stacks as it selects them.

* :func:`run` runs ``npx --no-install cdk ...`` from the repository root (``package-lock.json`` pins it), after
  printing the command as it can be pasted (``npx`` included; ``cd <root> &&`` first when the current folder is
  another). The CLI's whole output goes to a log file in the config's folder (``cdk-<command>.log``, replaced on each
  run); stderr shows only its per-stack lines (``<stack>: deploying... [i/n]``, ``✅  <stack>``, ``❌  <stack>
  failed: ...``: the pinned CLI's messages, node_modules/aws-cdk/lib/index.js). A failure is one line
  (:func:`failure`): the CLI's own reason, its log file, and what to do.
* :func:`require_credentials`: without AWS credentials the CDK CLI prints warnings and ``Unable to resolve AWS
  account to use``, twice, and exits 1; the command line says so first, in one line with the fix (exit 1), without
  a network call.
* :func:`select_stacks`: construct IDs as the CLI selects them, CloudFormation names translated.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hyperpod_core import node_banner, paths
from hyperpod_core.errors import CommandFailed, UsageError

#: Quiet, offline-friendly settings for the CDK CLI (tooling.md §0). Not CDK8S_CHECK_UPGRADE: the CDK CLI reads
#: every CDK* variable as an option and reports that one as the unknown option "--8SCheckUpgrade".
CLI_ENV = {"CDK_DISABLE_CLI_TELEMETRY": "true", "CDK_DISABLE_VERSION_CHECK": "1",
           "AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED": "true",
           node_banner.VARIABLE: node_banner.SILENCED_MAJORS}
#: The CLI's lines shown while it runs: a stack starting, done or failed (its other lines go to the log only).
_PROGRESS = re.compile(r"(deploying|destroying)\.\.\. \[\d+/\d+\]|^\s*[\u2705\u274c]")
_FAILED = "\u274c"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
#: Longest reason quoted from the CLI's output in the one-line failure.
MAX_REASON = 240


@dataclass(frozen=True, kw_only=True)
class Ran:
    """One run of the CDK CLI: its exit code, its log file and its output (ANSI colours removed)."""

    rc: int
    log: Path
    output: str

    @property
    def reason(self) -> str:
        """The CLI's reason for a failure: its last ``❌`` line, else its last ``Error:`` line (Node's report of a
        crash ends in a stack and the Node.js version), else its last line."""
        lines = [line.strip() for line in self.output.splitlines() if line.strip()]
        failed = [line for line in lines if line.startswith(_FAILED)]
        errors = [line for line in lines if re.match(r"^\w*Error: ", line)]
        text = (failed or errors or lines or ["no output"])[-1].lstrip(_FAILED).strip()
        return text if len(text) <= MAX_REASON else text[: MAX_REASON - 3] + "..."


def pasteable(cmd: list[str], root: Path) -> str:
    """``cmd`` as a shell line that runs it from anywhere: ``npx`` must run from ``root``, where cdk.json is."""
    line = shlex.join(cmd)
    return line if Path.cwd().resolve() == root.resolve() else f"cd {shlex.quote(str(root))} && {line}"


def run(args: list[str], log: Path, profile: str | None = None) -> Ran:
    """Run ``npx --no-install cdk <args>`` (``profile``: the CLI's own ``--profile``) from the repository root, its
    output into ``log``, its per-stack lines on stderr."""
    root = paths.checkout(f"hyperpod-dpd {args[0]}")
    npx = shutil.which("npx")
    if npx is None:
        raise CommandFailed("npx not found on PATH (install Node.js 18+ and run ./scripts/setup)")
    cmd = ["npx", "--no-install", "cdk", *args, *(["--profile", profile] if profile else [])]
    line = pasteable(cmd, root)
    print(f"$ {line}   # its output: {log}", file=sys.stderr, flush=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    output: list[str] = []
    with log.open("w", encoding="utf-8") as kept, subprocess.Popen(
            # PWD too: .npmrc's node-options preload path is ${PWD}/scripts/npx-env.cjs, and npm expands the
            # variable, not the process's folder (a command run from another folder could not start npx otherwise).
            [npx, *cmd[1:]], cwd=root, env={**os.environ, **CLI_ENV, "PWD": str(root)}, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace") as proc:
        kept.write(f"$ {line}\n")
        assert proc.stdout is not None
        for raw in proc.stdout:
            text = _ANSI.sub("", raw)
            kept.write(text)
            kept.flush()
            output.append(text)
            if _PROGRESS.search(text):
                print(f"  {text.strip()}", file=sys.stderr, flush=True)
        rc = proc.wait()
    return Ran(rc=rc, log=log, output="".join(output))


def failure(command: str, ran: Ran, then: str) -> CommandFailed:
    """The one line of a failed run: the CLI's reason, where its whole output is, and ``then`` (what to do)."""
    return CommandFailed(f"cdk {command} exited {ran.rc}: {ran.reason} (its whole output: {ran.log}); {then}")


def require_credentials(command: str) -> None:
    """Fail in one line, with the fix, when the AWS credential chain finds nothing (no call is made)."""
    import boto3
    from botocore.exceptions import NoCredentialsError

    from hyperpod_dpd import aws

    action = f"hyperpod-dpd {command}: the CDK CLI needs AWS credentials"
    with aws.aws_errors(action):
        found = boto3.Session().get_credentials()
    if found is None:
        raise aws.AwsFailure(action, aws.explain(NoCredentialsError()))


def log_file(workdir: Path, command: str) -> Path:
    """Where the CDK CLI's output of ``command`` is kept: ``cdk-<command>.log`` in the config's folder."""
    return workdir / f"cdk-{command}.log"


# --- the assembly's stacks, as the CLI selects them ---------------------------------------------------------------

def stack_ids(cdk_out: Path) -> dict[str, str]:
    """``{construct ID: CloudFormation stack name}`` of the synthesized assembly, in manifest order."""
    manifest = json.loads((cdk_out / "manifest.json").read_text())
    out: dict[str, str] = {}
    for artifact_id, artifact in manifest["artifacts"].items():
        if artifact.get("type") == "aws:cloudformation:stack":
            out[artifact_id] = artifact.get("properties", {}).get("stackName", artifact_id)
    return out


def select_stacks(cdk_out: Path, wanted: list[str] | None) -> list[str]:
    """CDK CLI selectors for ``wanted``: construct IDs as given, CloudFormation names translated; ``--all``."""
    ids = stack_ids(cdk_out)
    if not wanted:
        return ["--all"]
    by_name = {name: sid for sid, name in ids.items()}
    by_lower = {sid.lower(): sid for sid in ids}
    chosen = []
    for w in wanted:
        sid = w if w in ids else by_name.get(w) or by_lower.get(w.lower())
        if sid is None:
            allowed = ", ".join(f"{sid} ({name})" for sid, name in ids.items())
            raise UsageError(f"stack must be one of {allowed}, got {w!r}")
        chosen.append(sid)
    return chosen


def templates(cdk_out: Path, ids: list[str]) -> dict[str, dict[str, Any]]:
    """``{CloudFormation stack name: template}`` of the stacks ``ids`` (construct IDs) of the assembly."""
    artifacts = json.loads((cdk_out / "manifest.json").read_text())["artifacts"]
    out: dict[str, dict[str, Any]] = {}
    for sid in ids:
        props = artifacts[sid].get("properties", {})
        out[props.get("stackName", sid)] = json.loads((cdk_out / props["templateFile"]).read_text())
    return out


def with_downstream(cdk_out: Path, selected: list[str]) -> list[str]:
    """Construct IDs of ``selected`` and every stack that depends on them (what ``cdk destroy`` removes: it
    selects a stack's dependents too), in manifest order; every stack for ``--all``."""
    artifacts = json.loads((cdk_out / "manifest.json").read_text())["artifacts"]
    ids = list(stack_ids(cdk_out))
    if selected == ["--all"]:
        return ids
    chosen = set(selected)
    changed = True
    while changed:
        changed = False
        for sid in ids:
            if sid not in chosen and chosen & set(artifacts[sid].get("dependencies", [])):
                chosen.add(sid)
                changed = True
    return [sid for sid in ids if sid in chosen]
