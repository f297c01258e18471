"""HyperPod resiliency sub-charts: fetched and verified at set-up, shipped as CDK assets, installed by helm
through the cluster's kubectl provider before the HyperPod cluster is created.

Sources: AWS's install guide (sagemaker-hyperpod-eks-install-packages-using-helm-chart) installs these
sub-charts of aws/sagemaker-hyperpod-cli ``helm_chart/HyperPodHelmChart`` before creating the cluster;
deploy-facts.md ("Ordering and readiness"): a deploy that downloads charts from GitHub at deploy time fails
when GitHub is slow or rate limits.
"""

from __future__ import annotations

import glob
import hashlib
import itertools
import json
import tarfile
from pathlib import Path

import pytest
from tests.infra import stand_ins

from hyperpod_core import artifacts, pins
from hyperpod_core.errors import ConfigError

HELM_CHART = "Custom::AWSCDK-EKS-HelmChart"


#: provisioning.md section 1.3, the HyperPod dependencies chart's resiliency sub-charts that are on by default.
PUBLISHED_RESILIENCY_CHARTS = ("health-monitoring-agent", "deep-health-check", "job-auto-restart", "hyperpod-patching")


def _resiliency_releases(template) -> dict[str, dict]:
    charts = template.find_resources(HELM_CHART)
    return {k: v for k, v in charts.items() if "ResiliencyCharts" in k}


@pytest.fixture(scope="module")
def cluster(cluster_alone):
    """The cluster stack alone (``cluster_alone``), its charts not fetched."""
    return cluster_alone["Cluster"].template


def test_every_pinned_sub_chart_is_a_helm_release_from_an_s3_asset(cluster) -> None:
    """Fails on main: one custom resource downloaded the charts from codeload.github.com at deploy time."""
    releases = _resiliency_releases(cluster)
    # The resiliency sub-charts the HyperPod dependencies chart turns on (shared/reference/provisioning.md
    # section 1.3: health-monitoring-agent, deep-health-check, job-auto-restart, hyperpod-patching "on").
    assert sorted(r["Properties"]["Release"] for r in releases.values()) == sorted(PUBLISHED_RESILIENCY_CHARTS)
    for release in releases.values():
        props = release["Properties"]
        assert props["ChartAssetURL"]["Fn::Sub"].startswith("s3://cdk-hnb659fds-assets-")
        assert not {"Repository", "Chart", "Version", "Commit"} & set(props)
        assert props["Namespace"] == "kube-system"
        assert json.loads(props["Values"]) == {"region": stand_ins.REGION}
    assert not cluster.find_resources("Custom::HyperPodResiliencyCharts")


def test_nothing_in_any_template_downloads_from_github_at_deploy_time(templates) -> None:
    """The default app, every stack: nothing names github.com, github.io (the device plugins' Helm repositories),
    the archive/raw hosts or the HyperPod CLI repository. Fails on main: the installer's properties named the
    repository it downloaded at deploy time, and the device plugins came from nvidia.github.io and aws.github.io."""
    text = json.dumps({name: t.to_json()["Resources"] for name, t in templates.items()})
    for host in ("codeload.github.com", "raw.githubusercontent.com", "github.com", "github.io",
                 "aws/sagemaker-hyperpod-cli"):
        assert host not in text, host
    charts = templates["Cluster"].find_resources(HELM_CHART)
    assert len(charts) == 2 + len(PUBLISHED_RESILIENCY_CHARTS)  # + the NVIDIA and EFA device plugins
    assert all("ChartAssetURL" in c["Properties"] and "Repository" not in c["Properties"] for c in charts.values())


def test_sub_charts_install_in_order_as_part_of_the_hyperpod_dependencies(cluster, cluster_alone) -> None:
    """In order, and inside the construct the HyperPod cluster waits for (that wait, across stacks:
    tests/infra/test_app_wiring.py)."""
    releases = _resiliency_releases(cluster)
    ids = list(releases)
    for previous, current in itertools.pairwise(ids):
        assert previous in releases[current]["DependsOn"]
    stack = cluster_alone["Cluster"].stack
    assert stack.resiliency_charts.node.scope is stack.hyperpod_dependencies


def test_helm_runs_bounded_without_wait_well_inside_the_handler_lambda(cluster) -> None:
    """helm gets its own --timeout and no --wait (the kubectl handler runs one helm per resource in a
    15-minute Lambda); CloudFormation's side is bounded by ServiceTimeout, which the app's aspect sets on every
    custom resource of every stack (test_service_timeouts.py)."""
    for release in _resiliency_releases(cluster).values():
        props = release["Properties"]
        assert props["Timeout"] == "300s"
        assert props.get("Wait") in (None, False)
    handlers = cluster.find_resources("AWS::Lambda::Function")
    (kubectl,) = [f for k, f in handlers.items() if k.startswith("EksClusterKubectlProviderHandler")]
    assert kubectl["Properties"]["Timeout"] == 900


