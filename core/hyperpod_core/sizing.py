"""What a GPU node offers a pod: instance facts with their sources, and the reservations taken before a pod.

The node budget of a config's workers (:func:`worker_budget`, :func:`worker_requests`) and the GPUs of its pools
(:func:`pool_gpus`) are computed here too, as functions of the config. Requests of the endpoint pods are derived
from here, never from a constant: with ``ThreadsPerCore: 1`` an
ml.p5.48xlarge exposes 96 CPUs, not 192, and the kubelet, the DaemonSets and the operator's sidecars take
their share before a worker pod is scheduled (deploy-facts.md, "Compute").

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
  [NODEADM]  awslabs/amazon-eks-ami ``nodeadm/internal/kubelet/config.go``: ``kubeReserved.cpu`` =
             6 % of the first core + 1 % of the second + 0.5 % of cores 3-4 + 0.25 % of the rest;
             ``kubeReserved.memory`` = 11 MiB x maxPods + 255 MiB; ``evictionHard memory.available`` 100Mi;
             maxPods is capped at 250 on instances with more than 30 vCPUs.
"""

from __future__ import annotations

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
    source: str

    def cpus(self, threads_per_core: int) -> int:
        """CPUs the node reports: ``vcpus x threads_per_core / 2`` (``ThreadsPerCore: 1`` halves them) [EC2-CPU]."""
        if threads_per_core not in (1, 2):
            raise ValueError(f"threads_per_core must be 1 or 2, got {threads_per_core}")
        return self.vcpus * threads_per_core // 2


INSTANCE_FACTS: Final[dict[str, InstanceFacts]] = {f.instance_type: f for f in (
    InstanceFacts(instance_type="ml.p5.48xlarge", vcpus=192, cores=96, memory_gib=2048, gpus=8,
                  efa_interfaces=32, source="[EC2-ACC] p5.48xlarge: 192 vCPU, 2048 GiB, 8 x H100; [EFA-P5] 32"),
    InstanceFacts(instance_type="ml.p5e.48xlarge", vcpus=192, cores=96, memory_gib=2048, gpus=8,
                  efa_interfaces=32, source="[EC2-ACC] p5e.48xlarge: 192 vCPU, 2048 GiB, 8 x H200; [EFA-P5] 32"),
    InstanceFacts(instance_type="ml.p5en.48xlarge", vcpus=192, cores=96, memory_gib=2048, gpus=8,
                  efa_interfaces=16, source="[EC2-ACC] p5en.48xlarge: 192 vCPU, 2048 GiB, 8 x H200, 16 EFAv3 cards"),
    InstanceFacts(instance_type="ml.p6-b200.48xlarge", vcpus=192, cores=96, memory_gib=2048, gpus=8,
                  efa_interfaces=8, source="[EC2-ACC] p6-b200.48xlarge: 192 vCPU, 2048 GiB, 8 x B200, 8 EFAv4 cards"),
    InstanceFacts(instance_type="ml.p6-b300.48xlarge", vcpus=192, cores=96, memory_gib=4096, gpus=8,
                  efa_interfaces=16, source="[EC2-ACC] p6-b300.48xlarge: 192 vCPU, 4096 GiB, 8 x B300; EFA: "
                                             "6.4 Tbps EFAv4 at 400 Gbps per card [I] (not verified offline)"),
)}

#: Instance types with EFA RDMA read/write that the operator supports for DPD (sagemaker-hyperpod-model-
#: deployment-dpd, "Requirements"), with GPUs per node from the instance table above.
DPD_INSTANCE_TYPES: Final[tuple[str, ...]] = ("ml.p5.48xlarge", "ml.p5e.48xlarge", "ml.p5en.48xlarge",
                                              "ml.p6-b200.48xlarge", "ml.p6-b300.48xlarge")
DPD_INSTANCE_GPUS: Final[dict[str, int]] = {t: INSTANCE_FACTS[t].gpus for t in DPD_INSTANCE_TYPES}

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

#: What the node agents on a HyperPod GPU node may request together. A budget, not a measurement: the agents'
#: published charts request 720m and 756 MiB together (each chart cited in tests/test_deploy_facts.py), and
#: the observability add-on's four node pods, which publish none, get the rest (over 800m and 1.8 GiB each).
#: ``kubectl describe node`` ("Allocated resources") shows the real sum on a cluster.
DAEMONSET_CPU_MILLIS: Final = 4000
DAEMONSET_MEMORY_MIB: Final = 8192

