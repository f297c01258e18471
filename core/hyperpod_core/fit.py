"""What fits on a GPU node and on one of its GPUs, from the instance table (:mod:`hyperpod_core.instances`) and
narrow arguments (an instance type, GPUs per worker, a utilization, a buffer size), never the config: the config's
sections and rules call these with their own fields.

Requests of the endpoint pods are derived from here, never from a constant: with ``ThreadsPerCore: 1`` an
ml.p5.48xlarge exposes 96 CPUs, not 192, and the kubelet, the DaemonSets and the operator's sidecars take their share
before a worker pod is scheduled (deploy-facts.md, "Compute"); the workers of one node request at most
:data:`WORKER_SHARE_PERCENT` of it, so that the next add-on upgrade or DaemonSet still fits (lifecycle-facts.md,
"Node fit and GPU memory").

Sources:
  [NODEADM]  awslabs/amazon-eks-ami ``nodeadm/internal/kubelet/config.go``: ``kubeReserved.cpu`` =
             6 % of the first core + 1 % of the second + 0.5 % of cores 3-4 + 0.25 % of the rest;
             ``kubeReserved.memory`` = 11 MiB x maxPods + 255 MiB; ``evictionHard memory.available`` 100Mi;
             maxPods is capped at 250 on instances with more than 30 vCPUs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from hyperpod_core.instances import INSTANCE_FACTS

#: nodeadm's maxPods cap for instances with more than 30 vCPUs [NODEADM]; the reservation below assumes it
#: (the most a HyperPod node's kubelet could be configured with), so the estimate never under-reserves.
MAX_PODS: Final = 250
EVICTION_HARD_MEMORY_MIB: Final = 100

#: Share of the nominal memory the kernel reports as ``MemTotal`` (firmware and kernel hold the rest).
#: [I] An estimate: on large EC2 instances MemTotal is 1-3 % below the nominal GiB; we assume 3 %.
MEMORY_VISIBLE_FRACTION: Final = 0.97

#: The workers on one node request at most this share of the node's capacity (CPUs as ``ThreadsPerCore`` leaves
#: them, memory as EC2 states it): ml.p5.48xlarge with ThreadsPerCore 1 -> 86 of 96 CPUs, 1843 of 2048 GiB. What
#: is left covers the reservations below with room to spare, so an add-on upgrade that adds a DaemonSet, or a
#: sidecar that asks for more, does not leave a worker unschedulable after its next restart (lifecycle-facts.md,
#: "Node fit and GPU memory").
WORKER_SHARE_PERCENT: Final = 90


@dataclass(frozen=True, kw_only=True)
class Reservation:
    """What runs on a GPU node besides the workers, and the CPU and memory set aside for it."""

    name: str
    cpu_millis: int
    memory_mib: int
    per: Literal["node", "endpoint", "worker"]
    """``node``: once per node; ``endpoint``: once per endpoint whose workers may run on the node; ``worker``: once
    per worker pod on the node."""
    source: str


#: Everything the reservation covers beside the kubelet's own (``kubeReserved``, eviction threshold). Budgets,
#: not measurements: ``kubectl describe node`` ("Allocated resources") shows the real sum on a cluster.
RESERVATIONS: Final[tuple[Reservation, ...]] = (
    Reservation(
        name="DaemonSets of the pinned add-ons and charts", cpu_millis=4000, memory_mib=8192, per="node",
        source="VPC CNI + node agent, kube-proxy, Pod Identity agent, NVIDIA and EFA device plugins, health-"
               "monitoring agent, S3 and FSx CSI node plugins: 720m and 756 MiB together in their published "
               "charts (each cited in tests/test_deploy_facts.py); the observability add-on's four node pods, "
               "which publish none, get the rest (over 800m and 1.8 GiB each) [I]"),
    Reservation(
        name="operator v3.3 image cache (ModelImageCache DaemonSet)", cpu_millis=500, memory_mib=1024, per="endpoint",
        source="shared/crds/v3.3/modelimagecaches.yaml: 'a cached container image on a set of nodes, managed via a "
               "backing DaemonSet' (spec.modelCacheConfig.imageCache): one per endpoint (its image), on the nodes "
               "its workers may use [I]; its pod's requests are not published [I]"),
    Reservation(
        name="router pod (2 containers)", cpu_millis=1000, memory_mib=2048, per="endpoint",
        source="the operator's DPD router pod, one per endpoint, has 2 containers (seed blog, lifecycle-facts.md); "
               "nothing keeps it off a GPU node (HyperPod nodes carry no taint by default); counted on the nodes "
               "its endpoint's workers may use [I]; requests not published [I]"),
    Reservation(
        name="model pod sidecars (nginx reverse proxy, OpenTelemetry collector)", cpu_millis=1000, memory_mib=2048,
        per="worker",
        source="each model pod has 3 containers: vLLM, nginx reverse proxy, OpenTelemetry collector (seed blog, "
               "lifecycle-facts.md); their requests are not published for v3.2, v3.4 makes them configurable "
               "(release notes) [I]: 500m and 1 GiB each"),
)


def kube_reserved_cpu_millis(cpus: int) -> int:
    """``kubeReserved.cpu`` for a node with ``cpus`` CPUs [NODEADM]."""
    total = cpus * 1000
    reserved = 0.0
    for start, end, per_10k in ((0, 1000, 600), (1000, 2000, 100), (2000, 4000, 50), (4000, total, 25)):
        if total > start:
            reserved += (min(total, end) - start) * per_10k / 10_000
    return int(reserved)


def kube_reserved_memory_mib(max_pods: int = MAX_PODS) -> int:
    """``kubeReserved.memory`` [NODEADM]."""
    return 11 * max_pods + 255


def reserved(per: Literal["node", "endpoint", "worker"]) -> tuple[int, int]:
    """CPU millis and MiB of :data:`RESERVATIONS` taken once per node (``node``), per endpoint whose workers may run
    on the node (``endpoint``) or per worker (``worker``)."""
    rows = [r for r in RESERVATIONS if r.per == per]
    return sum(r.cpu_millis for r in rows), sum(r.memory_mib for r in rows)


@dataclass(frozen=True, kw_only=True)
class NodeBudget:
    """What one node leaves for the worker pods, step by step (every number in CPU millis or MiB)."""

    instance_type: str
    threads_per_core: int
    cpus: int
    memory_gib: int
    """Nominal memory (EC2), the base of the :data:`WORKER_SHARE_PERCENT` cap."""
    memory_mib: int
    """What the kernel reports (``MemTotal``, the kubelet's ``capacity.memory``): below the nominal GiB."""
    kube_reserved_cpu_millis: int
    kube_reserved_memory_mib: int
    tiered_storage_percent: int = 0
    """Share of the node's memory HyperPod's tiered storage takes (``TieredStorageConfig``); 0: off."""
    endpoints: int = 1
    """Endpoints whose workers may run on the node: each brings its router and image-cache pods (``endpoint``
    rows of :data:`RESERVATIONS`)."""

    @property
    def tiered_storage_mib(self) -> int:
        """Memory the tiered-storage daemon holds outside any pod's requests (its share of ``memory_mib``)."""
        return self.memory_mib * self.tiered_storage_percent // 100

    @property
    def allocatable_cpu_millis(self) -> int:
        """Node ``status.allocatable.cpu``: capacity minus kubeReserved."""
        return self.cpus * 1000 - self.kube_reserved_cpu_millis

    @property
    def allocatable_memory_mib(self) -> int:
        """Node ``status.allocatable.memory``: capacity minus kubeReserved and the hard eviction threshold."""
        return self.memory_mib - self.kube_reserved_memory_mib - EVICTION_HARD_MEMORY_MIB

    @property
    def workers_cpu(self) -> int:
        """The most CPUs all workers of the node may request together: :data:`WORKER_SHARE_PERCENT` of them."""
        return self.cpus * WORKER_SHARE_PERCENT // 100

    @property
    def workers_memory_gib(self) -> int:
        return self.memory_gib * WORKER_SHARE_PERCENT // 100

    def fit_cpu_millis(self, pods_per_node: int) -> int:
        """The most one worker container could request with ``pods_per_node`` workers after every reservation
        (without the cap)."""
        node_cpu, _ = reserved("node")
        endpoint_cpu, _ = reserved("endpoint")
        worker_cpu, _ = reserved("worker")
        return (self.allocatable_cpu_millis - node_cpu - endpoint_cpu * self.endpoints) // pods_per_node - worker_cpu

    def fit_memory_mib(self, pods_per_node: int) -> int:
        _, node_mem = reserved("node")
        _, endpoint_mem = reserved("endpoint")
        _, worker_mem = reserved("worker")
        return (self.allocatable_memory_mib - node_mem - endpoint_mem * self.endpoints - self.tiered_storage_mib
                ) // pods_per_node - worker_mem

    def pod_cpu(self, pods_per_node: int) -> int:
        """Whole CPUs one worker may request: within the cap and after every reservation."""
        return min(self.workers_cpu // pods_per_node, self.fit_cpu_millis(pods_per_node) // 1000)

    def pod_memory_gib(self, pods_per_node: int) -> int:
        return min(self.workers_memory_gib // pods_per_node, self.fit_memory_mib(pods_per_node) // 1024)


def node_budget(instance_type: str, threads_per_core: int, tiered_storage_percent: int = 0,
                endpoints: int = 1) -> NodeBudget:
    facts = INSTANCE_FACTS[instance_type]
    cpus = facts.cpus(threads_per_core)
    return NodeBudget(
        instance_type=instance_type, threads_per_core=threads_per_core, cpus=cpus, memory_gib=facts.memory_gib,
        memory_mib=int(facts.memory_gib * 1024 * MEMORY_VISIBLE_FRACTION),
        kube_reserved_cpu_millis=kube_reserved_cpu_millis(cpus),
        kube_reserved_memory_mib=kube_reserved_memory_mib(), tiered_storage_percent=tiered_storage_percent,
        endpoints=endpoints)


@dataclass(frozen=True, kw_only=True)
class PodRequests:
    """Requests of one worker container: whole CPUs and whole GiB (what the manifests carry)."""

    cpu: int
    memory_gib: int


def workers_per_node(instance_type: str, gpus_per_pod: int) -> int:
    return max(1, INSTANCE_FACTS[instance_type].gpus // gpus_per_pod)


def max_pod_requests(instance_type: str, threads_per_core: int, gpus_per_pod: int,
                     tiered_storage_percent: int = 0, endpoints: int = 1) -> PodRequests:
    """The largest whole-CPU / whole-GiB requests a worker with ``gpus_per_pod`` GPUs can make and still be
    scheduled with as many workers as the node has GPUs for (beside tiered storage's share, when it is on, and the
    router and image-cache pods of the ``endpoints`` whose workers may run there)."""
    pods = workers_per_node(instance_type, gpus_per_pod)
    budget = node_budget(instance_type, threads_per_core, tiered_storage_percent, endpoints)
    return PodRequests(cpu=budget.pod_cpu(pods), memory_gib=budget.pod_memory_gib(pods))


@dataclass(frozen=True, kw_only=True)
class NodeKind:
    """What sizes a worker's budget on the nodes of one instance group besides the instance type."""

    threads_per_core: int = 1
    endpoints: int = 1
    """Endpoints whose workers may run on the group's nodes."""


def worker_budget(instance_type: str, gpus_per_pod: int, nodes: Iterable[NodeKind],
                  tiered_storage_percent: int = 0) -> PodRequests:
    """The most one worker may request on every node it can land on: the smallest :func:`max_pod_requests` over
    the kinds of those nodes (their instance groups' ``threads_per_core`` and endpoints; one ``NodeKind()`` when none
    is given)."""
    kinds = sorted(set(nodes), key=lambda k: (k.threads_per_core, k.endpoints)) or [NodeKind()]
    budgets = [max_pod_requests(instance_type, k.threads_per_core, gpus_per_pod, tiered_storage_percent, k.endpoints)
               for k in kinds]
    return PodRequests(cpu=min(b.cpu for b in budgets), memory_gib=min(b.memory_gib for b in budgets))


# --- what one GPU holds ------------------------------------------------------------------------------------

GIB: Final = 1 << 30

#: GPU memory a worker needs beside vLLM's ``--gpu-memory-utilization`` share and the PD buffer: the CUDA context
#: and NCCL communicators of each rank, and decode's CUDA graphs (captured after vLLM has sized its KV cache).
#: [I] A budget, not a measurement: on an 80 GB H100 at 0.75 a 16 GiB buffer leaves about 4 GiB, which is
#: "marginal with decode's CUDA graphs" (lifecycle-facts.md); 3 GiB keeps that case and refuses what leaves less.
#: vLLM logs the graphs' size at start-up ("Graph capturing finished ... took N GiB"): check it on a real node.
GPU_RUNTIME_MARGIN_GIB: Final = 3.0

#: The vLLM flag a role's ``extra_args`` may override the endpoint's utilization with (they come after it).
UTILIZATION_FLAG: Final = "--gpu-memory-utilization"


def utilization_in_args(default: float, args: Sequence[str]) -> float:
    """The utilization an engine runs with: the last ``--gpu-memory-utilization`` in ``args`` (a role's
    ``extra_args``, appended after ``worker.args``, so it wins), else ``default``."""
    value = default
    for i, arg in enumerate(args):
        text = args[i + 1] if arg == UTILIZATION_FLAG and i + 1 < len(args) else (
            arg.partition("=")[2] if arg.startswith(UTILIZATION_FLAG + "=") else None)
        if text is not None:
            try:
                value = float(text)
            except ValueError:
                continue  # vLLM refuses it at start-up; this rule only sizes memory
    return value


@dataclass(frozen=True, kw_only=True)
class GpuMemoryFit:
    """One GPU of a worker: vLLM's share, the PD buffer LMCache allocates after it, and what is left."""

    gpu: str
    gpu_memory_gib: float
    utilization: float
    pd_buffer_gib: float
    margin_gib: float = GPU_RUNTIME_MARGIN_GIB

    @property
    def vllm_share_gib(self) -> float:
        return self.utilization * self.gpu_memory_gib

    @property
    def left_gib(self) -> float:
        """What vLLM's share and the buffer leave of the GPU (the margin must fit in it)."""
        return self.gpu_memory_gib - self.vllm_share_gib - self.pd_buffer_gib

    @property
    def fits(self) -> bool:
        return self.left_gib >= self.margin_gib - 1e-9

    @property
    def max_utilization(self) -> float:
        """The highest utilization (two decimals, rounded down) that fits beside this buffer."""
        return math.floor((self.gpu_memory_gib - self.pd_buffer_gib - self.margin_gib) / self.gpu_memory_gib * 100
                          + 1e-9) / 100

    @property
    def max_pd_buffer_gib(self) -> int:
        """The largest whole-GiB buffer that fits beside this utilization."""
        return math.floor(self.gpu_memory_gib - self.vllm_share_gib - self.margin_gib + 1e-9)


def gpu_memory_fit(instance_type: str, utilization: float, pd_buffer_bytes: int) -> GpuMemoryFit:
    gpu = INSTANCE_FACTS[instance_type].gpu
    return GpuMemoryFit(gpu=gpu.short_name, gpu_memory_gib=gpu.memory_gib, utilization=utilization,
                        pd_buffer_gib=pd_buffer_bytes / GIB)


def colocated_utilization(instance_type: str, utilization: float, pd_buffer_bytes: int) -> float:
    """The colocated baseline's ``--gpu-memory-utilization`` beside a DPD endpoint that runs at ``utilization`` with
    a ``pd_buffer_bytes`` buffer: ``utilization`` plus the share of one GPU the PD buffer takes on every DPD rank, at
    most what the GPU-memory rule allows without a buffer (the GPU less the runtime margin:
    :attr:`GpuMemoryFit.max_utilization` at 0 bytes). Two decimals, rounded down.

    A colocated engine has no PD buffer. The endpoint's value may have been lowered to make room for one (the
    remedy for a larger buffer, docs/endpoint.md); the baseline would otherwise leave that memory idle and hold less
    KV cache per GPU than a DPD rank's vLLM share and buffer together."""
    with_buffer = gpu_memory_fit(instance_type, utilization, pd_buffer_bytes)
    without = gpu_memory_fit(instance_type, utilization, 0)
    given = math.floor((with_buffer.utilization + with_buffer.pd_buffer_gib / with_buffer.gpu_memory_gib) * 100
                       + 1e-9) / 100
    return min(given, without.max_utilization)


@dataclass(frozen=True, kw_only=True)
class ModelMemory:
    """What a model puts on the GPUs of one engine, whole (not yet split over the tensor-parallel ranks)."""

    name: str
    weight_bytes: int
    kv_bytes_per_token_per_rank: int
    source: str


@dataclass(frozen=True, kw_only=True)
class ModelFit:
    """One GPU of an engine: its weights and one ``max_model_len`` sequence of KV cache against vLLM's share."""

    weights_gib: float
    kv_gib: float
    vllm_share_gib: float

    @property
    def needed_gib(self) -> float:
        return self.weights_gib + self.kv_gib

    @property
    def fits(self) -> bool:
        return self.needed_gib <= self.vllm_share_gib


def model_fit(memory: ModelMemory, *, instance_type: str, utilization: float, tensor_parallel_size: int,
              max_model_len: int) -> ModelFit:
    """vLLM refuses to start when its share, after the weights, cannot hold one ``max_model_len`` sequence
    (vLLM: "max seq len ... is larger than the maximum number of tokens that can be stored in KV cache")."""
    share = utilization * INSTANCE_FACTS[instance_type].gpu.memory_gib
    return ModelFit(weights_gib=memory.weight_bytes / tensor_parallel_size / GIB,
                    kv_gib=memory.kv_bytes_per_token_per_rank * max_model_len / GIB, vllm_share_gib=share)
