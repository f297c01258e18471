"""The replacement decision of ``hyperpod-dpd deploy`` (:mod:`hyperpod_dpd.change_set`), alone.

Responses come through botocore's ``Stubber`` on boto3's own CloudFormation model, which checks every response
against the service's output shapes, and are shaped as the API reference documents ``DescribeChangeSet``
(https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_DescribeChangeSet.html): ``Changes[]`` of
``Type: Resource`` with a ``ResourceChange`` (``Action``, ``LogicalResourceId``, ``PhysicalResourceId``,
``ResourceType``, ``Replacement`` ``True | False | Conditional``, ``Details[].Target.{Attribute, Name,
RequiresRecreation}`` with ``RequiresRecreation`` ``Never | Conditionally | Always``: API_ResourceChange.html,
API_ResourceTargetDefinition.html). moto computes no ``Replacement``, so it cannot play this part.
"""

from __future__ import annotations

import datetime
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from hyperpod_dpd import change_set

CHANGE_SET = change_set.CHANGE_SET_NAME
HYPERPOD_ARN = "arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdef123456"
#: An empty change set's status, as CloudFormation reports it (the pinned aws-cdk CLI's ``changeSetHasNoChanges``
#: tests the same prefix, node_modules/aws-cdk/lib/index.js).
NO_CHANGES = "The submitted information didn't contain changes. Submit different information to create a change set."


def change(logical_id: str, resource_type: str, replacement: str, physical_id: str,
           properties: list[tuple[str, ...]], action: str = "Modify") -> dict[str, Any]:
    """One ``Changes[]`` entry: ``properties`` are ``(Target.Name, Target.RequiresRecreation[, ChangeSource,
    CausingEntity])`` of the changed properties (default ``DirectModification``, which has no ``CausingEntity``).
    ``Evaluation`` is ``Static`` when the new value is known, ``Dynamic`` when CloudFormation learns it during the
    update (API reference, ``ResourceChangeDetail``: API_ResourceChangeDetail.html)."""
    details = []
    for name, requires, *cause in properties:
        source, entity = [*cause, None][:2] if cause else ("DirectModification", None)
        details.append({"Target": {"Attribute": "Properties", "Name": name, "RequiresRecreation": requires},
                        "Evaluation": "Static" if requires != "Conditionally" else "Dynamic",
                        "ChangeSource": source, **({"CausingEntity": entity} if entity else {})})
    return {"Type": "Resource", "ResourceChange": {
        "Action": action, "LogicalResourceId": logical_id, "PhysicalResourceId": physical_id,
        "ResourceType": resource_type, "Replacement": replacement, "Scope": ["Properties"], "Details": details}}


def removed(logical_id: str, resource_type: str, physical_id: str) -> dict[str, Any]:
    """A ``Remove`` entry: the resource left the template, or its logical ID changed (API reference,
    ``ResourceChange``: ``Replacement`` and ``Details`` are for the ``Modify`` action only)."""
    return {"Type": "Resource", "ResourceChange": {"Action": "Remove", "LogicalResourceId": logical_id,
                                                    "PhysicalResourceId": physical_id, "ResourceType": resource_type,
                                                    "Scope": [], "Details": []}}


def described(stack: str, changes: list[dict[str, Any]], next_token: str | None = None) -> dict[str, Any]:
    """A ``DescribeChangeSet`` response of the check's change set of ``stack``; no changes: ``FAILED`` with
    :data:`NO_CHANGES`, as CloudFormation leaves a change set that changes nothing."""
    return {
        "ChangeSetName": CHANGE_SET, "StackName": stack,
        "ChangeSetId": f"arn:aws:cloudformation:us-west-2:123456789012:changeSet/{CHANGE_SET}/1a2345b6-0000-00a0",
        "StackId": f"arn:aws:cloudformation:us-west-2:123456789012:stack/{stack}/1",
        "CreationTime": datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC),
        "ExecutionStatus": "AVAILABLE" if changes else "UNAVAILABLE",
        "Status": "CREATE_COMPLETE" if changes else "FAILED", "Changes": changes,
        **({} if changes else {"StatusReason": NO_CHANGES}), **({"NextToken": next_token} if next_token else {})}


def _cloudformation() -> tuple[Any, Stubber]:
    client = boto3.client("cloudformation", region_name="us-west-2", aws_access_key_id="x",
                          aws_secret_access_key="x")
    return client, Stubber(client)


