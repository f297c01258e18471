"""The EKS cluster stack alone (``cluster_alone``: explicit props, a stand-in VPC): control plane settings cdk-nag
cannot check for aws_eks_v2, add-ons, ordering, the human admin, outputs. The default config reaching this stack:
tests/infra/test_app_wiring.py."""

from __future__ import annotations

import json
import re

import pytest
from tests.infra import stand_ins
from tests.infra.conftest import ADMIN_PRINCIPAL_ARN, only

from hyperpod_core import outputs, pins


@pytest.fixture(scope="module")
def cluster(cluster_alone):
    return cluster_alone["Cluster"].template


def _cluster(t) -> tuple[str, dict]:
    logical_id, resource = only(t, "AWS::EKS::Cluster")
    return logical_id, resource["Properties"]


def test_kubernetes_version_is_the_given_one_and_the_pin_is_supported_by_hyperpod(cluster) -> None:
    assert _cluster(cluster)[1]["Version"] == stand_ins.KUBERNETES_VERSION == pins.KUBERNETES_VERSION
    assert pins.KUBERNETES_VERSION in pins.SUPPORTED_KUBERNETES_VERSIONS


def test_authentication_mode_is_one_hyperpod_accepts(cluster) -> None:
    assert _cluster(cluster)[1]["AccessConfig"]["AuthenticationMode"] in ("API", "API_AND_CONFIG_MAP")


def test_endpoint_is_public_and_private_with_the_given_allow_list(cluster) -> None:
    vpc = _cluster(cluster)[1]["ResourcesVpcConfig"]
    assert vpc["EndpointPrivateAccess"] is True
    assert vpc["EndpointPublicAccess"] is True
    assert vpc["PublicAccessCidrs"] == list(stand_ins.PUBLIC_ACCESS_CIDRS)


def test_every_control_plane_log_type_goes_to_our_log_group_with_retention(cluster) -> None:
    eks_id, props = _cluster(cluster)
    logging = props["Logging"]["ClusterLogging"]["EnabledTypes"]
    assert sorted(t["Type"] for t in logging) == ["api", "audit", "authenticator", "controllerManager", "scheduler"]
    # adopted (create-if-missing, retention, deleted after the cluster): tests/infra/test_adopted_log_groups.py
    adopters = cluster.find_resources("Custom::AdoptedLogGroup", {"Properties": {
        "LogGroupName": f"/aws/eks/{stand_ins.CLUSTER_NAME}/cluster",
        "RetentionInDays": str(stand_ins.LOG_RETENTION_DAYS), "DeleteOnDelete": "true"}})
    assert len(adopters) == 1
    assert next(iter(adopters)) in cluster.find_resources("AWS::EKS::Cluster")[eks_id]["DependsOn"]


def test_secrets_are_encrypted_with_a_rotating_kms_key(cluster) -> None:
    enc = _cluster(cluster)[1]["EncryptionConfig"]
    assert enc[0]["Resources"] == ["secrets"]
    key_id = enc[0]["Provider"]["KeyArn"]["Fn::GetAtt"][0]
    assert cluster.find_resources("AWS::KMS::Key")[key_id]["Properties"]["EnableKeyRotation"] is True


def test_auto_mode_is_off(cluster) -> None:
    assert _cluster(cluster)[1].get("ComputeConfig", {}).get("Enabled", False) is False


def test_cluster_subnets_are_the_private_subnets_in_two_azs(cluster) -> None:
    assert _cluster(cluster)[1]["ResourcesVpcConfig"]["SubnetIds"] == list(stand_ins.PRIVATE_SUBNETS)


def test_an_oidc_provider_points_at_the_cluster_issuer(cluster) -> None:
    eks_id, _ = _cluster(cluster)
    _, oidc = only(cluster, "AWS::IAM::OIDCProvider")
    assert oidc["Properties"]["Url"] == {"Fn::GetAtt": [eks_id, "OpenIdConnectIssuerUrl"]}


def test_core_addons_are_pinned_and_overwrite_unmanaged_copies(cluster) -> None:
    addons = cluster.find_resources("AWS::EKS::Addon")
    versions = {a["Properties"]["AddonName"]: a["Properties"]["AddonVersion"] for a in addons.values()}
    assert versions == {p.name: p.version for p in (pins.VPC_CNI, pins.KUBE_PROXY, pins.COREDNS,
                                                    pins.POD_IDENTITY_AGENT)}
    assert all(a["Properties"]["ResolveConflicts"] == "OVERWRITE" for a in addons.values())


def test_vpc_cni_meets_hyperpods_minimum() -> None:
    major, minor, patch = (int(x) for x in pins.VPC_CNI.version.removeprefix("v").split("-")[0].split("."))
    assert (major, minor, patch) >= (1, 18, 3)


def test_system_node_group_exists_and_waits_for_the_cni(cluster) -> None:
    logical_id, ng = only(cluster, "AWS::EKS::Nodegroup")
    props = ng["Properties"]
    assert props["InstanceTypes"] == [stand_ins.SYSTEM_INSTANCE_TYPE]
    assert props["ScalingConfig"]["MinSize"] == stand_ins.SYSTEM_DESIRED_SIZE
    assert props["ScalingConfig"]["DesiredSize"] == stand_ins.SYSTEM_DESIRED_SIZE
    addon_ids = {a["Properties"]["AddonName"]: i for i, a in cluster.find_resources("AWS::EKS::Addon").items()}
    assert {addon_ids["vpc-cni"], addon_ids["kube-proxy"], addon_ids["eks-pod-identity-agent"]} <= set(
        ng["DependsOn"])
    coredns = cluster.find_resources("AWS::EKS::Addon")[addon_ids["coredns"]]
    assert logical_id in coredns["DependsOn"]  # CoreDNS needs a node, or it stays DEGRADED


