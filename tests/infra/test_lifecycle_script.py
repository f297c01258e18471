"""on_create.sh, run for real by bash against a scratch root with stand-in system commands.

Expected behaviour from AWS's reference lifecycle script for HyperPod EKS (aws-samples/
awsome-distributed-training, 1.architectures/7.sagemaker-hyperpod-eks/LifecycleScripts/base-config/
on_create_main.sh): containerd's and the kubelet's state live on the secondary EBS volume at /opt/sagemaker,
so multi-GB worker images do not fill the root volume (deploy-facts.md, "Node set-up"). Fails on main: the
script only printed the volumes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "constructs" / "hyperpod_constructs" / "lifecycle" / "on_create.sh"

# Stand-ins: mountpoint/mount keep a list of mounted paths; systemctl keeps active services in a file.
FAKES = {
    "mountpoint": 'grep -qxF "$2" "$STATE/mounted"\n',
    "mount": 'echo "mount $*" >> "$STATE/calls"; [ "$1" = --bind ] && echo "$3" >> "$STATE/mounted"\n',
    "systemctl": '''echo "systemctl $*" >> "$STATE/calls"
case "$1" in
  is-active) grep -qxF "$3" "$STATE/active" ;;
  stop) grep -vxF "$2" "$STATE/active" > "$STATE/active.new" || true; mv "$STATE/active.new" "$STATE/active" ;;
  start) echo "$2" >> "$STATE/active" ;;
esac
''',
    "sleep": 'echo "sleep $*" >> "$STATE/calls"\n',
    "lsblk": "true\n",
}


def _run(tmp_path: Path, *, secondary_mounted: bool,
         nvme_mounted: bool = True) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    root, state, bin_dir = tmp_path / "root", tmp_path / "state", tmp_path / "bin"
    for d in (root / "opt/sagemaker", root / "opt/dlami/nvme",
              root / "var/lib/containerd/io.containerd.content.v1.content", root / "var/lib/kubelet/pki", root / "etc",
              state, bin_dir):
        d.mkdir(parents=True)
    (root / "var/lib/containerd/io.containerd.content.v1.content/pause-layer").write_text("pause image layer")
    (root / "var/lib/kubelet/pki/kubelet.crt").write_text("cert")
    (root / "etc/fstab").write_text("UUID=abc / xfs defaults 0 0\n")
    (state / "mounted").write_text((f"{root}/opt/sagemaker\n" if secondary_mounted else "")
                                   + (f"{root}/opt/dlami/nvme\n" if nvme_mounted else ""))
    (state / "active").write_text("containerd\n")
    (state / "calls").write_text("")
    for name, body in FAKES.items():
        (bin_dir / name).write_text("#!/bin/bash\n" + body)
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "STATE": str(state),
           "SECONDARY_VOLUME": str(root / "opt/sagemaker"), "VAR_LIB_DIR": str(root / "var/lib"),
           "FSTAB_FILE": str(root / "etc/fstab"), "SYSTEMD_DIR": str(root / "etc/systemd/system"),
           "LIMITS_DIR": str(root / "etc/security/limits.d"), "PROVISION_LOG_DIR": str(root / "var/log/provision"),
           "MOUNT_WAIT_SECONDS": "10", "INSTANCE_STORE_MOUNT": str(root / "opt/dlami/nvme")}
    result = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60, check=False)
    return result, root, state


def test_script_is_valid_bash() -> None:
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck (Debian package) not installed")
def test_script_passes_shellcheck() -> None:
    subprocess.run(["shellcheck", str(SCRIPT)], check=True)


def test_containerd_and_kubelet_state_move_to_the_secondary_volume(tmp_path: Path) -> None:
    result, root, state = _run(tmp_path, secondary_mounted=True)
    assert result.returncode == 0, result.stdout + result.stderr

    secondary = root / "opt/sagemaker"
    assert (secondary / "containerd/io.containerd.content.v1.content/pause-layer").read_text() == "pause image layer"
    assert (secondary / "kubelet/pki/kubelet.crt").read_text() == "cert"
    calls = (state / "calls").read_text().splitlines()
    assert f"mount --bind {secondary}/containerd {root}/var/lib/containerd" in calls
    assert f"mount --bind {secondary}/kubelet {root}/var/lib/kubelet" in calls
    # containerd was running: stopped before its state moved, started again after.
    assert calls.index("systemctl stop containerd") < calls.index(
        f"mount --bind {secondary}/containerd {root}/var/lib/containerd") < calls.index("systemctl start containerd")
    assert "systemctl start kubelet" not in calls  # it was not running before
    fstab = (root / "etc/fstab").read_text().splitlines()
    assert f"{secondary}/containerd {root}/var/lib/containerd none bind,nofail," \
           f"x-systemd.requires-mounts-for={secondary} 0 0" in fstab
    assert len([line for line in fstab if "bind" in line]) == 2


def test_running_it_twice_adds_no_duplicate_mounts(tmp_path: Path) -> None:
    _run(tmp_path, secondary_mounted=True)
    env_root = tmp_path / "root"
    fstab_before = (env_root / "etc/fstab").read_text()
    # Second run on the same node: /var/lib/* are mount points now, so nothing moves again.
    result = subprocess.run(["bash", str(SCRIPT)], env={
        **os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "STATE": str(tmp_path / "state"),
        "SECONDARY_VOLUME": str(env_root / "opt/sagemaker"), "VAR_LIB_DIR": str(env_root / "var/lib"),
        "FSTAB_FILE": str(env_root / "etc/fstab"), "SYSTEMD_DIR": str(env_root / "etc/systemd/system"),
        "LIMITS_DIR": str(env_root / "etc/security/limits.d"),
        "PROVISION_LOG_DIR": str(env_root / "var/log/provision")}, capture_output=True, text=True, timeout=60,
        check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "already a mount point" in result.stdout
    assert (env_root / "etc/fstab").read_text() == fstab_before


def test_without_the_secondary_volume_it_waits_bounded_then_warns(tmp_path: Path) -> None:
    result, root, state = _run(tmp_path, secondary_mounted=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "is not mounted after 10s" in result.stdout
    assert (state / "calls").read_text().count("sleep 5") == 2
    assert "bind" not in (root / "etc/fstab").read_text()


def test_containers_get_unlimited_locked_memory(tmp_path: Path) -> None:
    """limits.d reaches login sessions only; containers inherit containerd's limit (deploy-facts.md)."""
    _, root, state = _run(tmp_path, secondary_mounted=True)
    drop_in = (root / "etc/systemd/system/containerd.service.d/50-memlock.conf").read_text()
    assert "[Service]\nLimitMEMLOCK=infinity" in drop_in
    calls = (state / "calls").read_text().splitlines()
    assert calls.index("systemctl daemon-reload") < calls.index("systemctl start containerd")


