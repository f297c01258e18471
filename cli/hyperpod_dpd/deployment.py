"""What the day-2 commands (status, smoke, logs, sweep, bench) act on: one config, its deploy outputs, its cluster
names, and the endpoint ``--endpoint`` names (:meth:`Deployment.endpoint`: the only one by default; a config of
several needs the option).

Cluster and bucket names come from the ``cdk deploy --outputs-file`` file of the environment when it exists
(output IDs of :mod:`hyperpod_core.outputs`, read with :func:`hyperpod_core.inputs.read_outputs_file`), else from
the config, which names both clusters itself. The outputs file's ``EksApiEndpoint`` is the one Kubernetes API
server these commands talk to (:mod:`hyperpod_dpd.kubeconfig`: any other kubeconfig context is refused).

The region rule: a deployment lives in one region, its *home* (:func:`home_region`: the outputs file's ``Region``
when the file exists, else the config's ``region``). Stack names, and so every name derived from ``name``, are
unique per region only: ``dpd`` in us-west-2 and ``dpd`` in us-east-1 are two deployments. So a command that
changes, deletes or checks a deployment (``deploy``, ``diff``, ``destroy``, ``sweep``, ``stage-model``, ``bench``,
``preflight``) refuses a ``--region`` other than the home, in one line naming what it does there and before any AWS
call (:func:`require_region`); a reading command (``status``, ``logs``, ``smoke``) sends its calls where ``--region``
says, with a note.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from hyperpod_core import environment, outputs
from hyperpod_core.config.spec import EndpointSpec
from hyperpod_core.environment import Environment
from hyperpod_core.errors import ConfigError, UsageError
from hyperpod_core.inputs import eks_cluster_arn, read_outputs_file

if TYPE_CHECKING:  # the Kubernetes client loads when a command connects, not for --help
    from kubernetes.client import ApiClient

    from hyperpod_core.dist_layout import DistLayout
    from hyperpod_dpd.kube import Kube
    from hyperpod_dpd.kubeconfig import ClusterIdentity, KubeContext

KubeconfigOption = Annotated[str | None, typer.Option(
    "--kubeconfig", metavar="PATH", help="kubeconfig file (default $KUBECONFIG or ~/.kube/config).",
    show_default=False)]
ContextOption = Annotated[str | None, typer.Option(
    "--context", metavar="NAME", help="kubeconfig context (default: the current one).", show_default=False)]


def endpoint_of(e: Environment, name: str | None, command: str) -> EndpointSpec:
    """The endpoint ``--endpoint NAME`` names (:meth:`hyperpod_core.config.Config.spec`), the only one without it;
    an unknown name, or none with several endpoints, is bad input: one line naming the endpoints there are."""
    try:
        return e.config.spec(name)
    except ConfigError:
        names = [s.name for s in e.config.specs()]
        if name is None:
            raise UsageError(f"--endpoint must name the endpoint hyperpod-dpd {command} acts on: {e.config_path} "
                             f"serves {len(names)} endpoints ({', '.join(names)})") from None
        raise UsageError(f"--endpoint must be one of the endpoints of {e.config_path} ({', '.join(names)}), got "
                         f"{name!r}") from None


def endpoints_of(e: Environment, name: str | None, command: str) -> tuple[EndpointSpec, ...]:
    """The endpoint ``--endpoint NAME`` names (:func:`endpoint_of`), else every endpoint (``status``)."""
    return (endpoint_of(e, name, command),) if name is not None else e.config.specs()


def deployable(layout: DistLayout) -> DistLayout:
    """``layout`` as the synth writes it once every value is resolved: what an apply command names
    (``<endpoint>/endpoint/``), never the manifests under ``placeholders/``, which must not be applied."""
    import dataclasses

    return dataclasses.replace(layout, unresolved=False)


def before_apply(layout: DistLayout) -> str:
    """What must come before applying ``layout``'s manifests, as the start of a next step: nothing when the synth
    resolved them; else resolve the placeholders (the README beside them says what resolves each) and synthesize
    again."""
    from hyperpod_core.dist_layout import PLACEHOLDERS_README

    if not layout.unresolved:
        return ""
    return (f"the synth left placeholders in {layout.base}/ (its {PLACEHOLDERS_README} says what resolves each): "
            "resolve them and synthesize again, then ")


def endpoint_selector(e: Environment, spec: EndpointSpec) -> str:
    """How a printed next step names ``spec``'s endpoint again: the environment's selector, and ``--endpoint NAME``
    when the config has several endpoints (with one, the command picks it without)."""
    return e.selector + (f" --endpoint {spec.name}" if len(e.config.specs()) > 1 else "")


def rollout_command(e: Environment, spec: EndpointSpec) -> str:
    """``hyperpod-dpd rollout`` of ``spec``'s endpoint, as a printed next step names it (:func:`endpoint_selector`)."""
    return f"hyperpod-dpd rollout {endpoint_selector(e, spec)}"


