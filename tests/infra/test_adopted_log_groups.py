"""Fixed-name log groups that a service re-creates are adopted, not created: redeploy and rollback work.

The fact (shared/reference/lifecycle-facts.md, "Redeploy and rollback"): after a cluster is deleted, EKS's
service-linked role re-creates ``/aws/eks/<cluster>/cluster`` from late log deliveries (terraform-aws-modules/
terraform-aws-eks #2446 and #2763, CloudTrail shows AWSServiceRoleForAmazonEKS; aws-ia/terraform-aws-eks-blueprints
#376). An ``AWS::Logs::LogGroup`` with that name then fails the next create ("already exists"), and every retry
after a first-deploy rollback. The handler is driven against moto's CloudWatch Logs (create, delete, describe
log groups, retention) and moto's CloudFormation: for the upgrade guard a stack holding the old resource, and for
every Delete the stack holding the resource, in the status CloudFormation reports while it sends that Delete (set
on moto's backend: ``tests/cleanup/stack_fakes.py``). A Delete deletes only while the stack is being deleted (or a
failed first create rolls back), never during an update (``hyperpod_runtime.stack_status``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from tests.cleanup.stack_fakes import DELETE_STATUSES, UPDATE_STATUSES, stack_in_status
from tests.infra import stand_ins

from hyperpod_constructs.adopted_log_groups_handler import index
from hyperpod_runtime.stack_status import StackStatusRefused

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


def _event(request: str, *, physical_id: str | None = None, retention: int = 30,
           stack_id: str = "arn:aws:cloudformation:us-west-2:123456789012:stack/hyperpod-dpd-cluster/0",
           **extra: str) -> dict[str, Any]:
    event: dict[str, Any] = {"RequestType": request, "StackId": stack_id,
                             "LogicalResourceId": "EksLogGroupsControlPlaneLogGroup0ED04B0A", "ResourceProperties": {
                                 "LogGroupName": NAME, "RetentionInDays": str(retention), "DeleteOnDelete": "true",
                                 **extra}}
    if physical_id is not None:
        event["PhysicalResourceId"] = physical_id
    return event


def _in(aws: dict[str, Any], status: str, name: str = "hyperpod-dpd-cluster") -> str:
    """The ``StackId`` of a stack in ``status`` (moto)."""
    return stack_in_status(aws["cloudformation"], name, status)


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
    destroy = _event("Delete", physical_id=NAME, stack_id=_in(aws, "DELETE_IN_PROGRESS"))
    index.on_event(destroy, logs=logs, cloudformation=aws["cloudformation"])
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
    rollback = _in(aws, "ROLLBACK_IN_PROGRESS")  # the first create failed later on: the whole stack goes
    index.on_event(_event("Delete", physical_id=NAME, stack_id=rollback), logs=logs,
                   cloudformation=aws["cloudformation"])
    assert _groups(logs) == {}
    _eks_writes_late_logs(logs)
    index.on_event(_event("Create"), logs=logs)
    assert _groups(logs) == {NAME: 30}

    index.on_event(_event("Delete", physical_id="c0ffee-request-id", stack_id=rollback), logs=logs,
                   cloudformation=aws["cloudformation"])  # not ours: nothing deleted
    assert _groups(logs) == {NAME: 30}


def test_delete_of_a_missing_group_succeeds_and_update_changes_the_retention(aws) -> None:
    logs = aws["logs"]
    index.on_event(_event("Delete", physical_id=NAME, stack_id=_in(aws, "DELETE_IN_PROGRESS")), logs=logs,
                   cloudformation=aws["cloudformation"])
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
    index.on_event({**event, "RequestType": "Delete", "PhysicalResourceId": physical,
                    "StackId": _in(aws, "DELETE_IN_PROGRESS", "hyperpod-dpd-hyperpod")},
                   logs=logs, cloudformation=aws["cloudformation"])
    assert _groups(logs) == {theirs: None}


# --- a Delete during an update deletes nothing -------------------------------------------------------------------
# CloudFormation also sends Delete during an update: to a resource that leaves the template or whose logical ID
# changes (the old one, in UPDATE_COMPLETE_CLEANUP_IN_PROGRESS: "Monitor the progress of a stack update"), and to
# one a failed update created (User Guide, "Delete" custom resource request type; "Stack status codes").

PREFIX = "/aws/sagemaker/Clusters/hyperpod-dpd/"
HYPERPOD_GROUP = PREFIX + "abc123"


def _live_groups(aws: dict[str, Any], stack_id: str) -> list[dict[str, Any]]:
    """The control-plane group (adopted, delete-on-delete) and HyperPod's group (under ClusterLogsCleanup's
    prefix), live; the two Deletes CloudFormation would send them."""
    index.on_event(_event("Create"), logs=aws["logs"])
    aws["logs"].create_log_group(logGroupName=HYPERPOD_GROUP)
    cleanup = {"RequestType": "Delete", "StackId": stack_id, "LogicalResourceId": "LogGroupsClusterLogsCleanup98B580DC",
               "PhysicalResourceId": index.PREFIX_ID + PREFIX, "ResourceProperties": {"DeletePrefix": PREFIX}}
    return [_event("Delete", physical_id=NAME, stack_id=stack_id), cleanup]


@pytest.mark.parametrize("status", UPDATE_STATUSES)
def test_a_delete_during_an_update_keeps_the_live_groups(aws, status: str, caplog: pytest.LogCaptureFixture) -> None:
    """Fails on main: the Deletes of a rollback (or of a changed logical ID) deleted the live EKS audit log group
    and HyperPod's group. Now they log the skip and succeed, keeping their physical IDs."""
    for event in _live_groups(aws, _in(aws, status)):
        with caplog.at_level("INFO"):
            result = index.on_event(event, logs=aws["logs"], cloudformation=aws["cloudformation"])
        assert result == {"PhysicalResourceId": event["PhysicalResourceId"]}
    assert _groups(aws["logs"]) == {NAME: 30, HYPERPOD_GROUP: None}
    assert f"is {status}, not being deleted" in caplog.text
    assert f"log group {NAME} is left as it is" in caplog.text
    assert f"every log group under {PREFIX} is left as it is" in caplog.text


