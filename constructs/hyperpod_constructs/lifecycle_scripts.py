"""The S3 bucket HyperPod reads lifecycle scripts from, and our scripts in it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aws_cdk import RemovalPolicy
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3_deployment
from constructs import Construct

#: The scripts shipped with this package (``lifecycle/on_create.sh``).
SCRIPTS_DIR = Path(__file__).resolve().parent / "lifecycle"
ON_CREATE = "on_create.sh"
#: ``AmazonSageMakerClusterInstanceRolePolicy`` grants read on ``arn:aws:s3:::sagemaker-*`` only.
REQUIRED_BUCKET_PREFIX = "sagemaker-"


@dataclass(frozen=True, kw_only=True)
class LifecycleScriptsProps:
    """Props of :class:`LifecycleScripts`."""

    bucket_name: str
    """Must start with ``sagemaker-`` (the managed instance-role policy reads only such buckets)."""
    key_prefix: str = "lifecycle/"
    """Where the scripts go in the bucket. Default: ``lifecycle/``."""


class LifecycleScripts(Construct):
    """A private, TLS-only, encrypted bucket named ``sagemaker-...``, and ``on_create.sh`` deployed into it.

    The bucket holds only what this construct deploys, so it is emptied and deleted with the stack.
    """

    bucket: s3.Bucket
    deployment: s3_deployment.BucketDeployment

    def __init__(self, scope: Construct, construct_id: str, *, props: LifecycleScriptsProps) -> None:
        super().__init__(scope, construct_id)
        if not props.bucket_name.startswith(REQUIRED_BUCKET_PREFIX):
            raise ValueError(f"bucket_name must start with {REQUIRED_BUCKET_PREFIX!r} (read by "
                             f"AmazonSageMakerClusterInstanceRolePolicy), got {props.bucket_name!r}")
        if not props.key_prefix.endswith("/") or props.key_prefix.startswith("/"):
            raise ValueError(f"key_prefix must end with '/' and not start with '/', got {props.key_prefix!r}")
        self.key_prefix = props.key_prefix
        self.bucket = s3.Bucket(
            self, "Bucket", bucket_name=props.bucket_name,
            encryption=s3.BucketEncryption.S3_MANAGED, enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL, versioned=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            removal_policy=RemovalPolicy.DESTROY, auto_delete_objects=True)
        self.deployment = s3_deployment.BucketDeployment(
            self, "Scripts", destination_bucket=self.bucket, destination_key_prefix=props.key_prefix,
            sources=[s3_deployment.Source.asset(str(SCRIPTS_DIR))], prune=True, retain_on_delete=False)

    @property
    def source_s3_uri(self) -> str:
        """``LifeCycleConfig.SourceS3Uri``: the folder holding ``on_create.sh``."""
        return f"s3://{self.bucket.bucket_name}/{self.key_prefix}"

    @property
    def on_create(self) -> str:
        return ON_CREATE
