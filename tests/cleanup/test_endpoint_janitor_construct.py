"""EndpointJanitor alone (a bare stack, the stand-in EKS cluster of tests/infra/stand_ins.py) synthesizes a scoped,
ordered, nag-clean custom resource; in a VPC, its functions reach the cluster API through a group of its own."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk.assertions import Match, Template
from tests.infra import stand_ins

from hyperpod_constructs.endpoint_janitor import (
    HANDLER_DIR,
    LOGICAL_ID,
    RESOURCE_TYPE,
    EndpointJanitor,
    EndpointJanitorProps,
)
from hyperpod_infra.bundle import imported_by

#: What the platform stack bundles: the modules the handler imports.
BUNDLED = imported_by(HANDLER_DIR / "index.py")

HANDLER_ACTIONS_WITHOUT_RESOURCE_SCOPE = {
    "sagemaker:ListEndpoints", "sagemaker:ListEndpointConfigs", "sagemaker:ListModels", "acm:ListCertificates",
    "elasticloadbalancing:DescribeLoadBalancers", "elasticloadbalancing:DescribeTargetGroups",
    "elasticloadbalancing:DescribeTags", "ec2:DescribeSecurityGroups",
}
DEPLOYMENT_TAG = ("deployment", "team-a")


def _build(app: cdk.App) -> dict[str, Any]:
    """``JanitorStack``: the janitor outside a VPC, after an operator add-on, with a deployment tag;
    ``JanitorInVpcStack``: in the VPC, with a longer wait and poll."""
    stack = stand_ins.stack(app, "JanitorStack")
    cluster = stand_ins.cluster(stack, in_vpc=stand_ins.vpc(stack))
    operator = eks.CfnAddon(stack, "InferenceOperator", cluster_name=cluster.cluster_name,
                            addon_name="amazon-sagemaker-hyperpod-inference")
    janitor = EndpointJanitor(stack, "Janitor", props=EndpointJanitorProps(
        cluster=cluster, depends_on=[operator], bundled_modules=BUNDLED, deployment_tag=DEPLOYMENT_TAG))

    vpc_stack = stand_ins.stack(app, "JanitorInVpcStack")
    vpc = stand_ins.vpc(vpc_stack)
    EndpointJanitor(vpc_stack, "Janitor", props=EndpointJanitorProps(
        cluster=stand_ins.cluster(vpc_stack, in_vpc=vpc), vpc=vpc, timeout=cdk.Duration.minutes(45),
        query_interval=cdk.Duration.seconds(60), bundled_modules=BUNDLED))
    return {"stack": stack, "cluster": cluster, "janitor": janitor, "operator": operator, "vpc_stack": vpc_stack}


@pytest.fixture(scope="module")
def built() -> dict[str, Any]:
    built = _build(stand_ins.app())
    built["template"] = Template.from_stack(built["stack"])
    built["vpc_template"] = Template.from_stack(built["vpc_stack"])
    return built


def _logical_id(built: dict[str, Any], construct: Any) -> str:
    return built["stack"].resolve(built["stack"].get_logical_id(construct))


def _janitor_role_statements(template: Template) -> list[dict[str, Any]]:
    policies = template.find_resources(
        "AWS::IAM::Policy", {"Properties": {"Roles": [{"Ref": Match.string_like_regexp("^JanitorRole")}]}})
    assert len(policies) == 1
    return next(iter(policies.values()))["Properties"]["PolicyDocument"]["Statement"]


def test_custom_resource_carries_cluster_and_wait_budget(built: dict[str, Any]) -> None:
    built["template"].has_resource_properties(RESOURCE_TYPE, {
        "ServiceToken": Match.any_value(),
        "ClusterName": stand_ins.CLUSTER_NAME,
        "ClusterArn": stand_ins.arn(built["stack"], "eks", "cluster", stand_ins.CLUSTER_NAME),
        "WaitSeconds": "1740",  # 30 min minus two 30 s polls, so our message beats the framework's
        # its own wait plus 5 minutes, not the aspect's default (test_service_timeouts.py: kept by the aspect)
        "ServiceTimeout": str((30 + 5) * 60),
        "DeploymentTagKey": "deployment", "DeploymentTagValue": "team-a",
    })
    built["vpc_template"].has_resource_properties(RESOURCE_TYPE, {"DeploymentTagKey": Match.absent()})


def test_janitor_is_deleted_before_the_operator_and_its_own_access(built: dict[str, Any]) -> None:
    resources = built["template"].find_resources(RESOURCE_TYPE)
    depends_on = set(next(iter(resources.values()))["DependsOn"])
    template = built["template"].to_json()["Resources"]
    access_entry = next(k for k, v in template.items()
                        if v["Type"] == "AWS::EKS::AccessEntry" and k.startswith("JanitorAccessEntry"))
    role_policy = next(k for k, v in template.items()
                       if v["Type"] == "AWS::IAM::Policy" and k.startswith("JanitorRoleDefaultPolicy"))
    assert {_logical_id(built, built["operator"]), access_entry, role_policy} <= depends_on


def test_the_logical_id_does_not_depend_on_the_construct_path(built: dict[str, Any]) -> None:
    """Fails on main (a hash of the construct path). CloudFormation deletes a resource whose logical ID changes (the
    old one, in the update's cleanup phase), so the janitor keeps the one deployed stacks have whatever its path:
    here it sits at ``JanitorStack/Janitor``, not ``Platform/EndpointJanitor``."""
    assert LOGICAL_ID == "EndpointJanitor4EF4A0F0"  # the default config's Platform template at commit 828b511
    assert list(built["template"].find_resources(RESOURCE_TYPE)) == [LOGICAL_ID]


def test_the_janitor_may_read_the_status_of_its_own_stack_only(built: dict[str, Any]) -> None:
    """Fails on main (no such read). A Delete cleans up only while the stack is being deleted, so the handler reads
    the status of the stack holding it (DescribeStacks; resource type ``stack``, ARN ``...:stack/<name>/<id>``,
    which ``AWS::StackId`` is)."""
    reads = [s for s in _janitor_role_statements(built["template"])
             if "cloudformation:DescribeStacks" in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])]
    assert reads == [{"Action": "cloudformation:DescribeStacks", "Effect": "Allow",
                      "Resource": {"Ref": "AWS::StackId"}}]


def test_waiter_polls_every_30_s_for_30_min(built: dict[str, Any]) -> None:
    machines = built["template"].find_resources("AWS::StepFunctions::StateMachine")
    definition = str(next(iter(machines.values()))["Properties"]["DefinitionString"])
    assert '\\"IntervalSeconds\\":30,\\"MaxAttempts\\":60' in definition or \
        '"IntervalSeconds":30,"MaxAttempts":60' in definition


def test_access_entry_maps_the_role_to_a_group_bound_to_the_operator_resources_only(
        built: dict[str, Any]) -> None:
    """Not cluster admin for the life of the cluster (fails on main): a STANDARD entry with one Kubernetes
    group, and a ClusterRole for exactly get/list/delete on the operator's two CRDs and get/list on its
    SageMakerEndpointRegistrations, whose status names what the operator created (the plural names of the
    pinned CRD files in /work/shared/crds)."""
    template = built["template"]
    template.has_resource_properties("AWS::EKS::AccessEntry", {
        "PrincipalArn": {"Fn::GetAtt": [Match.string_like_regexp("^JanitorRole"), "Arn"]},
        "Type": "STANDARD", "KubernetesGroups": ["hyperpod-dpd:endpoint-janitor"],
        "AccessPolicies": Match.absent()})
    janitor_entries = {k: v for k, v in template.find_resources("AWS::EKS::AccessEntry").items()
                       if k.startswith("Janitor")}
    assert "AmazonEKSClusterAdminPolicy" not in json.dumps(janitor_entries)
    (manifest,) = template.find_resources("Custom::AWSCDK-EKS-KubernetesResource").values()
    objects = json.loads(json.dumps(built["stack"].resolve(manifest["Properties"]["Manifest"])))
    role, binding = json.loads(objects) if isinstance(objects, str) else objects
    assert role["rules"] == [{"apiGroups": ["inference.sagemaker.aws.amazon.com"],
                              "resources": ["inferenceendpointconfigs", "jumpstartmodels"],
                              "verbs": ["get", "list", "delete"]},
                             {"apiGroups": ["inference.sagemaker.aws.amazon.com"],
                              "resources": ["sagemakerendpointregistrations"], "verbs": ["get", "list"]}]
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                    "name": "hyperpod-dpd:endpoint-janitor"}]


def test_deletes_are_allowed_only_on_resources_carrying_the_operators_or_controllers_tag(
        built: dict[str, Any]) -> None:
    """Fails on main (no Model/EndpointConfig deletes, and nothing kept the janitor off another deployment's
    resources). Conditions as AWS's load balancer controller policy writes them (aws:ResourceTag/elbv2.k8s.aws/
    cluster), the operator's CreatedBy=HyperPodInference tag and, with a deployment tag, no other value of it
    (IAM condition operators: "...IfExists" is true when the key is absent, so a resource without the tag stays
    deletable when this cluster's objects name it). The SageMaker resource types and delete actions are the
    AmazonSageMakerHyperPodInferenceAccess policy's (operator.md, S12); each action only on its own type."""
    tagged = {"StringEquals": {"aws:ResourceTag/CreatedBy": "HyperPodInference"},
              "StringEqualsIfExists": {"aws:ResourceTag/deployment": "team-a"}}
    for template, expected in ((built["template"], tagged),
                               (built["vpc_template"], {"StringEquals": tagged["StringEquals"]})):
        statements = {s.get("Sid"): s for s in _janitor_role_statements(template)}
        for sid, action, resource in (("DeleteOperatorEndpoints", "sagemaker:DeleteEndpoint", "endpoint/*"),
                                      ("DeleteOperatorEndpointConfigs", "sagemaker:DeleteEndpointConfig",
                                       "endpoint-config/*"),
                                      ("DeleteOperatorModels", "sagemaker:DeleteModel", "model/*"),
                                      ("DeleteOperatorCertificates", "acm:DeleteCertificate", "certificate/*")):
            assert statements[sid]["Action"] == action
            assert statements[sid]["Condition"] == expected, sid
            assert json.dumps(statements[sid]["Resource"]).endswith(f':{resource}"]]}}'), sid
    statements = {s.get("Sid"): s for s in _janitor_role_statements(built["template"])}
    for sid in ("DeleteControllerLoadBalancers", "DeleteControllerSecurityGroups"):
        assert statements[sid]["Condition"]["StringEquals"] == {
            "aws:ResourceTag/elbv2.k8s.aws/cluster": stand_ins.CLUSTER_NAME}
    assert statements["RevokeControllerRules"]["Condition"]["ArnEquals"] == {
        "ec2:Vpc": stand_ins.arn(built["stack"], "ec2", "vpc", stand_ins.VPC_ID)}
    deletes = [s for s in statements.values() if any(":Delete" in a or ":Revoke" in a for a in
                                                     (s["Action"] if isinstance(s["Action"], list) else [s["Action"]]))]
    assert deletes and all("Condition" in s for s in deletes)


def test_read_actions_without_a_resource_scope_are_exactly_the_list_and_describe_calls(built: dict[str, Any]) -> None:
    """Resource "*" only for the calls that accept no resource scope (service authorization reference: the
    SageMaker List* calls, acm:ListCertificates, the ELB Describe* calls, ec2:DescribeSecurityGroups)."""
    unscoped = {a for s in _janitor_role_statements(built["template"]) if s["Resource"] == "*"
                for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])}
    assert unscoped == HANDLER_ACTIONS_WITHOUT_RESOURCE_SCOPE


