"""The S3 bucket HyperPod reads lifecycle scripts from, and our scripts in it."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import RemovalPolicy
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3_deployment
from constructs import Construct

#: The scripts shipped with this package (``lifecycle/on_create.sh``).
SCRIPTS_DIR = Path(__file__).resolve().parent / "lifecycle"
ON_CREATE = "on_create.sh"
#: Written beside ``on_create.sh`` at synth; the script reads it from its own folder (HyperPod downloads the whole
#: ``SourceS3Uri`` folder and runs the entry point from it: AWS's HyperPod EKS script runs ``./on_create_main.sh``
#: beside itself, awslabs/awsome-distributed-ai PR #927).
SETTINGS = "on_create.env"
#: ``AmazonSageMakerClusterInstanceRolePolicy`` grants read on ``arn:aws:s3:::sagemaker-*`` only.
REQUIRED_BUCKET_PREFIX = "sagemaker-"
#: Hex digits of the content hash in the scripts' prefix (64 bits: no two script versions share one).
HASH_LENGTH = 16


def settings(*, weights_cache: bool) -> str:
    """The text of :data:`SETTINGS`: ``KEY=value`` lines ``on_create.sh`` sources."""
    return ("# Written by hyperpod-dpd at synth (LifecycleScripts); read by on_create.sh beside it.\n"
            f"WEIGHTS_CACHE={'true' if weights_cache else 'false'}\n")


def content_hash(files: Mapping[str, bytes]) -> str:
    """Hash of the files as deployed (name and content of each), the same on every synth of the same files."""
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    return digest.hexdigest()[:HASH_LENGTH]


@dataclass(frozen=True, kw_only=True)
class LifecycleScriptsProps:
    """Props of :class:`LifecycleScripts`."""

    bucket_name: str
    """Must start with ``sagemaker-`` (the managed instance-role policy reads only such buckets)."""
    key_prefix: str = "lifecycle/"
    """Where the scripts go in the bucket, each version under ``<key_prefix><content hash>/``. Default:
    ``lifecycle/``."""
    weights_cache: bool = False
    """The inference operator's NVMe weights cache is on: ``on_create.sh`` waits for the instance store and fails
    the node when it never mounts. Default: off (the script only logs the mount)."""


class LifecycleScripts(Construct):
    """A private, TLS-only, encrypted bucket named ``sagemaker-...``, and ``on_create.sh`` deployed into it.

    The scripts go to ``<key_prefix><content hash>/`` (:attr:`scripts_prefix`), so an edited script or setting
    changes ``LifeCycleConfig.SourceS3Uri``: a cluster update that ``cdk diff`` shows, instead of an object
    overwritten in place that only nodes created later would run. Earlier versions stay in the bucket
    (``retain_on_delete``, aws-cdk-lib's default): with ``False`` the deployment handler deletes the previous
    prefix *before* uploading the new one when the destination changes (aws-cdk-lib 2.275, aws-s3-deployment
    README, "Retain on Delete"), while the cluster still names it until CloudFormation has updated it, and a
    node HyperPod creates in between finds no script. ``prune`` acts only inside the new prefix. The bucket is
    dedicated to these scripts, so ``autoDeleteObjects`` empties it (every version) when the stack is deleted.
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
        settings_text = settings(weights_cache=props.weights_cache)
        # Every file deployed, by its name under the prefix: the asset folder's files and the settings.
        self.files: dict[str, bytes] = {
            **{p.relative_to(SCRIPTS_DIR).as_posix(): p.read_bytes() for p in sorted(SCRIPTS_DIR.rglob("*"))
               if p.is_file()},
            SETTINGS: settings_text.encode()}
        self.content_hash = content_hash(self.files)
        self.scripts_prefix = f"{props.key_prefix}{self.content_hash}/"
        self.bucket = s3.Bucket(
            self, "Bucket", bucket_name=props.bucket_name,
            encryption=s3.BucketEncryption.S3_MANAGED, enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL, versioned=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            removal_policy=RemovalPolicy.DESTROY, auto_delete_objects=True)
        self.deployment = s3_deployment.BucketDeployment(
            self, "Scripts", destination_bucket=self.bucket, destination_key_prefix=self.scripts_prefix,
            sources=[s3_deployment.Source.asset(str(SCRIPTS_DIR)), s3_deployment.Source.data(SETTINGS, settings_text)],
            prune=True, retain_on_delete=True)

    @property
    def source_s3_uri(self) -> str:
        """``LifeCycleConfig.SourceS3Uri``: the folder holding this version of ``on_create.sh``."""
        return f"s3://{self.bucket.bucket_name}/{self.scripts_prefix}"

    @property
    def on_create(self) -> str:
        return ON_CREATE