def results_dir(e: Environment, spec: EndpointSpec) -> Path:
    """Where ``bench`` collects the benchmark results of ``spec``'s endpoint, and where ``report`` reads them by
    default: ``<workdir>/benchmark-results/<endpoint>/`` (each endpoint its own runs)."""
    return e.workdir / "benchmark-results" / spec.name


def report_dir(e: Environment, spec: EndpointSpec) -> Path:
    """Where ``report`` writes the report of ``spec``'s endpoint by default:
    ``<workdir>/benchmark-report/<endpoint>/``."""
    return e.workdir / "benchmark-report" / spec.name


@dataclass(frozen=True, kw_only=True)
class Deployment:
    """The deployment's cluster facts; the endpoints it serves are :meth:`endpoint`'s (a day-2 command acts on one)."""

    env: Environment
    region: str
    eks_cluster: str
    hyperpod_cluster: str
    tls_bucket: str | None
    model_bucket: str | None
    outputs_source: str
    """``outputs file <path>`` or ``config (no outputs file)``: where the names above came from."""
    eks_endpoint: str | None = None
    """``EksApiEndpoint`` of the outputs file: the only API server the Kubernetes commands talk to."""
    eks_cluster_arn: str | None = None
    """``EksClusterArn`` of the outputs file, else derived from the config when it names one account."""

    def endpoint(self, name: str | None, command: str) -> EndpointSpec:
        """The endpoint ``--endpoint`` names, else the only one (:func:`endpoint_of`)."""
        return endpoint_of(self.env, name, command)

    def layout(self, spec: EndpointSpec) -> DistLayout:
        """The manifests the environment's last synth wrote for ``spec``'s endpoint
        (:mod:`hyperpod_core.dist_layout`)."""
        from hyperpod_core.dist_layout import DistLayout

        return DistLayout.found(self.env.dist, spec.name, spec.endpoint.apply)

    @property
    def identity(self) -> ClusterIdentity:
        from hyperpod_dpd.kubeconfig import ClusterIdentity

        return ClusterIdentity(name=self.eks_cluster, region=self.region, api_server=self.eks_endpoint,
                               arn=self.eks_cluster_arn,
                               source=str(self.env.outputs_file) if self.outputs_source.startswith("outputs")
                               else f"no outputs file ({self.env.outputs_file})")

    def check_context(self, kubeconfig: str | None, context: str | None) -> KubeContext | None:
        """Refuse a kubeconfig context of another cluster (:func:`hyperpod_dpd.kubeconfig.check_context`)."""
        from hyperpod_dpd.kubeconfig import check_context

        return check_context(kubeconfig, context, self.identity)

    def api_client(self, kubeconfig: str | None, context: str | None) -> ApiClient:
        from hyperpod_dpd.kubeconfig import api_client

        return api_client(kubeconfig, context, self.identity)

    def kube(self, kubeconfig: str | None, context: str | None) -> Kube:
        from hyperpod_dpd.kubeconfig import connect

        return connect(kubeconfig, context, self.identity)