def test_functions_run_python_from_the_handler_asset(built: dict[str, Any]) -> None:
    for handler in ("index.on_event", "index.is_complete"):
        built["template"].has_resource_properties("AWS::Lambda::Function", {
            "Handler": handler, "Runtime": "python3.14", "Timeout": 300,
            "Role": {"Fn::GetAtt": [Match.string_like_regexp("^JanitorRole"), "Arn"]},
            "LoggingConfig": {"LogGroup": {"Ref": Match.string_like_regexp("^Janitor")}},
        })
    assert (HANDLER_DIR / "index.py").is_file()


def test_every_janitor_log_group_has_a_retention(built: dict[str, Any]) -> None:
    groups = built["template"].find_resources("AWS::Logs::LogGroup")
    janitor_groups = {k: v for k, v in groups.items() if k.startswith("Janitor")}
    assert len(janitor_groups) == 3  # two handlers + the provider framework
    assert all(v["Properties"]["RetentionInDays"] == 30 for v in janitor_groups.values())


def test_in_a_vpc_the_functions_get_a_security_group_allowed_to_the_cluster(built: dict[str, Any]) -> None:
    template = built["vpc_template"]
    template.has_resource_properties("AWS::Lambda::Function", {
        "Handler": "index.is_complete",
        "VpcConfig": {"SecurityGroupIds": [{"Fn::GetAtt": [Match.string_like_regexp("^JanitorSecurityGroup"),
                                                           "GroupId"]}],
                      "SubnetIds": Match.any_value()}})
    # The rule to the cluster API is the janitor's (its stack's), naming the cluster security group: in the app the
    # cluster stack never depends on the platform stack (tests/infra/test_restricted_endpoint.py).
    template.has_resource_properties("AWS::EC2::SecurityGroupIngress", {
        "IpProtocol": "tcp", "FromPort": 443, "ToPort": 443, "GroupId": stand_ins.CLUSTER_SECURITY_GROUP,
        "SourceSecurityGroupId": {"Fn::GetAtt": [Match.string_like_regexp("^JanitorSecurityGroup"), "GroupId"]},
    })
    template.has_resource_properties(RESOURCE_TYPE, {"WaitSeconds": "2580", "ServiceTimeout": "3000"})
    functions = template.find_resources("AWS::Lambda::Function", {"Properties": {"Handler": "index.is_complete"}})
    assert [k for k, f in functions.items() if "VpcConfig" in f["Properties"]] == [
        k for k in functions if k.startswith("Janitor") and "EniWaiter" not in k]


