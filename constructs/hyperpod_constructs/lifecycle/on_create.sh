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
#      would race HyperPod's own mount). With the weights cache on (WEIGHTS_CACHE=true in on_create.env, which
#      the deployment writes beside this script) it waits for the mount as for /opt/sagemaker and fails the
#      node, naming the setting to turn off, when it never comes: the cache would otherwise fill the root
#      volume. With the cache off it only logs what it finds.
#   6. On any failure (a failing command under `set -e`, or the check above) it logs what failed and waits
#      60 s before exiting non-zero, so that the CloudWatch agent uploads the log before HyperPod replaces the
#      node: AWS's updated HyperPod EKS lifecycle script does the same ("Wait 60 seconds when
#      on_create_main.sh failed to make sure error messages are uploaded to CloudWatch Logs",
#      awslabs/awsome-distributed-ai PR #916, re-landed as #927).
#
# Paths, waits and the settings file can be overridden through the environment (the project's tests run this
# script against a scratch directory with stand-in systemctl/mount/sleep commands); HyperPod sets none of them.
set -Eeuo pipefail

SECONDARY="${SECONDARY_VOLUME:-/opt/sagemaker}"
VAR_LIB="${VAR_LIB_DIR:-/var/lib}"
FSTAB="${FSTAB_FILE:-/etc/fstab}"
SYSTEMD_DIR="${SYSTEMD_DIR:-/etc/systemd/system}"
LIMITS_DIR="${LIMITS_DIR:-/etc/security/limits.d}"
LOG_DIR="${PROVISION_LOG_DIR:-/var/log/provision}"
MOUNT_WAIT_SECONDS="${MOUNT_WAIT_SECONDS:-60}"
INSTANCE_STORE="${INSTANCE_STORE_MOUNT:-/opt/dlami/nvme}"
FAILURE_LOG_FLUSH_SECONDS="${FAILURE_LOG_FLUSH_SECONDS:-60}"
# HyperPod downloads the whole SourceS3Uri folder and runs this script from it; the settings sit beside it.
SETTINGS="${ON_CREATE_SETTINGS:-$(dirname "${BASH_SOURCE[0]}")/on_create.env}"

mkdir -p "$LOG_DIR"
exec > >(tee -a "$LOG_DIR/provisioning.log") 2>&1
log() { echo "[on_create] $*"; }

# A failing command ends the script (set -e): name it, then give the CloudWatch agent time to upload the log.
on_error() { log "ERROR: command '$3' failed with exit code $1 (line $2)"; }
on_exit() {
  local status=$?
  if [ "$status" -ne 0 ]; then
    log "failed with exit code $status; waiting ${FAILURE_LOG_FLUSH_SECONDS}s for the log upload before exiting"
    sync || true
    sleep "$FAILURE_LOG_FLUSH_SECONDS"
  fi
  exit "$status"
}
trap 'on_error "$?" "$LINENO" "$BASH_COMMAND"' ERR
trap on_exit EXIT

log "start $(date -u +%FT%TZ) host=$(hostname)"

WEIGHTS_CACHE=false
if [ -f "$SETTINGS" ]; then
  # Written by the deployment (hyperpod_constructs.lifecycle_scripts): KEY=value lines only.
  # shellcheck source=/dev/null
  . "$SETTINGS"
fi
case "$WEIGHTS_CACHE" in
  true | false) log "settings: WEIGHTS_CACHE=$WEIGHTS_CACHE" ;;
  *) log "ERROR: WEIGHTS_CACHE in $SETTINGS must be true or false, got '$WEIGHTS_CACHE'"; exit 1 ;;
esac

# HyperPod mounts its disks shortly before or while lifecycle scripts run: wait for one, at most
# MOUNT_WAIT_SECONDS. Returns non-zero when it is still not mounted then.
wait_for_mount() {
  local path="$1" what="$2" waited=0
  until mountpoint -q "$path"; do
    if [ "$waited" -ge "$MOUNT_WAIT_SECONDS" ]; then
      return 1
    fi
    log "waiting for $path ($what) to be mounted (${waited}s)"
    sleep 5
    waited=$((waited + 5))
  done
}

secondary_mounted=false
if wait_for_mount "$SECONDARY" "secondary EBS volume"; then
  secondary_mounted=true
fi

# The weights cache's host path: required when the cache is on, checked before anything on the node changes.
if [ "$WEIGHTS_CACHE" = true ]; then
  if ! wait_for_mount "$INSTANCE_STORE" "NVMe instance store"; then
    log "ERROR: $INSTANCE_STORE (NVMe instance store) is not mounted after ${MOUNT_WAIT_SECONDS}s, and the" \
        "inference operator's weights cache writes there (endpoint.model_cache.weights_cache is on): failing the" \
        "node instead of filling its root volume; set endpoint.model_cache.weights_cache: false for this" \
        "instance type"
    exit 1
  fi
  log "instance store: $INSTANCE_STORE mounted," \
      "$(df -h --output=size "$INSTANCE_STORE" 2>/dev/null | tail -n 1 | tr -d ' ' || true) (weights cache on)"
elif mountpoint -q "$INSTANCE_STORE"; then
  log "instance store: $INSTANCE_STORE mounted," \
      "$(df -h --output=size "$INSTANCE_STORE" 2>/dev/null | tail -n 1 | tr -d ' ' || true) (weights cache off)"
else
  log "instance store: $INSTANCE_STORE is not a mount point (weights cache off: not needed)"
fi

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
  log "$name state: $source -> $target ($(du -sh "$target" 2>/dev/null | cut -f1 || true))"
}

if [ "$secondary_mounted" = true ]; then
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

if command -v fi_info >/dev/null 2>&1; then
  log "EFA devices: $(fi_info -p efa -t FI_EP_RDM 2>/dev/null | grep -c 'domain:' || true)"
fi

log "done $(date -u +%FT%TZ)"
