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
    """An EKS add-on at an exact version. ``source`` says where the version was taken from."""

    name: str
    version: str
    source: str


VPC_CNI: Final = AddonPin(
    name="vpc-cni", version="v1.20.4-eksbuild.1",
    source="HyperPod needs Amazon VPC CNI >= 1.18.3 (sagemaker-hyperpod-eks-prerequisites)")
KUBE_PROXY: Final = AddonPin(
    name="kube-proxy", version="v1.33.3-eksbuild.4", source="EKS add-on versions for Kubernetes 1.33")
COREDNS: Final = AddonPin(
    name="coredns", version="v1.12.2-eksbuild.4", source="EKS add-on versions for Kubernetes 1.33")
POD_IDENTITY_AGENT: Final = AddonPin(
    name="eks-pod-identity-agent", version="v1.3.8-eksbuild.2",
    source="required by the HyperPod observability add-on (hyperpod-observability-addon-setup)")
S3_CSI: Final = AddonPin(
    name="aws-mountpoint-s3-csi-driver", version="v1.14.1-eksbuild.1",
    source="inference operator dependency, minimum named in sagemaker-hyperpod-model-deployment-setup")
FSX_CSI: Final = AddonPin(
    name="aws-fsx-csi-driver", version="v1.6.0-eksbuild.1",
    source="inference operator init container requires CSIDriver fsx.csi.aws.com (chart manager.yaml)")
METRICS_SERVER: Final = AddonPin(
    name="metrics-server", version="v0.7.2-eksbuild.4",
    source="inference operator dependency (sagemaker-hyperpod-model-deployment-setup)")
CERT_MANAGER: Final = AddonPin(
    name="cert-manager", version="v1.18.2-eksbuild.2",
    source="inference operator dependency (sagemaker-hyperpod-model-deployment-setup)")
INFERENCE_OPERATOR: Final = AddonPin(
    name="amazon-sagemaker-hyperpod-inference", version="v1.3.0-eksbuild.1",
    source="add-on v1.3.0 = operator v3.2, the first with pdSpec (HyperPod inference release notes)")
OBSERVABILITY: Final = AddonPin(
    name="amazon-sagemaker-hyperpod-observability", version="v1.0.5-eksbuild.1",
    source="hyperpod-observability-addon-troubleshooting names v1.0.5-eksbuild.1 (adds the restricted-"
           "instance-group toleration); configuration keys from the console's observability-template.yaml")

#: The operator version whose CRD we generate bindings from and validate against.
INFERENCE_OPERATOR_APP_VERSION: Final = "3.2"


# --- The operator CRD (bindings and schema tests) ------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class CrdPin:
    """A CRD file published upstream, pinned by commit and content hash."""

    file_name: str
    url: str
    sha256: str


_CRD_BASE: Final = (
    "https://raw.githubusercontent.com/aws/sagemaker-hyperpod-cli/"
    "011ca927123e02b35a399935bbb3ab1905fe33c7/helm_chart/HyperPodHelmChart/charts/"
    "inference-operator/config/crd/"
)
INFERENCE_ENDPOINT_CONFIG_CRD: Final = CrdPin(
    file_name="inferenceendpointconfigs.yaml",
    url=_CRD_BASE + "inference.sagemaker.aws.amazon.com_inferenceendpointconfigs.yaml",
    sha256="de0fab82c890cfe6c779a3687a5a6375e89ebade828cd384133ac9be9e4c0f80",
)


# --- Images ---------------------------------------------------------------------------------------------
#: The DPD worker image AWS validated (LMCache 0.4.3, vLLM 0.19.0, NIXL 1.0.0), per the DPD guide.
DPD_WORKER_IMAGE: Final = "lmcache/vllm-openai:v0.4.3"
#: Images AWS names as supported for DPD (sagemaker-hyperpod-model-deployment-dpd).
DPD_SUPPORTED_IMAGES: Final = (
    "lmcache/vllm-openai:v0.4.3",
    "public.ecr.aws/deep-learning-containers/vllm:server-hyperpod-cuda-v1.1",
)


# --- Operator limits (v3.2) -----------------------------------------------------------------------------
#: "a single decoder replica with multiple prefiller replicas" (AWS ML blog, 10 Jul 2026; DPD guide:
#: one decode Deployment per endpoint).
DPD_MAX_DECODE_REPLICAS: Final = 1


