"""Helpers of the lifecycle tests: run the command line as a process, copy the demo environment (the session fixture
``demo_env`` of tests/cli/conftest.py: ``hyperpod-dpd init demo`` then ``hyperpod-dpd synth --env demo``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
#: The rule and parameter ``hyperpod_constructs.chart_assets.refuse_deploy_without`` adds to a stack whose Helm chart
#: set-up could not fetch: CloudFormation then refuses every create and update of it.
CHART_RULE, CHART_PARAMETER = "HyperPodChartsFetchedRule", "HyperPodChartsFetched"


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
