"""``BenchmarkChart``: the ``<endpoint>-benchmark`` chart, built from cdk8s-plus constructs.

One suspended ``Job`` per run, the ``ConfigMap`` with the client lock and the runner, the ``ServiceAccount`` the
Jobs run as. The chart is a pure function of :class:`~hyperpod_k8s.benchmark.props.BenchmarkChartProps`.

cdk8s-plus (cdk8s-plus-33 2.5.63) writes defaults of its own into every pod. Each is set here explicitly, or kept
for the reason given next to it; ``tests/k8s/test_benchmark_chart.py`` pins the whole pod spec.

* Set explicitly: the resources (cdk8s-plus's default is 1-1.5 CPU and 512-2048 MiB), the pod's non-root user and
  group 1000 (cdk8s-plus's docs say a container runs as 25000:26000 by default, but 2.5.63's ``lib/container.js``
  leaves both unset, so the image's user would apply), the container's security context
  (no privilege escalation, read-only root filesystem, every capability dropped, the runtime's seccomp profile),
  ``imagePullPolicy: IfNotPresent`` (cdk8s-plus says ``Always``; the API's default for an image pinned by digest is
  ``IfNotPresent``, and a digest never changes), and the writable ``/tmp`` emptyDir everything the run writes goes
  to (``BENCH_OUTPUT_DIR``, ``HOME``, the venv).
* Kept, each the Kubernetes default it spells out: ``automountServiceAccountToken: false`` on the pod (the
  ServiceAccount already says false, EKS Pod Identity mounts its own token, and checkov's CKV_K8S_38 now passes
  without a skip), ``dnsPolicy: ClusterFirst``,
  ``hostNetwork``/``setHostnameAsFQDN``/``shareProcessNamespace: false``, ``terminationGracePeriodSeconds: 30``,
  ``fsGroupChangePolicy: Always`` (it applies only with an ``fsGroup``, which the pod has none of), the
  container's ``runAsNonRoot: true`` (the pod says the same) and ``privileged: false``, and
  ``immutable: false`` on the ConfigMap.
* Kept, cdk8s-plus's own: the pod label ``cdk8s.io/metadata.addr`` (a stable hash of the construct path that
  cdk8s-plus puts on every pod it templates; a Job selects its pods by its own ``controller-uid``, and ``bench``
  by ``job-name``, so nothing depends on it).
* Moved: the ``RuntimeDefault`` seccomp profile is on the container, not the pod: cdk8s-plus's pod security context
  has no seccomp field; for the one container the effect is the same (Pod Security Standards "restricted" accept
  either place).
* Added through the escape hatch: ``spec.suspend: true``. cdk8s-plus's ``JobProps`` has no ``suspend``; the field
  is added to the Job's ``KubeJob`` (``ApiObject.of(job)``) as a JSON patch, cdk8s's documented escape hatch for a
  field an L2 construct does not expose.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Final

import cdk8s
import cdk8s_plus_33 as kplus
from constructs import Construct

from hyperpod_k8s.benchmark.props import LOCK_FILE, RUNNER_KEY, BenchmarkChartProps, BenchmarkJobProps
from hyperpod_k8s.endpoint import defaults as d

#: The label every HyperPod node of this project carries (``hyperpod_constructs.hyperpod_cluster.POOL_LABEL``).
#: Every HyperPod node carries it and none is tainted by default, so the Jobs require that it does *not* exist
#: (node affinity ``DoesNotExist``): they land on the system node group.
GPU_POOL_LABEL: Final = d.POOL_NODE_LABEL
CA_MOUNT: Final = "/etc/bench-ca"
CONTAINER_NAME: Final = "genai-bench"
#: The non-root user and group the client runs as (the image's ``python`` user is not assumed; any UID works).
RUN_AS: Final = 1000
#: The writable scratch space: the venv, genai-bench's output and caches (``HOME``, ``MPLCONFIGDIR``).
TMP_SIZE_GIB: Final = 8


@dataclass(frozen=True, kw_only=True)
class Compute:
    """CPU (whole CPUs) and memory (GiB) of the client container."""

    cpu: int
    memory_gib: int


#: The client's requests: one genai-bench process with up to 32 streams (tokenizing, SSE parsing) needs about a
#: core and under 2 GiB; they fit a system node (m7i.xlarge: 4 vCPU, 16 GiB, EC2 general purpose specs) beside
#: CoreDNS, the load balancer controller and the DaemonSets. Limits let a burst use the rest of the node.
REQUESTS: Final = Compute(cpu=1, memory_gib=2)
LIMITS: Final = Compute(cpu=3, memory_gib=6)


def install_and_run() -> str:
    """The container's shell command: a venv in /tmp, the hash-checked install, then the runner."""
    return ("set -eu; python -m venv /tmp/venv; "
            f"/tmp/venv/bin/python -m pip install --quiet --no-cache-dir --require-hashes --no-deps "
            f"-r /bench/{LOCK_FILE.name}; "
            f"exec /tmp/venv/bin/python /bench/{RUNNER_KEY}")