def _decide(stack: str, *pages: list[dict[str, Any]]) -> list[change_set.Replacement]:
    """``replacements`` of what :func:`change_set.read` reads from ``pages`` (each one DescribeChangeSet page)."""
    client, stub = _cloudformation()
    for i, page in enumerate(pages):
        expected = {"StackName": stack, "ChangeSetName": CHANGE_SET, **({"NextToken": f"t{i}"} if i else {})}
        stub.add_response("describe_change_set", described(stack, page, f"t{i + 1}" if i + 1 < len(pages) else None),
                          expected)
    with stub:
        found = change_set.replacements(stack, change_set.read(client, stack))
        stub.assert_no_pending_responses()
    return found


#: Guarded resources as the demo templates hold them (tests/cli/test_lifecycle.py checks these IDs against them).
HYPERPOD = ("HyperPodCluster", "AWS::SageMaker::Cluster", HYPERPOD_ARN)
EKS = ("EksClusterB2BDED5B", "AWS::EKS::Cluster", "demo-eks")
BUCKET = ("ModelBucket24FA8CA2", "AWS::S3::Bucket", "demo-platform-modelbucket24fa8ca2-abc")


#: What makes CloudFormation unsure of a new value: an ``Fn::GetAtt`` of a resource the same update modifies
#: (``ChangeSource`` ``ResourceAttribute``, ``CausingEntity`` the attribute: API_ResourceChangeDetail.html).
SG_ATTRIBUTE = ("ResourceAttribute", "EfaGroup8A1ECB17.GroupId")


@pytest.mark.parametrize(("resource", "replacement", "properties", "named"), [
    # hyperpod.cluster_name renamed: ClusterName is create-only (AWS::SageMaker::Cluster's resource schema).
    (HYPERPOD, "True", [("ClusterName", "Always")], ("ClusterName: DirectModification",)),
    # VpcConfig from a value CloudFormation learns during the update: may replace.
    (HYPERPOD, "Conditional", [("VpcConfig", "Conditionally", *SG_ATTRIBUTE), ("InstanceGroups", "Never")],
     ("VpcConfig: ResourceAttribute EfaGroup8A1ECB17.GroupId",)),
    # eks.cluster_name renamed: Name is create-only (AWS::EKS::Cluster).
    (EKS, "True", [("Name", "Always")], ("Name: DirectModification",)),
    (BUCKET, "True", [("BucketName", "Always")], ("BucketName: DirectModification",)),
], ids=["hyperpod-true", "hyperpod-conditional", "eks-true", "bucket-true"])
def test_a_guarded_replacement_is_found_with_its_property(resource, replacement, properties, named) -> None:
    logical_id, resource_type, physical_id = resource
    (found,) = _decide("demo-x", [change(logical_id, resource_type, replacement, physical_id, properties)])
    assert (found.logical_id, found.physical_id, found.replacement, found.properties) == (
        logical_id, physical_id, replacement, named)


@pytest.mark.parametrize("changes", [
    # an instance-group change: an in-place UpdateCluster (RequiresRecreation Never).
    [change(*HYPERPOD[:2], "False", HYPERPOD[2], [("InstanceGroups", "Never")])],
    # another bucket of the platform stack, replaced: not the model bucket.
    [change("TlsCertificatesBucket830516A0", "AWS::S3::Bucket", "True", "demo-tls", [("BucketName", "Always")])],
    # another resource type that is replaced: a Lambda function renamed.
    [change("Handler886CB40B", "AWS::Lambda::Function", "True", "demo-handler", [("FunctionName", "Always")])],
    # the model bucket dropped from the template (model_bucket.existing_name): Remove under its Retain.
    [removed(*BUCKET)],
    [],  # nothing changes
], ids=["in-place", "other-bucket", "other-type", "bucket-removed", "empty"])
def test_nothing_else_refuses_a_deploy(changes) -> None:
    assert _decide("demo-x", changes) == []


def test_every_page_of_the_change_set_is_read() -> None:
    """``DescribeChangeSet`` pages its ``Changes`` (``NextToken``): a replacement on the second page counts."""
    found = _decide("demo-hyperpod", [change("LifecycleBucket5EEB21F0", "AWS::S3::Bucket", "False", "lc", [])],
                    [change(*HYPERPOD[:2], "True", HYPERPOD[2], [("ClusterName", "Always")])])
    assert [r.logical_id for r in found] == ["HyperPodCluster"]


