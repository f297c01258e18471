"""Nothing may replace the GPU cluster by accident, and no refactor may delete what a custom resource cleans up.

``ClusterName``, ``VpcConfig`` and ``Orchestrator`` of AWS::SageMaker::Cluster are create-only: a change
replaces the cluster (all P5 nodes). This test pins them, with the logical IDs of the HyperPod and EKS
clusters, for the default config. If it fails, the change would replace a running cluster: undo it, or, if
that is really intended, follow docs/cluster.md ("Changing create-only settings") and update the snapshot.

It also pins the logical IDs of the custom resources whose Delete deletes what outlives them (the endpoint janitor,
the log-group adopters and ``ClusterLogsCleanup``): a changed logical ID makes CloudFormation create the new
resource and delete the old one during the update. Their handlers skip a Delete that is not the stack's deletion
(``hyperpod_runtime.stack_status``); the pinned IDs mean an upgrade does not even send one. Never change these.
"""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk.assertions import Template
from constructs import Construct

from hyperpod_constructs.adopted_log_groups import HANDLER_DIR as LOG_GROUPS_HANDLER_DIR
from hyperpod_constructs.adopted_log_groups import AdoptedLogGroupOptions, AdoptedLogGroups, AdoptedLogGroupsProps
from hyperpod_constructs.hyperpod_cluster import (
    CREATE_ONLY_PROPERTIES,
    LOGICAL_ID,
    HyperPodCluster,
    HyperPodClusterProps,
    InstanceGroupOptions,
)
from hyperpod_infra.bundle import imported_by

SNAPSHOT = Path(__file__).parent / "snapshots" / "hyperpod_create_only.json"
#: ``{template: {logical ID: resource type}}`` as config/default.yaml synthesized at commit 828b511, before they
#: were pinned (``./scripts/synth``, cdk.out/): deployed stacks hold these resources under these IDs.
PINNED_CUSTOM_RESOURCES = {
    "Platform": {"EndpointJanitor4EF4A0F0": "Custom::HyperPodEndpointJanitor"},
    "Cluster": {"EksLogGroupsControlPlaneLogGroup0ED04B0A": "Custom::AdoptedLogGroup"},
    "HyperPod": {"LogGroupsClusterLogsCleanup98B580DC": "Custom::AdoptedLogGroup",
                 "LogGroupsClusterLogs07A2C078": "Custom::AdoptedLogGroup"},
}


def _create_only(hyperpod_template) -> dict:
    resources = hyperpod_template.find_resources("AWS::SageMaker::Cluster")
    assert list(resources) == [LOGICAL_ID]
    props = resources[LOGICAL_ID]["Properties"]
    return {name: props[name] for name in CREATE_ONLY_PROPERTIES}


def test_create_only_properties_match_the_snapshot(hyperpod_template) -> None:
    assert _create_only(hyperpod_template) == json.loads(SNAPSHOT.read_text())


def test_a_replacement_never_deletes_the_running_cluster(hyperpod_template) -> None:
    resource = hyperpod_template.find_resources("AWS::SageMaker::Cluster")[LOGICAL_ID]
    assert resource["UpdateReplacePolicy"] == "Retain"
    assert resource["DeletionPolicy"] == "Delete"  # `cdk destroy` still removes the billable cluster


def test_the_model_bucket_and_its_key_keep_their_logical_ids(templates) -> None:
    """Stateful resources: a changed logical ID would replace the bucket (and orphan the weights) and its key."""
    assert "ModelBucket24FA8CA2" in templates["Platform"].find_resources("AWS::S3::Bucket")
    assert "ModelKeyE265A28C" in templates["Platform"].find_resources("AWS::KMS::Key")


def test_the_eks_cluster_keeps_its_logical_id_and_name(templates, default_config) -> None:
    clusters = templates["Cluster"].find_resources("AWS::EKS::Cluster")
    assert list(clusters) == ["EksClusterB2BDED5B"]
    assert clusters["EksClusterB2BDED5B"]["Properties"]["Name"] == default_config.eks.cluster_name


@pytest.mark.parametrize("template", sorted(PINNED_CUSTOM_RESOURCES))
def test_the_destructive_custom_resources_keep_their_deployed_logical_ids(templates, template: str) -> None:
    types = set(PINNED_CUSTOM_RESOURCES[template].values())
    found = {k: r["Type"] for k, r in templates[template].to_json()["Resources"].items() if r["Type"] in types}
    assert found == PINNED_CUSTOM_RESOURCES[template]


