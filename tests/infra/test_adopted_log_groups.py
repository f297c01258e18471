"""Fixed-name log groups that a service re-creates are adopted, not created: redeploy and rollback work.

The fact (shared/reference/lifecycle-facts.md, "Redeploy and rollback"): after a cluster is deleted, EKS's
service-linked role re-creates ``/aws/eks/<cluster>/cluster`` from late log deliveries (terraform-aws-modules/
terraform-aws-eks #2446 and #2763, CloudTrail shows AWSServiceRoleForAmazonEKS; aws-ia/terraform-aws-eks-blueprints
#376). An ``AWS::Logs::LogGroup`` with that name then fails the next create ("already exists"), and every retry
after a first-deploy rollback. The handler is driven against moto's CloudWatch Logs (create, delete, describe
log groups, retention) and, for the upgrade guard, moto's CloudFormation (a stack holding the old resource).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from hyperpod_constructs.adopted_log_groups_handler import index

REGION = "us-west-2"
NAME = "/aws/eks/hyperpod-dpd-eks/cluster"
#: The control-plane log group as the cluster template held it before this release (``Cluster`` template of
#: config/default.yaml synthesized at commit 6aa8d7d): its logical ID and its resource, word for word.
LEGACY_LOGICAL_ID = "EksControlPlaneLogsDB7AEF19"
LEGACY_RESOURCE = {"Type": "AWS::Logs::LogGroup",
                   "Properties": {"LogGroupName": NAME, "RetentionInDays": 30},
                   "UpdateReplacePolicy": "Delete", "DeletionPolicy": "Delete"}


@pytest.fixture
def aws() -> Iterator[dict[str, Any]]:
    """moto with this test's state only (its backends are reset on entry and exit: another suite may keep a
    session-wide mock running)."""
    from moto import mock_aws
    from moto.core.base_backend import BackendDict

    with mock_aws():
        BackendDict.reset()
        kwargs = {"region_name": REGION, "aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
        try:
            yield {"logs": boto3.client("logs", **kwargs), "cloudformation": boto3.client("cloudformation", **kwargs)}
        finally:
            BackendDict.reset()


def _event(request: str, *, physical_id: str | None = None, retention: int = 30, **extra: str) -> dict[str, Any]:
    event: dict[str, Any] = {"RequestType": request, "StackId": "arn:aws:cloudformation:us-west-2:123456789012:"
                             "stack/hyperpod-dpd-cluster/0", "ResourceProperties": {
                                 "LogGroupName": NAME, "RetentionInDays": str(retention), "DeleteOnDelete": "true",
                                 **extra}}
    if physical_id is not None:
        event["PhysicalResourceId"] = physical_id
    return event


def _groups(logs: Any, prefix: str = "/aws/") -> dict[str, int | None]:
    return {g["logGroupName"]: g.get("retentionInDays")
            for g in logs.describe_log_groups(logGroupNamePrefix=prefix)["logGroups"]}


def _eks_writes_late_logs(logs: Any) -> None:
    """What EKS's service-linked role does after the cluster is gone: the group again, with no expiry."""
    logs.create_log_group(logGroupName=NAME)


def test_a_plain_log_group_fails_the_next_create_once_eks_has_re_created_it(aws) -> None:
    """What ``AWS::Logs::LogGroup`` does on create (CreateLogGroup) is refused once the group is back."""
    _eks_writes_late_logs(aws["logs"])
    with pytest.raises(ClientError, match="ResourceAlreadyExistsException"):
        aws["logs"].create_log_group(logGroupName=NAME)


def test_create_destroy_create_adopts_the_group_eks_re_created(aws) -> None:
    logs = aws["logs"]
    assert index.on_event(_event("Create"), logs=logs) == {"PhysicalResourceId": NAME}
    assert _groups(logs) == {NAME: 30}

    # cdk destroy: the cluster goes first, then the group; EKS re-creates it from late deliveries
    index.on_event(_event("Delete", physical_id=NAME), logs=logs)
    assert _groups(logs) == {}
    _eks_writes_late_logs(logs)
    assert _groups(logs) == {NAME: None}

    # the next cdk deploy of the same name: adopted, and it expires again
    assert index.on_event(_event("Create"), logs=logs) == {"PhysicalResourceId": NAME}
    assert _groups(logs) == {NAME: 30}


