"""Every version of something this project *deploys*, pinned in one place.

Python and npm tooling versions are pinned in ``pyproject.toml`` and ``package-lock.json``; this module
holds what ends up running in the account: Kubernetes, EKS add-ons, Helm charts, container images, and
the operator CRD we generate bindings from. Each pin names its source so that an upgrade is a reviewed
one-line change. Nothing here is read from the network at synth time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

# --- Kubernetes -----------------------------------------------------------------------------------------
#: Kubernetes versions HyperPod supports (docs: sagemaker-hyperpod-eks-prerequisites) for which this
#: project also installs a kubectl Lambda layer (pyproject: aws-cdk.lambda-layer-kubectl-v33).
SUPPORTED_KUBERNETES_VERSIONS: Final = ("1.33",)
KUBERNETES_VERSION: Final = "1.33"


# --- EKS add-ons ----------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class AddonPin:
    """An EKS add-on at an exact version, with the Kubernetes versions EKS offers that version for.

    ``kubernetes_versions`` is the compatibility table: synth refuses ``eks.kubernetes_version`` when it is
    not listed (a pinned version that EKS does not offer for the cluster's Kubernetes version fails
    ``CreateAddon`` after the control plane is up: aws/containers-roadmap#2625). The authority is
    ``aws eks describe-addon-versions --addon-name <name> --kubernetes-version <v>``; ``checked`` is the date
    the row was last compared with it or with the page named in ``source``. ``scripts/refresh-addon-versions``
    redoes the comparison for whoever has AWS credentials and prints the rows that changed.
    """

    name: str
    version: str
    source: str
    kubernetes_versions: tuple[str, ...]
    """Kubernetes minor versions EKS offers ``version`` for (``describe-addon-versions`` ``compatibilities``)."""
    checked: str
    """ISO date the row was last checked against ``source`` (or the script's output)."""


_CHECKED: Final = "2026-11-30"
#: Rows compared on this date with published material (AWS pages, `eksctl`/`describe-addon-versions` output
#: others published, AWS samples); each row's ``source`` says what was found and how strong it is.
_RESEARCHED: Final = "2026-12-01"

VPC_CNI: Final = AddonPin(
    name="vpc-cni", version="v1.20.4-eksbuild.1",
    source="HyperPod needs Amazon VPC CNI >= 1.18.3 (sagemaker-hyperpod-eks-prerequisites); v1.20.x is "
           "the line the EKS user guide lists for 1.27-1.33 (managing-vpc-cni, 'Amazon VPC CNI versions')",
    kubernetes_versions=("1.29", "1.30", "1.31", "1.32", "1.33"), checked=_CHECKED)
KUBE_PROXY: Final = AddonPin(
    name="kube-proxy", version="v1.33.3-eksbuild.4",
    source="EKS add-on versions for Kubernetes 1.33; kube-proxy builds track one Kubernetes minor "
           "(managing-kube-proxy). Offered for 1.33: `eksctl get addons` on a 1.33 cluster lists it under "
           "UPDATE AVAILABLE, and a 1.32->1.33 upgrade guide shows it as describe-addon-versions' default",
    kubernetes_versions=("1.33",), checked=_RESEARCHED)
COREDNS: Final = AddonPin(
    name="coredns", version="v1.12.2-eksbuild.4",
    source="EKS add-on versions for Kubernetes 1.33 (managing-coredns, 'CoreDNS versions': the ja_jp edition's "
           "table lists '1.33 v1.12.2-eksbuild.4'; later editions list newer 1.33 builds)",
    kubernetes_versions=("1.33",), checked=_RESEARCHED)
POD_IDENTITY_AGENT: Final = AddonPin(
    name="eks-pod-identity-agent", version="v1.3.8-eksbuild.2",
    source="required by the HyperPod observability add-on (hyperpod-observability-addon-setup); ACTIVE on "
           "a 1.33 cluster in published `eksctl get addons` output (third party, not an AWS table)",
    kubernetes_versions=("1.33",), checked=_RESEARCHED)
S3_CSI: Final = AddonPin(
    name="aws-mountpoint-s3-csi-driver", version="v1.14.1-eksbuild.1",
    source="inference operator dependency, minimum named in sagemaker-hyperpod-model-deployment-setup; "
           "no public source found that ties this build to 1.33 (`preflight` checks it live)",
    kubernetes_versions=("1.33",), checked=_RESEARCHED)
FSX_CSI: Final = AddonPin(
    name="aws-fsx-csi-driver", version="v1.6.0-eksbuild.1",
    source="inference operator init container requires CSIDriver fsx.csi.aws.com (chart manager.yaml); the "
           "minimum named in sagemaker-hyperpod-model-deployment-setup. No public source found that ties this "
           "build to 1.33, and aws/containers-roadmap#2625 shows the add-on refused on 1.33 at its launch "
           "(`preflight` checks it live)",
    kubernetes_versions=("1.33",), checked=_RESEARCHED)
METRICS_SERVER: Final = AddonPin(
    name="metrics-server", version="v0.8.0-eksbuild.2",
    source="inference operator dependency, minimum v0.7.2-eksbuild.4 (sagemaker-hyperpod-model-deployment-"
           "setup). That build is seen only on 1.32 clusters; v0.8.0-eksbuild.2 is ACTIVE on a 1.33 cluster in "
           "published `eksctl get addons` output and mapped to 1.33 in third-party CDK add-on tables",
    kubernetes_versions=("1.33",), checked=_RESEARCHED)
CERT_MANAGER: Final = AddonPin(
    name="cert-manager", version="v1.18.2-eksbuild.2",
    source="inference operator dependency (sagemaker-hyperpod-model-deployment-setup); the ADT Terraform "
           "module installs this version on its Kubernetes 1.33 default (cert_manager.tf)",
    kubernetes_versions=("1.33",), checked=_CHECKED)
INFERENCE_OPERATOR: Final = AddonPin(
    name="amazon-sagemaker-hyperpod-inference", version="v1.4.0-eksbuild.1",
    source="add-on v1.4.0 = operator v3.3 (HyperPod inference release notes, as quoted in shared/reference/"
           "operator.md): modelCacheConfig and loadBalancer.idleTimeoutSeconds, which the endpoint manifests "
           "set, on top of v3.2's pdSpec. The '-eksbuild.1' suffix is [I]: no public copy shows the build "
           "number, so `preflight` checks it live with describe-addon-versions",
    kubernetes_versions=("1.33",), checked=_RESEARCHED)
OBSERVABILITY: Final = AddonPin(
    name="amazon-sagemaker-hyperpod-observability", version="v1.0.5-eksbuild.1",
    source="hyperpod-observability-addon-troubleshooting names v1.0.5-eksbuild.1 (adds the restricted-"
           "instance-group toleration); configuration keys from the console's observability-template.yaml",
    kubernetes_versions=("1.33",), checked=_CHECKED)

#: Every pinned add-on: the compatibility table synth checks and the CLI preflight reads.
ADDONS: Final[tuple[AddonPin, ...]] = (
    VPC_CNI, KUBE_PROXY, COREDNS, POD_IDENTITY_AGENT, S3_CSI, FSX_CSI, METRICS_SERVER, CERT_MANAGER,
    INFERENCE_OPERATOR, OBSERVABILITY,
)

#: The operator version whose CRD we generate bindings from and validate against: the add-on above ships it.
INFERENCE_OPERATOR_APP_VERSION: Final = "3.3"


# --- The operator CRD (bindings and schema tests) ------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class CrdPin:
    """A CRD file published upstream, pinned by commit and content hash."""

    file_name: str
    url: str
    sha256: str


#: The inference-operator sub-chart of aws/sagemaker-hyperpod-cli at the commit that made chart 2.3.0 /
#: appVersion "3.3" (shared/crds/v3.3/SOURCES.md). The local copies in ../shared/crds/v3.3 are byte-identical
#: (their git blob ids are in SOURCES.md); each sha256 below was computed from those verified copies.
CRD_COMMIT: Final = "0986f2cc4eb14070d3aeb159c2c9b09d1b5f287b"
_CRD_BASE: Final = (
    f"https://raw.githubusercontent.com/aws/sagemaker-hyperpod-cli/{CRD_COMMIT}/helm_chart/HyperPodHelmChart/"
    "charts/inference-operator/config/crd/inference.sagemaker.aws.amazon.com_"
)
INFERENCE_ENDPOINT_CONFIG_CRD: Final = CrdPin(
    file_name="inferenceendpointconfigs.yaml", url=_CRD_BASE + "inferenceendpointconfigs.yaml",
    sha256="9a0e6117cfb09a55cd2c71e52c41424bea13dfd58a1929c10332095a1d26c323",
)
#: What the operator creates for ``modelCacheConfig.weightsCache`` (new in v3.3); ``status`` reads its state.
MODEL_WEIGHTS_CACHE_CONFIG_CRD: Final = CrdPin(
    file_name="modelweightscacheconfigs.yaml", url=_CRD_BASE + "modelweightscacheconfigs.yaml",
    sha256="2f3c06372449122fbc444d356eb7b6489a746d0d46afaa19153d20e37ff59f52",
)
#: What the operator creates for ``modelCacheConfig.imageCache`` (new in v3.3; its status is mirrored in the
#: IEC's ``status.imageCacheStatus``).
MODEL_IMAGE_CACHE_CRD: Final = CrdPin(
    file_name="modelimagecaches.yaml", url=_CRD_BASE + "modelimagecaches.yaml",
    sha256="ba475be0ee231162e6cdf4594136f97e7ca2654f38074cb2d3e09ee9f35d7af3",
)


# --- Images ---------------------------------------------------------------------------------------------
#: The DPD worker image AWS validated (LMCache 0.4.3, vLLM 0.19.0, NIXL 1.0.0), per the DPD guide.
DPD_WORKER_IMAGE: Final = "lmcache/vllm-openai:v0.4.3"
#: Images AWS names as supported for DPD (sagemaker-hyperpod-model-deployment-dpd).
DPD_SUPPORTED_IMAGES: Final = (
    "lmcache/vllm-openai:v0.4.3",
    "public.ecr.aws/deep-learning-containers/vllm:server-hyperpod-cuda-v1.1",
)


# --- Operator limits (v3.3) -----------------------------------------------------------------------------
#: "a single decoder replica with multiple prefiller replicas" (AWS ML blog, 10 Jul 2026; DPD guide:
#: one decode Deployment per endpoint). v3.3 leaves ``pdSpec`` unchanged (shared/crds/v3.3/SOURCES.md).
DPD_MAX_DECODE_REPLICAS: Final = 1
#: ``spec.loadBalancer.idleTimeoutSeconds``: ``minimum: 1``, ``maximum: 4000``, no schema default; "If not
#: specified, defaults to 60 seconds" (v3.3 CRD, IEC line 4397).
LOAD_BALANCER_IDLE_TIMEOUT_RANGE_SECONDS: Final = (1, 4000)
ALB_DEFAULT_IDLE_TIMEOUT_SECONDS: Final = 60
#: ``spec.modelCacheConfig.weightsCache.hostPath``: ``default: /opt/dlami/nvme``, length 1-255 (v3.3 CRD).
WEIGHTS_CACHE_DEFAULT_HOST_PATH: Final = "/opt/dlami/nvme"


# --- Helm charts the cluster stack installs ---------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class HelmChartPin:
    """A published Helm chart at an exact version. The deploy does not download it: set-up fetches its chart
    directory (``*_CHART`` below, a :class:`ChartArtifactPin`) and synth ships it as an asset."""

    chart: str
    repository: str
    version: str
    source: str


#: The HyperPod dependencies chart (``helm_chart/HyperPodHelmChart`` in aws/sagemaker-hyperpod-cli) bundles
#: these two device plugins as sub-charts pulled from their published repositories. We install the same
#: charts at the same versions, from their source at the commits those versions were packaged from, with the
#: values HyperPod needs (affinity to ``ml.*`` instance types, tolerations for the HyperPod health taints).
NVIDIA_DEVICE_PLUGIN: Final = HelmChartPin(
    chart="nvidia-device-plugin", repository="https://nvidia.github.io/k8s-device-plugin", version="0.16.1",
    source="HyperPodHelmChart/Chart.yaml dependency (aws/sagemaker-hyperpod-cli@011ca927)")
EFA_DEVICE_PLUGIN: Final = HelmChartPin(
    chart="aws-efa-k8s-device-plugin", repository="https://aws.github.io/eks-charts", version="0.5.20",
    source="HyperPodHelmChart/Chart.yaml dependency (aws/sagemaker-hyperpod-cli@011ca927)")


# --- HyperPod resiliency components (chart artifacts) -----------------------------------------------
#: The health-monitoring agent (HMA) and the deep-health-check, job-auto-restart and hyperpod-patching
#: components exist only as local sub-charts of ``helm_chart/HyperPodHelmChart`` in aws/sagemaker-hyperpod-cli;
#: AWS publishes them in no Helm or OCI repository (docs: sagemaker-hyperpod-eks-install-packages-using-helm-chart,
#: "Download the Helm charts ... git clone"). The docs also say the chart is required for clusters created
#: through the API and that the ``aws-hyperpod`` namespace is fixed.
#: They are fetched at SET-UP (``./scripts/setup`` -> ``python -m hyperpod_mainjob.charts --fetch``), file by
#: file from raw.githubusercontent.com at this commit, each verified against the SHA-256 below (computed from
#: the blobs of that commit), and shipped as CDK assets: the deploy reaches only AWS APIs and container
#: registries. They are never copied into this repository. See docs/deploy.md.
HYPERPOD_CHART_REPOSITORY: Final = "https://github.com/aws/sagemaker-hyperpod-cli"
HYPERPOD_CHART_COMMIT: Final = "011ca927123e02b35a399935bbb3ab1905fe33c7"
HYPERPOD_CHART_PATH: Final = "helm_chart/HyperPodHelmChart/charts"


@dataclass(frozen=True, kw_only=True)
class ChartFilePin:
    """One file of a chart directory, relative to the chart, with its content hash."""

    path: str
    sha256: str


@dataclass(frozen=True, kw_only=True)
class ChartArtifactPin:
    """A chart directory of a GitHub repository at one commit: exactly these files."""

    name: str
    commit: str
    files: tuple[ChartFilePin, ...]
    repository: str = "aws/sagemaker-hyperpod-cli"
    """``owner/name``. Default: the HyperPod CLI repository."""
    path: str = ""
    """The chart directory in the repository. Default: ``HYPERPOD_CHART_PATH/<name>``."""

    @property
    def base_url(self) -> str:
        """Where set-up downloads the files from (``base_url + file.path``)."""
        path = self.path or f"{HYPERPOD_CHART_PATH}/{self.name}"
        return f"https://raw.githubusercontent.com/{self.repository}/{self.commit}/{path}/"


#: Installed in this order, each its own Helm release (deep-health-check creates the aws-hyperpod namespace
#: the health-monitoring agent runs in). The training operators, MPI operator, Neuron plugin, MLflow and the
#: inference operator are left out: DPD on p5 does not use them, and the inference operator is installed as
#: its EKS add-on by the platform stack.
HYPERPOD_RESILIENCY_CHART_ARTIFACTS: Final = (
    ChartArtifactPin(name="deep-health-check", commit=HYPERPOD_CHART_COMMIT, files=(
        ChartFilePin(path="Chart.yaml",
                     sha256="565b1af368106a7f170e140701cf7b3212a033457a7c2198bacc537db7c849d2"),
        ChartFilePin(path="templates/aws-hyperpod-namespace.yaml",
                     sha256="b95e2fbdb20c3bf9e900ecf0071030d59dfeb2f3d81368a0fa69ed17491ea1b3"),
        ChartFilePin(path="templates/deep-health-check-rbac.yaml",
                     sha256="630e11018a6190f10d77192a9b12a4211440d5dc2f5d462baca95517530ca321"),
        ChartFilePin(path="values.yaml",
                     sha256="1a787c6106584f7d99f2f251230314283f0ffb563e26e18b2ff7eb5d058dbd8a"),
    )),
    ChartArtifactPin(name="health-monitoring-agent", commit=HYPERPOD_CHART_COMMIT, files=(
        ChartFilePin(path="Chart.yaml",
                     sha256="0ee1c2d8227cee3df36af67c69d2e699f3733d7b0cbeea989db027f3fccee9ba"),
        ChartFilePin(path="templates/_helpers.tpl",
                     sha256="ebe45662be5d181e4e955815f78d551e78b2d6adcf1a2042e1cf0839a2f54134"),
        ChartFilePin(path="templates/health-monitoring-agent.yaml",
                     sha256="144934bc16b86f9321924f095aa18d00d0609166c7756a0c7fda74515a881826"),
        ChartFilePin(path="values.yaml",
                     sha256="b04ce7d3a733ca6c36a2531e47454b06f21585addff97a136d66a9379abcfdb9"),
    )),
    ChartArtifactPin(name="job-auto-restart", commit=HYPERPOD_CHART_COMMIT, files=(
        ChartFilePin(path="Chart.yaml",
                     sha256="90cf9a17addf2a8a4ef5985be27bd60529aded5baebfa9c61a4f3e4ac1bc4a12"),
        ChartFilePin(path="templates/job-auto-restart-rbac.yaml",
                     sha256="421c3898ca8bd6a57b4dc06314ddc402ee094bdf02591dbb30effbb77192f2d8"),
        ChartFilePin(path="values.yaml",
                     sha256="133260b7fa3482131b6dea85c09b367ed930c460d192ce7234bccdeedc8bed9f"),
    )),
    ChartArtifactPin(name="hyperpod-patching", commit=HYPERPOD_CHART_COMMIT, files=(
        ChartFilePin(path="Chart.yaml",
                     sha256="f6991247a61af220202675f83cf8ed4b61e151381769a102e697c8abe0f67b50"),
        ChartFilePin(path="templates/clusterrole.yaml",
                     sha256="095b19c2a22af90c4210b6c0b99174d1cb8460252df6f69f18a1abc08e543513"),
        ChartFilePin(path="templates/clusterrolebinding.yaml",
                     sha256="ca29da6efb32c8922413cdaf6ce24455eff84a5e1952f0ad962e81c995df6319"),
        ChartFilePin(path="values.yaml",
                     sha256="e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    )),
)


def _files(listing: str) -> tuple[ChartFilePin, ...]:
    return tuple(ChartFilePin(sha256=digest, path=path) for digest, path in
                 (line.split() for line in listing.strip().splitlines()))


#: The device plugins, as chart source directories at the commit their published package was made from
#: (fetched at set-up like the sub-charts above, so the deploy does not reach nvidia.github.io or
#: aws.github.io). NVIDIA: tag v0.16.1 (Chart.yaml version "0.16.1", with its vendored
#: node-feature-discovery sub-chart). EFA: the eks-charts commit that set Chart.yaml ``version: v0.5.20``.
NVIDIA_DEVICE_PLUGIN_CHART: Final = ChartArtifactPin(
    name="nvidia-device-plugin", repository="NVIDIA/k8s-device-plugin",
    commit="cb6e45ec357705e6458f753eb04a4bde31ec18cf", path="deployments/helm/nvidia-device-plugin", files=_files("""
bb987e6a8ef45a99255d1d632812482d5f0f3255ea841520b4d90342df5fe2b3 .helmignore
9d2ab56558fded8bf5941ffd0e53ed6a8c92746a95482e403b3ce34c85569595 Chart.lock
8d14be23712a2a596207a72129dc460f1d7146997bcdd0b41d0f7df978cfeed4 Chart.yaml
28e8a2df066ea0e802fd5ce3803e8712ca915853ee7b5bd66f3a1e17e0b53f8c charts/node-feature-discovery-chart-0.15.3.tgz
635507feb77085bd00ba467542b9ee95e655fc4d2dd46dcf8c689bf581d0b84b templates/_helpers.tpl
dfbe2e6c474de212abe0c8f885b99328aa39d0a434cddae6635e1a853db3195a templates/configmap.yml
8b5f5654772f884a32adf20f754c00d626b058b1fd0f5e6431f940a9ea78cfbb templates/daemonset-device-plugin.yml
245bbaaec335065b602108bb6cb83f4bf60ec520d7fd7d84eb05dd7825daa2cc templates/daemonset-gfd.yml
ae706cc38f278dd4a041c4dd6d873827397086c411e63254c26f639512ceafda templates/daemonset-mps-control-daemon.yml
93aaee182c1e34a537ad5c262245d037eadb718447058a8b1d901020da4c1bf5 templates/role-binding.yml
0b462aa31b119071b2a58441faf0ea8ced390e5abf91ac378e5f4172afd99179 templates/role.yml
2d92a3db6d4889337473fe09d7094bfc1c703db16337a8d9db9c1bf7a642a097 templates/service-account.yml
81f64af3f65646d1130b318f67e862d3758b893f022a09c1b34c9b8622f7c7d3 templates/validation.yml
dac71351557522c62bf8634704d78060bd421a2b0a4105484d94a89d1b0590b6 values.yaml
"""))
EFA_DEVICE_PLUGIN_CHART: Final = ChartArtifactPin(
    name="aws-efa-k8s-device-plugin", repository="aws/eks-charts",
    commit="de5fdc1dae279f99c00e9fcac24b9a894dbc052f", path="stable/aws-efa-k8s-device-plugin", files=_files("""
bb987e6a8ef45a99255d1d632812482d5f0f3255ea841520b4d90342df5fe2b3 .helmignore
1b696fbfd39d55fb5e5e1be7e93e851e6bfe0deaee5ba17ca8d9738f8621898a Chart.yaml
d4495288360b34f29c8279fe7cb0930fff3b82a6809fa84e0284173b95ac00d6 README.md
ed182dc40ee03e58a1abdd1e45c4c894b848f2dbd9b0a630c6136bf572a82332 templates/NOTES.txt
11aeaf40349fcd84f60b6cc964bc1f28854b3b4188c330ec5afd3863e504736b templates/_helpers.tpl
518e2170ef286e753b905d87b0dd6ef62997b9a3db50725be2a745e26d5c2574 templates/daemonset.yaml
640d395e18013923c9414fcc74187d33364a607e368688f943776d3837cfcb02 values.yaml
"""))
#: Every chart set-up fetches.
CHART_ARTIFACTS: Final = (NVIDIA_DEVICE_PLUGIN_CHART, EFA_DEVICE_PLUGIN_CHART, *HYPERPOD_RESILIENCY_CHART_ARTIFACTS)


# --- Benchmark client (hyperpod-dpd bench; k8s/hyperpod_k8s/benchmark) -----------------------------------
#: Base image of the benchmark Jobs: Debian 12 (glibc 2.36) + CPython 3.11, the platform the hash-pinned
#: genai-bench lock (k8s/hyperpod_k8s/benchmark/genai-bench.lock.txt) is resolved for. Docker Hub digest of
#: python:3.11-slim-bookworm as recorded in a public repository that verified it (see docs/benchmark.md).
BENCHMARK_CLIENT_IMAGE: Final = (
    "python:3.11-slim-bookworm@sha256:2e32f7d302adc1c37428355c1e646897c0c53f4fd60b6a551245fb90ee129f91")
#: genai-bench release the lock file pins (PyPI; Python 3.10-3.12; the client of AWS's DPD benchmark).
GENAI_BENCH_VERSION: Final = "0.0.5"
