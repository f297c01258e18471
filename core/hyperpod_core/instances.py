"""The one table of the instance types the operator runs DPD on: the node, its GPU and its instance store, each
figure with its source. The config's field types, its rules, the node and GPU fits (:mod:`hyperpod_core.fit`) and the
sizing planner (``hyperpod_analysis.plan``) all read it; nothing here reads the config.

Sources:
  [EC2-ACC]  EC2 "Accelerated computing instances - specifications"
             (docs.aws.amazon.com/ec2/latest/instancetypes/ac.html): vCPUs, memory (GiB), GPUs and network
             cards of p5/p5e/p5en/p6-b200/p6-b300.
  [EC2-CPU]  EC2 "CPU options - supported CPU cores and threads per CPU core per instance type": default cores
             and 2 threads per core for these types; ``ThreadsPerCore: 1`` leaves one vCPU per core.
  [EC2-STORE] EC2 "Accelerated computing instances - specifications", "Instance store specifications" (same page,
             #ac_instance-store): NVMe instance-store volumes per instance type.
  [EFA-P5]   EC2 "Maximize network bandwidth ... EFA configuration for P5 and P5e instances": 32 EFA network cards.
  [EC2-NET]  aws.amazon.com/ec2/instance-types/p5/ and /p6/: network bandwidth (p5/p5e/p5en/p6-b200: 3,200 Gbps;
             p6-b300: 6,400 Gbps).
  [SMI]      GPU memory as the driver reports it (``nvidia-smi`` ``memory.total``, MiB), published for each GPU:
             H100 80GB HBM3 81,559 MiB (NVIDIA/nccl#1264, driver 550.54.15; modal-labs/modal-client#2797);
             H200 143,771 MiB (NVIDIA/cuda-samples#311, driver 550.54.15); B200 183,359 MiB
             (NVIDIA/TensorRT-LLM#10278, driver 580.95.05); B300 SXM6 AC 275,040 MiB (NVIDIA AIConfigurator,
             ``systems/b300_sxm.yaml``: ``mem_capacity: 288400343040 # 275040MiB reported by nvidia-smi``).
             The datasheets' "80 GB" / "141 GB" / "180 GB" / "288 GB" are not what a process can use: 80 GB read as
             80 GiB overstates an H100 by 0.35 GiB, 141 GB as 141 GiB an H200 by 0.6 GiB.
  [GPU-DS]   Datasheet figures per GPU (bandwidths, peak): NVIDIA H100 and H200 datasheets, SXM columns
             (nvidia.com/en-us/data-center/h100/, /h200/); NVIDIA HGX B200 and B300 specifications
             (nvidia.com/en-us/data-center/hgx/: per board of 8 GPUs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

MIB: Final = 1 << 20


@dataclass(frozen=True, kw_only=True)
class GpuFacts:
    """One GPU: what a process can use of its memory, and the datasheet figures the planner's step model needs."""

    name: str
    """The GPU as the planner names it (``H100 SXM 80GB``; AIConfigurator's systems are keyed by it)."""
    short_name: str
    """The GPU model alone (``H100``), as the config's messages name it."""
    memory_mib: int
    """Memory of one GPU as the driver reports it (``nvidia-smi`` ``memory.total``) [SMI]. vLLM sizes its share
    from what CUDA reports (``torch.cuda.mem_get_info``), a few hundred MiB less: 81,106 MiB on an H100 SXM in a
    published ``deviceQuery`` (thamada/nvidia-smi, ``nvsim/H100SXMx8_deviceQuery.py``), 139.8 GiB on the H200
    measured in shared/reference/review-4/gpu-planner-check.md. The runtime margin of the GPU-memory rule absorbs
    that (:data:`hyperpod_core.fit.GPU_RUNTIME_MARGIN_GIB`)."""
    hbm_bytes_per_s: float
    bf16_dense_flops: float
    """Dense BF16 tensor-core peak (the datasheets print the 2:4-sparse figure, twice this)."""
    nvlink_bytes_per_s: float
    """Per GPU, one direction (half the datasheet's bidirectional figure)."""
    source: str

    @property
    def memory_bytes(self) -> int:
        return self.memory_mib * MIB

    @property
    def memory_gib(self) -> float:
        return self.memory_mib / 1024


_H100 = "[GPU-DS] H100 SXM: 80 GB HBM3, 3.35 TB/s, BF16 1,979 TFLOPS with sparsity, NVLink 900 GB/s; [SMI] 81,559 MiB"
_H200 = "[GPU-DS] H200 SXM: 141 GB HBM3e, 4.8 TB/s, BF16 1,979 TFLOPS with sparsity, NVLink 900 GB/s; [SMI] 143,771 MiB"
_B200 = ("[GPU-DS] HGX B200: 8 GPUs, 1.4 TB HBM3e (AWS p6-b200: 1,440 GB), 8 TB/s per GPU, FP16/BF16 36 PFLOPS with "
         "sparsity per board, NVLink 5 1.8 TB/s per GPU; [SMI] 183,359 MiB")