def test_without_a_configured_principal_the_deploy_must_name_one(cluster) -> None:
    """No admin named: a required parameter (no default) becomes the access entry, so the person who deploys
    gets kubectl access (the README passes the caller) and a deploy without it fails fast."""
    entries = cluster.find_resources("AWS::EKS::AccessEntry")
    # CDK's kubectl handler (it installs every chart, the resiliency sub-charts included) and the human admin.
    assert len(entries) == 2
    human = [e for e in entries.values() if e["Properties"]["PrincipalArn"] == {"Ref": "AdminPrincipalArn"}]
    assert len(human) == 1
    assert "AmazonEKSClusterAdminPolicy" in str(human[0]["Properties"]["AccessPolicies"])
    parameter = cluster.to_json()["Parameters"]["AdminPrincipalArn"]
    assert "Default" not in parameter and parameter["Type"] == "String"
    assert re.fullmatch(parameter["AllowedPattern"], "arn:aws:iam::123456789012:role/Admin")
    assert not re.fullmatch(parameter["AllowedPattern"], "arn:aws:sts::123456789012:assumed-role/Admin/me")


def test_admin_principal_gets_a_cluster_admin_access_entry(cluster_alone) -> None:
    with_admin = cluster_alone["ClusterWithAdmin"].template
    entries = with_admin.find_resources("AWS::EKS::AccessEntry", {"Properties": {"PrincipalArn": ADMIN_PRINCIPAL_ARN}})
    assert len(entries) == 1
    (policy,) = next(iter(entries.values()))["Properties"]["AccessPolicies"]
    assert policy["AccessScope"] == {"Type": "cluster"}
    assert "AmazonEKSClusterAdminPolicy" in str(policy["PolicyArn"])
    assert "AdminPrincipalArn" not in with_admin.to_json().get("Parameters", {})


def test_device_plugins_come_from_verified_chart_assets_at_pinned_versions(cluster) -> None:
    """Set-up fetches the charts (test_resiliency_charts.py); the deploy reads them from S3, not GitHub."""
    charts = cluster.find_resources("Custom::AWSCDK-EKS-HelmChart")
    by_release = {c["Properties"]["Release"]: c["Properties"] for c in charts.values()}
    for pin in (pins.NVIDIA_DEVICE_PLUGIN, pins.EFA_DEVICE_PLUGIN):
        props = by_release[pin.chart]
        assert props["ChartAssetURL"]["Fn::Sub"].startswith("s3://")
        assert not {"Repository", "Version", "Chart"} & set(props)
        assert props["Namespace"] == "kube-system"
    assert pins.NVIDIA_DEVICE_PLUGIN_CHART.base_url.endswith("/deployments/helm/nvidia-device-plugin/")


def test_device_plugins_schedule_on_hyperpod_gpu_nodes_and_tolerate_health_checks(cluster) -> None:
    charts = cluster.find_resources("Custom::AWSCDK-EKS-HelmChart")
    values = {c["Properties"]["Release"]: json.loads(c["Properties"]["Values"]) for c in charts.values()}
    nvidia = values[pins.NVIDIA_DEVICE_PLUGIN.chart]
    term = nvidia["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"][0]
    assert term["key"] == "node.kubernetes.io/instance-type"
    assert term["values"] == sorted(stand_ins.GPU_INSTANCE_TYPES)
    efa = values[pins.EFA_DEVICE_PLUGIN.chart]
    assert efa["supportedInstanceLabels"]["values"] == sorted(stand_ins.GPU_INSTANCE_TYPES)
    for v in (nvidia, efa):
        assert {"key": "sagemaker.amazonaws.com/node-health-status", "operator": "Equal",
                "value": "Unschedulable", "effect": "NoSchedule"} in v["tolerations"]


def test_helm_timeouts_stay_under_the_handler_lambda_limit(cluster) -> None:
    for chart in cluster.find_resources("Custom::AWSCDK-EKS-HelmChart").values():
        assert chart["Properties"]["Timeout"] == "300s"


def test_kubectl_handler_runs_in_the_vpc(cluster) -> None:
    functions = cluster.find_resources("AWS::Lambda::Function")
    handler = next(f for i, f in functions.items() if i.startswith("EksClusterKubectlProviderHandler"))
    assert handler["Properties"]["VpcConfig"]["SubnetIds"] == list(stand_ins.PRIVATE_SUBNETS)


def test_outputs(cluster) -> None:
    eks_id, _ = _cluster(cluster)
    cluster.has_output(outputs.EKS_CLUSTER_NAME, {"Value": {"Ref": eks_id}})
    cluster.has_output(outputs.REGION, {"Value": stand_ins.REGION})
    # AWS::EKS::Cluster return values (CloudFormation User Guide): Arn, Endpoint ("https://...eks.amazonaws.com").
    cluster.has_output(outputs.EKS_CLUSTER_ARN, {"Value": {"Fn::GetAtt": [eks_id, "Arn"]}})
    cluster.has_output(outputs.EKS_API_ENDPOINT, {"Value": {"Fn::GetAtt": [eks_id, "Endpoint"]}})
    cluster.has_output("UpdateKubeconfigCommand", {
        "Value": f"aws eks update-kubeconfig --name {stand_ins.CLUSTER_NAME} --region {stand_ins.REGION}"})
