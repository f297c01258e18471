"""What the day-2 commands (status, smoke, logs, sweep) act on: one config, its deploy outputs, its names.

Cluster and bucket names come from the ``cdk deploy --outputs-file`` file of the environment when it exists
(output IDs of :mod:`hyperpod_core.outputs`, read with :func:`hyperpod_core.inputs.read_outputs_file`), else from
the config, which names both clusters itself.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import typer

from hyperpod_core import environment, outputs
from hyperpod_core.environment import Environment
from hyperpod_core.inputs import read_outputs_file
from hyperpod_core.names import EndpointNames

if TYPE_CHECKING:  # the Kubernetes client loads when a command connects, not for --help
    from hyperpod_dpd.kube import Kube

KubeconfigOption = Annotated[str | None, typer.Option(
    "--kubeconfig", help="kubeconfig file (default $KUBECONFIG or ~/.kube/config).", show_default=False)]
ContextOption = Annotated[str | None, typer.Option(
    "--context", help="kubeconfig context (default: the current one).", show_default=False)]


@dataclass(frozen=True, kw_only=True)
class Deployment:
    env: Environment
    names: EndpointNames
    region: str
    eks_cluster: str
    hyperpod_cluster: str
    tls_bucket: str | None
    model_bucket: str | None
    outputs_source: str
    """``outputs file <path>`` or ``config (no outputs file)``: where the names above came from."""

    def kube(self, kubeconfig: str | None, context: str | None) -> Kube:
        from hyperpod_dpd.kube import connect

        return connect(kubeconfig, context, eks_cluster=self.eks_cluster, region=self.region)


def load(config: str | None, env: str | None, *, region: str | None = None) -> Deployment:
    """The deployment of the config named; ``region`` (``--region``) sends its AWS calls elsewhere than the
    config's region."""
    e = environment.resolve(config, env)
    c = e.config
    if region and region != c.region:
        print(f"note: --region {region}: AWS calls go there, while this config deploys to {c.region}", file=sys.stderr)
    found = read_outputs_file(e.outputs_file, e.config) if e.outputs_file.is_file() else {}

    def out(output_id: str) -> str | None:
        return found[output_id][1] if output_id in found else None

    return Deployment(
        env=e, names=EndpointNames.of(c), region=region or c.region,
        eks_cluster=out(outputs.EKS_CLUSTER_NAME) or c.eks.cluster_name,
        hyperpod_cluster=out(outputs.HYPERPOD_CLUSTER_NAME) or c.hyperpod.cluster_name,
        tls_bucket=out(outputs.TLS_BUCKET_NAME),
        model_bucket=c.model.existing_bucket_name or out(outputs.MODEL_BUCKET_NAME),
        outputs_source=f"outputs file {e.outputs_file}" if found else "config (no outputs file)",
    )