_B300 = ("[GPU-DS] HGX B300: 8 GPUs, 288 GB HBM3e each (2.3 TB), 8 TB/s per GPU, FP16/BF16 36 PFLOPS with sparsity per "
         "board, NVLink 5 1.8 TB/s per GPU; [SMI] 275,040 MiB")

#: The four GPUs of the DPD instance types.
GPUS: Final[dict[str, GpuFacts]] = {g.name: g for g in (
    GpuFacts(name="H100 SXM 80GB", short_name="H100", memory_mib=81_559, hbm_bytes_per_s=3.35e12,
             bf16_dense_flops=989.5e12, nvlink_bytes_per_s=450e9, source=_H100),
    GpuFacts(name="H200 SXM 141GB", short_name="H200", memory_mib=143_771, hbm_bytes_per_s=4.8e12,
             bf16_dense_flops=989.5e12, nvlink_bytes_per_s=450e9, source=_H200),
    GpuFacts(name="B200 180GB", short_name="B200", memory_mib=183_359, hbm_bytes_per_s=8.0e12,
             bf16_dense_flops=36e15 / 8 / 2, nvlink_bytes_per_s=900e9, source=_B200),
    GpuFacts(name="B300 288GB", short_name="B300", memory_mib=275_040, hbm_bytes_per_s=8.0e12,
             bf16_dense_flops=36e15 / 8 / 2, nvlink_bytes_per_s=900e9, source=_B300),
)}
H100_SXM, H200_SXM, B200_SXM, B300_SXM = GPUS.values()


@dataclass(frozen=True, kw_only=True)
class InstanceFacts:
    """One instance type as EC2 documents it (defaults: 2 threads per core), with its GPU."""

    instance_type: str
    vcpus: int
    cores: int
    memory_gib: int
    gpus: int
    gpu: GpuFacts
    efa_interfaces: int
    """EFA-capable network cards (one EFA interface each)."""
    efa_gbps: int
    """Aggregate EFA network bandwidth of the node [EC2-NET]."""
    source: str

    def cpus(self, threads_per_core: int) -> int:
        """CPUs the node reports: ``vcpus x threads_per_core / 2`` (``ThreadsPerCore: 1`` halves them) [EC2-CPU]."""
        if threads_per_core not in (1, 2):
            raise ValueError(f"threads_per_core must be 1 or 2, got {threads_per_core}")
        return self.vcpus * threads_per_core // 2

    @property
    def efa_bytes_per_s(self) -> float:
        return self.efa_gbps * 1e9 / 8


INSTANCE_FACTS: Final[dict[str, InstanceFacts]] = {f.instance_type: f for f in (
    InstanceFacts(instance_type="ml.p5.48xlarge", vcpus=192, cores=96, memory_gib=2048, gpus=8, gpu=H100_SXM,
                  efa_interfaces=32, efa_gbps=3200,
                  source="[EC2-ACC] p5.48xlarge: 192 vCPU, 2048 GiB, 8 x H100; [EFA-P5] 32; [EC2-NET] 3,200 Gbps"),
    InstanceFacts(instance_type="ml.p5e.48xlarge", vcpus=192, cores=96, memory_gib=2048, gpus=8, gpu=H200_SXM,
                  efa_interfaces=32, efa_gbps=3200,
                  source="[EC2-ACC] p5e.48xlarge: 192 vCPU, 2048 GiB, 8 x H200; [EFA-P5] 32; [EC2-NET] 3,200 Gbps"),
    InstanceFacts(instance_type="ml.p5en.48xlarge", vcpus=192, cores=96, memory_gib=2048, gpus=8, gpu=H200_SXM,
                  efa_interfaces=16, efa_gbps=3200,
                  source="[EC2-ACC] p5en.48xlarge: 192 vCPU, 2048 GiB, 8 x H200, 16 EFAv3 cards; [EC2-NET] 3,200 Gbps"),
    InstanceFacts(instance_type="ml.p6-b200.48xlarge", vcpus=192, cores=96, memory_gib=2048, gpus=8, gpu=B200_SXM,
                  efa_interfaces=8, efa_gbps=3200,
                  source="[EC2-ACC] p6-b200.48xlarge: 192 vCPU, 2048 GiB, 8 x B200, 8 EFAv4 cards; [EC2-NET] 3,200 "
                         "Gbps"),
    InstanceFacts(instance_type="ml.p6-b300.48xlarge", vcpus=192, cores=96, memory_gib=4096, gpus=8, gpu=B300_SXM,
                  efa_interfaces=16, efa_gbps=6400,
                  source="[EC2-ACC] p6-b300.48xlarge: 192 vCPU, 4096 GiB, 8 x B300; [EC2-NET] 6,400 Gbps EFAv4 at 400 "
                         "Gbps per card [I] (not verified offline)"),
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
