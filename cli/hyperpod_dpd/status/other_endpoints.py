"""The rows of the InferenceEndpointConfigs on the cluster that the config does not hold.

An endpoint removed from, or renamed in, ``endpoints:`` keeps running until someone deletes its
InferenceEndpointConfig, and its pods keep their GPUs, which the config's endpoints then cannot get (issue 34). Every
InferenceEndpointConfig of every namespace whose namespace and name are no endpoint of the config (nor one of its
revisions, ``<endpoint>-r<N>``: :func:`hyperpod_core.names.revision_of`) is one warn row
that never blocks serving: its mode and state, whether it is this deployment's (the ``app.kubernetes.io/part-of``
label every endpoint manifest carries holds the deployment's ``name``), the GPUs its pods hold
(:meth:`hyperpod_dpd.kube.Kube.gpus_held`) and the command that deletes it.
"""

from __future__ import annotations

from typing import Any

from hyperpod_core.errors import CommandFailed
from hyperpod_core.names import PART_OF_LABEL, EndpointNames, revision_of
from hyperpod_dpd.deployment import Deployment
from hyperpod_dpd.status.check import Check

SECTION = "other endpoints"
LISTING = "listing the InferenceEndpointConfigs of every namespace"


def other_endpoint_checks(dep: Deployment, kubeconfig: str | None, context: str | None) -> list[Check]:
    """One row per InferenceEndpointConfig of the cluster that is no endpoint of ``dep``'s config (by namespace and
    name), in namespace and name order; one warn row when they cannot be listed."""
    from hyperpod_dpd.kube import kube_errors

    specs = dep.env.config.specs()
    try:
        kube = dep.kube(kubeconfig, context)
        with kube_errors(LISTING):
            listed = kube.endpoints() or []
    except CommandFailed as exc:
        return [Check(section=SECTION, name="InferenceEndpointConfigs of every namespace", state="warn",
                      blocks_serving=False, detail=getattr(exc, "summary", str(exc)),
                      next_step=getattr(exc, "fix", "") or "read the error, fix it and run status again")]
    rows = []
    for obj in listed:
        meta = obj.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        if any(namespace == s.namespace and revision_of(name, s.name) is not None for s in specs):
            continue  # an endpoint of the config, or one of its revisions (``hyperpod-dpd rollout``: <endpoint>-r<N>)
        dpd = (obj.get("spec") or {}).get("pdSpec") is not None
        try:
            with kube_errors(f"reading the pods of InferenceEndpointConfig {namespace}/{name}"):
                gpus: int | None = kube.gpus_held(EndpointNames(name=name, namespace=namespace), dpd=dpd)
            held = f"its pods hold {gpus} GPU{'' if gpus == 1 else 's'}"
        except CommandFailed as exc:
            gpus, held = None, f"the GPUs its pods hold are unknown ({getattr(exc, 'summary', exc)})"
        rows.append(_row(dep, obj, namespace, name, dpd=dpd, gpus=gpus, held=held))
    return rows


def _row(dep: Deployment, obj: dict[str, Any], namespace: str, name: str, *, dpd: bool, gpus: int | None,
         held: str) -> Check:
    part_of = ((obj.get("metadata") or {}).get("labels") or {}).get(PART_OF_LABEL)
    ours = part_of == dep.env.config.name
    whose = (f"part of this deployment ({PART_OF_LABEL}={part_of})" if ours else
             f"not of this deployment ({PART_OF_LABEL}={part_of})" if part_of else
             f"not of this deployment (no {PART_OF_LABEL} label)")
    state = (obj.get("status") or {}).get("state") or "state unset"
    delete = f"kubectl delete inferenceendpointconfig {name} -n {namespace}"
    return Check(section=SECTION, name=f"{namespace}/{name}", state="warn", blocks_serving=False,
                 detail=f"not in {dep.env.config_path}: {'DPD' if dpd else 'colocated'}, {state}, {whose}; {held}",
                 next_step=(f"{delete}   (an endpoint removed or renamed in the config keeps running until deleted)"
                            if ours else f"if nothing serves it any more: {delete}"),
                 facts={"namespace": namespace, "name": name, "mode": "dpd" if dpd else "colocated", "gpus": gpus,
                        "part_of": part_of})
