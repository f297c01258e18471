# shellcheck shell=bash
# Sourced by every script: quiet, offline-friendly settings for jsii, the CDK CLI and the cdk8s CLI.
# Each was measured in shared/reference/tooling.md; they must be exported before Python imports aws_cdk.
# jsii prints an 11-line banner in every process on a Node.js past its support; scripts/setup says that in one
# line instead (scripts/node-support.cjs), and the banner is not repeated for this Node's major version.
node_major=$(node --version 2>/dev/null || echo v0)
node_major=${node_major#v}
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=${node_major%%.*}
unset node_major
export CDK_DISABLE_CLI_TELEMETRY=true                       # CLI telemetry POST
export CDK_DISABLE_VERSION_CHECK=1                          # CLI version check
export AWS_EC2_METADATA_DISABLED=true                       # no IMDS probe when there are no credentials
export AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED=true
export PYTHONDONTWRITEBYTECODE=1
export PIP_DISABLE_PIP_VERSION_CHECK=1
