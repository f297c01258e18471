"""on_create.sh, run for real by bash against a scratch root with stand-in system commands.

Expected behaviour from AWS's reference lifecycle script for HyperPod EKS (aws-samples/
awsome-distributed-training, 1.architectures/7.sagemaker-hyperpod-eks/LifecycleScripts/base-config/
on_create_main.sh): containerd's and the kubelet's state live on the secondary EBS volume at /opt/sagemaker,
so multi-GB worker images do not fill the root volume (deploy-facts.md, "Node set-up"). Fails on main: the
script only printed the volumes.

The script runs from a copy in a scratch folder, with the settings file the deployment writes beside it
(:func:`hyperpod_constructs.lifecycle_scripts.settings`), as HyperPod runs it from the downloaded
``SourceS3Uri`` folder. The stand-in ``sleep`` only records its argument, and can mount a path after a given
number of calls (a disk HyperPod mounts while the script waits).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.conftest import REPO_ROOT

from hyperpod_constructs.lifecycle_scripts import SETTINGS, settings

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
    # Each line "<path> <n>" of $STATE/mount_later mounts <path> once sleep has been called n times.
    "sleep": '''echo "sleep $*" >> "$STATE/calls"
slept=$(grep -c '^sleep ' "$STATE/calls")
while read -r path after; do
  if [ "$slept" -ge "$after" ]; then echo "$path" >> "$STATE/mounted"; fi
done < "$STATE/mount_later"
''',
    "sync": 'echo "sync" >> "$STATE/calls"\n',
    "lsblk": "true\n",
}


def _run(tmp_path: Path, *, secondary_mounted: bool, nvme_mounted: bool = True, weights_cache: bool | None = None,
         nvme_mounted_after_sleeps: int | None = None, settings_text: str | None = None,
         fakes: dict[str, str] | None = None,
         env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    """``weights_cache``: the settings file the deployment writes beside the script (``None``: no file);
    ``settings_text``: that file's text as given."""
    root, state, bin_dir, scripts = tmp_path / "root", tmp_path / "state", tmp_path / "bin", tmp_path / "scripts"
    for d in (root / "opt/sagemaker", root / "opt/dlami/nvme",
              root / "var/lib/containerd/io.containerd.content.v1.content", root / "var/lib/kubelet/pki", root / "etc",
              state, bin_dir, scripts):
        d.mkdir(parents=True)
    (root / "var/lib/containerd/io.containerd.content.v1.content/pause-layer").write_text("pause image layer")
    (root / "var/lib/kubelet/pki/kubelet.crt").write_text("cert")
    (root / "etc/fstab").write_text("UUID=abc / xfs defaults 0 0\n")
    (state / "mounted").write_text((f"{root}/opt/sagemaker\n" if secondary_mounted else "")
                                   + (f"{root}/opt/dlami/nvme\n" if nvme_mounted else ""))
    (state / "mount_later").write_text(f"{root}/opt/dlami/nvme {nvme_mounted_after_sleeps}\n"
                                       if nvme_mounted_after_sleeps is not None else "")
    (state / "active").write_text("containerd\n")
    (state / "calls").write_text("")
    for name, body in {**FAKES, **(fakes or {})}.items():
        (bin_dir / name).write_text("#!/bin/bash\n" + body)
        (bin_dir / name).chmod(0o755)
    shutil.copy(SCRIPT, scripts / SCRIPT.name)
    if weights_cache is not None:
        (scripts / SETTINGS).write_text(settings(weights_cache=weights_cache))
    if settings_text is not None:
        (scripts / SETTINGS).write_text(settings_text)
    run_env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "STATE": str(state),
               "SECONDARY_VOLUME": str(root / "opt/sagemaker"), "VAR_LIB_DIR": str(root / "var/lib"),
               "FSTAB_FILE": str(root / "etc/fstab"), "SYSTEMD_DIR": str(root / "etc/systemd/system"),
               "LIMITS_DIR": str(root / "etc/security/limits.d"),
               "PROVISION_LOG_DIR": str(root / "var/log/provision"),
               "MOUNT_WAIT_SECONDS": "10", "INSTANCE_STORE_MOUNT": str(root / "opt/dlami/nvme"), **(env or {})}
    result = subprocess.run(["bash", str(scripts / SCRIPT.name)], env=run_env, capture_output=True, text=True,
                            timeout=60, check=False)
    return result, root, state


def _calls(state: Path) -> list[str]:
    return (state / "calls").read_text().splitlines()


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
    result, root, state = _run(tmp_path, secondary_mounted=True, weights_cache=True)
    assert result.returncode == 0, result.stdout + result.stderr
    nvme = root / "opt/dlami/nvme"
    assert f"[on_create] instance store: {nvme} mounted, " in result.stdout
    assert str(nvme) not in (state / "calls").read_text()  # no mount, no bind
    assert list(nvme.iterdir()) == []
    assert "WARNING" not in result.stdout and "ERROR" not in result.stdout


# --- the weights cache needs the instance store (lifecycle-review.md #9) ----------------------------------------

