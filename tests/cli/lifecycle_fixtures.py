"""Helpers of the lifecycle tests: run the command line as a process, copy the demo environment (the session fixture
``demo_env`` of tests/cli/conftest.py: ``hyperpod-dpd init demo`` then ``hyperpod-dpd synth --env demo``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
#: The rule and parameter ``hyperpod_constructs.chart_assets.refuse_deploy_without`` adds to a stack whose Helm chart
#: set-up could not fetch: CloudFormation then refuses every create and update of it.
CHART_RULE, CHART_PARAMETER = "HyperPodChartsFetchedRule", "HyperPodChartsFetched"


def no_aws_credentials(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """No AWS credentials anywhere in boto's chain (environment, shared files, profile; IMDS off), with the shared
    files pointed at paths under ``folder`` that do not exist."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_DEFAULT_PROFILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(folder / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(folder / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def cli_process(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m hyperpod_dpd ARGS`` in ``cwd``, with ``env`` added (and no ``$HYPERPOD_CONFIG``)."""
    full_env = {k: v for k, v in os.environ.items() if k != "HYPERPOD_CONFIG"} | env
    return subprocess.run([sys.executable, "-m", "hyperpod_dpd", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=600, check=False, stdin=subprocess.DEVNULL)


def set_charts_fetched(cdk_out: Path, *, charts_fetched: bool) -> None:
    """The Cluster template of ``cdk_out`` as set-up with (or without) access to the charts' sources leaves it:
    without (or with) the rule that refuses the deploy."""
    path = cdk_out / "Cluster.template.json"
    template = json.loads(path.read_text())
    if charts_fetched:
        template.get("Rules", {}).pop(CHART_RULE, None)
        template.get("Parameters", {}).pop(CHART_PARAMETER, None)
    else:
        template.setdefault("Parameters", {})[CHART_PARAMETER] = {"Type": "String", "Default": "no",
                                                                  "AllowedValues": ["no"]}
        template.setdefault("Rules", {})[CHART_RULE] = {"Assertions": [{
            "Assert": {"Fn::Equals": [{"Ref": CHART_PARAMETER}, "yes"]},
            "AssertDescription": "Helm charts nvidia-device-plugin (NVIDIA/k8s-device-plugin@cb6e45e) were not "
                                 "fetched when this template was synthesized; run ./scripts/setup with access to "
                                 "raw.githubusercontent.com (or set HYPERPOD_CHART_CACHE), synthesize again, then "
                                 "deploy"}]}
    path.write_text(json.dumps(template))


def copy_env(source: Path, target: Path, *, charts_fetched: bool) -> Path:
    """``source`` (an environment folder: ``config.yaml``, ``cdk.out/``, ``dist/``) copied to ``target`` (kept when it
    exists), its Cluster template as :func:`set_charts_fetched` says."""
    if not target.exists():
        shutil.copytree(source, target)
    set_charts_fetched(target / "cdk.out", charts_fetched=charts_fetched)
    return target
