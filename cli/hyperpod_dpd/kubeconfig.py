"""Which kubeconfig context talks to this deployment's EKS cluster, and a client for that cluster only.

Safety first: every command that talks to Kubernetes connects through :func:`api_client`, which refuses (one
line, exit 2) a kubeconfig context that does not talk to this deployment's EKS cluster: its server must be the
``EksApiEndpoint`` of the outputs file (:func:`is_cluster`, :func:`check_context`). The fix names
``aws eks update-kubeconfig`` for this cluster, or ``--context`` of a context that does.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from dataclasses import dataclass
from typing import Any

import yaml
from kubernetes import client as k8s
from kubernetes.config import ConfigException, kube_config

from hyperpod_core.errors import UsageError
from hyperpod_dpd.aws import one_line
from hyperpod_dpd.kube import Kube, KubeFailure


@dataclass(frozen=True, kw_only=True)
class ClusterIdentity:
    """This deployment's EKS cluster, as the outputs file and the config name it."""

    name: str
    region: str
    api_server: str | None
    """``EksApiEndpoint`` from the outputs file (:mod:`hyperpod_core.outputs`), ``None`` when there is none."""
    arn: str | None
    source: str
    """Where ``api_server`` came from (the outputs file), for messages."""

    @property
    def update_kubeconfig(self) -> str:
        return f"aws eks update-kubeconfig --name {self.name} --region {self.region}"


@dataclass(frozen=True, kw_only=True)
class KubeContext:
    """One context of the kubeconfig, with what says which cluster it talks to."""

    name: str
    server: str
    cluster: str
    """The name of its ``clusters[]`` entry (``aws eks update-kubeconfig`` names it by the cluster ARN)."""
    tls_server_name: str
    exec_args: tuple[str, ...]


def kubeconfig_path(kubeconfig: str | None) -> str:
    """The file(s) the client reads: ``--kubeconfig``, else ``$KUBECONFIG`` (``:``-separated), else
    ``~/.kube/config``."""
    return kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"


def read_contexts(kubeconfig: str | None) -> tuple[dict[str, KubeContext], str | None]:
    """Every context of the kubeconfig (merged as the client merges several files) and the current one; empty
    when there is no readable kubeconfig (:func:`connect` reports that)."""
    try:
        merged = kube_config.KubeConfigMerger(kubeconfig_path(kubeconfig)).config
    except (ConfigException, OSError, ValueError, yaml.YAMLError):
        return {}, None
    data = merged.value if merged is not None else {}
    if not isinstance(data, dict):
        return {}, None

    def entries(kind: str) -> dict[str, dict[str, Any]]:
        out = {}
        for item in data.get(kind) or []:
            value = item.value if hasattr(item, "value") else item
            if isinstance(value, dict) and value.get("name"):
                out[str(value["name"])] = value.get(kind[:-1]) or {}
        return out

    clusters, users = entries("clusters"), entries("users")
    found = {}
    for name, ctx in entries("contexts").items():
        cluster = clusters.get(str(ctx.get("cluster", ""))) or {}
        user = users.get(str(ctx.get("user", ""))) or {}
        found[name] = KubeContext(name=name, server=str(cluster.get("server") or ""), cluster=str(ctx.get("cluster")),
                                  tls_server_name=str(cluster.get("tls-server-name") or ""),
                                  exec_args=tuple(str(a) for a in ((user.get("exec") or {}).get("args") or [])))
    current = data.get("current-context")
    return found, str(current) if current else None


def _endpoint(url: str) -> tuple[str, str, int, str]:
    u = urllib.parse.urlsplit(url.strip())
    port = u.port or (443 if u.scheme == "https" else 80)
    return u.scheme.lower(), (u.hostname or "").lower(), port, u.path.rstrip("/")


def _arg(args: tuple[str, ...], *names: str) -> str | None:
    for i, a in enumerate(args):
        for n in names:
            if a == n and i + 1 < len(args):
                return args[i + 1]
            if a.startswith(n + "="):
                return a.split("=", 1)[1]
    return None