def test_in_a_vpc_destroy_waits_for_the_functions_interfaces_before_deleting_their_group(
        built: dict[str, Any]) -> None:
    """Lambda releases a deleted function's VPC ENIs minutes later; until then the group (and the VPC)
    cannot be deleted (Lambda developer guide, VPC networking). The functions depend on the waiter, the
    waiter on the group: CloudFormation deletes functions -> waits -> group."""
    resources = built["vpc_template"].to_json()["Resources"]
    (waiter_id,) = [k for k, v in resources.items() if v["Type"] == "Custom::LambdaEniWaiter"]
    group_id = next(k for k, v in resources.items()
                    if v["Type"] == "AWS::EC2::SecurityGroup" and k.startswith("JanitorSecurityGroup"))
    assert resources[waiter_id]["Properties"]["SecurityGroupId"] == {"Fn::GetAtt": [group_id, "GroupId"]}
    for handler in ("index.on_event", "index.is_complete"):
        (fn,) = [v for k, v in resources.items() if k.startswith("Janitor") and "EniWaiter" not in k
                 and v["Type"] == "AWS::Lambda::Function" and v["Properties"]["Handler"] == handler]
        assert waiter_id in fn["DependsOn"]


def test_outside_a_vpc_no_security_group_is_made(built: dict[str, Any]) -> None:
    assert built["janitor"].security_group is None
    functions = built["template"].find_resources("AWS::Lambda::Function")
    assert not [k for k, f in functions.items() if k.startswith("Janitor") and "VpcConfig" in f["Properties"]]