def test_rollback_then_retry_works(aws) -> None:
    """A first deploy that rolls back after the group was adopted deletes it; EKS (or its late deliveries) can
    bring it back before the retry, which adopts it. A Delete that follows a failed Create names no group."""
    logs = aws["logs"]
    index.on_event(_event("Create"), logs=logs)
    index.on_event(_event("Delete", physical_id=NAME), logs=logs)  # rollback of a later resource's failure
    _eks_writes_late_logs(logs)
    index.on_event(_event("Create"), logs=logs)
    assert _groups(logs) == {NAME: 30}

    index.on_event(_event("Delete", physical_id="c0ffee-request-id"), logs=logs)  # not ours: nothing deleted
    assert _groups(logs) == {NAME: 30}


def test_delete_of_a_missing_group_succeeds_and_update_changes_the_retention(aws) -> None:
    logs = aws["logs"]
    index.on_event(_event("Delete", physical_id=NAME), logs=logs)
    index.on_event(_event("Create"), logs=logs)
    index.on_event(_event("Update", physical_id=NAME, retention=90), logs=logs)
    assert _groups(logs) == {NAME: 90}


def test_a_kept_group_is_not_deleted(aws) -> None:
    logs = aws["logs"]
    event = _event("Create")
    event["ResourceProperties"]["DeleteOnDelete"] = "false"
    index.on_event(event, logs=logs)
    index.on_event({**event, "RequestType": "Delete", "PhysicalResourceId": NAME}, logs=logs)
    assert _groups(logs) == {NAME: 30}


def test_prefix_cleanup_deletes_only_this_clusters_groups(aws) -> None:
    """HyperPod's own groups, ``/aws/sagemaker/Clusters/<name>/<id>`` (one per cluster ID), including one a
    destroyed cluster of the same name left; another deployment's ``<name>-b`` groups stay."""
    logs = aws["logs"]
    ours = ["/aws/sagemaker/Clusters/hyperpod-dpd/abc123", "/aws/sagemaker/Clusters/hyperpod-dpd/old999"]
    theirs = "/aws/sagemaker/Clusters/hyperpod-dpd-b/def456"
    for name in [*ours, theirs]:
        logs.create_log_group(logGroupName=name)
    event = {"RequestType": "Create", "ResourceProperties": {"DeletePrefix": "/aws/sagemaker/Clusters/hyperpod-dpd/"}}
    physical = index.on_event(event, logs=logs)["PhysicalResourceId"]
    assert len(_groups(logs)) == 3  # Create does nothing
    index.on_event({**event, "RequestType": "Delete", "PhysicalResourceId": physical}, logs=logs)
    assert _groups(logs) == {theirs: None}


# --- upgrade from the template that held the group as a plain AWS::Logs::LogGroup -----------------------------

def _stack(cloudformation: Any, resources: dict[str, Any]) -> str:
    return cloudformation.create_stack(StackName="hyperpod-dpd-cluster", TemplateBody=json.dumps(
        {"Resources": resources}))["StackId"]


def _upgrade(retained: str, stack_id: str) -> dict[str, Any]:
    event = _event("Create", LegacyLogicalId=LEGACY_LOGICAL_ID, LegacyRetained=retained)
    return {**event, "StackId": stack_id}


def test_upgrade_without_retain_is_refused_before_anything_changes(aws) -> None:
    """CloudFormation deletes a resource an update removes under the *deployed* template's DeletionPolicy
    (User Guide, DeletionPolicy attribute); the deployed one says Delete, so that update must not run."""
    stack_id = _stack(aws["cloudformation"], {LEGACY_LOGICAL_ID: LEGACY_RESOURCE})
    assert _groups(aws["logs"]) == {NAME: 30}  # the live group, created by the old template
    with pytest.raises(RuntimeError, match=r"still holds /aws/eks/hyperpod-dpd-eks/cluster as the log group resource "
                                           r"EksControlPlaneLogsDB7AEF19 .*:LegacyControlPlaneLogGroup=retain"):
        index.on_event(_upgrade("false", stack_id), logs=aws["logs"], cloudformation=aws["cloudformation"])
    assert _groups(aws["logs"]) == {NAME: 30}


def test_upgrade_with_retain_adopts_the_live_group(aws) -> None:
    stack_id = _stack(aws["cloudformation"], {LEGACY_LOGICAL_ID: LEGACY_RESOURCE})
    assert index.on_event(_upgrade("true", stack_id), logs=aws["logs"],
                          cloudformation=aws["cloudformation"]) == {"PhysicalResourceId": NAME}
    assert _groups(aws["logs"]) == {NAME: 30}


