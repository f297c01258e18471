"""The EKS cluster stack: control plane settings cdk-nag cannot check for aws_eks_v2, add-ons, ordering."""

from __future__ import annotations

import re

from tests.infra.conftest import only

from hyperpod_core import outputs, pins

EKS_LOGICAL_ID = "EksClusterB2BDED5B"


def _cluster(t) -> dict:
    logical_id, cluster = only(t, "AWS::EKS::Cluster")
    assert logical_id == EKS_LOGICAL_ID  # a new logical ID would replace the control plane
    return cluster["Properties"]


def test_kubernetes_version_is_pinned_and_supported_by_hyperpod(cluster_template) -> None:
    props = _cluster(cluster_template)
    assert props["Version"] == pins.KUBERNETES_VERSION
    assert props["Version"] in pins.SUPPORTED_KUBERNETES_VERSIONS


def test_authentication_mode_is_one_hyperpod_accepts(cluster_template) -> None:
    assert _cluster(cluster_template)["AccessConfig"]["AuthenticationMode"] in ("API", "API_AND_CONFIG_MAP")


def test_endpoint_is_public_and_private_with_the_configured_allow_list(cluster_template, default_config) -> None:
    vpc = _cluster(cluster_template)["ResourcesVpcConfig"]
    assert vpc["EndpointPrivateAccess"] is True
    assert vpc["EndpointPublicAccess"] is True
    assert vpc["PublicAccessCidrs"] == list(default_config.eks.endpoint_public_access_cidrs)


def test_every_control_plane_log_type_goes_to_our_log_group_with_retention(cluster_template, default_config):
    logging = _cluster(cluster_template)["Logging"]["ClusterLogging"]["EnabledTypes"]
    assert sorted(t["Type"] for t in logging) == ["api", "audit", "authenticator", "controllerManager", "scheduler"]
    # adopted (create-if-missing, retention, deleted after the cluster): tests/infra/test_adopted_log_groups.py
    adopters = cluster_template.find_resources("Custom::AdoptedLogGroup", {"Properties": {
        "LogGroupName": f"/aws/eks/{default_config.eks.cluster_name}/cluster",
        "RetentionInDays": str(default_config.eks.log_retention_days), "DeleteOnDelete": "true"}})
    assert len(adopters) == 1
    assert next(iter(adopters)) in cluster_template.find_resources("AWS::EKS::Cluster")[EKS_LOGICAL_ID]["DependsOn"]


def test_secrets_are_encrypted_with_a_rotating_kms_key(cluster_template) -> None:
    enc = _cluster(cluster_template)["EncryptionConfig"]
    assert enc[0]["Resources"] == ["secrets"]
    key_id = enc[0]["Provider"]["KeyArn"]["Fn::GetAtt"][0]
    assert cluster_template.find_resources("AWS::KMS::Key")[key_id]["Properties"]["EnableKeyRotation"] is True


def test_auto_mode_is_off(cluster_template) -> None:
    props = _cluster(cluster_template)
    assert props.get("ComputeConfig", {}).get("Enabled", False) is False


def test_cluster_subnets_are_the_private_subnets_in_two_azs(cluster_template, templates) -> None:
    subnets = _cluster(cluster_template)["ResourcesVpcConfig"]["SubnetIds"]
    assert len(subnets) == 2
    assert all("private" in s["Fn::ImportValue"].lower() for s in subnets)


def test_an_oidc_provider_points_at_the_cluster_issuer(cluster_template) -> None:
    _, oidc = only(cluster_template, "AWS::IAM::OIDCProvider")
    assert oidc["Properties"]["Url"] == {"Fn::GetAtt": [EKS_LOGICAL_ID, "OpenIdConnectIssuerUrl"]}


def test_core_addons_are_pinned_and_overwrite_unmanaged_copies(cluster_template) -> None:
    addons = cluster_template.find_resources("AWS::EKS::Addon")
    versions = {a["Properties"]["AddonName"]: a["Properties"]["AddonVersion"] for a in addons.values()}
    assert versions == {p.name: p.version for p in (pins.VPC_CNI, pins.KUBE_PROXY, pins.COREDNS,
                                                    pins.POD_IDENTITY_AGENT)}
    assert all(a["Properties"]["ResolveConflicts"] == "OVERWRITE" for a in addons.values())


def test_vpc_cni_meets_hyperpods_minimum() -> None:
    major, minor, patch = (int(x) for x in pins.VPC_CNI.version.removeprefix("v").split("-")[0].split("."))
    assert (major, minor, patch) >= (1, 18, 3)


def test_system_node_group_exists_and_waits_for_the_cni(cluster_template, default_config) -> None:
    logical_id, ng = only(cluster_template, "AWS::EKS::Nodegroup")
    props = ng["Properties"]
    ngc = default_config.eks.system_node_group
    assert props["InstanceTypes"] == [ngc.instance_type]
    assert props["ScalingConfig"]["MinSize"] == ngc.desired_size >= 1
    addon_ids = {a["Properties"]["AddonName"]: i
                 for i, a in cluster_template.find_resources("AWS::EKS::Addon").items()}
    assert {addon_ids["vpc-cni"], addon_ids["kube-proxy"], addon_ids["eks-pod-identity-agent"]} <= set(
        ng["DependsOn"])
    coredns = cluster_template.find_resources("AWS::EKS::Addon")[addon_ids["coredns"]]
    assert logical_id in coredns["DependsOn"]  # CoreDNS needs a node, or it stays DEGRADED