@pytest.mark.parametrize(("overrides", "message"), [
    ({"timeout": cdk.Duration.minutes(2)}, "timeout must be between 5 and 50 minutes, got 120 seconds"),
    ({"timeout": cdk.Duration.hours(1)}, "timeout must be between 5 and 50 minutes, got 3600 seconds"),
    ({"query_interval": cdk.Duration.minutes(10)}, "query_interval must be between 5 seconds and timeout/4"),
    ({"query_interval": cdk.Duration.seconds(1)}, "query_interval must be between 5 seconds"),
])
def test_fails_when_timing_is_out_of_range(built: dict[str, Any], overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        EndpointJanitor(built["stack"], "Bad", props=EndpointJanitorProps(
            cluster=built["cluster"], bundled_modules=BUNDLED, **overrides))


def test_fails_when_vpc_options_come_without_a_vpc(built: dict[str, Any]) -> None:
    sg = ec2.SecurityGroup.from_security_group_id(built["stack"], "ImportedSg", "sg-12345678")
    with pytest.raises(ValueError, match="vpc_subnets and security_group require vpc"):
        EndpointJanitor(built["stack"], "Bad", props=EndpointJanitorProps(
            cluster=built["cluster"], bundled_modules=BUNDLED, security_group=sg))


@pytest.mark.slow
def test_janitor_resources_pass_cdk_nag() -> None:
    from hyperpod_infra.nag import add_nag

    app = stand_ins.app()
    add_nag(app)
    _build(app)
    app.synth()  # raises on any unacknowledged finding