def home_region(e: Environment) -> tuple[str, str]:
    """The region the deployment of ``e`` lives in, and where that was read: the outputs file's ``Region`` when the
    file exists (:func:`hyperpod_core.inputs.read_outputs_file` refuses one of another deployment, and one whose
    ``Region`` is not the config's), else the config's ``region``."""
    if e.outputs_file.is_file():
        found = read_outputs_file(e.outputs_file, e.config)
        if outputs.REGION in found:
            stack, value = found[outputs.REGION]
            return value, f"{e.outputs_file}: {stack}.{outputs.REGION}"
    return e.config.region, f"region of {e.config_path}"


#: What each command that keeps to the deployment's region does there (the reason in :func:`require_region`'s line).
ACTS_ON = {
    "deploy": "which creates, updates and deletes its stacks",
    "diff": "which compares its deployed stacks with these templates",
    "destroy": "which deletes its stacks",
    "sweep": "which deletes what its operator and load balancer controller left",
    "stage-model": "which uploads to its model bucket",
    "bench": "which runs benchmark Jobs on its endpoint and writes their results",
    "preflight": "which checks what a deploy of this config needs in its region (quotas, AZ, bootstrap, add-ons)",
}


def require_region(e: Environment, region: str | None, command: str) -> str:
    """The home region of ``e`` (:func:`home_region`); a ``--region`` naming another one is bad input (exit 2): a
    command that changes, deletes or checks a deployment (:data:`ACTS_ON`) never acts on a deployment of the same
    name in another region."""
    if region is None:  # nothing to compare: the config's region (an outputs file's Region must equal it)
        return e.config.region
    home, source = home_region(e)
    if region != home:
        raise UsageError(f"--region must be this deployment's region {home} ({source}) for hyperpod-dpd {command}, "
                         f"{ACTS_ON[command]}, got {region!r} (a deployment of the same name in {region} is another "
                         "deployment; name its own config)")
    return home


def load(config: str | None, env: str | None, *, region: str | None = None,
         changing: str | None = None, outputs_file: Path | None = None) -> Deployment:
    """The deployment of the config named; ``region`` (``--region``) sends a reading command's AWS calls elsewhere
    than the config's region (with a note). ``changing``: the name of a command that changes or deletes; then
    ``region`` must be the deployment's own (:func:`require_region`). ``outputs_file`` (``--outputs-file``): the
    deploy outputs to read instead of the config folder's ``cdk-outputs.json``."""
    e = environment.resolve(config, env, outputs_file=outputs_file)
    c = e.config
    if changing:
        region = require_region(e, region, changing)
    elif region and region != c.region:
        print(f"note: --region {region}: AWS calls go there, while this config deploys to {c.region}", file=sys.stderr)
    found = read_outputs_file(e.outputs_file, e.config) if e.outputs_file.is_file() else {}

    def out(output_id: str) -> str | None:
        return found[output_id][1] if output_id in found else None

    arn = eks_cluster_arn(c, found, str(e.outputs_file))
    return Deployment(
        env=e, region=region or c.region,
        eks_cluster=out(outputs.EKS_CLUSTER_NAME) or c.eks.cluster_name,
        hyperpod_cluster=out(outputs.HYPERPOD_CLUSTER_NAME) or c.hyperpod.cluster_name,
        tls_bucket=out(outputs.TLS_BUCKET_NAME),
        model_bucket=c.model_bucket.existing_name or out(outputs.MODEL_BUCKET_NAME),
        outputs_source=f"outputs file {e.outputs_file}" if found else "config (no outputs file)",
        eks_endpoint=out(outputs.EKS_API_ENDPOINT), eks_cluster_arn=None if arn.placeholder else arn.value,
    )
