"""The HyperPod Inference Operator EKS add-on and the four add-ons it needs first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

OPERATOR_ADDON_NAME = "amazon-sagemaker-hyperpod-inference"
S3_CSI_ADDON_NAME = "aws-mountpoint-s3-csi-driver"
FSX_CSI_ADDON_NAME = "aws-fsx-csi-driver"
METRICS_SERVER_ADDON_NAME = "metrics-server"
CERT_MANAGER_ADDON_NAME = "cert-manager"


@dataclass(frozen=True, kw_only=True)
class InferenceOperatorVersions:
    """Exact add-on versions (``vX.Y.Z-eksbuild.N``); the caller takes them from the one pin module."""

    operator: str
    """Must be an add-on release with operator >= v3.3: add-on >= v1.4.0 (v3.2 brought DPD; v3.3 the
    ``modelCacheConfig`` and ``loadBalancer.idleTimeoutSeconds`` the endpoint manifests set, which an older
    operator's CRD would silently prune)."""
    s3_csi: str
    fsx_csi: str
    metrics_server: str
    cert_manager: str


@dataclass(frozen=True, kw_only=True)
class InferenceOperatorProps:
    """Props of :class:`InferenceOperator`."""

    cluster: eks.ICluster
    versions: InferenceOperatorVersions
    hyperpod_cluster_arn: str
    """Required by the add-on from v1.2.0 on (release notes)."""
    execution_role: iam.IRole
    """Named ``SageMakerHyperPodInference*`` (see :class:`InferenceIam`)."""
    tls_certificates_bucket: s3.IBucket
    keda_role: iam.IRole
    alb_controller_role: iam.IRole
    s3_csi_role: iam.IRole
    """Service-account role of the Mountpoint for Amazon S3 CSI driver (``kube-system:s3-csi-driver-sa``)."""


class InferenceOperator(Construct):
    """Installs, in order, the S3 Mountpoint CSI driver, the FSx CSI driver, metrics-server and cert-manager,
    then ``amazon-sagemaker-hyperpod-inference``.

    The operator's init container refuses to start unless CSIDrivers ``s3.csi.aws.com`` *and*
    ``fsx.csi.aws.com`` and the cert-manager CRDs exist, so FSx CSI is installed even for S3-only models.
    FSx CSI gets no IAM role: only dynamic provisioning of file systems needs one, and nothing here
    provisions FSx. CloudFormation deletes in reverse, so on destroy the operator goes before its dependencies.
    """

    addon: eks.CfnAddon
    dependencies: tuple[eks.CfnAddon, ...]
    s3_csi_addon: eks.CfnAddon
    fsx_csi_addon: eks.CfnAddon
    metrics_server_addon: eks.CfnAddon
    cert_manager_addon: eks.CfnAddon

    def __init__(self, scope: Construct, construct_id: str, *, props: InferenceOperatorProps) -> None:
        super().__init__(scope, construct_id)
        v = props.versions
        _check_operator_version(v.operator)
        name = props.cluster.cluster_name
        self.s3_csi_addon = self._addon("S3CsiDriver", S3_CSI_ADDON_NAME, v.s3_csi, name,
                                        service_account_role_arn=props.s3_csi_role.role_arn)
        self.fsx_csi_addon = self._addon("FsxCsiDriver", FSX_CSI_ADDON_NAME, v.fsx_csi, name)
        self.metrics_server_addon = self._addon("MetricsServer", METRICS_SERVER_ADDON_NAME, v.metrics_server, name)
        self.cert_manager_addon = self._addon("CertManager", CERT_MANAGER_ADDON_NAME, v.cert_manager, name)
        self.dependencies = (self.s3_csi_addon, self.fsx_csi_addon, self.metrics_server_addon,
                             self.cert_manager_addon)

        self.configuration_values = {
            "executionRoleArn": props.execution_role.role_arn,
            "tlsCertificateS3Bucket": props.tls_certificates_bucket.bucket_name,
            "hyperpodClusterArn": props.hyperpod_cluster_arn,
            "alb": {"enabled": True, "serviceAccount": {"create": True,
                                                         "roleArn": props.alb_controller_role.role_arn}},
            "keda": {"enabled": True, "auth": {"aws": {"irsa": {"enabled": True,
                                                                 "roleArn": props.keda_role.role_arn}}}},
        }
        self.addon = self._addon(
            "Operator", OPERATOR_ADDON_NAME, v.operator, name,
            configuration_values=Stack.of(self).to_json_string(self.configuration_values))
        for dependency in self.dependencies:
            self.addon.node.add_dependency(dependency)

    def _addon(self, construct_id: str, addon_name: str, version: str, cluster_name: str,
               **extra: Any) -> eks.CfnAddon:
        return eks.CfnAddon(
            self, construct_id, addon_name=addon_name, addon_version=version, cluster_name=cluster_name,
            resolve_conflicts="OVERWRITE",  # IaC owns the config; take over objects a Helm install left
            **extra)


def _check_operator_version(version: str) -> None:
    try:
        major, minor = (int(x) for x in version.removeprefix("v").split("-", 1)[0].split(".")[:2])
    except ValueError:
        raise ValueError(f"versions.operator must look like v1.4.0-eksbuild.1, got {version!r}") from None
    if (major, minor) < (1, 4):
        raise ValueError(f"versions.operator must be >= v1.4.0 (operator v3.3: DPD plus the model cache and "
                         f"idle-timeout fields the manifests set), got {version!r}")