def test_adopted_log_group_logical_ids_do_not_depend_on_the_construct_path() -> None:
    """Fails on main (hashes of the construct path): the IDs the caller pins are the IDs in the template."""
    stack = cdk.Stack(cdk.App(context={"aws:cdk:disable-asset-staging": True}), "S")
    groups = AdoptedLogGroups(Construct(stack, "Deeply"), "Nested", props=AdoptedLogGroupsProps(
        bundled_modules=imported_by(LOG_GROUPS_HANDLER_DIR / "index.py")))
    groups.adopt("Kept", AdoptedLogGroupOptions(log_group_name="/kept", logical_id="PinnedKept",
                                                retention=logs.RetentionDays.ONE_MONTH, delete_on_destroy=False))
    groups.adopt("Deleted", AdoptedLogGroupOptions(log_group_name="/deleted", logical_id="PinnedDeleted",
                                                   retention=logs.RetentionDays.ONE_MONTH))
    groups.delete_on_destroy("Cleanup", prefix="/prefix/", logical_id="PinnedCleanup")
    resources = Template.from_stack(stack).find_resources("Custom::AdoptedLogGroup")
    assert sorted(resources) == ["PinnedCleanup", "PinnedDeleted", "PinnedKept"]


@pytest.fixture()
def construct_scope():
    app = cdk.App()
    stack = cdk.Stack(app, "S", env=cdk.Environment(region="us-west-2"))
    vpc = ec2.Vpc(stack, "Vpc", max_azs=1, nat_gateways=0,
                  subnet_configuration=[ec2.SubnetConfiguration(name="p", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)])
    sg = ec2.SecurityGroup(stack, "Sg", vpc=vpc)
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    return stack, vpc.isolated_subnets[0], sg, role


def _group(subnet, sg, role, **kw) -> InstanceGroupOptions:
    args = {"name": "g", "instance_type": "ml.p5.48xlarge", "instance_count": 1, "execution_role": role,
            "lifecycle_source_s3_uri": "s3://sagemaker-x/lifecycle/", "subnet": subnet, "security_group": sg}
    args.update(kw)
    return InstanceGroupOptions(**args)


def test_the_logical_id_does_not_depend_on_the_construct_path(construct_scope) -> None:
    stack, subnet, sg, role = construct_scope
    parent = HyperPodCluster(stack, "Deeply", props=HyperPodClusterProps(
        cluster_name="c", eks_cluster_arn="arn:aws:eks:us-west-2:123456789012:cluster/x", subnet=subnet,
        security_group=sg, eks_cluster_security_group_id="sg-0eks"))
    parent.add_instance_group(_group(subnet, sg, role))
    assert LOGICAL_ID in Template.from_stack(stack).find_resources("AWS::SageMaker::Cluster")


def test_fails_when_instance_group_names_repeat(construct_scope) -> None:
    stack, subnet, sg, role = construct_scope
    c = HyperPodCluster(stack, "C", props=HyperPodClusterProps(
        cluster_name="c", eks_cluster_arn="arn", subnet=subnet, security_group=sg,
        eks_cluster_security_group_id="sg-0eks"))
    c.add_instance_group(_group(subnet, sg, role))
    with pytest.raises(ValueError, match="must be unique"):
        c.add_instance_group(_group(subnet, sg, role))


def test_fails_when_deep_health_check_is_unknown(construct_scope) -> None:
    stack, subnet, sg, role = construct_scope
    c = HyperPodCluster(stack, "C", props=HyperPodClusterProps(
        cluster_name="c", eks_cluster_arn="arn", subnet=subnet, security_group=sg,
        eks_cluster_security_group_id="sg-0eks"))
    with pytest.raises(ValueError, match="deep_health_checks"):
        c.add_instance_group(_group(subnet, sg, role, deep_health_checks=("Quick",)))


def test_fails_at_synth_without_instance_groups(construct_scope) -> None:
    stack, subnet, sg, _ = construct_scope
    HyperPodCluster(stack, "C", props=HyperPodClusterProps(
        cluster_name="c", eks_cluster_arn="arn", subnet=subnet, security_group=sg,
        eks_cluster_security_group_id="sg-0eks"))
    with pytest.raises(RuntimeError, match="at least one instance group"):
        Template.from_stack(stack)


def test_training_plan_and_legacy_provisioning_are_passed_through(construct_scope) -> None:
    stack, subnet, sg, role = construct_scope
    plan = "arn:aws:sagemaker:us-west-2:123456789012:training-plan/p5-plan"
    c = HyperPodCluster(stack, "C", props=HyperPodClusterProps(
        cluster_name="c", eks_cluster_arn="arn", subnet=subnet, security_group=sg,
        eks_cluster_security_group_id="sg-0eks",
        node_provisioning_mode="Legacy", node_recovery="None"))
    c.add_instance_group(_group(subnet, sg, role, training_plan_arn=plan, deep_health_checks=()))
    props = Template.from_stack(stack).find_resources("AWS::SageMaker::Cluster")[LOGICAL_ID]["Properties"]
    assert "NodeProvisioningMode" not in props and props["NodeRecovery"] == "None"
    (group,) = props["InstanceGroups"]
    assert group["TrainingPlanArn"] == plan and "OnStartDeepHealthChecks" not in group
