"""HyperPodExecutionRole alone (a bare stack, imported VPC, subnet, groups and bucket): the role HyperPod assumes,
with AWS's managed instance policy, pod identity on the one EKS cluster, and ENI writes bounded to the GPU subnet,
the nodes' groups and the VPC."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template
from tests.infra import stand_ins

from hyperpod_constructs.hyperpod_execution_role import (
    ENI_WRITE_ACTIONS,
    MANAGED_POLICY,
    HyperPodExecutionRole,
    HyperPodExecutionRoleProps,
)

EKS_CLUSTER_ARN = f"arn:aws:eks:{stand_ins.REGION}:{stand_ins.ACCOUNT}:cluster/{stand_ins.CLUSTER_NAME}"
GROUPS = (stand_ins.EFA_GROUP, stand_ins.CLUSTER_SECURITY_GROUP)


@pytest.fixture(scope="module")
def built() -> dict[str, Any]:
    stack = stand_ins.stack()
    HyperPodExecutionRole(stack, "Execution", props=HyperPodExecutionRoleProps(
        eks_cluster_arn=EKS_CLUSTER_ARN, vpc=stand_ins.vpc(stack),
        gpu_subnet=ec2.Subnet.from_subnet_attributes(stack, "GpuSubnet", subnet_id=stand_ins.GPU_SUBNET,
                                                     availability_zone=stand_ins.GPU_AZ),
        security_group_ids=GROUPS, lifecycle_bucket=s3.Bucket.from_bucket_name(stack, "Lifecycle", "lc-bucket")))
    resources = Template.from_stack(stack).to_json()["Resources"]
    (role,) = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::IAM::Role"]
    (policy,) = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::IAM::Policy"]
    return {"stack": stack, "role": role, "statements": {s["Sid"]: s for s in policy["PolicyDocument"]["Statement"]}}


def test_sagemaker_assumes_it_with_the_managed_instance_policy(built: dict[str, Any]) -> None:
    # SageMaker HyperPod developer guide, "IAM role for SageMaker HyperPod": trusted by sagemaker.amazonaws.com, with
    # AmazonSageMakerClusterInstanceRolePolicy (shared/reference/provisioning.md: every AWS template does the same).
    (trust,) = built["role"]["AssumeRolePolicyDocument"]["Statement"]
    assert (trust["Action"], trust["Principal"]) == ("sts:AssumeRole", {"Service": "sagemaker.amazonaws.com"})
    (managed,) = built["role"]["ManagedPolicyArns"]
    assert managed["Fn::Join"][1][-1] == f":iam::aws:policy/{MANAGED_POLICY}"
    assert built["statements"]["PodIdentity"]["Resource"] == EKS_CLUSTER_ARN


def test_eni_writes_are_bounded_to_the_gpu_subnet_the_node_groups_and_the_vpc(built: dict[str, Any]) -> None:
    # AWS's HyperPod IAM template (aws/sagemaker-hyperpod-cluster-setup, sagemaker-iam-role-template.yaml): ENI
    # writes on the cluster's subnet and security groups, existing interfaces limited by ec2:Vpc.
    stack = built["stack"]
    scoped = built["statements"]["EniWritesInGpuSubnet"]
    assert sorted(scoped["Action"]) == sorted(ENI_WRITE_ACTIONS)
    vpc = stand_ins.arn(stack, "ec2", "vpc", stand_ins.VPC_ID)
    assert scoped["Resource"] == [stand_ins.arn(stack, "ec2", "subnet", stand_ins.GPU_SUBNET),
                                  *(stand_ins.arn(stack, "ec2", "security-group", g) for g in GROUPS), vpc]
    assert built["statements"]["ManageEnisInVpc"]["Condition"] == {"ArnEquals": {"ec2:Vpc": vpc}}
