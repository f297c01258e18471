"""What a GPU node offers a pod: instance facts with their sources, and the reservations taken before a pod.

The node budget of a config's workers (:func:`worker_budget`, :func:`worker_requests`), the GPUs of its pools
(:func:`pool_gpus`) and what one GPU holds (:func:`gpu_memory_fit`, :func:`model_fit`) are computed here too, as
functions of the config. Requests of the endpoint pods are derived from here, never from a constant: with
``ThreadsPerCore: 1`` an ml.p5.48xlarge exposes 96 CPUs, not 192, and the kubelet, the DaemonSets and the
operator's sidecars take their share before a worker pod is scheduled (deploy-facts.md, "Compute"); the workers
of one node request at most :data:`WORKER_SHARE_PERCENT` of it, so that the next add-on upgrade or DaemonSet
still fits (lifecycle-facts.md, "Node fit and GPU memory").

Sources:
  [EC2-ACC]  EC2 "Accelerated computing instances - specifications"
             (docs.aws.amazon.com/ec2/latest/instancetypes/ac.html): vCPUs, memory (GiB), GPUs and network
             cards of p5/p5e/p5en/p6-b200/p6-b300.
  [EC2-CPU]  EC2 "CPU options - supported CPU cores and threads per CPU core per instance type": default cores
             and 2 threads per core for these types; ``ThreadsPerCore: 1`` leaves one vCPU per core.
  [EC2-STORE] EC2 "Accelerated computing instances - specifications", "Instance store specifications" (same page,
             #ac_instance-store): NVMe instance-store volumes per instance type.
  [EFA-P5]   EC2 "Maximize network bandwidth ... EFA configuration for P5 and P5e instances": 32 EFA network cards.
  [SM-TPC]   SageMaker API ``ClusterInstanceGroupSpecification.ThreadsPerCore`` (1 disables hyper-threading).
  [EC2-GPU]  GPU memory per GPU: EC2 P5 page (aws.amazon.com/ec2/instance-types/p5/: p5 640 GB HBM3, p5e/p5en
             1128 GB HBM3e per 8 GPUs) and NVIDIA's H100 SXM (80 GB) / H200 (141 GB) datasheets; EC2 P6 page
             (aws.amazon.com/ec2/instance-types/p6/: p6-b200 1440 GB HBM3e per 8 GPUs) and NVIDIA's HGX B200
             datasheet (180 GB per GPU). B300: NVIDIA lists 288 GB HBM3e; HyperPod's own MIG table for
             ml.p6-b300.48xlarge (aws/sagemaker-hyperpod-cli, ``INSTANCE_TYPE_MIG_PROFILES``: whole-GPU profile
             ``mig-7g.269gb``, "288GB HBM3e, ~269GB usable") shows what a pod gets; we take 269 [I].
  [NODEADM]  awslabs/amazon-eks-ami ``nodeadm/internal/kubelet/config.go``: ``kubeReserved.cpu`` =
             6 % of the first core + 1 % of the second + 0.5 % of cores 3-4 + 0.25 % of the rest;
             ``kubeReserved.memory`` = 11 MiB x maxPods + 255 MiB; ``evictionHard memory.available`` 100Mi;
             maxPods is capped at 250 on instances with more than 30 vCPUs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

if TYPE_CHECKING:  # the config imports this module for its instance tables
    from hyperpod_core.config import Config, EndpointConfig


@dataclass(frozen=True, kw_only=True)
class InstanceFacts:
    """One instance type as EC2 documents it (defaults: 2 threads per core)."""

    instance_type: str
    vcpus: int
    cores: int
    memory_gib: int
    gpus: int
    efa_interfaces: int
    """EFA-capable network cards (one EFA interface each)."""
    gpu: str
    gpu_memory_gib: int
    """Memory of one GPU as the datasheets state it (their "GB" are the binary sizes the HBM stacks have: an
    80 GB H100 holds 80 GiB, of which CUDA reports 79.6 GiB; vLLM multiplies what CUDA reports, so using the
    datasheet figure overstates the room left beside vLLM's share by (1 - utilization) x 0.4 GiB, 0.1 GiB at
    0.75, which :data:`GPU_RUNTIME_MARGIN_GIB` absorbs) [EC2-GPU]."""
    source: str

    def cpus(self, threads_per_core: int) -> int:
        """CPUs the node reports: ``vcpus x threads_per_core / 2`` (``ThreadsPerCore: 1`` halves them) [EC2-CPU]."""
        if threads_per_core not in (1, 2):
            raise ValueError(f"threads_per_core must be 1 or 2, got {threads_per_core}")
        return self.vcpus * threads_per_core // 2


INSTANCE_FACTS: Final[dict[str, InstanceFacts]] = {f.instance_type: f for f in (
    InstanceFacts(instance_type="ml.p5.48xlarge", vcpus=192, cores=96, memory_gib=2048, gpus=8,
                  efa_interfaces=32, gpu="H100", gpu_memory_gib=80,
                  source="[EC2-ACC] p5.48xlarge: 192 vCPU, 2048 GiB, 8 x H100; [EFA-P5] 32; [EC2-GPU] 8 x 80 GB"),
    InstanceFacts(instance_type="ml.p5e.48xlarge", vcpus=192, cores=96, memory_gib=2048, gpus=8,
                  efa_interfaces=32, gpu="H200", gpu_memory_gib=141,
                  source="[EC2-ACC] p5e.48xlarge: 192 vCPU, 2048 GiB, 8 x H200; [EFA-P5] 32; [EC2-GPU] 8 x 141 GB"),
    InstanceFacts(instance_type="ml.p5en.48xlarge", vcpus=192, cores=96, memory_gib=2048, gpus=8,
                  efa_interfaces=16, gpu="H200", gpu_memory_gib=141,
                  source="[EC2-ACC] p5en.48xlarge: 192 vCPU, 2048 GiB, 8 x H200, 16 EFAv3 cards; [EC2-GPU] 8 x 141 GB"),
    InstanceFacts(instance_type="ml.p6-b200.48xlarge", vcpus=192, cores=96, memory_gib=2048, gpus=8,
                  efa_interfaces=8, gpu="B200", gpu_memory_gib=180,
                  source="[EC2-ACC] p6-b200.48xlarge: 192 vCPU, 2048 GiB, 8 x B200, 8 EFAv4 cards; "
                         "[EC2-GPU] 8 x 180 GB"),
    InstanceFacts(instance_type="ml.p6-b300.48xlarge", vcpus=192, cores=96, memory_gib=4096, gpus=8,
                  efa_interfaces=16, gpu="B300", gpu_memory_gib=269,
                  source="[EC2-ACC] p6-b300.48xlarge: 192 vCPU, 4096 GiB, 8 x B300; EFA: 6.4 Tbps EFAv4 at 400 Gbps "
                         "per card [I] (not verified offline); [EC2-GPU] 269 of 288 GB usable [I]"),
)}

#: Instance types with EFA RDMA read/write that the operator supports for DPD (sagemaker-hyperpod-model-
#: deployment-dpd, "Requirements"), with GPUs per node from the instance table above.
DPD_INSTANCE_TYPES: Final[tuple[str, ...]] = ("ml.p5.48xlarge", "ml.p5e.48xlarge", "ml.p5en.48xlarge",
                                              "ml.p6-b200.48xlarge", "ml.p6-b300.48xlarge")
DPD_INSTANCE_GPUS: Final[dict[str, int]] = {t: INSTANCE_FACTS[t].gpus for t in DPD_INSTANCE_TYPES}

#: DPD instance types HyperPod offers only as reserved capacity (a SageMaker training plan), not on demand: the
#: SageMaker API accepts them for a cluster (``ClusterInstanceType``) and for training plans
#: (``ReservedCapacityInstanceType``), but AWS's price list has no on-demand HyperPod cluster offer for them in any
#: region (cfn-lint's E3644 data, ``aws_sagemaker_cluster/instancetype_enum.json``, built from that list). [I]
#: until AWS's HyperPod pricing page lists an on-demand price.
RESERVED_ONLY_INSTANCE_TYPES: Final[frozenset[str]] = frozenset({"ml.p5e.48xlarge"})

# --- instance storage (the NVMe weights cache of operator v3.3) --------------------------------------------

@dataclass(frozen=True, kw_only=True)
class InstanceStore:
    """The NVMe instance-store volumes of one instance type, as EC2's instance-store table lists them."""

    disks: int
    disk_gb: int
    """Size of one volume in GB (decimal, as EC2 writes it)."""
    source: str

    @property
    def total_gb(self) -> int:
        return self.disks * self.disk_gb


