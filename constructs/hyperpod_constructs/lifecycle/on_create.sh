#!/bin/bash
# HyperPod lifecycle script for the EKS-orchestrated GPU instance groups (LifeCycleConfig.OnCreate).
#
# Written for this project and uploaded from this repository to the lifecycle bucket by `cdk deploy`.
# It downloads nothing (no GitHub, no package repositories): a node's creation must not depend on
# anything outside AWS. HyperPod runs it as root once per node; a non-zero exit fails that node, and
# HyperPod reports it in the cluster events and replaces the node.
#
# The HyperPod EKS AMI already carries the NVIDIA driver, the EFA software and the EKS bootstrap. This script:
#   1. Logs to /var/log/provision/provisioning.log; HyperPod ships lifecycle output to CloudWatch Logs
#      (/aws/sagemaker/Clusters/<cluster-name>/<cluster-id>, stream LifecycleConfig/<group>/<instance-id>).
#   2. Puts containerd's and the kubelet's state on the secondary EBS volume HyperPod mounts at
#      /opt/sagemaker (InstanceStorageConfigs.EbsVolumeConfig), as AWS's reference lifecycle script does
#      (aws-samples/awsome-distributed-training, LifecycleScripts/base-config/on_create_main.sh): the
#      worker image is many GB and would otherwise fill the root volume. We bind-mount
#      /opt/sagemaker/{containerd,kubelet} over /var/lib/{containerd,kubelet} (persisted in /etc/fstab)
#      instead of rewriting containerd's configuration, so the AMI's runtime settings (nvidia runtime,
#      sandbox image, CDI) stay exactly as AWS ships them on both AL2 and AL2023.
#   3. Lifts the locked-memory limit EFA (libfabric) and NCCL/NIXL need to register RDMA buffers, for
#      containers too: they inherit containerd's limits (a systemd drop-in), not /etc/security/limits.d.
#   4. Records the volumes and EFA devices it finds, so a failed or slow node can be diagnosed from logs.
#   5. Checks the NVMe instance store the inference operator's weights cache writes to
#      (modelCacheConfig.weightsCache.hostPath, default /opt/dlami/nvme, operator v3.3). HyperPod mounts the
#      instance-store volumes there itself: AWS's reference script above offers "/opt/sagemaker" or
#      "/opt/dlami/nvme" as already-mounted disks and only waits for them, and AWS's NVMe samples read weights
#      from hostPath /opt/dlami/nvme/... So this script neither formats nor assembles the drives (doing so
#      would race HyperPod's own mount); it logs the mount and its size, or a WARNING naming the setting to
#      turn off when the path is not a mount point (the cache would then fill the root volume).
#
# Paths and the wait can be overridden through the environment (the project's tests run this script
# against a scratch directory with stand-in systemctl/mount commands); HyperPod sets none of them.
set -euo pipefail

SECONDARY="${SECONDARY_VOLUME:-/opt/sagemaker}"
VAR_LIB="${VAR_LIB_DIR:-/var/lib}"
FSTAB="${FSTAB_FILE:-/etc/fstab}"
SYSTEMD_DIR="${SYSTEMD_DIR:-/etc/systemd/system}"
LIMITS_DIR="${LIMITS_DIR:-/etc/security/limits.d}"
LOG_DIR="${PROVISION_LOG_DIR:-/var/log/provision}"
MOUNT_WAIT_SECONDS="${MOUNT_WAIT_SECONDS:-60}"
INSTANCE_STORE="${INSTANCE_STORE_MOUNT:-/opt/dlami/nvme}"

mkdir -p "$LOG_DIR"
exec > >(tee -a "$LOG_DIR/provisioning.log") 2>&1
log() { echo "[on_create] $*"; }
log "start $(date -u +%FT%TZ) host=$(hostname)"

# HyperPod mounts the secondary volume shortly before or while lifecycle scripts run: wait for it.
waited=0
until mountpoint -q "$SECONDARY"; do
  if [ "$waited" -ge "$MOUNT_WAIT_SECONDS" ]; then
    break
  fi
  log "waiting for $SECONDARY to be mounted (${waited}s)"
  sleep 5
  waited=$((waited + 5))
done

log "block devices and mounts:"
lsblk -o NAME,SIZE,TYPE,MOUNTPOINT || true

# Locked memory for RDMA: login sessions (limits.d) and every container (containerd's own limit).
mkdir -p "$LIMITS_DIR" "$SYSTEMD_DIR/containerd.service.d"
cat > "$LIMITS_DIR/99-efa-memlock.conf" <<'LIMITS'
# EFA / RDMA buffer registration (written by the hyperpod-dpd on_create.sh)
*       soft    memlock unlimited
*       hard    memlock unlimited
LIMITS
cat > "$SYSTEMD_DIR/containerd.service.d/50-memlock.conf" <<'UNIT'
# EFA / RDMA buffer registration inside containers (written by the hyperpod-dpd on_create.sh)
[Service]
LimitMEMLOCK=infinity
UNIT
systemctl daemon-reload  # containerd (re)starts below with the new limit


# Move one service's state directory onto the secondary volume and bind-mount it back in place.
relocate() {
  local name="$1" source="$VAR_LIB/$1" target="$SECONDARY/$1"
  if mountpoint -q "$source"; then
    log "$source is already a mount point; leaving it"
    return 0
  fi
  mkdir -p "$source"
  # A node replaced in place can carry a state directory of an older AMI: start from the root volume's.
  rm -rf "$target"
  mkdir -p "$target"
  cp -a "$source/." "$target/"
  mount --bind "$target" "$source"
  # Remount at every boot, after the secondary volume itself.
  if ! grep -qs "^$target $source " "$FSTAB"; then
    echo "$target $source none bind,nofail,x-systemd.requires-mounts-for=$SECONDARY 0 0" >> "$FSTAB"
  fi
  log "$name state: $source -> $target ($(du -sh "$target" 2>/dev/null | cut -f1))"
}

if mountpoint -q "$SECONDARY"; then
  # Stop what writes to the directories while they move; start again only what was running.
  running=()
  for service in kubelet containerd; do
    if systemctl is-active --quiet "$service"; then
      running+=("$service")
      systemctl stop "$service"
    fi
  done
  relocate containerd
  relocate kubelet
  for (( i=${#running[@]}-1; i>=0; i-- )); do
    systemctl start "${running[$i]}"
  done
  df -h "$SECONDARY" || true
else
  # Not fatal: the node still works, but large images then land on the root volume.
  log "WARNING: $SECONDARY (secondary EBS volume) is not mounted after ${MOUNT_WAIT_SECONDS}s;" \
      "containerd and kubelet state stay on the root volume"
fi

# The weights cache's host path (checked after the wait above, by when HyperPod has mounted its disks).
if mountpoint -q "$INSTANCE_STORE"; then
  log "instance store: $INSTANCE_STORE mounted, $(df -h --output=size "$INSTANCE_STORE" 2>/dev/null | tail -n 1 | tr -d ' ')"
else
  log "WARNING: $INSTANCE_STORE (NVMe instance store) is not a mount point; the operator's weights cache" \
      "would write to the root volume: set endpoint.model_cache.weights_cache: false for this node's instance type"
fi

if command -v fi_info >/dev/null 2>&1; then
  log "EFA devices: $(fi_info -p efa -t FI_EP_RDM 2>/dev/null | grep -c 'domain:' || true)"
fi

log "done $(date -u +%FT%TZ)"