@dataclass(frozen=True, kw_only=True)
class NodePodReservation:
    """One pod on every GPU node that is not a worker, with what it may request."""

    name: str
    cpu_millis: int
    memory_mib: int
    source: str


#: The DaemonSet behind the operator's ``ModelImageCache`` (operator v3.3, ``modelCacheConfig.imageCache``: "the
#: operator pre-pulls the inference server container image onto target nodes via a DaemonSet"; CRD
#: ModelImageCache: "managed via a backing DaemonSet"), one pod on every node that runs a worker. Its requests
#: are not published [I]: a puller pod, then an idle container; budgeted like the small node agents. Reserved
#: whether or not the cache is on, so turning it on never makes a sized worker unschedulable.
MODEL_IMAGE_CACHE_DAEMONSET: Final = NodePodReservation(
    name="ModelImageCache DaemonSet (operator v3.3)", cpu_millis=100, memory_mib=256,
    source="[I] not published; shared/crds/v3.3/modelimagecaches.yaml says only 'backing DaemonSet'")


#: The operator adds containers to every worker pod next to vLLM (metrics sidecar on :9113, metrics
#: collector, S3 uploader; operator v3.4 makes their resources configurable: operator.md). Budget per pod.
SIDECAR_CPU_MILLIS: Final = 1000
SIDECAR_MEMORY_MIB: Final = 2048


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


@dataclass(frozen=True, kw_only=True)
class NodeBudget:
    """What one node leaves for the worker pods, step by step (every number in CPU millis or MiB)."""

    instance_type: str
    threads_per_core: int
    cpus: int
    memory_mib: int
    kube_reserved_cpu_millis: int
    kube_reserved_memory_mib: int

    @property
    def allocatable_cpu_millis(self) -> int:
        """Node ``status.allocatable.cpu``: capacity minus kubeReserved."""
        return self.cpus * 1000 - self.kube_reserved_cpu_millis

    @property
    def allocatable_memory_mib(self) -> int:
        """Node ``status.allocatable.memory``: capacity minus kubeReserved and the hard eviction threshold."""
        return self.memory_mib - self.kube_reserved_memory_mib - EVICTION_HARD_MEMORY_MIB

    def pod_cpu_millis(self, pods_per_node: int) -> int:
        """The most one worker container may request with ``pods_per_node`` workers on the node."""
        daemonsets = DAEMONSET_CPU_MILLIS + MODEL_IMAGE_CACHE_DAEMONSET.cpu_millis
        return (self.allocatable_cpu_millis - daemonsets) // pods_per_node - SIDECAR_CPU_MILLIS

    def pod_memory_mib(self, pods_per_node: int) -> int:
        daemonsets = DAEMONSET_MEMORY_MIB + MODEL_IMAGE_CACHE_DAEMONSET.memory_mib
        return (self.allocatable_memory_mib - daemonsets) // pods_per_node - SIDECAR_MEMORY_MIB


def node_budget(instance_type: str, threads_per_core: int) -> NodeBudget:
    facts = INSTANCE_FACTS[instance_type]
    cpus = facts.cpus(threads_per_core)
    return NodeBudget(
        instance_type=instance_type, threads_per_core=threads_per_core, cpus=cpus,
        memory_mib=int(facts.memory_gib * 1024 * MEMORY_VISIBLE_FRACTION),
        kube_reserved_cpu_millis=kube_reserved_cpu_millis(cpus),
        kube_reserved_memory_mib=kube_reserved_memory_mib())


@dataclass(frozen=True, kw_only=True)
class PodRequests:
    """Requests of one worker container: whole CPUs and whole GiB (what the manifests carry)."""

    cpu: int
    memory_gib: int


def max_pod_requests(instance_type: str, threads_per_core: int, gpus_per_pod: int) -> PodRequests:
    """The largest whole-CPU / whole-GiB requests a worker with ``gpus_per_pod`` GPUs can make and still be
    scheduled with as many workers as the node has GPUs for."""
    facts = INSTANCE_FACTS[instance_type]
    pods = max(1, facts.gpus // gpus_per_pod)
    budget = node_budget(instance_type, threads_per_core)
    return PodRequests(cpu=budget.pod_cpu_millis(pods) // 1000, memory_gib=budget.pod_memory_mib(pods) // 1024)


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
    budgets = [max_pod_requests(e.instance_type, tpc, e.tensor_parallel_size)
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
