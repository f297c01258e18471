"""A private, TLS-only S3 bucket for infrastructure data that is emptied and deleted on ``cdk destroy``."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_s3 as s3
from constructs import Construct


@dataclass(frozen=True, kw_only=True)
class InfraBucketProps:
    """Props of :class:`InfraBucket`."""

    server_access_logs_bucket: s3.IBucket | None = None
    """Where S3 server access logs go. Default: none (use only for the access-log bucket itself)."""
    server_access_logs_prefix: str | None = None
    """Key prefix of this bucket's access logs. Default: none."""
    retain_on_destroy: bool = False
    """Keep the bucket and its objects on ``cdk destroy``. Default: empty and delete it."""
    abort_incomplete_multipart_upload_days: int = 7
    """Abort multipart uploads left incomplete this long. Default: 7 days."""
    versioned: bool = False
    """Keep every version of every object (an audit trail cannot be silently overwritten). Default: off."""
    expiration_days: int | None = None
    """Expire objects this many days after creation (and noncurrent versions after
    ``noncurrent_expiration_days``). Default: never."""
    noncurrent_expiration_days: int = 30
    """With ``versioned``: delete overwritten or deleted versions this long after they became noncurrent.
    Default: 30 days."""


class InfraBucket(Construct):
    """SSE-S3, block public access, TLS-only bucket policy, lifecycle for incomplete uploads.

    SSE-S3 rather than SSE-KMS: S3 server access logging can only deliver to SSE-S3 buckets, and the TLS
    certificates the operator writes are public material. On destroy the bucket is auto-emptied (a CDK
    custom resource) and deleted, unless ``retain_on_destroy``; the bucket policy follows the bucket.
    """

    bucket: s3.Bucket

    def __init__(self, scope: Construct, construct_id: str, *, props: InfraBucketProps) -> None:
        super().__init__(scope, construct_id)
        if props.expiration_days is not None and props.expiration_days < 1:
            raise ValueError(f"expiration_days must be >= 1 or None, got {props.expiration_days}")
        if props.noncurrent_expiration_days < 1:
            raise ValueError(f"noncurrent_expiration_days must be >= 1, got {props.noncurrent_expiration_days}")
        if props.abort_incomplete_multipart_upload_days < 1:
            raise ValueError("abort_incomplete_multipart_upload_days must be >= 1, "
                             f"got {props.abort_incomplete_multipart_upload_days}")
        removal = RemovalPolicy.RETAIN if props.retain_on_destroy else RemovalPolicy.DESTROY
        self.bucket = s3.Bucket(
            self, "Bucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            server_access_logs_bucket=props.server_access_logs_bucket,
            server_access_logs_prefix=props.server_access_logs_prefix,
            versioned=props.versioned,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="AbortIncompleteMultipartUploads",
                    abort_incomplete_multipart_upload_after=Duration.days(
                        props.abort_incomplete_multipart_upload_days)),
                *([s3.LifecycleRule(id="ExpireObjects", expiration=Duration.days(props.expiration_days))]
                  if props.expiration_days is not None else []),
                *([s3.LifecycleRule(id="ExpireNoncurrentVersions",
                                    noncurrent_version_expiration=Duration.days(props.noncurrent_expiration_days))]
                  if props.versioned else []),
            ],
            removal_policy=removal,
            auto_delete_objects=not props.retain_on_destroy,
        )
        keep_policy_with_bucket(self.bucket, removal)


def keep_policy_with_bucket(bucket: s3.Bucket, removal: RemovalPolicy) -> None:
    """Give ``bucket``'s policy (``AWS::S3::BucketPolicy``) the bucket's own removal policy.

    aws-cdk-lib gives the bucket policy no ``DeletionPolicy``, so CloudFormation deletes it on ``cdk destroy`` even
    when it keeps the bucket: a kept bucket would lose its ``aws:SecureTransport`` deny, and a kept log bucket the
    statements that let S3 deliver server access logs to it (S3 API Reference, PutBucketLogging: with the bucket
    owner enforced setting, "Permissions can only be granted using policies"), so the kept model bucket's logging
    would stop (CloudFormation User Guide, "DeletionPolicy attribute": "If a resource has no DeletionPolicy
    attribute, AWS CloudFormation deletes the resource by default"). ``DeletionPolicy`` and ``UpdateReplacePolicy``
    both follow the bucket's."""
    if bucket.policy is None:  # every bucket here enforces TLS, so it has a policy; none: nothing to keep
        return
    bucket.policy.apply_removal_policy(removal)
