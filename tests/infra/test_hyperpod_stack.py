"""The HyperPod stack alone (``hyperpod_alone``: explicit props, stand-in EKS cluster, VPC, GPU subnet and EFA
group): instance groups, ordering, lifecycle scripts and the execution role's scoping. What the default config
and the other stacks hand it: tests/infra/test_app_wiring.py."""

from __future__ import annotations

import re
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match
from tests.infra import stand_ins
from tests.infra.conftest import only

from hyperpod_constructs import lifecycle_scripts
from hyperpod_constructs.hyperpod_cluster import CREATE_ONLY_PROPERTIES, LOGICAL_ID
from hyperpod_constructs.lifecycle_scripts import ON_CREATE, SETTINGS, LifecycleScripts, LifecycleScriptsProps, settings
from hyperpod_core import instances, outputs
from hyperpod_infra.app_builder import lifecycle_bucket_name


@pytest.fixture(scope="module")
def template(hyperpod_alone):
    return hyperpod_alone.template


@pytest.fixture(scope="module")
def cluster(template) -> dict:
    logical_id, resource = only(template, "AWS::SageMaker::Cluster")
    assert logical_id == LOGICAL_ID  # fixed whatever the construct path (test_replacement_guard.py)
    return resource


def test_cluster_uses_the_eks_orchestrator_of_the_given_eks_cluster(cluster, hyperpod_alone) -> None:
    assert cluster["Properties"]["Orchestrator"]["Eks"]["ClusterArn"] == stand_ins.arn(
        hyperpod_alone.stack, "eks", "cluster", stand_ins.CLUSTER_NAME)


def test_cluster_settings_are_the_given_ones(cluster) -> None:
    props = cluster["Properties"]
    assert props["ClusterName"] == stand_ins.HYPERPOD_CLUSTER_NAME
    assert props["NodeRecovery"] == "Automatic"
    assert props["NodeProvisioningMode"] == "Continuous"


def test_every_group_is_pinned_to_the_gpu_subnet_efa_and_eks_cluster_security_groups(cluster) -> None:
    """The nodes carry the EFA group and the EKS cluster security group: the control-plane ENIs and system nodes
    admit only members of the latter (deploy-facts.md, Networking)."""
    groups = cluster["Properties"]["InstanceGroups"]
    assert [g["InstanceGroupName"] for g in groups] == [g.name for g in stand_ins.INSTANCE_GROUPS]
    for g in groups:
        assert g["OverrideVpcConfig"] == {"Subnets": [stand_ins.GPU_SUBNET], "SecurityGroupIds": [
            stand_ins.EFA_GROUP, stand_ins.CLUSTER_SECURITY_GROUP]}
    assert cluster["Properties"]["VpcConfig"] == groups[0]["OverrideVpcConfig"]


def test_every_group_has_its_type_count_threads_ebs_and_health_checks(cluster, template) -> None:
    (role_id,) = template.find_resources("AWS::IAM::Role", {"Properties": {"AssumeRolePolicyDocument": {
        "Statement": [Match.object_like({"Principal": {"Service": "sagemaker.amazonaws.com"}})]}}})
    for g, spec in zip(cluster["Properties"]["InstanceGroups"], stand_ins.INSTANCE_GROUPS, strict=True):
        assert g["InstanceType"] == spec.instance_type
        assert g["InstanceCount"] == spec.instance_count
        assert g["ThreadsPerCore"] == spec.threads_per_core
        assert g["InstanceStorageConfigs"] == [{"EbsVolumeConfig": {"VolumeSizeInGB": spec.ebs_volume_size_gb}}]
        assert g["OnStartDeepHealthChecks"] == list(spec.deep_health_checks)
        assert "TrainingPlanArn" not in g
        assert g["ExecutionRole"] == {"Fn::GetAtt": [role_id, "Arn"]}