#: [EC2-STORE] EC2 "Accelerated computing instances - specifications", "Instance store specifications"
#: (docs.aws.amazon.com/ec2/latest/instancetypes/ac.html#ac_instance-store), the table AWS's NVMe deployment
#: page (sagemaker-hyperpod-model-deployment-deploy-nvme) points to "to validate availability for your instance
#: type". An instance type missing here has no instance store: the weights cache cannot work on it.
INSTANCE_STORES: Final[dict[str, InstanceStore]] = {
    "ml.p5.48xlarge": InstanceStore(disks=8, disk_gb=3840, source="[EC2-STORE] p5.48xlarge: 8 x 3840 GB NVMe SSD"),
    "ml.p5e.48xlarge": InstanceStore(disks=8, disk_gb=3840, source="[EC2-STORE] p5e.48xlarge: 8 x 3840 GB NVMe SSD"),
    "ml.p5en.48xlarge": InstanceStore(disks=8, disk_gb=3840,
                                      source="[EC2-STORE] p5en.48xlarge: 8 x 3840 GB NVMe SSD"),
    "ml.p6-b200.48xlarge": InstanceStore(disks=8, disk_gb=3840,
                                         source="[EC2-STORE] p6-b200.48xlarge: 8 x 3840 GB NVMe SSD"),
    "ml.p6-b300.48xlarge": InstanceStore(disks=8, disk_gb=3840,
                                         source="[EC2-STORE] p6-b300.48xlarge: 8 x 3840 GB NVMe SSD [I] (not "
                                                "re-read offline; a public P6-B300 run shows a 27 TiB "
                                                "/opt/dlami/nvme, = 8 x 3840 GB)"),
}

