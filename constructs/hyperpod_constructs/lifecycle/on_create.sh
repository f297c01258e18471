#!/bin/bash
# HyperPod lifecycle script for the EKS-orchestrated GPU instance groups (LifeCycleConfig.OnCreate).
#
# Written for this project and uploaded from this repository to the lifecycle bucket by `cdk deploy`.
# It downloads nothing (no GitHub, no package repositories): a node's creation must not depend on
# anything outside AWS. HyperPod runs it as root once per node; a non-zero exit fails that node, and
# HyperPod reports it in the cluster events and replaces the node.
#
# It deliberately does little, because the HyperPod EKS AMI already carries the NVIDIA driver, the EFA
# software and the EKS bootstrap:
#   1. Logs to /var/log/provision/provisioning.log; HyperPod ships lifecycle output to CloudWatch Logs
#      (/aws/sagemaker/Clusters/<cluster-name>/<cluster-id>, stream LifecycleConfig/<group>/<instance-id>).
#   2. Records the volumes and EFA devices it finds, so a failed or slow node can be diagnosed from logs.
#   3. Lifts the memlock limit that EFA (libfabric) and NCCL/NIXL need to register RDMA buffers.
set -euo pipefail

LOG_DIR=/var/log/provision
mkdir -p "$LOG_DIR"
exec > >(tee -a "$LOG_DIR/provisioning.log") 2>&1
echo "[on_create] start $(date -u +%FT%TZ) host=$(hostname)"

echo "[on_create] block devices and mounts:"
lsblk -o NAME,SIZE,TYPE,MOUNTPOINT || true
df -h /opt/sagemaker 2>/dev/null || echo "[on_create] /opt/sagemaker (secondary EBS volume) is not mounted"

if command -v fi_info >/dev/null 2>&1; then
  echo "[on_create] EFA devices: $(fi_info -p efa -t FI_EP_RDM 2>/dev/null | grep -c 'domain:' || true)"
fi

cat > /etc/security/limits.d/99-efa-memlock.conf <<'LIMITS'
# EFA / RDMA buffer registration (written by the hyperpod-dpd on_create.sh)
*       soft    memlock unlimited
*       hard    memlock unlimited
LIMITS

echo "[on_create] done $(date -u +%FT%TZ)"
