"""The composition root: config/default.yaml reaching each stack, and the stacks' references to each other.

Whole-app facts only, read from the default app the session builds once (``templates``, ``stacks``): what each
construct and stack does with its props is tested alone (tests/infra/test_*_stack.py and the construct tests,
given the stand-ins of tests/infra/stand_ins.py). A cross-stack reference is read by value: the output its
``Fn::ImportValue`` names, in the exporting stack (:func:`tests.infra.stand_ins.exported_value`), never the
export's name, which hashes construct paths.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from aws_cdk.assertions import Match
from tests.infra.conftest import only
from tests.infra.stand_ins import exported_value

from hyperpod_constructs.hyperpod_cluster import POOL_LABEL
from hyperpod_constructs.lifecycle_scripts import SETTINGS, settings
from hyperpod_core import artifacts, outputs, pins
from hyperpod_core.telemetry.alerts import alert_rule_groups


def _resources(template, resource_type: str) -> dict[str, dict]:
    return template.find_resources(resource_type)


def _imports(value: Any) -> list[dict]:
    """Every ``{"Fn::ImportValue": ...}`` in ``value``, in order."""
    if isinstance(value, dict):
        return [value] if set(value) == {"Fn::ImportValue"} else [i for v in value.values() for i in _imports(v)]
    if isinstance(value, list):
        return [i for v in value for i in _imports(v)]
    return []


def _by_value(templates, value: Any) -> list[tuple[str, Any]]:
    """What each import in ``value`` reads: ``(exporting stack, output value)``."""
    return [exported_value(templates, i) for i in _imports(value)]


@pytest.fixture(scope="module")
def ids(templates, default_config) -> dict[str, str]:
    """Logical IDs of what other stacks refer to, found by what they are."""
    network = templates["Network"]
    (gpu_subnet,) = [k for k, s in _resources(network, "AWS::EC2::Subnet").items()
                     if s["Properties"]["CidrBlock"] == default_config.network.gpu_cidr]
    (efa,) = _resources(network, "AWS::EC2::SecurityGroup")
    (vpc,) = _resources(network, "AWS::EC2::VPC")
    eks, _ = only(templates["Cluster"], "AWS::EKS::Cluster")
    return {"gpu_subnet": gpu_subnet, "efa": efa, "vpc": vpc, "eks": eks}


# --- network -------------------------------------------------------------------------------------------------

def test_the_network_config_reaches_the_network_stack(templates, default_config) -> None:
    n = default_config.network
    network = templates["Network"]
    network.has_resource_properties("AWS::EC2::VPC", {"CidrBlock": n.vpc_cidr})
    subnets = _resources(network, "AWS::EC2::Subnet")
    (gpu,) = [s["Properties"] for s in subnets.values() if s["Properties"]["CidrBlock"] == n.gpu_cidr]
    assert gpu["AvailabilityZoneId"] == n.gpu_availability_zone_id
    # derived (config: null): the region's first two EKS-supported AZ IDs
    assert {s["Properties"]["AvailabilityZoneId"] for s in subnets.values()
            if s["Properties"]["CidrBlock"] != n.gpu_cidr} == set(n.control_plane_availability_zone_ids) == {
        "usw2-az1", "usw2-az2"}
    network.resource_count_is("AWS::EC2::NatGateway", n.nat_gateways)
    assert n.nat_gateways == 1 and not n.interface_endpoints and not n.fsx_lustre
    assert network.find_resources("AWS::EC2::VPCEndpoint", {"Properties": {"VpcEndpointType": "Interface"}}) == {}
    network.has_resource_properties("AWS::Logs::LogGroup", {"RetentionInDays": n.flow_logs_retention_days})


# --- cluster -------------------------------------------------------------------------------------------------

def test_the_eks_config_reaches_the_cluster_stack(templates, default_config) -> None:
    e = default_config.eks
    cluster = templates["Cluster"]
    _, resource = only(cluster, "AWS::EKS::Cluster")
    props = resource["Properties"]
    assert props["Version"] == e.kubernetes_version == pins.KUBERNETES_VERSION
    assert props["Version"] in pins.SUPPORTED_KUBERNETES_VERSIONS
    assert props["ResourcesVpcConfig"]["PublicAccessCidrs"] == list(e.endpoint_public_access_cidrs)
    assert len(_resources(cluster, "Custom::AdoptedLogGroup")) == 1
    cluster.has_resource_properties("Custom::AdoptedLogGroup", {
        "LogGroupName": f"/aws/eks/{e.cluster_name}/cluster", "RetentionInDays": str(e.log_retention_days)})
    _, nodegroup = only(cluster, "AWS::EKS::Nodegroup")
    assert nodegroup["Properties"]["InstanceTypes"] == [e.system_node_group.instance_type]
    assert nodegroup["Properties"]["ScalingConfig"]["MinSize"] == e.system_node_group.desired_size >= 1
    cluster.has_output(outputs.REGION, {"Value": default_config.region})
    cluster.has_output("UpdateKubeconfigCommand", {
        "Value": f"aws eks update-kubeconfig --name {e.cluster_name} --region {default_config.region}"})


def test_the_default_config_names_no_admin_so_the_deploy_must(templates, default_config) -> None:
    assert default_config.eks.admin_principal_arn is None
    entries = _resources(templates["Cluster"], "AWS::EKS::AccessEntry")
    assert [e for e in entries.values() if e["Properties"]["PrincipalArn"] == {"Ref": "AdminPrincipalArn"}]
    assert "Default" not in templates["Cluster"].to_json()["Parameters"]["AdminPrincipalArn"]


def test_the_device_plugins_run_on_the_configured_instance_types(templates, default_config) -> None:
    types = sorted({g.instance_type for g in default_config.hyperpod.instance_groups})
    assert types == ["ml.p5.48xlarge"]
    charts = _resources(templates["Cluster"], "Custom::AWSCDK-EKS-HelmChart")
    values = {c["Properties"]["Release"]: json.loads(c["Properties"]["Values"]) for c in charts.values()}
    term = values[pins.NVIDIA_DEVICE_PLUGIN.chart]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"][0]
    assert term["values"] == types
    assert values[pins.EFA_DEVICE_PLUGIN.chart]["supportedInstanceLabels"]["values"] == types


def test_the_deploy_is_refused_exactly_while_a_pinned_chart_is_not_fetched(templates) -> None:
    """The charts set-up fetched (none offline, as on this machine) are the ones the app ships; the rule that
    refuses the deploy names each missing one by its pinned repository and commit, and is absent when none is."""
    missing = [c for c in pins.CHART_ARTIFACTS if artifacts.verified_chart_dir(c) is None]
    rules = [r for k, r in templates["Cluster"].to_json().get("Rules", {}).items() if k != "CheckBootstrapVersion"]
    if not missing:
        assert rules == []
        return
    (rule,) = rules
    for chart in missing:
        assert f"{chart.repository}@{chart.commit}" in json.dumps(rule), chart.name


def test_the_control_plane_and_the_kubectl_handler_use_the_networks_private_subnets(templates, default_config) -> None:
    cluster = templates["Cluster"]
    _, resource = only(cluster, "AWS::EKS::Cluster")
    handler = next(f for i, f in _resources(cluster, "AWS::Lambda::Function").items()
                   if i.startswith("EksClusterKubectlProviderHandler"))
    network = templates["Network"]
    for subnet_ids in (resource["Properties"]["ResourcesVpcConfig"]["SubnetIds"],
                       handler["Properties"]["VpcConfig"]["SubnetIds"]):
        found = _by_value(templates, subnet_ids)
        assert len(found) == 2 and {stack for stack, _ in found} == {"Network"}
        subnets = [network.to_json()["Resources"][value["Ref"]]["Properties"] for _, value in found]
        assert {"Key": "aws-cdk:subnet-type", "Value": "Private"} in subnets[0]["Tags"]
        assert all({"Key": "aws-cdk:subnet-type", "Value": "Private"} in s["Tags"] for s in subnets)
        assert len({s["AvailabilityZoneId"] for s in subnets}) == 2
        assert default_config.network.gpu_cidr not in {s["CidrBlock"] for s in subnets}


# --- HyperPod ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def hyperpod_cluster(templates) -> dict:
    _, resource = only(templates["HyperPod"], "AWS::SageMaker::Cluster")
    return resource["Properties"]


def test_the_hyperpod_config_reaches_the_hyperpod_stack(hyperpod_cluster, templates, stacks, default_config) -> None:
    h = default_config.hyperpod
    assert hyperpod_cluster["ClusterName"] == h.cluster_name
    assert (hyperpod_cluster["NodeRecovery"], hyperpod_cluster["NodeProvisioningMode"]) == (
        h.node_recovery, h.node_provisioning_mode) == ("Automatic", "Continuous")
    groups = hyperpod_cluster["InstanceGroups"]
    assert [g["InstanceGroupName"] for g in groups] == [g.name for g in h.instance_groups]
    for g, cfg in zip(groups, h.instance_groups, strict=True):
        assert (g["InstanceType"], g["InstanceCount"], g["ThreadsPerCore"]) == (
            cfg.instance_type, cfg.instance_count, cfg.threads_per_core) == ("ml.p5.48xlarge", cfg.instance_count, 1)
        assert g["InstanceStorageConfigs"] == [{"EbsVolumeConfig": {"VolumeSizeInGB": cfg.ebs_volume_size_gb}}]
        assert cfg.ebs_volume_size_gb == 500
        assert g["OnStartDeepHealthChecks"] == list(cfg.deep_health_checks) == ["InstanceStress",
                                                                                "InstanceConnectivity"]
        assert g["KubernetesConfig"] == {"Labels": {POOL_LABEL: cfg.pool}}
        assert "TrainingPlanArn" not in g
    # the default's p5 groups have the weights cache on: every node waits for the instance store
    assert default_config.spec().resolved_model_cache().weights_cache is True
    assert stacks.hyperpod.lifecycle.files[SETTINGS] == settings(weights_cache=True).encode()
    templates["HyperPod"].has_output(outputs.HYPERPOD_CLUSTER_NAME, {"Value": h.cluster_name})


def test_the_hyperpod_cluster_runs_on_our_eks_cluster_gpu_subnet_and_groups(hyperpod_cluster, templates, ids) -> None:
    """By value: the EKS cluster's ARN and cluster security group (cluster stack), the GPU subnet and the EFA
    group (network stack), for the cluster and every group."""
    assert _by_value(templates, hyperpod_cluster["Orchestrator"]["Eks"]["ClusterArn"]) == [
        ("Cluster", {"Fn::GetAtt": [ids["eks"], "Arn"]})]
    for vpc in (hyperpod_cluster["VpcConfig"], *(g["OverrideVpcConfig"] for g in hyperpod_cluster["InstanceGroups"])):
        assert _by_value(templates, vpc["Subnets"]) == [("Network", {"Ref": ids["gpu_subnet"]})]
        assert _by_value(templates, vpc["SecurityGroupIds"]) == [
            ("Network", {"Fn::GetAtt": [ids["efa"], "GroupId"]}),
            ("Cluster", {"Fn::GetAtt": [ids["eks"], "ClusterSecurityGroupId"]})]


def test_the_execution_role_is_scoped_to_our_subnet_groups_vpc_cluster_and_region(templates, ids,
                                                                                  default_config) -> None:
    hyperpod = templates["HyperPod"]
    (role_id,) = hyperpod.find_resources("AWS::IAM::Role", {"Properties": {"AssumeRolePolicyDocument": {
        "Statement": [Match.object_like({"Principal": {"Service": "sagemaker.amazonaws.com"}})]}}})
    statements = {s["Sid"]: s for p in hyperpod.find_resources(
        "AWS::IAM::Policy", {"Properties": {"Roles": [{"Ref": role_id}]}}).values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]}
    assert _by_value(templates, statements["EniWritesInGpuSubnet"]["Resource"]) == [
        ("Network", {"Ref": ids["gpu_subnet"]}), ("Network", {"Fn::GetAtt": [ids["efa"], "GroupId"]}),
        ("Cluster", {"Fn::GetAtt": [ids["eks"], "ClusterSecurityGroupId"]}), ("Network", {"Ref": ids["vpc"]})]
    assert _by_value(templates, statements["ManageEnisInVpc"]["Condition"]) == [("Network", {"Ref": ids["vpc"]})]
    assert _by_value(templates, statements["PodIdentity"]["Resource"]) == [
        ("Cluster", {"Fn::GetAtt": [ids["eks"], "Arn"]})]
    for sid, s in statements.items():
        for r in s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]:
            if isinstance(r, dict) and "Fn::Join" in r:
                text = "".join(p if isinstance(p, str) else "" for p in r["Fn::Join"][1])
                if text.startswith((":ec2:", ":ecr:", ":cloudwatch:")):
                    assert f":{default_config.region}:" in text, sid


def test_no_access_entry_for_the_execution_role(templates) -> None:
    """HyperPod creates its own (type ``HYPERPOD_LINUX``); no stack of ours adds one."""
    for t in templates.values():
        for entry in t.find_resources("AWS::EKS::AccessEntry").values():
            assert "ExecutionRole" not in str(entry["Properties"]["PrincipalArn"])


def test_the_hyperpod_stack_deploys_after_the_cluster_stack_and_its_charts(stacks) -> None:
    assert stacks.cluster in stacks.hyperpod.dependencies
    assert stacks.network in stacks.hyperpod.dependencies
    # The construct-level dependency covers every chart of the dependencies construct, the resiliency sub-charts
    # included.
    deps = stacks.cluster.hyperpod_dependencies
    assert deps in stacks.hyperpod.hyperpod.node.dependencies
    assert len(deps.charts) == 2
    assert stacks.cluster.resiliency_charts.node.scope is deps


# --- observability -------------------------------------------------------------------------------------------

def test_the_observability_config_reaches_the_observability_stacks(templates, stacks, default_config) -> None:
    o = default_config.observability
    obs = templates["Observability"]
    _, namespace = only(obs, "AWS::APS::RuleGroupsNamespace")
    assert namespace["Properties"]["Name"] == f"{default_config.name}-dpd-alerts"
    assert yaml.safe_load(namespace["Properties"]["Data"]) == alert_rule_groups(default_config.specs())
    # no receivers configured: nobody subscribes; no Grafana workspace: no dashboards resource
    assert not o.alerts.email_addresses and o.alerts.topic_arn is None and o.grafana_workspace is None
    assert obs.find_resources("AWS::SNS::Subscription") == {}
    assert obs.find_resources("Custom::GrafanaDashboards") == {}
    # the add-on waits for a registered node of every configured pool, after the HyperPod cluster
    (wait,) = _resources(templates["ObservabilityAddon"], "Custom::NodeReadiness").values()
    pools = {g.pool for g in default_config.hyperpod.instance_groups}
    assert {(r["LabelKey"], r["LabelValue"]) for r in json.loads(wait["Properties"]["Requirements"])} == {
        (POOL_LABEL, p) for p in pools} == {(POOL_LABEL, "prefill"), (POOL_LABEL, "decode")}
    assert stacks.hyperpod in stacks.observability_addon.dependencies
    assert stacks.hyperpod.hyperpod in stacks.observability_addon.node_readiness.props.depends_on
