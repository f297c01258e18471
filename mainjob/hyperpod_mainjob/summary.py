"""Print what the main job produced: stacks and resources by type, manifests, validation results.

The main job (``hyperpod_mainjob.job``) calls :func:`print_summary` after its own cfn-lint pass. Standalone:
``python -m hyperpod_mainjob.summary --cdk-out cdk.out --dist dist`` runs cfn-lint itself and exits non-zero on
an error, so a broken template is never summarized as fine.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer
import yaml

from hyperpod_core import paths
from hyperpod_core.errors import guarded, run_app
from hyperpod_mainjob.lint_worker import SETTINGS_FILE


def _stacks(cdk_out: Path) -> dict[str, collections.Counter[str]]:
    manifest = json.loads((cdk_out / "manifest.json").read_text())
    out: dict[str, collections.Counter[str]] = {}
    for artifact in manifest["artifacts"].values():
        if artifact.get("type") != "aws:cloudformation:stack":
            continue
        template = json.loads((cdk_out / artifact["properties"]["templateFile"]).read_text())
        name = artifact["properties"].get("stackName", artifact["displayName"])
        out[name] = collections.Counter(r["Type"] for r in template.get("Resources", {}).values())
    return out


def _cfn_lint(cdk_out: Path) -> tuple[int, str]:
    settings = paths.checkout("python -m hyperpod_mainjob.summary") / SETTINGS_FILE
    templates = sorted(str(p) for p in cdk_out.glob("*.template.json"))
    lint = Path(sys.executable).with_name("cfn-lint")
    result = subprocess.run([str(lint), "--config-file", str(settings), "--", *templates],
                            capture_output=True, text=True, check=False)
    return result.returncode, result.stdout.strip()


def print_summary(*, cdk_out: Path, dist: Path, config: str, lint_rc: int, lint_output: str,
                  next_steps: list[str], lint_unchanged: int = 0) -> None:
    """Stacks and resources by type, manifests by kind, validation results and the exact next commands."""
    stacks = _stacks(cdk_out)
    total = sum(sum(c.values()) for c in stacks.values())
    print(f"\n== CloudFormation ({cdk_out}/): {len(stacks)} stacks, {total} resources, from {config}")
    for name, counts in stacks.items():
        top = ", ".join(f"{t.removeprefix('AWS::')} {n}" for t, n in counts.most_common(6))
        more = len(counts) - 6
        print(f"  {name:<28} {sum(counts.values()):>4} resources: {top}{f', +{more} more types' if more > 0 else ''}")

    manifests = sorted(dist.rglob("*.k8s.yaml")) + sorted(dist.rglob("*.json"))
    print(f"\n== Kubernetes ({dist}/): {len(manifests)} files")
    for path in manifests:
        if path.suffix == ".json":
            print(f"  {path.relative_to(dist)}")
            continue
        kinds = collections.Counter(d["kind"] for d in yaml.safe_load_all(path.read_text()) if d)
        print(f"  {path.relative_to(dist)}: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))

    print("\n== Validation")
    report = cdk_out / "nag-findings.json"
    if report.is_file():
        r = json.loads(report.read_text())
        print(f"  cdk-nag AwsSolutions: {r['unacknowledged']} unacknowledged findings (synth fails on any); "
              f"{len(r['findings'])} findings acknowledged by {r['acknowledgements']} acknowledgements, each "
              f"with its reason: {report}")
    else:
        print("  cdk-nag AwsSolutions: 0 unacknowledged findings (synth fails on any)")
    unchanged = f"; {lint_unchanged} of them unchanged since they linted clean" if lint_unchanged else ""
    print(f"  cfn-lint: {'clean' if lint_rc == 0 else f'exit {lint_rc}'} on {len(stacks)} templates "
          f"(.cfnlintrc.yaml{unchanged})")
    if lint_rc:
        print(lint_output)
    print("\nNext:")
    for step in next_steps:
        print(f"  {step}")


PROG = "python -m hyperpod_mainjob.summary"
app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]})


@app.command(help=__doc__)
def _summary(cdk_out: Annotated[Path, typer.Option(metavar="DIR")] = Path("cdk.out"),
             dist: Annotated[Path, typer.Option(metavar="DIR")] = Path("dist"),
             config: Annotated[str, typer.Option(metavar="PATH")] = "config/default.yaml") -> int:
    rc, lint_out = _cfn_lint(cdk_out)
    print_summary(cdk_out=cdk_out, dist=dist, config=config, lint_rc=rc, lint_output=lint_out,
                  next_steps=[f"npx cdk deploy --app {cdk_out} --all --outputs-file cdk-outputs.json"])
    return 1 if rc else 0


def main(argv: list[str] | None = None) -> None:
    """The entry point: exits 1 when cfn-lint reports an error."""
    run_app(app, argv, PROG)


if __name__ == "__main__":
    guarded(main)