def test_the_refusal_is_one_line_naming_resource_and_property() -> None:
    found = _decide("demo-hyperpod", [change(*HYPERPOD[:2], "True", HYPERPOD[2], [("ClusterName", "Always")])])
    line = change_set.refusal(found)
    assert "\n" not in line
    assert line.startswith(f"deploy would replace demo-hyperpod: the HyperPod cluster HyperPodCluster "
                           f"(AWS::SageMaker::Cluster {HYPERPOD_ARN}) Replacement True (property ClusterName: "
                           "DirectModification).")
    assert line.endswith("undo it, or pass --allow-replace HyperPodCluster (the old HyperPod cluster is then deleted, "
                         "asked once)")


def test_the_refusal_says_what_makes_a_replacement_conditional() -> None:
    """Fails on main, which named only the property: ``Conditional`` also refuses an update that replaces nothing
    (the referenced attribute keeps its value), and only ``ChangeSource``/``CausingEntity`` (API reference,
    ``ResourceChangeDetail``) let the operator judge it and allow just that resource."""
    found = _decide("demo-cluster", [change(*EKS[:2], "Conditional", EKS[2],
                                            [("ResourcesVpcConfig", "Conditionally", *SG_ATTRIBUTE)])])
    line = change_set.refusal(found)
    assert ("the EKS cluster EksClusterB2BDED5B (AWS::EKS::Cluster demo-eks) Replacement Conditional (property "
            "ResourcesVpcConfig: ResourceAttribute EfaGroup8A1ECB17.GroupId)") in line
    assert "--allow-replace EksClusterB2BDED5B" in line


@pytest.mark.parametrize("resource", [HYPERPOD, EKS], ids=["hyperpod", "eks"])
def test_a_removed_cluster_counts_as_replaced(resource) -> None:
    """Fails on main, which read only ``Modify``: a ``Remove`` (the logical ID changed, or the resource left the
    template) deletes a resource whose ``DeletionPolicy`` is ``Delete`` (User Guide, "DeletionPolicy attribute": it
    "also applies to stack update operations that lead to resources being deleted from stacks"), as both clusters'
    is (tests/cli/test_lifecycle.py checks the templates)."""
    (found,) = _decide("demo-x", [removed(*resource)])
    assert (found.logical_id, found.action, found.replacement) == (resource[0], "Remove", "True")
    assert "Action Remove (DeletionPolicy Delete: the resource is deleted" in change_set.refusal([found])


@pytest.mark.parametrize(("allow", "go"), [
    (["all"], True), (["HyperPodCluster"], True), (["EksClusterB2BDED5B", "HyperPodCluster"], True),
    (["EksClusterB2BDED5B"], False), ([], False)])
def test_allow_replace_names_resources_or_all(allow: list[str], go: bool) -> None:
    (found,) = _decide("demo-hyperpod", [change(*HYPERPOD[:2], "True", HYPERPOD[2], [("ClusterName", "Always")])])
    assert change_set.allowed(found, allow) is go


def _stacks(status: str) -> dict[str, Any]:
    return {"Stacks": [{"StackName": "demo-cluster", "CreationTime": datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC),
                        "StackStatus": status, "Parameters": [
                            {"ParameterKey": "AdminPrincipalArn",
                             "ParameterValue": "arn:aws:iam::123456789012:role/Alice"}]}]}


@pytest.mark.parametrize(("status", "updated"), [
    ("UPDATE_COMPLETE", True), ("UPDATE_ROLLBACK_COMPLETE", True), ("CREATE_COMPLETE", True),
    # The CDK CLI deletes a stack whose first create failed and creates it again; one held in review is created.
    ("ROLLBACK_COMPLETE", False), ("REVIEW_IN_PROGRESS", False)])
def test_a_stack_the_deploy_updates_is_told_from_one_it_creates(status: str, updated: bool) -> None:
    client, stub = _cloudformation()
    stub.add_response("describe_stacks", _stacks(status), {"StackName": "demo-cluster"})
    with stub:
        found = change_set.deployed(client, "demo-cluster")
    assert (found is not None) == updated
    assert change_set.parameter(found, "AdminPrincipalArn") == (
        "arn:aws:iam::123456789012:role/Alice" if updated else None)


def test_a_stack_that_does_not_exist_is_created() -> None:
    """CloudFormation answers DescribeStacks of a missing stack with ``ValidationError`` "Stack with id NAME does not
    exist" (the message the pinned aws-cdk CLI's ``CloudFormationStack.lookup`` tests for); a first deploy has
    nothing to replace and no admin to keep."""
    client, stub = _cloudformation()
    stub.add_client_error("describe_stacks", service_error_code="ValidationError",
                          service_message="Stack with id demo-cluster does not exist", http_status_code=400)
    with stub:
        assert change_set.deployed(client, "demo-cluster") is None
