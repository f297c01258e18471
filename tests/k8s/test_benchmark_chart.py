"""``BenchmarkChart`` alone, in a bare cdk8s app, from the default config's props: the Jobs are cdk8s-plus Jobs, and
every default cdk8s-plus writes into their pods is either set back to what the Jobs said before they were typed or
kept for the reason the chart's docstring gives (and repeated next to each value below).

Sources: the Kubernetes 1.33 API reference (PodSpec, Container, SecurityContext, ConfigMap defaults), cdk8s-plus-33
2.5.63 (``lib/pod.js``, ``lib/container.js``, ``lib/job.js``, ``lib/workload.js`` of the wheel's jsii bundle) for what
it writes.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from hyperpod_core.config import Config

#: A benchmark Job's pod spec as the project wrote it before cdk8s-plus (the default config's first Job, read from the
#: snapshot of the commit before this change), without ``env`` and ``command`` (tests/k8s/test_benchmark_jobs.py).
BEFORE: dict[str, Any] = {
    "restartPolicy": "Never",
    "serviceAccountName": "llama-3-3-70b-benchmark",
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "hyperpod-dpd/pool", "operator": "DoesNotExist"}]}]}}},
    "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000,
                        "seccompProfile": {"type": "RuntimeDefault"}},
    "containers": [{
        "name": "genai-bench",
        "image": "<client_image>",
        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "3", "memory": "6Gi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "bench", "mountPath": "/bench", "readOnly": True},
                         {"name": "tmp", "mountPath": "/tmp"}],
    }],
    "volumes": [{"name": "bench", "configMap": {"name": "llama-3-3-70b-benchmark"}},
                {"name": "tmp", "emptyDir": {"sizeLimit": "8Gi"}}],
}


def _after_from_before() -> dict[str, Any]:
    """BEFORE with each cdk8s-plus default applied as the chart decides, one line each."""
    pod = copy.deepcopy(BEFORE)
    container = pod["containers"][0]
    # Set back explicitly: cdk8s-plus says Always; the API's default for an image pinned by digest is IfNotPresent.
    container["imagePullPolicy"] = "IfNotPresent"
    # Moved: cdk8s-plus's pod security context has no seccomp field; on the one container the effect is the same.
    container["securityContext"]["seccompProfile"] = pod["securityContext"].pop("seccompProfile")
    # Kept: the pod says runAsNonRoot too, and privileged false is the API default.
    container["securityContext"] |= {"runAsNonRoot": True, "privileged": False}
    # Kept: fsGroupChangePolicy acts only with an fsGroup, which this pod has none of.
    pod["securityContext"]["fsGroupChangePolicy"] = "Always"
    # Kept: the ServiceAccount already says false (EKS Pod Identity mounts its own token).
    pod["automountServiceAccountToken"] = False
    # Kept: each is the PodSpec default, spelled out.
    pod |= {"dnsPolicy": "ClusterFirst", "hostNetwork": False, "setHostnameAsFQDN": False,
            "shareProcessNamespace": False, "terminationGracePeriodSeconds": 30}
    return pod


_QUANTITY = re.compile(r"^(\d+)(Ki|Mi|Gi)?$")
_BINARY = {None: 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}


def _normalized(node: Any) -> Any:
    """Quantities as numbers: cdk8s-plus writes memory in Mi (``2048Mi``), the same quantity as ``2Gi``."""
    if isinstance(node, dict):
        return {k: _normalized(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_normalized(v) for v in node]
    if isinstance(node, str) and (m := _QUANTITY.match(node)):
        return int(m.group(1)) * _BINARY[m.group(2)]
    return node


@pytest.fixture(scope="module")
def docs(default_config: Config) -> list[dict]:
    import cdk8s
    from tests.k8s.endpoint_props import props_of

    from hyperpod_k8s.benchmark.benchmark_chart import BenchmarkChart
    from hyperpod_k8s.benchmark.props import benchmark_props

    props = benchmark_props(default_config.spec(), props_of(default_config))
    return BenchmarkChart(cdk8s.App(), "benchmark", props=props).to_json()


def _pods(docs: list[dict]) -> list[dict]:
    return [d["spec"]["template"]["spec"] for d in docs if d["kind"] == "Job"]


def test_the_pod_spec_is_the_one_before_cdk8s_plus_field_by_field(default_config: Config, docs: list[dict]) -> None:
    """Resources, both security contexts, the volumes and mounts, the affinity and the identity are what the Jobs
    said before; what cdk8s-plus adds is only what :func:`_after_from_before` lists."""
    expected = _after_from_before()
    expected["containers"][0]["image"] = default_config.benchmark.client_image
    for pod in _pods(docs):
        actual = copy.deepcopy(pod)
        actual["containers"] = [{k: v for k, v in c.items() if k not in ("env", "command")}
                                for c in actual["containers"]]
        assert _normalized(actual) == _normalized(expected)


def test_the_root_filesystem_is_read_only_and_everything_the_run_writes_is_on_the_writable_scratch(
        docs: list[dict]) -> None:
    """genai-bench, pip and the runner write to the output folder, HOME, matplotlib's config folder and the venv;
    each must sit on a mount that is neither read-only nor the ConfigMap."""
    for pod in _pods(docs):
        (container,) = pod["containers"]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        env = {e["name"]: e["value"] for e in container["env"]}
        written = [env["BENCH_OUTPUT_DIR"], env["HOME"], env["MPLCONFIGDIR"], "/tmp/venv"]
        assert "python -m venv /tmp/venv" in container["command"][-1]
        volumes = {v["name"]: v for v in pod["volumes"]}
        for path in written:
            (mount,) = [m for m in container["volumeMounts"] if f"{path}/".startswith(f"{m['mountPath']}/")]
            assert not mount.get("readOnly") and "emptyDir" in volumes[mount["name"]], (path, mount)


def test_jobs_are_suspended_cdk8s_plus_jobs_with_the_pod_label_it_adds(docs: list[dict]) -> None:
    """``suspend`` is not a cdk8s-plus Job prop: the chart adds it through the escape hatch, and applying the file
    must start nothing. cdk8s-plus labels every pod it templates with ``cdk8s.io/metadata.addr``; kept, nothing
    selects on it (a Job selects by its controller-uid, ``bench`` by ``job-name``)."""
    jobs = [d for d in docs if d["kind"] == "Job"]
    assert jobs and all(j["spec"]["suspend"] is True for j in jobs)
    for job in jobs:
        labels = job["spec"]["template"]["metadata"]["labels"]
        assert labels.pop("cdk8s.io/metadata.addr")
        assert labels == job["metadata"]["labels"]
    (config_map,) = [d for d in docs if d["kind"] == "ConfigMap"]
    assert config_map["immutable"] is False  # cdk8s-plus's, kept: the Kubernetes default