def test_switching_back_from_retain_to_none_after_the_upgrade_is_allowed(aws) -> None:
    """After the upgrade the deployed template retains the old resource; an update to ``none`` removes it, and
    CloudFormation removes a dropped resource only in UPDATE_COMPLETE_CLEANUP_IN_PROGRESS, after every update
    (User Guide, "Monitoring the progress of a stack update"), under that Retain: the stack still holds it while
    this Update runs, and the live group stays. Refusing it would loop the user (review finding)."""
    stack_id = _stack(aws["cloudformation"], {LEGACY_LOGICAL_ID: {**LEGACY_RESOURCE, "DeletionPolicy": "Retain"}})
    event = {**_event("Update", physical_id=NAME, LegacyLogicalId=LEGACY_LOGICAL_ID, LegacyRetained="false"),
             "StackId": stack_id, "OldResourceProperties": {"LogGroupName": NAME, "RetentionInDays": "30",
                                                            "LegacyLogicalId": LEGACY_LOGICAL_ID,
                                                            "LegacyRetained": "true"}}
    assert index.on_event(event, logs=aws["logs"], cloudformation=aws["cloudformation"]) == {
        "PhysicalResourceId": NAME}
    assert _groups(aws["logs"]) == {NAME: 30}
    # the same update from a stack whose deployed template never retained it is still refused
    refused = {**event, "OldResourceProperties": {**event["OldResourceProperties"], "LegacyRetained": "false"}}
    with pytest.raises(RuntimeError, match="this update would delete the live group"):
        index.on_event(refused, logs=aws["logs"], cloudformation=aws["cloudformation"])


def test_retain_on_a_stack_that_never_held_the_old_resource_is_refused(aws) -> None:
    """Its create would collide with the adopted group; the message says to deploy with ``none``."""
    stack_id = _stack(aws["cloudformation"], {"Other": {"Type": "AWS::Logs::LogGroup",
                                                        "Properties": {"LogGroupName": "/other"}}})
    with pytest.raises(RuntimeError, match="LegacyControlPlaneLogGroup=retain is only for a stack that holds"):
        index.on_event(_upgrade("true", stack_id), logs=aws["logs"], cloudformation=aws["cloudformation"])
    fresh = index.on_event(_upgrade("false", stack_id), logs=aws["logs"], cloudformation=aws["cloudformation"])
    assert fresh == {"PhysicalResourceId": NAME}


# --- the templates ---------------------------------------------------------------------------------------------

def _cluster(templates) -> dict[str, Any]:
    return templates["Cluster"].to_json()


def test_the_control_plane_group_is_adopted_before_the_cluster_and_deleted_after_it(templates) -> None:
    t = _cluster(templates)["Resources"]
    (adopter,) = [k for k, r in t.items() if r["Type"] == "Custom::AdoptedLogGroup"]
    assert t[adopter]["Properties"]["LogGroupName"] == NAME and t[adopter]["Properties"]["DeleteOnDelete"] == "true"
    (cluster,) = [r for r in t.values() if r["Type"] == "AWS::EKS::Cluster"]
    assert adopter in cluster["DependsOn"]  # created before, deleted after (reverse order on delete)
    plain = [k for k, r in t.items() if r["Type"] == "AWS::Logs::LogGroup"
             and r["Properties"].get("LogGroupName") == NAME and "Condition" not in r]
    assert plain == []


def test_the_old_resource_stays_retained_under_the_upgrade_parameter(templates) -> None:
    """Same logical ID and properties as the deployed template, DeletionPolicy and UpdateReplacePolicy Retain,
    only while ``LegacyControlPlaneLogGroup=retain`` (default ``none``: a fresh create has no such resource),
    and after the guard that refuses both mistakes."""
    template = _cluster(templates)
    legacy = template["Resources"][LEGACY_LOGICAL_ID]
    assert (legacy["Type"], legacy["Properties"]) == (LEGACY_RESOURCE["Type"], LEGACY_RESOURCE["Properties"])
    assert (legacy["DeletionPolicy"], legacy["UpdateReplacePolicy"]) == ("Retain", "Retain")
    parameter = template["Parameters"]["LegacyControlPlaneLogGroup"]
    assert (parameter["Default"], parameter["AllowedValues"]) == ("none", ["none", "retain"])
    assert template["Conditions"][legacy["Condition"]] == {
        "Fn::Equals": [{"Ref": "LegacyControlPlaneLogGroup"}, "retain"]}
    (adopter,) = legacy["DependsOn"]
    assert template["Resources"][adopter]["Properties"]["LegacyLogicalId"] == LEGACY_LOGICAL_ID
    assert template["Resources"][adopter]["Properties"]["LegacyRetained"] == {
        "Fn::If": [legacy["Condition"], "true", "false"]}