def _resources() -> kplus.ContainerResources:
    return kplus.ContainerResources(
        cpu=kplus.CpuResources(request=kplus.Cpu.units(REQUESTS.cpu), limit=kplus.Cpu.units(LIMITS.cpu)),
        memory=kplus.MemoryResources(request=cdk8s.Size.gibibytes(REQUESTS.memory_gib),
                                     limit=cdk8s.Size.gibibytes(LIMITS.memory_gib)))


def _container_security() -> kplus.ContainerSecurityContextProps:
    return kplus.ContainerSecurityContextProps(
        allow_privilege_escalation=False, read_only_root_filesystem=True, ensure_non_root=True, privileged=False,
        capabilities=kplus.ContainerSecutiryContextCapabilities(drop=[kplus.Capability.ALL]),
        seccomp_profile=kplus.SeccompProfile(type=kplus.SeccompProfileType.RUNTIME_DEFAULT))


class BenchmarkChart(cdk8s.Chart):
    """The benchmark's ConfigMap, ServiceAccount and one suspended Job per run (module docstring).

    What every Job shares (volumes, resources, the node query, equal environment values) is made once: each
    cdk8s-plus object is a call into the jsii kernel, and the chart has a few dozen Jobs.
    """

    def __init__(self, scope: Construct, construct_id: str, *, props: BenchmarkChartProps) -> None:
        super().__init__(scope, construct_id, namespace=props.namespace, disable_resource_name_hashes=True)
        self._props = props
        self.config_map = kplus.ConfigMap(
            self, "ConfigMap", metadata=cdk8s.ApiObjectMetadata(name=props.resource_name, labels=props.labels),
            data=dict(props.files))
        self.service_account = kplus.ServiceAccount(
            self, "ServiceAccount", metadata=cdk8s.ApiObjectMetadata(name=props.resource_name, labels=props.labels),
            automount_token=False)
        self._mounts = [
            ("/bench", kplus.Volume.from_config_map(self, "Bench", self.config_map, name="bench"), True),
            ("/tmp", kplus.Volume.from_empty_dir(self, "Tmp", "tmp", size_limit=cdk8s.Size.gibibytes(TMP_SIZE_GIB)),
             False)]
        if props.ca_secret_name:
            secret = kplus.Secret.from_secret_name(self, "EndpointCaSecret", props.ca_secret_name)
            self._mounts.append(
                (CA_MOUNT, kplus.Volume.from_secret(self, "EndpointCa", secret, name="endpoint-ca"), True))
        self._off_gpu_nodes = kplus.Node.labeled(kplus.NodeLabelQuery.does_not_exist(GPU_POOL_LABEL))
        self._resources = _resources()
        self._env_values: dict[str, kplus.EnvValue] = {}
        self.jobs = [self._job(job) for job in props.jobs]

    def _env_value(self, value: str) -> kplus.EnvValue:
        if value not in self._env_values:
            self._env_values[value] = kplus.EnvValue.from_value(value)
        return self._env_values[value]

    def _job(self, p: BenchmarkJobProps) -> kplus.Job:
        job = kplus.Job(
            self, p.name,
            metadata=cdk8s.ApiObjectMetadata(name=p.name, labels=p.labels, annotations=p.annotations),
            pod_metadata=cdk8s.ApiObjectMetadata(labels=p.labels),
            backoff_limit=0, active_deadline=cdk8s.Duration.seconds(p.active_deadline_seconds),
            restart_policy=kplus.RestartPolicy.NEVER, service_account=self.service_account,
            automount_service_account_token=False,
            security_context=kplus.PodSecurityContextProps(ensure_non_root=True, user=RUN_AS, group=RUN_AS))
        # Not in cdk8s-plus's JobProps (module docstring): applying the file must start nothing. The Job's API
        # object is its default child (``ApiObject.of(job)`` finds the same one, ~50x slower through jsii).
        api_object = typing.cast(cdk8s.ApiObject, job.node.default_child)
        api_object.add_json_patch(cdk8s.JsonPatch.add("/spec/suspend", True))
        job.scheduling.attract(self._off_gpu_nodes)
        env = dict(p.environment)
        if self._props.ca_secret_name:
            env["REQUESTS_CA_BUNDLE"] = f"{CA_MOUNT}/ca.pem"
        container = job.add_container(
            name=CONTAINER_NAME, image=self._props.client_image, command=["/bin/sh", "-c", install_and_run()],
            env_variables={name: self._env_value(value) for name, value in env.items()},
            resources=self._resources, security_context=_container_security(),
            image_pull_policy=kplus.ImagePullPolicy.IF_NOT_PRESENT)
        for path, volume, read_only in self._mounts:
            container.mount(path, volume, read_only=read_only or None)
        return job
