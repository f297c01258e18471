"""HyperPod resiliency sub-charts: fetched at deploy time at a pinned commit, before the HyperPod cluster."""

from __future__ import annotations

import io
import sys
import tarfile
from pathlib import Path

import pytest
from tests.conftest import REPO_ROOT

from hyperpod_infra import pins

sys.path.insert(0, str(REPO_ROOT / "constructs" / "hyperpod_constructs" / "resiliency_installer"))
import index as installer


def test_custom_resource_installs_the_pinned_sub_charts(templates) -> None:
    t = templates["Cluster"]
    (resource,) = t.find_resources("Custom::HyperPodResiliencyCharts").values()
    props = resource["Properties"]
    assert props["Repository"] == "aws/sagemaker-hyperpod-cli"
    assert props["Commit"] == pins.HYPERPOD_CHART_COMMIT and len(props["Commit"]) == 40
    assert props["Charts"] == list(pins.HYPERPOD_RESILIENCY_CHARTS)
    assert {"health-monitoring-agent", "deep-health-check"} <= set(props["Charts"])
    assert props["Namespace"] == "kube-system"


def test_installer_has_cluster_admin_access_before_it_runs(templates) -> None:
    t = templates["Cluster"]
    (resource,) = t.find_resources("Custom::HyperPodResiliencyCharts").values()
    entries = t.find_resources("AWS::EKS::AccessEntry")
    installer_entries = [i for i in entries if "HyperPodResiliencyInstaller" in i]
    assert len(installer_entries) == 1
    assert installer_entries[0] in resource["DependsOn"]


def test_installer_runs_in_the_vpc_with_the_kubectl_layer(templates) -> None:
    functions = templates["Cluster"].find_resources("AWS::Lambda::Function")
    (fn,) = [f for i, f in functions.items() if i.startswith("HyperPodDependenciesResiliencyChartsHandler")]
    assert len(fn["Properties"]["VpcConfig"]["SubnetIds"]) == 2
    assert any("KubectlLayer" in str(layer) for layer in fn["Properties"]["Layers"])
    assert fn["Properties"]["Timeout"] < 15 * 60


def test_hyperpod_cluster_waits_for_the_resiliency_charts(stacks) -> None:
    deps = stacks.cluster.hyperpod_dependencies
    assert stacks.cluster.resiliency_charts.node.scope is deps  # covered by the dependency on `deps`
    assert deps in stacks.hyperpod.hyperpod.node.dependencies


def _archive(tmp_path: Path, files: dict[str, str]) -> Path:
    path = tmp_path / "repo.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_installer_extracts_only_the_requested_sub_charts(tmp_path) -> None:
    base = "sagemaker-hyperpod-cli-abc/helm_chart/HyperPodHelmChart/charts"
    archive = _archive(tmp_path, {
        f"{base}/health-monitoring-agent/Chart.yaml": "name: hma",
        f"{base}/health-monitoring-agent/templates/ds.yaml": "kind: DaemonSet",
        f"{base}/mlflow/Chart.yaml": "name: mlflow",
        "sagemaker-hyperpod-cli-abc/README.md": "x",
    })
    charts = installer.extract_charts(archive, ["health-monitoring-agent"],
                                      "helm_chart/HyperPodHelmChart/charts", tmp_path / "src")
    assert (charts["health-monitoring-agent"] / "templates" / "ds.yaml").exists()
    assert not list((tmp_path / "src").rglob("mlflow"))
    assert not list((tmp_path / "src").rglob("README.md"))


def test_installer_fails_when_a_sub_chart_is_missing(tmp_path) -> None:
    archive = _archive(tmp_path, {"r/other/Chart.yaml": "x"})
    with pytest.raises(RuntimeError, match="not found"):
        installer.extract_charts(archive, ["deep-health-check"], "helm_chart/HyperPodHelmChart/charts",
                                 tmp_path / "src")


def test_installer_makes_an_eks_token_offline(monkeypatch) -> None:
    import base64
    import urllib.parse

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    token = installer.get_token("my-cluster", region="us-west-2")
    assert token.startswith("k8s-aws-v1.")
    url = base64.urlsafe_b64decode(token.removeprefix("k8s-aws-v1.") + "==").decode()
    query = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)
    assert query["Action"] == ["GetCallerIdentity"]
    assert "x-k8s-aws-id" in query["X-Amz-SignedHeaders"][0]


def test_staged_installer_asset_holds_a_real_copy_of_the_token_module(tmp_path) -> None:
    """The linked eks_token.py must arrive in the deployed asset as a file, not a dangling link."""
    import aws_cdk as cdk

    from hyperpod_constructs.hyperpod_resiliency_charts import installer_code

    stack = cdk.Stack(cdk.App(outdir=str(tmp_path)), "Staging")
    installer_code().bind(stack)
    (staged,) = tmp_path.glob("asset.*/eks_token.py")
    shared = REPO_ROOT / "constructs" / "hyperpod_constructs" / "endpoint_janitor_handler" / "eks_token.py"
    assert not staged.is_symlink()
    assert staged.read_text() == shared.read_text()
    assert (staged.parent / "index.py").is_file()
