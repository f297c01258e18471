"""InferenceOperator alone (a bare stack, the stand-in cluster, imported roles and bucket): the operator add-on comes
after the four add-ons its init container checks for, configured with the cluster, its role and its bucket."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template
from tests.infra import stand_ins

from hyperpod_constructs.inference_operator import (
    OPERATOR_ADDON_NAME,
    InferenceOperator,
    InferenceOperatorProps,
    InferenceOperatorVersions,
)
from hyperpod_core import pins

VERSIONS = InferenceOperatorVersions(
    operator=pins.INFERENCE_OPERATOR.version, s3_csi=pins.S3_CSI.version, fsx_csi=pins.FSX_CSI.version,
    metrics_server=pins.METRICS_SERVER.version, cert_manager=pins.CERT_MANAGER.version)
TLS_BUCKET = "tls-bucket"


def _role(stack: Any, name: str) -> iam.IRole:
    return iam.Role.from_role_arn(stack, name, f"arn:aws:iam::{stand_ins.ACCOUNT}:role/{name}")


def _props(stack: Any) -> InferenceOperatorProps:
    return InferenceOperatorProps(
        cluster=stand_ins.cluster(stack), versions=VERSIONS, hyperpod_cluster_arn=stand_ins.HYPERPOD_CLUSTER_ARN,
        execution_role=_role(stack, "SageMakerHyperPodInferenceExecution"),
        tls_certificates_bucket=s3.Bucket.from_bucket_name(stack, "Tls", TLS_BUCKET), keda_role=_role(stack, "Keda"),
        alb_controller_role=_role(stack, "Alb"), s3_csi_role=_role(stack, "S3Csi"))


@pytest.fixture(scope="module")
def addons() -> dict[str, dict[str, Any]]:
    """Each ``AWS::EKS::Addon`` by add-on name: its logical ID, properties and ``DependsOn``."""
    stack = stand_ins.stack()
    InferenceOperator(stack, "Operator", props=_props(stack))
    resources = Template.from_stack(stack).find_resources("AWS::EKS::Addon")
    return {r["Properties"]["AddonName"]: {"id": k, **r} for k, r in resources.items()}


def test_the_operator_comes_after_the_add_ons_its_init_container_checks(addons: dict[str, Any]) -> None:
    # The operator's init container refuses to start without CSIDrivers s3.csi.aws.com and fsx.csi.aws.com and
    # the cert-manager CRDs; metrics-server is a documented prerequisite (shared/reference/operator.md).
    dependencies = {"aws-mountpoint-s3-csi-driver", "aws-fsx-csi-driver", "metrics-server", "cert-manager"}
    # ../shared/reference/operator.md (S4, S5, S14): the add-on is amazon-sagemaker-hyperpod-inference
    assert OPERATOR_ADDON_NAME == "amazon-sagemaker-hyperpod-inference"
    assert set(addons) == {OPERATOR_ADDON_NAME, *dependencies}
    assert sorted(addons[OPERATOR_ADDON_NAME]["DependsOn"]) == sorted(addons[name]["id"] for name in dependencies)
    assert addons["aws-mountpoint-s3-csi-driver"]["Properties"]["ServiceAccountRoleArn"].endswith(":role/S3Csi")


def test_the_operator_is_configured_with_the_cluster_its_role_and_its_bucket(addons: dict[str, Any]) -> None:
    values = json.loads(addons[OPERATOR_ADDON_NAME]["Properties"]["ConfigurationValues"])
    assert (values["hyperpodClusterArn"], values["tlsCertificateS3Bucket"]) == (stand_ins.HYPERPOD_CLUSTER_ARN,
                                                                                TLS_BUCKET)
    assert values["executionRoleArn"].endswith(":role/SageMakerHyperPodInferenceExecution")

