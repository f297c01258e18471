"""Custom resource: install the HyperPod resiliency sub-charts from aws/sagemaker-hyperpod-cli at a pinned commit.

Written for this project. At deploy time it downloads the repository archive of one commit from GitHub,
extracts only ``helm_chart/HyperPodHelmChart/charts/<name>/`` for the requested sub-charts, and runs
``helm upgrade --install`` for each (``helm uninstall`` on delete). helm and kubectl come from the CDK
kubectl Lambda layer; the Kubernetes token is an STS-presigned GetCallerIdentity (the EKS IAM token format),
made by ``eks_token.py``, a link to the endpoint janitor's module so the scheme lives in one file.
Only the Python standard library and boto3 (Lambda runtime) are used.
"""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
import tempfile
import urllib.request
from pathlib import Path, PurePosixPath
from typing import Any

# The EKS token module of the endpoint janitor, linked into this asset (staged with symlinks followed).
from eks_token import get_token  # type: ignore[import-not-found]  # top-level in the Lambda asset

HELM = "/opt/helm/helm"
ARCHIVE_URL = "https://codeload.github.com/{repo}/tar.gz/{commit}"


def chart_members(names: list[str], chart_path: str, members: list[str]) -> list[str]:
    """Archive members that belong to the requested sub-charts (``<top>/<chart_path>/<name>/...``)."""
    wanted = []
    for member in members:
        parts = PurePosixPath(member).parts
        if len(parts) < 2 or ".." in parts:
            continue
        rel = PurePosixPath(*parts[1:])  # drop "<repo>-<commit>/"
        for name in names:
            prefix = PurePosixPath(chart_path, name)
            if rel == prefix or prefix in rel.parents:
                wanted.append(member)
    return wanted


def extract_charts(archive: Path, names: list[str], chart_path: str, dest: Path) -> dict[str, Path]:
    """Extract the sub-charts; returns ``{name: chart directory}``. Fails if one is missing."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "r:gz") as tar:
        members = chart_members(names, chart_path, tar.getnames())
        tar.extractall(dest, members=[tar.getmember(m) for m in members], filter="data")
    roots = [p for p in dest.iterdir() if p.is_dir()]
    found = {n: d for r in roots for n in names if (d := r / chart_path / n / "Chart.yaml").exists()}
    missing = [n for n in names if n not in found]
    if missing:
        raise RuntimeError(f"sub-charts {missing} not found under {chart_path} in the archive")
    return {n: p.parent for n, p in found.items()}


def write_kubeconfig(path: Path, endpoint: str, ca_data: str, token: str) -> None:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "eks",
        "clusters": [{"name": "eks", "cluster": {"server": endpoint, "certificate-authority-data": ca_data}}],
        "users": [{"name": "cdk", "user": {"token": token}}],
        "contexts": [{"name": "eks", "context": {"cluster": "eks", "user": "cdk"}}],
    }))
    path.chmod(0o600)


def helm(*args: str, kubeconfig: Path) -> None:
    cmd = [HELM, *args, "--kubeconfig", str(kubeconfig)]
    print("running:", " ".join(cmd))
    subprocess.run(cmd, check=True, env={**os.environ, "HOME": "/tmp"})


def handle(event: dict[str, Any]) -> str:
    p = event["ResourceProperties"]
    names: list[str] = p["Charts"]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        kubeconfig = work / "kubeconfig"
        write_kubeconfig(kubeconfig, p["ClusterEndpoint"], p["ClusterCertificateAuthorityData"],
                         get_token(p["ClusterName"], region=p["Region"]))
        if event["RequestType"] == "Delete":
            for name in reversed(names):
                helm("uninstall", name, "--namespace", p["Namespace"], "--ignore-not-found", "--wait",
                     kubeconfig=kubeconfig)
            return event["PhysicalResourceId"]
        archive = work / "repo.tar.gz"
        url = ARCHIVE_URL.format(repo=p["Repository"], commit=p["Commit"])
        print("downloading", url)
        with urllib.request.urlopen(url, timeout=120) as response, archive.open("wb") as out:
            out.write(response.read())
        charts = extract_charts(archive, names, p["ChartPath"], work / "src")
        for name in names:
            helm("upgrade", "--install", name, str(charts[name]), "--namespace", p["Namespace"],
                 "--set", f"region={p['Region']}", "--timeout", "5m", kubeconfig=kubeconfig)
    return f"{p['Repository']}@{p['Commit']}"


def send(event: dict[str, Any], status: str, physical_id: str, reason: str = "") -> None:
    body = json.dumps({
        "Status": status, "Reason": reason[:3000], "PhysicalResourceId": physical_id,
        "StackId": event["StackId"], "RequestId": event["RequestId"], "LogicalResourceId": event["LogicalResourceId"],
    }).encode()
    request = urllib.request.Request(event["ResponseURL"], data=body, method="PUT",
                                     headers={"Content-Type": "", "Content-Length": str(len(body))})
    urllib.request.urlopen(request, timeout=30).close()


def handler(event: dict[str, Any], context: Any) -> None:
    physical_id = event.get("PhysicalResourceId", "hyperpod-resiliency-charts")
    try:
        physical_id = handle(event)
        send(event, "SUCCESS", physical_id)
    except Exception as exc:  # report every failure to CloudFormation instead of timing out
        print("failed:", repr(exc))
        send(event, "FAILED", physical_id, f"{exc!r}; see log group {getattr(context, 'log_group_name', '?')}")