#: Where HyperPod nodes mount the instance store: AWS's HyperPod EKS lifecycle script offers "/opt/sagemaker"
#: (the secondary EBS volume) or "/opt/dlami/nvme" as already-mounted disks and only waits for them
#: (aws-samples/awsome-distributed-training, 1.architectures/7.sagemaker-hyperpod-eks/LifecycleScripts/
#: base-config/on_create_main.sh); AWS's own NVMe samples read weights from hostPath /opt/dlami/nvme/...
#: (aws/sagemaker-hyperpod-cli, inference-operator/config/samples/v1_nvme_k8s_volume.yaml); the v3.3 CRD
#: defaults ``weightsCache.hostPath`` to it. No page says in words that HyperPod mounts it there [I]; the
#: lifecycle script logs whether it is a mount point on every node.
INSTANCE_STORE_MOUNT: Final = "/opt/dlami/nvme"


def instance_store(instance_type: str) -> InstanceStore | None:
    """The instance type's NVMe instance store, or ``None`` when it has none."""
    return INSTANCE_STORES.get(instance_type)


def weights_cache_unavailable(instance_type: str) -> str | None:
    """Why the NVMe weights cache cannot work on ``instance_type`` (one clause), or ``None`` when it can."""
    if instance_store(instance_type) is None:
        return f"{instance_type} has no NVMe instance store (EC2 instance-store table)"
    return None


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
    per: Literal["node", "worker"]
    """``node``: once per node; ``worker``: once per worker pod on the node."""
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
        name="operator v3.3 image cache (ModelImageCache DaemonSet)", cpu_millis=500, memory_mib=1024, per="node",
        source="shared/crds/v3.3/modelimagecaches.yaml: 'a cached container image on a set of nodes, managed via a "
               "backing DaemonSet' (spec.modelCacheConfig.imageCache); its pod's requests are not published [I]"),
    Reservation(
        name="router pod (2 containers)", cpu_millis=1000, memory_mib=2048, per="node",
        source="the operator's DPD router pod has 2 containers (seed blog, lifecycle-facts.md); nothing keeps it "
               "off a GPU node (HyperPod nodes carry no taint by default); requests not published [I]"),
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