def is_cluster(ctx: KubeContext, identity: ClusterIdentity) -> bool:
    """The context talks to this deployment's cluster: its server is ``EksApiEndpoint`` (or, through a tunnel, its
    ``tls-server-name`` is that host); without an endpoint on record, its cluster entry is the cluster's ARN or its
    credential plugin asks for a token of the cluster (``aws eks get-token --cluster-name NAME [--region R]``)."""
    if identity.api_server:
        want = _endpoint(identity.api_server)
        return _endpoint(ctx.server) == want or (bool(ctx.tls_server_name) and ctx.tls_server_name.lower() == want[1])
    arn = re.fullmatch(r"arn:aws[a-z-]*:eks:([a-z0-9-]+):(\d{12}):cluster/(.+)", ctx.cluster)
    if arn:
        return (ctx.cluster == identity.arn if identity.arn else
                (arn[1], arn[3]) == (identity.region, identity.name))
    token_for = _arg(ctx.exec_args, "--cluster-name", "--cluster-id", "-i")
    region = _arg(ctx.exec_args, "--region")
    return token_for == identity.name and region in (None, identity.region)


def check_context(kubeconfig: str | None, context: str | None, identity: ClusterIdentity) -> KubeContext | None:
    """The kubeconfig context the command would use, refused (one line, exit 2) unless it talks to this
    deployment's cluster (:func:`is_cluster`). ``None`` when there is no usable kubeconfig (:func:`connect` says
    what to do then)."""
    contexts, current = read_contexts(kubeconfig)
    if not contexts:
        return None
    chosen = context or current
    if context is not None and context not in contexts:
        raise UsageError(f"--context {context!r} is not in the kubeconfig ({kubeconfig_path(kubeconfig)}); its "
                         f"contexts: {', '.join(sorted(contexts))}")
    if chosen is None or chosen not in contexts:
        return None
    ctx = contexts[chosen]
    if is_cluster(ctx, identity):
        return ctx
    others = sorted(n for n, c in contexts.items() if n != chosen and is_cluster(c, identity))
    fix = f"run: {identity.update_kubeconfig}" + (f", or pass --context {others[0]}" if others else "")
    if identity.api_server:
        raise UsageError(f"kubeconfig context {chosen!r} points at {ctx.server or '(no server)'}, not at EKS cluster "
                         f"{identity.name} of this config ({identity.api_server}, {identity.source}); {fix}")
    raise UsageError(f"cannot tell that kubeconfig context {chosen!r} ({ctx.server or 'no server'}) is EKS cluster "
                     f"{identity.name}: {identity.source} records no API endpoint and the context does not name the "
                     f"cluster; {fix}")


def api_client(kubeconfig: str | None, context: str | None, identity: ClusterIdentity) -> k8s.ApiClient:
    """An API client for this deployment's cluster only (:func:`check_context`), from the kubeconfig."""
    check_context(kubeconfig, context, identity)
    try:
        api = kube_config.new_client_from_config(config_file=kubeconfig_path(kubeconfig), context=context,
                                                 persist_config=False)
    except (ConfigException, OSError) as exc:
        text = str(exc).strip()
        detail = one_line(text.splitlines()[0] if text else type(exc).__name__)[0]
        if "exec" in text.lower() and "process returned" in text.lower():
            raise KubeFailure(f"the kubeconfig's credential plugin failed ({detail})",
                              fix="aws sso login (or check AWS_PROFILE), then run it again") from None
        raise KubeFailure(f"no usable kubeconfig ({detail})",
                          fix=f"run '{identity.update_kubeconfig}' or pass --kubeconfig") from None
    api.configuration.retries = 1
    return api


def connect(kubeconfig: str | None, context: str | None, identity: ClusterIdentity) -> Kube:
    """A client for this deployment's cluster (:func:`api_client`)."""
    return Kube(api_client(kubeconfig, context, identity))