def test_without_a_configured_principal_the_deploy_must_name_one(cluster_template) -> None:
    """The default config names no admin: a required parameter (no default) becomes the access entry, so the
    person who deploys gets kubectl access (the README passes the caller) and a deploy without it fails fast."""
    entries = cluster_template.find_resources("AWS::EKS::AccessEntry")
    # CDK's kubectl handler (it installs every chart, the resiliency sub-charts included) and the human admin.
    assert len(entries) == 2
    human = [e for e in entries.values() if e["Properties"]["PrincipalArn"] == {"Ref": "AdminPrincipalArn"}]
    assert len(human) == 1
    assert "AmazonEKSClusterAdminPolicy" in str(human[0]["Properties"]["AccessPolicies"])
    parameter = cluster_template.to_json()["Parameters"]["AdminPrincipalArn"]
    assert "Default" not in parameter and parameter["Type"] == "String"
    assert re.fullmatch(parameter["AllowedPattern"], "arn:aws:iam::123456789012:role/Admin")
    assert not re.fullmatch(parameter["AllowedPattern"], "arn:aws:sts::123456789012:assumed-role/Admin/me")


def test_admin_principal_gets_a_cluster_admin_access_entry(default_config) -> None:
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    from hyperpod_infra.app_builder import build

    admin = "arn:aws:iam::123456789012:role/Admin"
    config = default_config.model_copy(update={"eks": default_config.eks.model_copy(
        update={"admin_principal_arn": admin})})
    stacks = build(cdk.App(context={"aws:cdk:disable-asset-staging": True}), config)
    entries = Template.from_stack(stacks.cluster).find_resources(
        "AWS::EKS::AccessEntry", {"Properties": {"PrincipalArn": admin}})
    assert len(entries) == 1
    (policy,) = next(iter(entries.values()))["Properties"]["AccessPolicies"]
    assert policy["AccessScope"] == {"Type": "cluster"}
    assert "AmazonEKSClusterAdminPolicy" in str(policy["PolicyArn"])
    assert "AdminPrincipalArn" not in Template.from_stack(stacks.cluster).to_json().get("Parameters", {})


def test_device_plugins_come_from_verified_chart_assets_at_pinned_versions(cluster_template) -> None:
    """Set-up fetches the charts (test_resiliency_charts.py); the deploy reads them from S3, not GitHub."""
    charts = cluster_template.find_resources("Custom::AWSCDK-EKS-HelmChart")
    by_release = {c["Properties"]["Release"]: c["Properties"] for c in charts.values()}
    for pin in (pins.NVIDIA_DEVICE_PLUGIN, pins.EFA_DEVICE_PLUGIN):
        props = by_release[pin.chart]
        assert props["ChartAssetURL"]["Fn::Sub"].startswith("s3://")
        assert not {"Repository", "Version", "Chart"} & set(props)
        assert props["Namespace"] == "kube-system"
    assert pins.NVIDIA_DEVICE_PLUGIN_CHART.base_url.endswith("/deployments/helm/nvidia-device-plugin/")


def test_device_plugins_schedule_on_hyperpod_gpu_nodes_and_tolerate_health_checks(cluster_template) -> None:
    import json

    charts = cluster_template.find_resources("Custom::AWSCDK-EKS-HelmChart")
    values = {c["Properties"]["Release"]: json.loads(c["Properties"]["Values"]) for c in charts.values()}
    nvidia = values[pins.NVIDIA_DEVICE_PLUGIN.chart]
    term = nvidia["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"][0]
    assert term["key"] == "node.kubernetes.io/instance-type" and "ml.p5.48xlarge" in term["values"]
    efa = values[pins.EFA_DEVICE_PLUGIN.chart]
    assert efa["supportedInstanceLabels"]["values"] == ["ml.p5.48xlarge"]
    for v in (nvidia, efa):
        assert {"key": "sagemaker.amazonaws.com/node-health-status", "operator": "Equal",
                "value": "Unschedulable", "effect": "NoSchedule"} in v["tolerations"]


def test_helm_timeouts_stay_under_the_handler_lambda_limit(cluster_template) -> None:
    for chart in cluster_template.find_resources("Custom::AWSCDK-EKS-HelmChart").values():
        assert chart["Properties"]["Timeout"] == "300s"


def test_kubectl_handler_runs_in_the_vpc(cluster_template) -> None:
    functions = cluster_template.find_resources("AWS::Lambda::Function")
    handler = next(f for i, f in functions.items() if i.startswith("EksClusterKubectlProviderHandler"))
    assert len(handler["Properties"]["VpcConfig"]["SubnetIds"]) == 2


def test_outputs(cluster_template, default_config) -> None:
    cluster_template.has_output(outputs.EKS_CLUSTER_NAME, {"Value": {"Ref": EKS_LOGICAL_ID}})
    cluster_template.has_output(outputs.REGION, {"Value": default_config.region})
    # AWS::EKS::Cluster return values (CloudFormation User Guide): Arn, Endpoint ("https://...eks.amazonaws.com").
    cluster_template.has_output(outputs.EKS_CLUSTER_ARN, {"Value": {"Fn::GetAtt": [EKS_LOGICAL_ID, "Arn"]}})
    cluster_template.has_output(outputs.EKS_API_ENDPOINT, {"Value": {"Fn::GetAtt": [EKS_LOGICAL_ID, "Endpoint"]}})
    cluster_template.has_output("UpdateKubeconfigCommand", {
        "Value": f"aws eks update-kubeconfig --name {default_config.eks.cluster_name} "
                 f"--region {default_config.region}"})