def reserved(per: Literal["node", "worker"]) -> tuple[int, int]:
    """CPU millis and MiB of :data:`RESERVATIONS` taken once per node (``node``) or per worker (``worker``)."""
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
        worker_cpu, _ = reserved("worker")
        return (self.allocatable_cpu_millis - node_cpu) // pods_per_node - worker_cpu

    def fit_memory_mib(self, pods_per_node: int) -> int:
        _, node_mem = reserved("node")
        _, worker_mem = reserved("worker")
        return (self.allocatable_memory_mib - node_mem - self.tiered_storage_mib) // pods_per_node - worker_mem

    def pod_cpu(self, pods_per_node: int) -> int:
        """Whole CPUs one worker may request: within the cap and after every reservation."""
        return min(self.workers_cpu // pods_per_node, self.fit_cpu_millis(pods_per_node) // 1000)

    def pod_memory_gib(self, pods_per_node: int) -> int:
        return min(self.workers_memory_gib // pods_per_node, self.fit_memory_mib(pods_per_node) // 1024)


def node_budget(instance_type: str, threads_per_core: int, tiered_storage_percent: int = 0) -> NodeBudget:
    facts = INSTANCE_FACTS[instance_type]
    cpus = facts.cpus(threads_per_core)
    return NodeBudget(
        instance_type=instance_type, threads_per_core=threads_per_core, cpus=cpus, memory_gib=facts.memory_gib,
        memory_mib=int(facts.memory_gib * 1024 * MEMORY_VISIBLE_FRACTION),
        kube_reserved_cpu_millis=kube_reserved_cpu_millis(cpus),
        kube_reserved_memory_mib=kube_reserved_memory_mib(), tiered_storage_percent=tiered_storage_percent)


@dataclass(frozen=True, kw_only=True)
class PodRequests:
    """Requests of one worker container: whole CPUs and whole GiB (what the manifests carry)."""

    cpu: int
    memory_gib: int


def workers_per_node(instance_type: str, gpus_per_pod: int) -> int:
    return max(1, INSTANCE_FACTS[instance_type].gpus // gpus_per_pod)


def max_pod_requests(instance_type: str, threads_per_core: int, gpus_per_pod: int,
                     tiered_storage_percent: int = 0) -> PodRequests:
    """The largest whole-CPU / whole-GiB requests a worker with ``gpus_per_pod`` GPUs can make and still be
    scheduled with as many workers as the node has GPUs for (beside tiered storage's share, when it is on)."""
    pods = workers_per_node(instance_type, gpus_per_pod)
    budget = node_budget(instance_type, threads_per_core, tiered_storage_percent)
    return PodRequests(cpu=budget.pod_cpu(pods), memory_gib=budget.pod_memory_gib(pods))


# --- the node budget of a config's workers -----------------------------------------------------------------

#: A worker of the DPD endpoint (``prefill``, ``decode``) or of the colocated baseline the benchmark runs.
WorkerRole = Literal["prefill", "decode", "colocated"]


def worker_budget(config: Config, role: WorkerRole) -> PodRequests:
    """The most one worker of ``role`` may request: the smallest node budget among the instance groups of
    ``endpoint.instance_type`` it can land on (its pool and ``shared``; any pool for the colocated
    baseline), shared by as many workers as the node has GPUs for."""
    e = config.endpoint
    pools: tuple[str, ...] = ("prefill", "decode", "shared") if role == "colocated" else (role, "shared")
    groups = [g for g in config.hyperpod.instance_groups if g.instance_type == e.instance_type and g.pool in pools]
    groups = groups or [g for g in config.hyperpod.instance_groups if g.instance_type == e.instance_type]
    budgets = [max_pod_requests(e.instance_type, tpc, e.tensor_parallel_size, config.tiered_storage_percent() or 0)
               for tpc in sorted({g.threads_per_core for g in groups}) or [1]]
    return PodRequests(cpu=min(b.cpu for b in budgets), memory_gib=min(b.memory_gib for b in budgets))


def worker_requests(config: Config, role: WorkerRole) -> PodRequests:
    """CPU and memory requests of one worker of ``role``: the configured ones, else the node budget.
    The colocated baseline runs the decode role's engine and takes its requests."""
    budget = worker_budget(config, role)
    r = config.endpoint.decode if role == "colocated" else getattr(config.endpoint, role)
    return PodRequests(cpu=min(r.cpu or budget.cpu, budget.cpu),
                       memory_gib=min(r.memory_gib or budget.memory_gib, budget.memory_gib))


def pool_gpus(config: Config, pool: Literal["prefill", "decode", "shared"]) -> int:
    """GPUs available to a DPD role: nodes in groups labelled for it, plus shared groups."""
    return sum(g.instance_count * DPD_INSTANCE_GPUS[g.instance_type]
               for g in config.hyperpod.instance_groups if g.pool in (pool, "shared"))


def peak_replicas(endpoint: EndpointConfig, role: Literal["prefill", "decode"]) -> int:
    """Replicas a role can reach: its fixed count, or the autoscaling maximum when that is on."""
    fixed: int = getattr(endpoint, role).replicas
    return max(fixed, getattr(endpoint.autoscaling, role).max_replicas) if endpoint.autoscaling.enabled else fixed


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


def role_gpu_memory_utilization(endpoint: EndpointConfig, role: Literal["prefill", "decode"]) -> float:
    """The utilization the role's engine runs with: the last ``--gpu-memory-utilization`` in its
    ``extra_args`` (appended after ``worker.args``, so it wins), else ``endpoint.gpu_memory_utilization``."""
    value = endpoint.gpu_memory_utilization
    args = list(getattr(endpoint, role).extra_args)
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
    facts = INSTANCE_FACTS[instance_type]
    return GpuMemoryFit(gpu=facts.gpu, gpu_memory_gib=facts.gpu_memory_gib, utilization=utilization,
                        pd_buffer_gib=pd_buffer_bytes / GIB)


def colocated_gpu_memory_utilization(endpoint: EndpointConfig) -> float:
    """The colocated baseline's ``--gpu-memory-utilization``: ``endpoint.gpu_memory_utilization`` plus the share of
    one GPU the PD buffer takes on every DPD rank, at most what the GPU-memory rule
    (:func:`hyperpod_core.config.rules.gpu_memory_holds_the_pd_buffer`) allows without a buffer (the GPU less the
    runtime margin: :attr:`GpuMemoryFit.max_utilization` at 0 bytes). Two decimals, rounded down.

    A colocated engine has no PD buffer. The endpoint's value may have been lowered to make room for one (the
    remedy for a larger buffer, docs/endpoint.md); the baseline would otherwise leave that memory idle and hold less
    KV cache per GPU than a DPD rank's vLLM share and buffer together."""
    with_buffer = gpu_memory_fit(endpoint.instance_type, endpoint.gpu_memory_utilization,
                                 endpoint.pd_buffer_size_bytes)
    without = gpu_memory_fit(endpoint.instance_type, endpoint.gpu_memory_utilization, 0)
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


def model_memory(config: Config) -> ModelMemory | None:
    """The config's model by size: ``model.parameters_billion`` (with ``model.dtype`` and
    ``model.kv_cache_kib_per_token``) when set, else the table's model named by ``model.name`` or its S3
    folder (:func:`hyperpod_core.models.known_model`); ``None`` when neither says how large it is."""
    from hyperpod_core.models import DTYPE_BYTES, known_model

    m, tp = config.model, config.endpoint.tensor_parallel_size
    if m.parameters_billion is not None and m.kv_cache_kib_per_token is not None:
        return ModelMemory(name=m.name, weight_bytes=int(m.parameters_billion * 1e9 * DTYPE_BYTES[m.dtype]),
                           kv_bytes_per_token_per_rank=int(m.kv_cache_kib_per_token * 1024 / tp),
                           source="model.parameters_billion, model.kv_cache_kib_per_token")
    shape = known_model(m.name, m.s3_prefix)
    if shape is None:
        return None
    return ModelMemory(name=shape.name, weight_bytes=shape.parameters * DTYPE_BYTES[m.dtype],
                       kv_bytes_per_token_per_rank=shape.kv_bytes_per_token_per_rank(tp), source=shape.source)


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


def model_fit(config: Config, role: Literal["prefill", "decode"]) -> ModelFit | None:
    """vLLM refuses to start when its share, after the weights, cannot hold one ``max_model_len`` sequence
    (vLLM: "max seq len ... is larger than the maximum number of tokens that can be stored in KV cache")."""
    memory = model_memory(config)
    if memory is None:
        return None
    e = config.endpoint
    share = role_gpu_memory_utilization(e, role) * INSTANCE_FACTS[e.instance_type].gpu_memory_gib
    return ModelFit(weights_gib=memory.weight_bytes / e.tensor_parallel_size / GIB,
                    kv_gib=memory.kv_bytes_per_token_per_rank * e.max_model_len / GIB, vllm_share_gib=share)