def test_with_the_weights_cache_on_it_waits_for_the_instance_store(tmp_path: Path) -> None:
    """Mounted only after two 5 s polls: the script waits for it as for /opt/sagemaker (AWS's reference script
    waits up to 60 s for either disk, base-config/on_create_main.sh) and goes on. Fails on main: one check, then a
    warning."""
    result, root, state = _run(tmp_path, secondary_mounted=True, nvme_mounted=False, weights_cache=True,
                               nvme_mounted_after_sleeps=2)
    assert result.returncode == 0, result.stdout + result.stderr
    nvme = root / "opt/dlami/nvme"
    assert f"[on_create] waiting for {nvme} (NVMe instance store) to be mounted (0s)" in result.stdout
    assert f"[on_create] waiting for {nvme} (NVMe instance store) to be mounted (5s)" in result.stdout
    assert f"[on_create] instance store: {nvme} mounted, " in result.stdout
    assert _calls(state).count("sleep 5") == 2
    assert "WARNING" not in result.stdout and "ERROR" not in result.stdout


def test_with_the_weights_cache_on_a_missing_instance_store_fails_the_node_after_the_log_flush(tmp_path: Path) -> None:
    """Never mounted: the wait is bounded (MOUNT_WAIT_SECONDS, here 10 s: two polls), then one ERROR naming the
    path and the setting to turn off, the node is failed before anything on it changed, and the script waits
    60 s before exiting so the CloudWatch agent uploads the log (AWS's updated HyperPod EKS script: "Wait 60
    seconds when on_create_main.sh failed to make sure error messages are uploaded to CloudWatch Logs",
    awslabs/awsome-distributed-ai PR #916/#927). Fails on main: a warning and exit 0."""
    result, root, state = _run(tmp_path, secondary_mounted=True, nvme_mounted=False, weights_cache=True)
    assert result.returncode == 1, result.stdout + result.stderr
    (error,) = [line for line in result.stdout.splitlines() if "ERROR" in line]
    assert f"{root}/opt/dlami/nvme (NVMe instance store) is not mounted after 10s" in error
    assert "set endpoint.model_cache.weights_cache: false" in error
    calls = _calls(state)
    assert calls.count("sleep 5") == 2
    assert calls[-2:] == ["sync", "sleep 60"]  # the log flush comes last
    assert not any(c.startswith(("mount", "systemctl")) for c in calls)  # nothing on the node changed
    assert error in (root / "var/log/provision/provisioning.log").read_text()


def test_with_the_weights_cache_off_a_missing_instance_store_is_not_waited_for(tmp_path: Path) -> None:
    """No settings file (a deployment without the cache) behaves as ``WEIGHTS_CACHE=false``: one line, no wait,
    no failure."""
    for case, weights_cache in (("nofile", None), ("off", False)):
        result, root, state = _run(tmp_path / case, secondary_mounted=True, nvme_mounted=False,
                                   weights_cache=weights_cache)
        assert result.returncode == 0, result.stdout + result.stderr
        assert (f"[on_create] instance store: {root}/opt/dlami/nvme is not a mount point (weights cache off: not "
                "needed)") in result.stdout
        assert "sleep" not in (state / "calls").read_text()
        assert "WARNING" not in result.stdout and "ERROR" not in result.stdout


def test_fails_when_the_settings_file_has_a_bad_weights_cache_value(tmp_path: Path) -> None:
    result, _, state = _run(tmp_path, secondary_mounted=True, settings_text="WEIGHTS_CACHE=yes\n")
    assert result.returncode == 1
    assert (f"ERROR: WEIGHTS_CACHE in {tmp_path}/scripts/{SETTINGS} must be true or false, got 'yes'"
            in result.stdout)
    assert _calls(state)[-2:] == ["sync", "sleep 60"]


# --- any failure: named, then the log flush (AWS's updated script waits 60 s before exiting) --------------------

def test_a_failing_command_is_named_and_the_log_flushed_before_the_non_zero_exit(tmp_path: Path) -> None:
    """``mount --bind`` fails (exit 32): the ERR trap names the command and its exit code, the EXIT trap syncs
    and sleeps ``FAILURE_LOG_FLUSH_SECONDS`` (60 s by default, shortened here through the environment) and the
    script exits with the command's code. Fails on main: set -e exits at once, unnamed and unflushed."""
    failing_mount = 'echo "mount $*" >> "$STATE/calls"; exit 32\n'
    result, root, state = _run(tmp_path, secondary_mounted=True, fakes={"mount": failing_mount},
                               env={"FAILURE_LOG_FLUSH_SECONDS": "7"})
    assert result.returncode == 32, result.stdout + result.stderr
    line = SCRIPT.read_text().splitlines().index('  mount --bind "$target" "$source"') + 1
    assert (f"""[on_create] ERROR: command 'mount --bind "$target" "$source"' failed with exit code 32 (line {line})"""
            in result.stdout)
    assert "[on_create] failed with exit code 32; waiting 7s for the log upload before exiting" in result.stdout
    assert _calls(state)[-2:] == ["sync", "sleep 7"]
    assert "done " not in result.stdout
    assert "failed with exit code 32" in (root / "var/log/provision/provisioning.log").read_text()


def test_a_node_that_succeeds_exits_without_the_flush_wait(tmp_path: Path) -> None:
    result, _, state = _run(tmp_path, secondary_mounted=True, weights_cache=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "sync" not in _calls(state) and not any(c.startswith("sleep") for c in _calls(state))
    assert result.stdout.rstrip().splitlines()[-1].startswith("[on_create] done ")