def test_the_instance_store_for_the_weights_cache_is_checked_not_touched(tmp_path: Path) -> None:
    """HyperPod mounts the instance store at /opt/dlami/nvme (AWS's reference script treats it as an
    already-mounted disk; the v3.3 CRD's weightsCache.hostPath default): logged with its size, never mounted,
    formatted or written to by this script."""
    result, root, state = _run(tmp_path, secondary_mounted=True)
    assert result.returncode == 0, result.stdout + result.stderr
    nvme = root / "opt/dlami/nvme"
    assert f"[on_create] instance store: {nvme} mounted, " in result.stdout
    assert str(nvme) not in (state / "calls").read_text()  # no mount, no bind
    assert list(nvme.iterdir()) == []
    assert "WARNING" not in result.stdout


def test_a_missing_instance_store_mount_is_one_warning_not_a_failed_node(tmp_path: Path) -> None:
    result, root, _ = _run(tmp_path, secondary_mounted=True, nvme_mounted=False)
    assert result.returncode == 0, result.stdout + result.stderr
    (warning,) = [line for line in result.stdout.splitlines() if "WARNING" in line]
    assert f"{root}/opt/dlami/nvme (NVMe instance store) is not a mount point" in warning
    assert "set endpoint.model_cache.weights_cache: false" in warning