@pytest.mark.parametrize("status", DELETE_STATUSES)
def test_the_stacks_deletion_deletes_the_groups(aws, status: str) -> None:
    for event in _live_groups(aws, _in(aws, status)):
        index.on_event(event, logs=aws["logs"], cloudformation=aws["cloudformation"])
    assert _groups(aws["logs"]) == {}


def test_a_refused_status_read_keeps_the_groups_and_fails_the_delete(aws) -> None:
    """Fail safe and loud (AccessDenied from botocore's Stubber on the real CloudFormation model: moto does not
    enforce IAM): nothing deleted, and the message says what helps."""
    cloudformation = boto3.client("cloudformation", region_name=REGION)
    stubber = Stubber(cloudformation)
    events = _live_groups(aws, "arn:aws:cloudformation:us-west-2:123456789012:stack/hyperpod-dpd-cluster/0")
    for _ in events:
        stubber.add_client_error("describe_stacks", service_error_code="AccessDenied", http_status_code=403)
    with stubber:
        for event in events:
            with pytest.raises(StackStatusRefused, match=r"AccessDenied.*Nothing was deleted.*--retain-resources "
                                                         + event["LogicalResourceId"]):
                index.on_event(event, logs=aws["logs"], cloudformation=cloudformation)
    assert _groups(aws["logs"]) == {NAME: 30, HYPERPOD_GROUP: None}


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

def test_the_control_plane_group_is_adopted_before_the_cluster_and_deleted_after_it(cluster_alone) -> None:
    """The cluster stack alone (``cluster_alone``)."""
    t = cluster_alone["Cluster"].template.to_json()["Resources"]
    name = f"/aws/eks/{stand_ins.CLUSTER_NAME}/cluster"
    (adopter,) = [k for k, r in t.items() if r["Type"] == "Custom::AdoptedLogGroup"]
    assert t[adopter]["Properties"]["LogGroupName"] == name and t[adopter]["Properties"]["DeleteOnDelete"] == "true"
    (cluster,) = [r for r in t.values() if r["Type"] == "AWS::EKS::Cluster"]
    assert adopter in cluster["DependsOn"]  # created before, deleted after (reverse order on delete)
    plain = [k for k, r in t.items() if r["Type"] == "AWS::Logs::LogGroup"
             and r["Properties"].get("LogGroupName") == name and "Condition" not in r]
    assert plain == []


def test_the_old_resource_stays_retained_under_the_upgrade_parameter(templates) -> None:
    """The default app: the deployed template's resource (logical ID and properties, word for word: a pin of
    deployed state, as tests/infra/test_replacement_guard.py's), DeletionPolicy and UpdateReplacePolicy Retain,
    only while ``LegacyControlPlaneLogGroup=retain`` (default ``none``: a fresh create has no such resource),
    and after the guard that refuses both mistakes."""
    template = templates["Cluster"].to_json()
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


def test_the_handler_may_read_the_status_of_its_own_stack_only(cluster_alone, hyperpod_alone) -> None:
    """Fails on main (no such read). Every stack with a group deleted on Delete lets its handler read its own status
    (DescribeStacks; resource type ``stack``, whose ARN ``AWS::StackId`` is), and nothing else's. The cluster and
    HyperPod stacks alone."""
    for name, template in (("Cluster", cluster_alone["Cluster"].template), ("HyperPod", hyperpod_alone.template)):
        resources = template.to_json()["Resources"]
        roles = {k for k, r in resources.items() if r["Type"] == "AWS::IAM::Role" and "LogGroupsRole" in k}
        assert roles, name
        statements = [s for r in resources.values() if r["Type"] == "AWS::IAM::Policy"
                      and {x.get("Ref") for x in r["Properties"]["Roles"]} & roles
                      for s in r["Properties"]["PolicyDocument"]["Statement"]]
        reads = [s for s in statements if "cloudformation:DescribeStacks" in str(s["Action"])]
        assert reads == [{"Action": "cloudformation:DescribeStacks", "Effect": "Allow",
                          "Resource": {"Ref": "AWS::StackId"}}], name
