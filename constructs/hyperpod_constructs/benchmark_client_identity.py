"""The identity of the benchmark Jobs (``hyperpod-dpd bench``): an EKS Pod Identity association for their
ServiceAccount, with read of the model prefix (the Jobs fetch the tokenizer from the weights) and, when a
results location is configured, write below it."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Aws
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from hyperpod_constructs.nag import acknowledge


@dataclass(frozen=True, kw_only=True)
class BenchmarkClientIdentityProps:
    """Props of :class:`BenchmarkClientIdentity`."""

    cluster: eks.ICluster
    namespace: str
    """Namespace of the benchmark Jobs (the endpoint's)."""
    service_account: str
    """ServiceAccount the Jobs run as (written by the cdk8s benchmark chart)."""
    model_read_statements: tuple[iam.PolicyStatement, ...]
    """Read of the endpoint's own model prefix (``ModelBucket.read_statements``): the tokenizer files sit there."""
    results_bucket: str | None = None
    """Bucket of ``benchmark.results_s3_uri``. Default: none (results go to the pod log; no write access)."""
    results_prefix: str = ""
    """Key prefix (no leading or trailing ``/``) below which the Jobs write result files, as ``<prefix>/...``.
    Default: the whole results bucket."""


class BenchmarkClientIdentity(Construct):
    """Role trusted by ``pods.eks.amazonaws.com`` for this cluster only (``aws:SourceArn``/``aws:SourceAccount``,
    as the observability add-on's collector), its policy, and the association to the Jobs' ServiceAccount.

    Writing results is ``s3:PutObject`` below the results prefix only; the bucket's own encryption applies
    (an SSE-KMS results bucket also needs ``kms:GenerateDataKey`` on its key, which this role does not get).
    """

    role: iam.Role
    policy: iam.Policy
    association: eks.CfnPodIdentityAssociation

    def __init__(self, scope: Construct, construct_id: str, *, props: BenchmarkClientIdentityProps) -> None:
        super().__init__(scope, construct_id)
        self.role = iam.Role(
            self, "Role", description="hyperpod-dpd benchmark Jobs (EKS Pod Identity)",
            assumed_by=iam.SessionTagsPrincipal(iam.ServicePrincipal("pods.eks.amazonaws.com").with_conditions({
                "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID,
                                 "aws:SourceArn": props.cluster.cluster_arn}})))
        statements = list(props.model_read_statements)
        self.results_resource: str | None = None
        below = f"{props.results_bucket}/{props.results_prefix}/*" if props.results_prefix else \
            f"{props.results_bucket}/*"
        if props.results_bucket is not None:
            self.results_resource = f"arn:{Aws.PARTITION}:s3:::{below}"
            statements.append(iam.PolicyStatement(sid="WriteBenchmarkResults", actions=["s3:PutObject"],
                                                  resources=[self.results_resource]))
        self.policy = iam.Policy(self, "Policy", roles=[self.role], statements=statements)
        self.association = eks.CfnPodIdentityAssociation(
            self, "Association", cluster_name=props.cluster.cluster_name, namespace=props.namespace,
            service_account=props.service_account, role_arn=self.role.role_arn)
        self.association.node.add_dependency(self.policy)  # usable with its permissions from the start
        if props.results_bucket is not None:
            acknowledge(self.policy, f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::{below}]",
                        "Result file names are created per run below the results prefix; the statement is "
                        "limited to s3:PutObject below that prefix of this one bucket.")