def test_no_cluster_admin_access_entry_of_our_own_for_chart_installs(cluster) -> None:
    """Fails on main: the installer Lambda had its own AmazonEKSClusterAdminPolicy entry for the life of the
    cluster. The kubectl provider (whose entry aws_eks_v2 creates anyway) installs the charts now."""
    entries = cluster.find_resources("AWS::EKS::AccessEntry")
    assert not [k for k in entries if "Resiliency" in k]


def _build_charts(tmp_path: Path, directories: dict[str, Path | None]):
    import aws_cdk as cdk
    from aws_cdk import aws_eks_v2 as eks
    from aws_cdk.assertions import Template
    from aws_cdk.lambda_layer_kubectl_v33 import KubectlV33Layer

    from hyperpod_constructs.hyperpod_resiliency_charts import (
        HyperPodResiliencyCharts,
        HyperPodResiliencyChartsProps,
        ResiliencyChart,
    )

    stack = cdk.Stack(cdk.App(outdir=str(tmp_path / "out")), "Charts")
    cluster = eks.Cluster(stack, "Eks", version=eks.KubernetesVersion.V1_33, default_capacity=0,
                          default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
                          kubectl_provider_options=eks.KubectlProviderOptions(
                              kubectl_layer=KubectlV33Layer(stack, "Kubectl")))
    HyperPodResiliencyCharts(stack, "Resiliency", props=HyperPodResiliencyChartsProps(
        cluster=cluster, source="aws/sagemaker-hyperpod-cli@test",
        charts=tuple(ResiliencyChart(name=n, directory=d) for n, d in directories.items())))
    return Template.from_stack(stack).to_json()


