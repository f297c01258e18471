# Sourced by every script: quiet, offline-friendly settings for jsii, the CDK CLI and the cdk8s CLI.
# Each was measured in shared/reference/tooling.md; they must be exported before Python imports aws_cdk.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20     # jsii's Node 20 end-of-life banner
export CDK_DISABLE_CLI_TELEMETRY=true                       # CLI telemetry POST
export CDK_DISABLE_VERSION_CHECK=1                          # CLI version check
export AWS_EC2_METADATA_DISABLED=true                       # no IMDS probe when there are no credentials
export AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED=true
export PYTHONDONTWRITEBYTECODE=1
export PIP_DISABLE_PIP_VERSION_CHECK=1
