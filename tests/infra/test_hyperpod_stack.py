"""The HyperPod stack: instance groups, ordering, lifecycle scripts and the execution role's scoping."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Match
from tests.infra.conftest import only

from hyperpod_core import outputs

HYPERPOD_LOGICAL_ID = "HyperPodCluster"


@pytest.fixture(scope="module")
def cluster(hyperpod_template) -> dict:
    logical_id, resource = only(hyperpod_template, "AWS::SageMaker::Cluster")
    assert logical_id == HYPERPOD_LOGICAL_ID  # a new logical ID would replace the GPU cluster
    return resource


def _import(value: dict) -> str:
    return value["Fn::ImportValue"]


def test_cluster_uses_the_eks_orchestrator_of_our_eks_cluster(cluster) -> None:
    arn = _import(cluster["Properties"]["Orchestrator"]["Eks"]["ClusterArn"])
    assert arn == "hyperpod-dpd-cluster:ExportsOutputFnGetAttEksClusterB2BDED5BArn45C32E56"


def test_cluster_settings_follow_the_config(cluster, default_config) -> None:
    props = cluster["Properties"]
    assert props["ClusterName"] == default_config.hyperpod.cluster_name
    assert props["NodeRecovery"] == "Automatic"
    assert props["NodeProvisioningMode"] == "Continuous"


def test_every_group_is_pinned_to_the_gpu_subnet_efa_and_eks_cluster_security_groups(cluster, default_config) -> None:
    """The nodes carry the EFA group and the EKS cluster security group: the control-plane ENIs and system nodes
    admit only members of the latter (deploy-facts.md, Networking)."""
    groups = cluster["Properties"]["InstanceGroups"]
    assert [g["InstanceGroupName"] for g in groups] == [g.name for g in default_config.hyperpod.instance_groups]
    for g in groups:
        vpc = g["OverrideVpcConfig"]
        assert [_import(s) for s in vpc["Subnets"]] == [
            "hyperpod-dpd-network:ExportsOutputRefNetworkGpuSubnet98B9B6C22D860308"]
        efa, eks_cluster = (_import(g) for g in vpc["SecurityGroupIds"])
        assert "EfaGroup" in efa and "EksClusterB2BDED5BClusterSecurityGroupId" in eks_cluster
    assert cluster["Properties"]["VpcConfig"] == groups[0]["OverrideVpcConfig"]


def test_groups_are_p5_with_explicit_threads_ebs_and_deep_health_checks(cluster, default_config) -> None:
    for g, cfg in zip(cluster["Properties"]["InstanceGroups"], default_config.hyperpod.instance_groups,
                      strict=True):
        assert g["InstanceType"] == "ml.p5.48xlarge"
        assert g["InstanceCount"] == cfg.instance_count
        assert g["ThreadsPerCore"] == 1
        assert g["InstanceStorageConfigs"] == [{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}]
        assert g["OnStartDeepHealthChecks"] == ["InstanceStress", "InstanceConnectivity"]
        assert g["KubernetesConfig"] == {"Labels": {"hyperpod-dpd/pool": cfg.pool}}
        assert "TrainingPlanArn" not in g
        assert g["ExecutionRole"]["Fn::GetAtt"][0].startswith("ExecutionRole")


def test_lifecycle_config_points_at_our_script_in_the_sagemaker_bucket(cluster, hyperpod_template) -> None:
    bucket_id, bucket = only(hyperpod_template, "AWS::S3::Bucket")
    name = bucket["Properties"]["BucketName"]["Fn::Join"][1]
    assert name[0].startswith("sagemaker-")
    for g in cluster["Properties"]["InstanceGroups"]:
        assert g["LifeCycleConfig"] == {
            "OnCreate": "on_create.sh",
            "SourceS3Uri": {"Fn::Join": ["", ["s3://", {"Ref": bucket_id}, "/lifecycle/"]]}}


def test_lifecycle_bucket_is_private_encrypted_tls_only_and_deleted_with_the_stack(hyperpod_template) -> None:
    hyperpod_template.has_resource("AWS::S3::Bucket", {
        "Properties": {
            "BucketEncryption": {"ServerSideEncryptionConfiguration": [
                {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]},
            "PublicAccessBlockConfiguration": {"BlockPublicAcls": True, "BlockPublicPolicy": True,
                                               "IgnorePublicAcls": True, "RestrictPublicBuckets": True}},
        "DeletionPolicy": "Delete"})
    hyperpod_template.has_resource_properties("AWS::S3::BucketPolicy", {"PolicyDocument": {"Statement": [
        Match.object_like({"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}}),
        Match.any_value()]}})
    hyperpod_template.resource_count_is("Custom::S3AutoDeleteObjects", 1)


def test_on_create_is_deployed_from_this_repository(hyperpod_template) -> None:
    hyperpod_template.has_resource_properties("Custom::CDKBucketDeployment", {
        "DestinationBucketKeyPrefix": "lifecycle/", "Prune": True})


def test_hyperpod_cluster_is_created_after_role_policy_and_scripts(cluster, hyperpod_template) -> None:
    depends = set(cluster["DependsOn"])
    roles = hyperpod_template.find_resources("AWS::IAM::Role", {"Properties": {"AssumeRolePolicyDocument": {
        "Statement": [Match.object_like({"Principal": {"Service": "sagemaker.amazonaws.com"}})]}}})
    (role_id,) = roles
    policies = hyperpod_template.find_resources("AWS::IAM::Policy", {"Properties": {"Roles": [{"Ref": role_id}]}})
    deployment = hyperpod_template.find_resources("Custom::CDKBucketDeployment")
    assert role_id in depends
    assert set(policies) <= depends and policies
    assert set(deployment) <= depends


def test_hyperpod_stack_deploys_after_the_cluster_stack_and_its_charts(stacks) -> None:
    assert stacks.cluster in stacks.hyperpod.dependencies
    assert stacks.network in stacks.hyperpod.dependencies
    # The construct-level dependency covers every chart of the dependencies construct.
    deps = stacks.hyperpod.hyperpod.node.dependencies
    assert stacks.cluster.hyperpod_dependencies in deps
    charts = stacks.cluster.hyperpod_dependencies.charts
    assert len(charts) == 2


# --- execution role ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def role_statements(hyperpod_template) -> dict[str, dict]:
    roles = hyperpod_template.find_resources("AWS::IAM::Role", {"Properties": {"AssumeRolePolicyDocument": {
        "Statement": [Match.object_like({"Principal": {"Service": "sagemaker.amazonaws.com"}})]}}})
    (role_id,) = roles
    policies = hyperpod_template.find_resources("AWS::IAM::Policy", {"Properties": {"Roles": [{"Ref": role_id}]}})
    statements = [s for p in policies.values() for s in p["Properties"]["PolicyDocument"]["Statement"]]
    return {s["Sid"]: s for s in statements}


def _resources(statement: dict) -> list:
    r = statement["Resource"]
    return r if isinstance(r, list) else [r]


def _actions(statement: dict) -> list[str]:
    a = statement["Action"]
    return a if isinstance(a, list) else [a]


def test_execution_role_has_the_managed_instance_policy(hyperpod_template) -> None:
    hyperpod_template.has_resource_properties("AWS::IAM::Role", {
        "AssumeRolePolicyDocument": {"Statement": [Match.object_like({
            "Principal": {"Service": "sagemaker.amazonaws.com"}})]},
        "ManagedPolicyArns": [{"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"},
                                                 ":iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy"]]}]})


def test_eni_creation_is_scoped_to_our_subnet_and_the_nodes_security_groups(role_statements) -> None:
    """Every group the nodes carry (EFA and EKS cluster security group) or HyperPod cannot create their ENIs;
    the subnet, groups and VPC are named by ARN, nothing else of those types."""
    s = role_statements["EniWritesInGpuSubnet"]
    assert "ec2:CreateNetworkInterface" in _actions(s) and "Condition" not in s
    text = str(_resources(s))
    assert text.count("subnet/") == 1 and "NetworkGpuSubnet" in text
    assert text.count("security-group/") == 2
    assert "EfaGroup" in text and "EksClusterB2BDED5BClusterSecurityGroupId" in text
    assert text.count("vpc/") == 1 and "NetworkVpc" in text
    assert "*" not in text


def test_writes_on_existing_enis_are_limited_to_our_vpc(role_statements) -> None:
    """``ec2:Vpc`` on network-interface/*: every ENI write but CreateNetworkInterface carries the key (service
    authorization reference); a new interface has none, so that one is bounded by the subnet and groups."""
    s = role_statements["ManageEnisInVpc"]
    assert "ec2:CreateNetworkInterface" not in _actions(s)
    assert set(s["Condition"]) == {"ArnEquals"} and list(s["Condition"]["ArnEquals"]) == ["ec2:Vpc"]
    assert "NetworkVpc" in str(s["Condition"]) and "network-interface/*" in str(_resources(s))


def test_the_vpc_cni_may_tag_existing_enis(role_statements) -> None:
    """ipamd tags ENIs after creating them (standalone CreateTags): no ``ec2:CreateAction`` condition, as in
    AmazonEKS_CNI_Policy and AWS's HyperPod IAM template (deploy-facts.md, IAM)."""
    s = role_statements["TagEnis"]
    assert _actions(s) == ["ec2:CreateTags"] and "Condition" not in s
    assert "network-interface/*" in str(_resources(s))


def test_pod_identity_is_scoped_to_our_eks_cluster(role_statements) -> None:
    s = role_statements["PodIdentity"]
    assert _actions(s) == ["eks-auth:AssumeRoleForPodIdentity"]
    (arn,) = _resources(s)
    assert "EksCluster" in arn["Fn::ImportValue"]


def test_lifecycle_read_is_scoped_to_the_script_prefix(role_statements, hyperpod_template) -> None:
    bucket_id, _ = only(hyperpod_template, "AWS::S3::Bucket")
    get = role_statements["ReadLifecycleScripts"]
    assert _actions(get) == ["s3:GetObject"]
    assert _resources(get) == [{"Fn::Join": ["", [{"Fn::GetAtt": [bucket_id, "Arn"]}, "/lifecycle/*"]]}]
    listing = role_statements["ListLifecycleScripts"]
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["lifecycle/*"]}}


def test_star_resources_only_for_actions_without_resource_level_permissions(role_statements) -> None:
    for sid, s in role_statements.items():
        if "*" in _resources(s):
            assert all(a.startswith("ec2:Describe") or a == "ecr:GetAuthorizationToken" for a in _actions(s)), sid


def test_every_arn_wildcard_is_limited_to_this_region(role_statements, default_config) -> None:
    for sid, s in role_statements.items():
        for r in _resources(s):
            if isinstance(r, dict) and "Fn::Join" in r:
                text = "".join(p if isinstance(p, str) else "" for p in r["Fn::Join"][1])
                if text.startswith(":ec2:") or text.startswith(":ecr:") or text.startswith(":cloudwatch:"):
                    assert f":{default_config.region}:" in text, sid


def test_no_access_entry_for_the_execution_role(templates) -> None:
    for t in templates.values():
        for entry in t.find_resources("AWS::EKS::AccessEntry").values():
            assert "ExecutionRole" not in str(entry["Properties"]["PrincipalArn"])


def test_outputs(hyperpod_template, default_config) -> None:
    hyperpod_template.has_output(outputs.HYPERPOD_CLUSTER_NAME, {"Value": default_config.hyperpod.cluster_name})
    hyperpod_template.has_output(outputs.HYPERPOD_CLUSTER_ARN,
                                 {"Value": {"Fn::GetAtt": [HYPERPOD_LOGICAL_ID, "ClusterArn"]}})