def _local_chart(root: Path, name: str, version: str) -> Path:
    """A chart directory made by this test (NOT upstream content): enough to exercise asset staging."""
    (root / name / "templates").mkdir(parents=True)
    (root / name / "Chart.yaml").write_text(f"apiVersion: v2\nname: {name}\nversion: {version}\n")
    (root / name / "templates" / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\n")
    return root / name


def test_a_pin_bump_updates_the_same_releases_instead_of_replacing_them(tmp_path: Path) -> None:
    """Fails on main: the installer's physical id was ``<repo>@<commit>``, so a pin bump returned a new
    physical id and CloudFormation deleted the "old" resource = helm uninstall of the same releases. Now the
    logical ids and release names do not depend on the pin; only the asset changes (an Update), and the
    Provider framework keeps the physical id on Update."""
    name = "deep-health-check"
    old = _build_charts(tmp_path / "a", {name: _local_chart(tmp_path / "a", name, "0.1.0")})
    new = _build_charts(tmp_path / "b", {name: _local_chart(tmp_path / "b", name, "0.2.0")})
    old_charts = {k: v for k, v in old["Resources"].items() if v["Type"] == HELM_CHART}
    new_charts = {k: v for k, v in new["Resources"].items() if v["Type"] == HELM_CHART}
    assert set(old_charts) == set(new_charts)
    (key,) = old_charts
    assert old_charts[key]["Properties"]["Release"] == new_charts[key]["Properties"]["Release"]
    assert old_charts[key]["Properties"]["ChartAssetURL"] != new_charts[key]["Properties"]["ChartAssetURL"]
    assert "Rules" not in new or set(new["Rules"]) == {"CheckBootstrapVersion"}


def test_a_delete_after_a_failed_create_runs_no_uninstall() -> None:
    """The charts' service token is the kubectl provider's Provider framework, whose runtime (shipped in the
    pinned aws-cdk-lib) answers a Delete that follows a failed Create without calling the handler: read from
    the pinned package itself, not from our memory of it. (On main our own Lambda answered CloudFormation
    itself and ran helm uninstall on that Delete; test_every_pinned_sub_chart_... fails there.)"""
    import aws_cdk

    (bundle,) = glob.glob(str(Path(aws_cdk.__file__).parent / "_jsii" / "aws-cdk-lib@*.jsii.tgz"))
    with tarfile.open(bundle) as tar:
        runtime = tar.extractfile("package/custom-resources/lib/provider-framework/runtime/cfn-response.js")
        assert runtime is not None
        code = runtime.read().decode()
    assert "AWSCDK::CustomResourceProviderFramework::CREATE_FAILED" in code
    assert "ignoring DELETE event caused by a failed CREATE event" in code


def test_without_fetched_charts_the_templates_synthesize_but_cannot_be_deployed(cluster) -> None:
    """Offline synth (CI, this machine): a stand-in asset (not upstream content) and a rule whose
    assertion no parameter value can satisfy, so CloudFormation refuses every create/update of the stack
    with the message, before it touches a resource."""
    template = cluster.to_json()
    (rule,) = [r for k, r in template["Rules"].items() if k != "CheckBootstrapVersion"]
    parameter = template["Parameters"]["HyperPodChartsFetched"]
    assert parameter["AllowedValues"] == ["no"]
    assert len(rule["Assertions"]) == 3  # each device plugin, and the four sub-charts together
    for assertion in rule["Assertions"]:
        assert assertion["Assert"] == {"Fn::Equals": [{"Ref": "HyperPodChartsFetched"}, "yes"]}
        assert "run ./scripts/setup" in assertion["AssertDescription"]
    assert "nvidia-device-plugin (NVIDIA/k8s-device-plugin@cb6e45ec" in json.dumps(rule)


def test_with_fetched_charts_there_is_no_blocking_rule(tmp_path: Path) -> None:
    template = _build_charts(tmp_path, {"deep-health-check": _local_chart(tmp_path, "deep-health-check", "0.1.0")})
    assert set(template.get("Rules", {})) <= {"CheckBootstrapVersion"}
    assert "HyperPodChartsFetched" not in template.get("Parameters", {})


# -- the chart cache: fetched at set-up, verified at every synth -------------------------------------------

def _pin_for(files: dict[str, bytes]) -> pins.ChartArtifactPin:
    """A pin over files this test made (stand-in content, hashed here); the real pins hash upstream blobs."""
    return pins.ChartArtifactPin(name="test-chart", commit="0" * 40, files=tuple(
        pins.ChartFilePin(path=p, sha256=hashlib.sha256(b).hexdigest()) for p, b in files.items()))


class _FakeResponse:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def read(self) -> bytes:
        return self._body

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def test_fetch_verifies_every_file_and_moves_the_chart_into_place(tmp_path: Path, monkeypatch) -> None:
    files = {"Chart.yaml": b"name: test-chart\n", "templates/ds.yaml": b"kind: DaemonSet\n"}
    pin = _pin_for(files)
    monkeypatch.setattr(artifacts.urllib.request, "urlopen",
                        lambda url, timeout: _FakeResponse(files[url.removeprefix(pin.base_url)]))

    path = artifacts.fetch_chart(pin, tmp_path)

    assert path == tmp_path / ("0" * 40) / "test-chart"
    assert artifacts.verified_chart_dir(pin, tmp_path) == path
    assert (path / "templates" / "ds.yaml").read_bytes() == b"kind: DaemonSet\n"


def test_fetch_refuses_a_file_whose_hash_differs_and_leaves_nothing(tmp_path: Path, monkeypatch) -> None:
    pin = _pin_for({"Chart.yaml": b"name: test-chart\n"})
    monkeypatch.setattr(artifacts.urllib.request, "urlopen", lambda url, timeout: _FakeResponse(b"tampered"))

    with pytest.raises(ConfigError, match="expected the pinned"):
        artifacts.fetch_chart(pin, tmp_path)
    assert artifacts.verified_chart_dir(pin, tmp_path) is None
    assert not list(tmp_path.rglob("Chart.yaml"))


def test_synth_refuses_a_cache_that_differs_from_the_pins(tmp_path: Path) -> None:
    pin = _pin_for({"Chart.yaml": b"name: test-chart\n"})
    root = artifacts.chart_dir(pin, tmp_path)
    root.mkdir(parents=True)
    (root / "Chart.yaml").write_bytes(b"name: edited\n")
    with pytest.raises(ConfigError, match="does not match its pinned sha256"):
        artifacts.verified_chart_dir(pin, tmp_path)
    (root / "Chart.yaml").write_bytes(b"name: test-chart\n")
    (root / "extra.yaml").write_bytes(b"x")
    with pytest.raises(ConfigError, match=r"extra \['extra.yaml'\]"):
        artifacts.verified_chart_dir(pin, tmp_path)


def test_pins_name_full_commits_and_sha256_digests() -> None:
    for chart in pins.HYPERPOD_RESILIENCY_CHART_ARTIFACTS:
        assert chart.commit == pins.HYPERPOD_CHART_COMMIT
        assert chart.base_url.startswith("https://raw.githubusercontent.com/aws/sagemaker-hyperpod-cli/")
    for chart in pins.CHART_ARTIFACTS:
        assert len(chart.commit) == 40 and int(chart.commit, 16) >= 0
        assert {"Chart.yaml", "values.yaml"} <= {f.path for f in chart.files}
        assert all(len(f.sha256) == 64 and int(f.sha256, 16) >= 0 for f in chart.files)