# --- Helm charts the cluster stack installs at deploy time ---------------------------------------------
@dataclass(frozen=True, kw_only=True)
class HelmChartPin:
    """A Helm chart fetched at *deploy* time by the kubectl handler Lambda from its published repository.

    Synth stays offline: the template only carries ``repository``, ``chart`` and ``version``.
    """

    chart: str
    repository: str
    version: str
    source: str


#: The HyperPod dependencies chart (``helm_chart/HyperPodHelmChart`` in aws/sagemaker-hyperpod-cli) bundles
#: these two device plugins as sub-charts pulled from their published repositories. We install the same
#: charts at the same versions directly from those repositories, with the values HyperPod needs (affinity
#: to ``ml.*`` instance types, tolerations for the HyperPod health taints).
NVIDIA_DEVICE_PLUGIN: Final = HelmChartPin(
    chart="nvidia-device-plugin", repository="https://nvidia.github.io/k8s-device-plugin", version="0.16.1",
    source="HyperPodHelmChart/Chart.yaml dependency (aws/sagemaker-hyperpod-cli@011ca927)")
EFA_DEVICE_PLUGIN: Final = HelmChartPin(
    chart="aws-efa-k8s-device-plugin", repository="https://aws.github.io/eks-charts", version="0.5.20",
    source="HyperPodHelmChart/Chart.yaml dependency (aws/sagemaker-hyperpod-cli@011ca927)")


# --- HyperPod resiliency components ---------------------------------------------------------------------
#: The health-monitoring agent (HMA) and the deep-health-check, job-auto-restart and hyperpod-patching
#: components exist only as local sub-charts of ``helm_chart/HyperPodHelmChart`` in aws/sagemaker-hyperpod-cli;
#: AWS publishes them in no Helm or OCI repository (docs: sagemaker-hyperpod-eks-install-packages-using-helm-chart,
#: "Download the Helm charts ... git clone"). The docs also say the chart is required for clusters created
#: through the API ("Failure to configure ... might result in the SageMaker HyperPod cluster not functioning
#: correctly or the creation process failing entirely") and that the ``aws-hyperpod`` namespace is fixed.
#: We therefore fetch exactly these sub-chart directories at deploy time from the repository at this
#: commit (a content address), and never copy them into this repository. See docs/cluster.md.
HYPERPOD_CHART_REPOSITORY: Final = "https://github.com/aws/sagemaker-hyperpod-cli"
HYPERPOD_CHART_COMMIT: Final = "011ca927123e02b35a399935bbb3ab1905fe33c7"
HYPERPOD_CHART_PATH: Final = "helm_chart/HyperPodHelmChart/charts"
#: Sub-charts installed (each its own Helm release, in the order given: deep-health-check creates the
#: aws-hyperpod namespace the health-monitoring agent runs in). The training operators, MPI
#: operator, Neuron plugin, MLflow and the inference operator are left out: DPD on p5 does not use them,
#: and the inference operator is installed as its EKS add-on by the platform stack.
HYPERPOD_RESILIENCY_CHARTS: Final = ("deep-health-check", "health-monitoring-agent", "job-auto-restart",
                                     "hyperpod-patching")
#: The namespace HyperPod requires for these components ("The aws-hyperpod namespace name cannot be modified").
HYPERPOD_NAMESPACE: Final = "aws-hyperpod"


# --- Benchmark client (hyperpod-dpd bench; k8s/hyperpod_k8s/benchmark) -----------------------------------
#: Base image of the benchmark Jobs: Debian 12 (glibc 2.36) + CPython 3.11, the platform the hash-pinned
#: genai-bench lock (k8s/hyperpod_k8s/benchmark/genai-bench.lock.txt) is resolved for. Docker Hub digest of
#: python:3.11-slim-bookworm as recorded in a public repository that verified it (see docs/benchmark.md).
BENCHMARK_CLIENT_IMAGE: Final = (
    "python:3.11-slim-bookworm@sha256:2e32f7d302adc1c37428355c1e646897c0c53f4fd60b6a551245fb90ee129f91")
#: genai-bench release the lock file pins (PyPI; Python 3.10-3.12; the client of AWS's DPD benchmark).
GENAI_BENCH_VERSION: Final = "0.0.5"