#: SageMaker API Reference, "ClusterKubernetesConfig": ``Labels`` keys and values, as the API validates them.
LABEL_KEY = (r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
             r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
LABEL_VALUE = r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"


def test_every_group_carries_its_pool_label_and_a_pinned_group_its_name(cluster) -> None:
    """``KubernetesConfig.Labels`` (HyperPod applies them to every node of the group: SageMaker API Reference,
    "ClusterKubernetesConfig"): the pool label on every group; ``hyperpod-dpd/instance-group: <name>`` on a group an
    endpoint's role names (the second stand-in group), which that role's nodeSelector selects."""
    labels = [g["KubernetesConfig"]["Labels"] for g in cluster["Properties"]["InstanceGroups"]]
    assert labels == [{"hyperpod-dpd/pool": "prefill"},
                      {"hyperpod-dpd/pool": "decode", "hyperpod-dpd/instance-group": "decode"}]
    for key, value in ((k, v) for group in labels for k, v in group.items()):
        assert re.fullmatch(LABEL_KEY, key) and len(key) <= 317, key
        assert re.fullmatch(LABEL_VALUE, value) and 1 <= len(value) <= 63, value


def test_lifecycle_bucket_is_private_encrypted_tls_only_and_deleted_with_the_stack(template) -> None:
    template.has_resource("AWS::S3::Bucket", {
        "Properties": {
            "BucketName": stand_ins.LIFECYCLE_BUCKET_NAME,
            "BucketEncryption": {"ServerSideEncryptionConfiguration": [
                {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]},
            "PublicAccessBlockConfiguration": {"BlockPublicAcls": True, "BlockPublicPolicy": True,
                                               "IgnorePublicAcls": True, "RestrictPublicBuckets": True}},
        "DeletionPolicy": "Delete"})
    template.has_resource_properties("AWS::S3::BucketPolicy", {"PolicyDocument": {"Statement": [
        Match.object_like({"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}}),
        Match.any_value()]}})
    template.resource_count_is("Custom::S3AutoDeleteObjects", 1)


def test_lifecycle_config_points_at_this_version_of_our_scripts(cluster, template, hyperpod_alone) -> None:
    """``SourceS3Uri`` is ``s3://<bucket>/lifecycle/<content hash>/``, the folder the deployment writes to: an
    edited ``on_create.sh`` or setting is a new ``SourceS3Uri``, an ``UpdateCluster`` that ``cdk diff`` shows
    (lifecycle-review.md #7). Fails on main: ``lifecycle/``, overwritten in place."""
    bucket_id, _ = only(template, "AWS::S3::Bucket")
    _, deployment = only(template, "Custom::CDKBucketDeployment")
    prefix = deployment["Properties"]["DestinationBucketKeyPrefix"]
    assert re.fullmatch(r"lifecycle/[0-9a-f]{16}/", prefix), prefix
    assert prefix == f"lifecycle/{hyperpod_alone.stack.lifecycle.content_hash}/"
    for g in cluster["Properties"]["InstanceGroups"]:
        assert g["LifeCycleConfig"] == {
            "OnCreate": "on_create.sh",
            "SourceS3Uri": {"Fn::Join": ["", ["s3://", {"Ref": bucket_id}, f"/{prefix}"]]}}


def test_the_script_and_its_settings_are_deployed_and_earlier_versions_kept(template, hyperpod_alone) -> None:
    """Two sources: the scripts folder and ``on_create.env`` (the weights cache is on). ``RetainOnDelete: true``
    keeps the previous prefix when the destination changes: with ``false`` aws-cdk-lib's handler deletes it
    *first* (aws-s3-deployment README, "Retain on Delete": "all files in the previous destination will first be
    deleted"), while the cluster still names it until CloudFormation has updated it. ``Prune`` only cleans the new
    prefix (the handler's ``aws s3 sync --delete`` to it)."""
    template.has_resource_properties("Custom::CDKBucketDeployment", {
        "Prune": True, "RetainOnDelete": True, "SourceObjectKeys": [Match.any_value(), Match.any_value()]})
    assert hyperpod_alone.stack.lifecycle.files[SETTINGS] == settings(weights_cache=True).encode()
    assert set(hyperpod_alone.stack.lifecycle.files) == {ON_CREATE, SETTINGS}


def test_the_lifecycle_source_is_updated_in_place_never_replacing_the_cluster() -> None:
    """The registry schema of AWS::SageMaker::Cluster (cfn-lint 1.58's copy for us-west-2) makes only
    ``ClusterName``, ``VpcConfig`` and ``Orchestrator/Eks`` create-only: a new ``SourceS3Uri`` updates the cluster
    in place (HyperPod EKS guide, "Updating SageMaker HyperPod cluster configuration": "the lifecycle
    configuration entrypoint script, and the path to the script" can change), so the content hash in the prefix
    cannot replace the GPU cluster. The snapshot in test_replacement_guard.py pins the create-only values."""
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

    create_only = PROVIDER_SCHEMA_MANAGER.get_resource_schema(
        "us-west-2", "AWS::SageMaker::Cluster").schema["createOnlyProperties"]
    assert {p.split("/")[2] for p in create_only} == set(CREATE_ONLY_PROPERTIES)
    assert not any(p.startswith("/properties/InstanceGroups") for p in create_only)


def test_every_group_type_has_the_instance_store_the_script_waits_for() -> None:
    """One settings file serves every instance group, so with the weights cache on every group's nodes wait for
    /opt/dlami/nvme: each type a group may have (``DpdInstanceType``) must have an instance store, or its nodes
    would fail (EC2 instance-store table, ``instances.INSTANCE_STORES``)."""
    assert set(instances.DPD_INSTANCE_TYPES) <= set(instances.INSTANCE_STORES)


@pytest.fixture(scope="module")
def lifecycle_variants(tmp_path_factory) -> dict[str, LifecycleScripts]:
    """One bare stack holding the scripts construct for: this repository's script (twice), an edited copy of it,
    and the weights cache on. No synthesis: the prefix is decided when the construct is built."""
    edited = tmp_path_factory.mktemp("lifecycle")
    (edited / ON_CREATE).write_bytes(lifecycle_scripts.SCRIPTS_DIR.joinpath(ON_CREATE).read_bytes() + b"# edited\n")
    stack = cdk.Stack(cdk.App(), "S", env=cdk.Environment(region="us-west-2"))
    made = {}
    for key, scripts_dir, weights_cache in (("base", None, False), ("again", None, False),
                                            ("edited", edited, False), ("cache", None, True)):
        original = lifecycle_scripts.SCRIPTS_DIR
        lifecycle_scripts.SCRIPTS_DIR = scripts_dir or original
        try:
            made[key] = LifecycleScripts(stack, key, props=LifecycleScriptsProps(
                bucket_name=f"sagemaker-{key}", weights_cache=weights_cache))
        finally:
            lifecycle_scripts.SCRIPTS_DIR = original
    return made


def test_an_edited_script_or_setting_gets_a_new_prefix_the_same_content_the_same(lifecycle_variants) -> None:
    prefixes = {k: c.scripts_prefix for k, c in lifecycle_variants.items()}
    assert prefixes["again"] == prefixes["base"]  # stable across synths: content only
    assert len({prefixes["base"], prefixes["edited"], prefixes["cache"]}) == 3
    assert all(p.startswith("lifecycle/") for p in prefixes.values())  # under the execution role's read scope
    base = lifecycle_variants["base"]
    stack = cdk.Stack.of(base)
    bucket_id = stack.get_logical_id(base.bucket.node.default_child)  # type: ignore[arg-type]
    assert stack.resolve(base.source_s3_uri) == {
        "Fn::Join": ["", ["s3://", {"Ref": bucket_id}, f"/{prefixes['base']}"]]}


# --- the lifecycle bucket's name (lifecycle-review.md #8) ---------------------------------------------------

#: ``AWS::StackId`` as CloudFormation gives it (CloudFormation user guide, "Pseudo parameters reference":
#: ``arn:aws:cloudformation:us-west-2:123456789012:stack/teststack/51af3dc0-da77-11e4-872e-1234567db123``).
STACK_A = "arn:aws:cloudformation:us-west-2:123456789012:stack/dpd-hyperpod/51af3dc0-da77-11e4-872e-1234567db123"
STACK_B = "arn:aws:cloudformation:us-west-2:123456789012:stack/dpd-hyperpod/1c2fa620-982a-11e3-aff7-50e2416294e0"
#: S3 user guide, "General purpose bucket naming rules": 3-63 characters, lowercase letters, digits, dots and
#: hyphens, beginning and ending with a letter or digit, no two adjacent dots, not starting with ``xn--`` or
#: ``sthree-``. No dots here: a dotted name breaks virtual-hosted-style TLS.
BUCKET_NAME = re.compile(r"^(?!xn--|sthree-)[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")


def _evaluate(value: Any, refs: dict[str, str]) -> Any:
    """The value CloudFormation computes for the intrinsics a bucket name uses."""
    if isinstance(value, str):
        return value
    (function, args), = value.items()
    if function == "Ref":
        return refs[args]
    if function == "Fn::Join":
        return args[0].join(_evaluate(a, refs) for a in args[1])
    if function == "Fn::Split":
        return _evaluate(args[1], refs).split(args[0])
    if function == "Fn::Select":
        return _evaluate(args[1], refs)[args[0]]
    raise AssertionError(f"unexpected intrinsic {function}")


def _bucket_name(config, stack_id: str) -> str:
    stack = cdk.Stack(cdk.App(), "HyperPod")
    return _evaluate(stack.resolve(lifecycle_bucket_name(config)),
                     {"AWS::AccountId": "123456789012", "AWS::StackId": stack_id})


def test_lifecycle_bucket_name_is_unique_per_stack_and_the_same_for_its_life(default_config) -> None:
    """The first block of the stack's UUID, as the operator's role ``SageMakerHyperPodInference-<stack UUID
    head>``: unknown before the stack exists, so the name cannot be taken before a deploy or after a destroy.
    Fails on main: ``sagemaker-<name>-lc-<account>-<region>``, the same for every stack."""
    name = _bucket_name(default_config, STACK_A)
    assert name == "sagemaker-hyperpod-dpd-lc-123456789012-51af3dc0"
    assert _bucket_name(default_config, STACK_A) == name  # every synth, every update of the stack
    assert _bucket_name(default_config, STACK_B) == "sagemaker-hyperpod-dpd-lc-123456789012-1c2fa620"


def test_lifecycle_bucket_name_is_valid_for_the_longest_deployment_name(default_config) -> None:
    """``name`` holds up to 40 characters (``DeploymentName``); the bucket name stays within 63 and keeps the
    ``sagemaker-`` prefix ``AmazonSageMakerClusterInstanceRolePolicy`` reads (``arn:aws:s3:::sagemaker-*``);
    two long names that share their start still differ."""
    longest = ("Hyperpod-DPD-" + "x" * 40)[:40]
    other = longest[:-1] + "y"
    for name in (longest, other):
        assert re.fullmatch(r"^[A-Za-z]([A-Za-z0-9-]{0,38}[A-Za-z0-9])?$", name) and len(name) == 40
    names = [_bucket_name(default_config.model_copy(update={"name": n}), STACK_A) for n in (longest, other)]
    for bucket in names:
        assert len(bucket) <= 63 and BUCKET_NAME.fullmatch(bucket) and "--" not in bucket, bucket
        assert bucket.startswith("sagemaker-hyperpod-dpd-") and bucket.endswith("-lc-123456789012-51af3dc0")
    assert names[0] != names[1]


def test_hyperpod_cluster_is_created_after_role_policy_and_scripts(cluster, template) -> None:
    depends = set(cluster["DependsOn"])
    roles = template.find_resources("AWS::IAM::Role", {"Properties": {"AssumeRolePolicyDocument": {
        "Statement": [Match.object_like({"Principal": {"Service": "sagemaker.amazonaws.com"}})]}}})
    (role_id,) = roles
    policies = template.find_resources("AWS::IAM::Policy", {"Properties": {"Roles": [{"Ref": role_id}]}})
    deployment = template.find_resources("Custom::CDKBucketDeployment")
    assert role_id in depends
    assert set(policies) <= depends and policies
    assert set(deployment) <= depends


def test_hyperpod_cluster_waits_for_what_the_cluster_stack_installs(hyperpod_alone) -> None:
    """The construct-level dependency on the given dependencies (in the app: every chart of the cluster stack's
    HyperPodDependencies, tests/infra/test_app_wiring.py)."""
    assert hyperpod_alone.given.hyperpod_dependencies in hyperpod_alone.stack.hyperpod.node.dependencies


# --- execution role ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def role_statements(template) -> dict[str, dict]:
    roles = template.find_resources("AWS::IAM::Role", {"Properties": {"AssumeRolePolicyDocument": {
        "Statement": [Match.object_like({"Principal": {"Service": "sagemaker.amazonaws.com"}})]}}})
    (role_id,) = roles
    policies = template.find_resources("AWS::IAM::Policy", {"Properties": {"Roles": [{"Ref": role_id}]}})
    statements = [s for p in policies.values() for s in p["Properties"]["PolicyDocument"]["Statement"]]
    return {s["Sid"]: s for s in statements}


def _resources(statement: dict) -> list:
    r = statement["Resource"]
    return r if isinstance(r, list) else [r]


def _actions(statement: dict) -> list[str]:
    a = statement["Action"]
    return a if isinstance(a, list) else [a]


def test_execution_role_has_the_managed_instance_policy(template) -> None:
    template.has_resource_properties("AWS::IAM::Role", {
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
    assert text.count("subnet/") == 1 and f":subnet/{stand_ins.GPU_SUBNET}" in text
    assert text.count("security-group/") == 2
    assert f":security-group/{stand_ins.EFA_GROUP}" in text
    assert f":security-group/{stand_ins.CLUSTER_SECURITY_GROUP}" in text
    assert text.count("vpc/") == 1 and f":vpc/{stand_ins.VPC_ID}" in text
    assert "*" not in text


def test_writes_on_existing_enis_are_limited_to_our_vpc(role_statements) -> None:
    """``ec2:Vpc`` on network-interface/*: every ENI write but CreateNetworkInterface carries the key (service
    authorization reference); a new interface has none, so that one is bounded by the subnet and groups."""
    s = role_statements["ManageEnisInVpc"]
    assert "ec2:CreateNetworkInterface" not in _actions(s)
    assert set(s["Condition"]) == {"ArnEquals"} and list(s["Condition"]["ArnEquals"]) == ["ec2:Vpc"]
    assert f":vpc/{stand_ins.VPC_ID}" in str(s["Condition"]) and "network-interface/*" in str(_resources(s))


def test_the_vpc_cni_may_tag_existing_enis(role_statements) -> None:
    """ipamd tags ENIs after creating them (standalone CreateTags): no ``ec2:CreateAction`` condition, as in
    AmazonEKS_CNI_Policy and AWS's HyperPod IAM template (deploy-facts.md, IAM)."""
    s = role_statements["TagEnis"]
    assert _actions(s) == ["ec2:CreateTags"] and "Condition" not in s
    assert "network-interface/*" in str(_resources(s))


def test_pod_identity_is_scoped_to_our_eks_cluster(role_statements, hyperpod_alone) -> None:
    s = role_statements["PodIdentity"]
    assert _actions(s) == ["eks-auth:AssumeRoleForPodIdentity"]
    assert _resources(s) == [stand_ins.arn(hyperpod_alone.stack, "eks", "cluster", stand_ins.CLUSTER_NAME)]


def test_lifecycle_read_is_scoped_to_the_script_prefix(role_statements, template) -> None:
    bucket_id, _ = only(template, "AWS::S3::Bucket")
    get = role_statements["ReadLifecycleScripts"]
    assert _actions(get) == ["s3:GetObject"]
    assert _resources(get) == [{"Fn::Join": ["", [{"Fn::GetAtt": [bucket_id, "Arn"]}, "/lifecycle/*"]]}]
    listing = role_statements["ListLifecycleScripts"]
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["lifecycle/*"]}}


def test_star_resources_only_for_actions_without_resource_level_permissions(role_statements) -> None:
    for sid, s in role_statements.items():
        if "*" in _resources(s):
            assert all(a.startswith("ec2:Describe") or a == "ecr:GetAuthorizationToken" for a in _actions(s)), sid


def test_every_arn_wildcard_is_limited_to_this_region(role_statements) -> None:
    for sid, s in role_statements.items():
        for r in _resources(s):
            if isinstance(r, dict) and "Fn::Join" in r:
                text = "".join(p if isinstance(p, str) else "" for p in r["Fn::Join"][1])
                if text.startswith(":ec2:") or text.startswith(":ecr:") or text.startswith(":cloudwatch:"):
                    assert f":{stand_ins.REGION}:" in text, sid


def test_outputs(template) -> None:
    template.has_output(outputs.HYPERPOD_CLUSTER_NAME, {"Value": stand_ins.HYPERPOD_CLUSTER_NAME})
    template.has_output(outputs.HYPERPOD_CLUSTER_ARN, {"Value": {"Fn::GetAtt": [LOGICAL_ID, "ClusterArn"]}})
