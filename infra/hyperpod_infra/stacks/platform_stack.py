"""The inference platform: model bucket, TLS certificates bucket, the operator's IAM, the HyperPod Inference
Operator add-on with its dependency add-ons, and the outputs the cdk8s app needs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from hyperpod_constructs import endpoint_janitor
from hyperpod_constructs.benchmark_client_identity import BenchmarkClientIdentity, BenchmarkClientIdentityProps
from hyperpod_constructs.endpoint_janitor import EndpointJanitor, EndpointJanitorProps
from hyperpod_constructs.inference_iam import InferenceIam, InferenceIamProps
from hyperpod_constructs.inference_operator import (
    InferenceOperator,
    InferenceOperatorProps,
    InferenceOperatorVersions,
)
from hyperpod_constructs.infra_bucket import InfraBucket, InfraBucketProps
from hyperpod_constructs.managed_prometheus import ManagedPrometheus
from hyperpod_constructs.model_bucket import ModelBucket, ModelBucketProps, ModelReadLocation
from hyperpod_core import names, outputs, pins
from hyperpod_infra import bundle

#: S3 server access logs of the model and TLS buckets are kept this long.
ACCESS_LOG_RETENTION_DAYS = 365


#: The construct ID of a one-endpoint deployment's benchmark identity (the one it has always had); in a fleet every
#: endpoint's is ``BenchmarkClient-<endpoint>`` (:func:`benchmark_client_id`). An association's namespace and service
#: account are create-only (AWS::EKS::PodIdentityAssociation), so a new logical ID replaces it, and EKS refuses to
#: create the new one while the old one still holds the service account (docs/platform.md, "Several endpoints").
BENCHMARK_CLIENT_ID = "BenchmarkClient"


def benchmark_client_id(endpoint_name: str, endpoints: int) -> str:
    """The construct ID of endpoint ``endpoint_name``'s benchmark identity in a deployment of ``endpoints``
    endpoints: :data:`BENCHMARK_CLIENT_ID` alone, else ``BenchmarkClient-<endpoint>``, from the name only. Within a
    fleet of two or more, reordering, adding or removing other endpoints never gives a deployed association a new
    logical ID; going from one endpoint to several, or from several back to one, does, for the endpoint that stays
    (``BenchmarkClient`` <-> ``BenchmarkClient-<endpoint>``), and that deploy needs the old association deleted by
    hand first (docs/platform.md, "Several endpoints")."""
    return BENCHMARK_CLIENT_ID if endpoints == 1 else f"{BENCHMARK_CLIENT_ID}-{endpoint_name}"


@dataclass(frozen=True, kw_only=True)
class BenchmarkClientSpec:
    """Where one endpoint's benchmark Jobs run and write (``benchmark`` config section; cdk8s benchmark chart)."""

    endpoint_name: str
    """The endpoint's name: its identity's construct ID in a fleet (:func:`benchmark_client_id`)."""
    namespace: str
    service_account: str
    model_reads: tuple[ModelReadLocation, ...]
    """The endpoint's own model: the Jobs read the tokenizer from its weights."""
    results_bucket: str | None = None
    results_prefix: str = ""


@dataclass(frozen=True, kw_only=True)
class PlatformStackProps:
    cluster: eks.ICluster
    oidc_provider: iam.IOidcProvider
    hyperpod_cluster_arn: str
    model_bucket: ModelBucketProps
    """Without ``server_access_logs_bucket``: the stack creates the access-log bucket."""
    model_reads: tuple[ModelReadLocation, ...]
    """Every endpoint's model (deduplicated): the S3 CSI driver and the HyperPod nodes may list and read
    below these prefixes only, never a whole bucket."""
    hyperpod_execution_role: iam.IRole | None = None
    """The HyperPod instance groups' role; gets read access to the model bucket. Default: none."""
    prometheus: ManagedPrometheus | None = None
    """Workspace KEDA may query. Default: none (observability off)."""
    benchmark_clients: tuple[BenchmarkClientSpec, ...] = ()
    """Give each endpoint's benchmark Jobs' ServiceAccount its Pod Identity association (construct IDs:
    :func:`benchmark_client_id`). Default: none."""
    janitor_vpc: ec2.IVpc | None = None
    """Run the endpoint janitor in this VPC (when the cluster API is not reachable from the internet).
    Default: outside any VPC."""
    deployment_name: str | None = None
    """The deployment's ``name``: the value of the ``deployment`` tag the endpoints' ``spec.tags`` carry, by
    which the janitor tells this deployment's SageMaker resources and certificates from another's.
    Default: none (the janitor then goes by what this cluster's objects name, and by cluster tags)."""


class PlatformStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, props: PlatformStackProps, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        # S3 log delivery through a bucket policy, not the legacy LogDeliveryWrite ACL (also set in cdk.json;
        # set here so every synth of this stack, tests included, behaves the same). Before any child exists.
        self.node.set_context("@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy", True)
        self._buckets(props.model_bucket)
        self._operator(props)
        # Clean destroy: the janitor deletes the inference endpoints and waits for the operator to remove
        # their SageMaker endpoints, ALBs and certificates. It depends on the operator (and its dependency
        # add-ons and roles), so CloudFormation deletes it, and waits, before any of them.
        self.janitor = EndpointJanitor(self, "EndpointJanitor", props=EndpointJanitorProps(
            cluster=props.cluster, depends_on=(self.operator, self.iam), vpc=props.janitor_vpc,
            deployment_tag=(names.DEPLOYMENT_TAG, props.deployment_name) if props.deployment_name else None,
            bundled_modules=bundle.imported_by(endpoint_janitor.HANDLER_DIR / "index.py")))
        self._model_readers(props)
        self._outputs()

    def _buckets(self, mb: ModelBucketProps) -> None:
        """The model bucket, the TLS certificates bucket, and the access-log bucket of both."""
        # The access-log bucket is the audit trail of the model bucket, so it is kept exactly when that is.
        keep_logs = mb.existing_bucket_name is None and not mb.delete_on_destroy
        # Versioned (the audit trail cannot be overwritten unnoticed) and expiring (it does not grow forever).
        self.access_logs = InfraBucket(self, "AccessLogs", props=InfraBucketProps(
            retain_on_destroy=keep_logs, versioned=True, expiration_days=ACCESS_LOG_RETENTION_DAYS))
        # No AwsSolutions-S1 acknowledgement: cdk-nag does not flag a bucket that is a log target.
        self.model = ModelBucket(self, "Model", props=ModelBucketProps(
            existing_bucket_name=mb.existing_bucket_name, existing_kms_key_arn=mb.existing_kms_key_arn,
            bucket_name=mb.bucket_name, delete_on_destroy=mb.delete_on_destroy,
            server_access_logs_bucket=self.access_logs.bucket,
            server_access_logs_prefix=mb.server_access_logs_prefix,
            abort_incomplete_multipart_upload_days=mb.abort_incomplete_multipart_upload_days))
        self.tls = InfraBucket(self, "TlsCertificates", props=InfraBucketProps(
            server_access_logs_bucket=self.access_logs.bucket, server_access_logs_prefix="tls-certificates/",
            versioned=True))  # an overwritten certificate can be recovered (checkov CKV_AWS_21)

    def _operator(self, props: PlatformStackProps) -> None:
        """The HyperPod Inference Operator add-on and the IAM of it and of the components it brings."""
        self.iam = InferenceIam(self, "InferenceIam", props=InferenceIamProps(
            oidc_provider=props.oidc_provider, tls_certificates_bucket=self.tls.bucket,
            # The driver mounts the weights' prefixes only (each endpoint's S3 model source).
            model_read_statements=tuple(self.model.read_statements(props.model_reads)),
            vpc_arn=self.format_arn(service="ec2", resource="vpc", resource_name=props.cluster.vpc.vpc_id),
            operator_namespace=names.OPERATOR_NAMESPACE,
            amp_workspace_arn=props.prometheus.workspace_arn if props.prometheus else None))
        self.operator = InferenceOperator(self, "InferenceOperator", props=InferenceOperatorProps(
            cluster=props.cluster,
            versions=InferenceOperatorVersions(
                operator=pins.INFERENCE_OPERATOR.version, s3_csi=pins.S3_CSI.version,
                fsx_csi=pins.FSX_CSI.version, metrics_server=pins.METRICS_SERVER.version,
                cert_manager=pins.CERT_MANAGER.version),
            hyperpod_cluster_arn=props.hyperpod_cluster_arn, execution_role=self.iam.execution_role,
            tls_certificates_bucket=self.tls.bucket, keda_role=self.iam.keda_role,
            alb_controller_role=self.iam.alb_controller_role, s3_csi_role=self.iam.s3_csi_role))

    def _model_readers(self, props: PlatformStackProps) -> None:
        """Who else reads the weights (below ``model_reads``): the S3 CSI driver, the HyperPod nodes and each
        endpoint's benchmark Jobs (its own model only); each policy's findings acknowledged by the bucket."""
        self.model.acknowledge_read(self.iam.s3_csi_policy, props.model_reads)
        if props.hyperpod_execution_role is not None:
            # The policy lives in this (the bucket's) stack, attached to the role in the HyperPod stack:
            # references run platform -> hyperpod only, so there is no cycle.
            self.hyperpod_model_read = iam.Policy(
                self, "HyperPodExecutionRoleModelRead", roles=[props.hyperpod_execution_role],
                statements=self.model.read_statements(props.model_reads))
            self.model.acknowledge_read(self.hyperpod_model_read, props.model_reads)
        self.benchmark_clients: dict[str, BenchmarkClientIdentity] = {}
        """Each endpoint's benchmark identity, by endpoint name."""
        for b in props.benchmark_clients:
            identity = BenchmarkClientIdentity(
                self, benchmark_client_id(b.endpoint_name, len(props.benchmark_clients)),
                props=BenchmarkClientIdentityProps(
                    cluster=props.cluster, namespace=b.namespace, service_account=b.service_account,
                    model_read_statements=tuple(self.model.read_statements(b.model_reads)),
                    results_bucket=b.results_bucket, results_prefix=b.results_prefix))
            self.model.acknowledge_read(identity.policy, b.model_reads)
            self.benchmark_clients[b.endpoint_name] = identity

    def _outputs(self) -> None:
        """What the cdk8s app and the operator need. Region and cluster names/ARNs are output by the cluster and
        HyperPod stacks that own them."""
        CfnOutput(self, outputs.MODEL_BUCKET_NAME, value=self.model.bucket.bucket_name,
                  description="Upload the weights here, under model.s3_prefix")
        if self.model.encryption_key is not None:
            CfnOutput(self, outputs.MODEL_BUCKET_KEY_ARN, value=self.model.encryption_key.key_arn,
                      description="The model bucket's KMS key: model_bucket.existing_kms_key_arn to read the bucket "
                                  "again after a destroy kept it")
        CfnOutput(self, outputs.TLS_BUCKET_NAME, value=self.tls.bucket.bucket_name)
        CfnOutput(self, outputs.INFERENCE_EXECUTION_ROLE_ARN, value=self.iam.execution_role.role_arn)
        CfnOutput(self, outputs.KEDA_ROLE_ARN, value=self.iam.keda_role.role_arn)
