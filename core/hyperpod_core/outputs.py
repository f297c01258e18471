"""The contract between ``cdk deploy --outputs-file`` and the cdk8s app.

The CDK stacks emit ``CfnOutput``s with these IDs; ``cdk deploy --outputs-file cdk-outputs.json`` writes
``{"<stack name>": {"<output id>": "<value>"}}``; the cdk8s app reads the values back by the same IDs.
Keep the two sides on these constants so they cannot drift.
"""

from __future__ import annotations

from typing import Final

#: Default file the README tells users to pass to ``cdk deploy --outputs-file``.
DEFAULT_OUTPUTS_FILE: Final = "cdk-outputs.json"

REGION: Final = "Region"
GPU_AVAILABILITY_ZONE: Final = "GpuAvailabilityZone"
"""AZ *name* (e.g. ``us-west-2b``) of the GPU subnet, resolved by CloudFormation from the configured AZ ID."""
EKS_CLUSTER_NAME: Final = "EksClusterName"
EKS_CLUSTER_ARN: Final = "EksClusterArn"
"""``arn:aws:eks:<region>:<account>:cluster/<name>``: the cdk8s app writes it into the endpoints' ``spec.tags``; the
command line compares it with the kubeconfig context's cluster entry when the endpoint is not known."""
EKS_API_ENDPOINT: Final = "EksApiEndpoint"
"""``https://<id>.<gr>.<region>.eks.amazonaws.com`` (``AWS::EKS::Cluster`` ``Endpoint``): the server every command that
talks to Kubernetes requires of the kubeconfig context (``hyperpod_dpd.kube``), so it never acts on another cluster."""
HYPERPOD_CLUSTER_NAME: Final = "HyperPodClusterName"
HYPERPOD_CLUSTER_ARN: Final = "HyperPodClusterArn"
MODEL_BUCKET_NAME: Final = "ModelBucketName"
MODEL_BUCKET_KEY_ARN: Final = "ModelBucketKeyArn"
"""Key ARN of the KMS key that encrypts the model bucket (the created key, or ``model_bucket.existing_kms_key_arn``;
absent for an existing bucket named without a key). With ``ModelBucketName``, what ``hyperpod-dpd destroy`` prints as
the ``model_bucket.existing_name`` and ``existing_kms_key_arn`` lines that reuse a kept bucket."""
TLS_BUCKET_NAME: Final = "TlsCertificatesBucketName"
AMP_WORKSPACE_ENDPOINT: Final = "AmpWorkspaceEndpoint"
"""``https://aps-workspaces.<region>.amazonaws.com/workspaces/ws-.../`` (KEDA serverAddress base)."""
AMP_WORKSPACE_ARN: Final = "AmpWorkspaceArn"
ALERT_TOPIC_ARN: Final = "AlertTopicArn"
"""The SNS topic the workspace's alert manager publishes every alert to (subscribe more receivers to it)."""
INFERENCE_EXECUTION_ROLE_ARN: Final = "InferenceExecutionRoleArn"
KEDA_ROLE_ARN: Final = "KedaRoleArn"
