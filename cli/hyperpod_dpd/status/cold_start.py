"""The cold-start rows (operator v3.3 ``modelCacheConfig``): the image cache (``status.imageCacheStatus``) and the
weights cache (the operator's ModelWeightsCacheConfig objects)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hyperpod_core.errors import CommandFailed
from hyperpod_core.names import EndpointNames
from hyperpod_dpd.status.check import Check

if TYPE_CHECKING:  # the Kubernetes client loads in the checks that call it, not for --help
    from hyperpod_dpd.kube import Kube

#: ``status.imageCacheStatus.state`` (v3.3 CRD enum: Pending | Downloading | Ready | Failed | PartiallyReady).
_CACHE_WAIT = {"Pending", "Downloading", "PartiallyReady"}


def cache_checks(names: EndpointNames, kube: Kube, spec: dict[str, Any], status_: dict[str, Any]) -> list[Check]:
    """The image cache (``status.imageCacheStatus``) and the weights cache (the operator's ModelWeightsCacheConfig)
    of the endpoint ``names`` (its live ``spec`` and ``status``). Neither blocks serving: without them a pod pulls
    its image and loads its weights from S3, only slower."""
    from hyperpod_dpd.kube import kube_errors

    cache = spec.get("modelCacheConfig") or {}
    checks = [_image_cache_check(cache, status_.get("imageCacheStatus"))]
    weights = cache.get("weightsCache") or {}
    if not weights.get("enabled"):
        checks.append(Check(section="endpoint", name="weights cache", state="ok", blocks_serving=False,
                            detail="off: weights load from S3 on every pod start (5-10 min for a 70B model)"))
        return checks
    try:
        with kube_errors("listing the ModelWeightsCacheConfig objects"):
            found = kube.weights_caches(names, spec.get("modelSourceConfig"))
    except CommandFailed as exc:
        return [*checks, Check(section="endpoint", name="weights cache", state="warn", detail=str(exc),
                               blocks_serving=False)]
    checks.append(_weights_cache_check(names, weights, found))
    return checks


def _image_cache_check(cache: dict[str, Any], image: dict[str, Any] | None) -> Check:
    if not (cache.get("imageCache") or {}).get("enabled"):
        return Check(section="endpoint", name="image cache", state="ok", blocks_serving=False,
                     detail="off: every new pod pulls the worker image itself")
    if not image:
        return Check(section="endpoint", name="image cache", state="warn", blocks_serving=False,
                     detail="on, but the endpoint has no status.imageCacheStatus",
                     next_step="the operator reports it from v3.3 on (add-on v1.4.0): check the add-on version")
    state = str(image.get("state") or "unset")
    nodes = f"{image.get('readyNodes', 0)}/{image.get('targetNodes', '?')} nodes"
    message = f": {image['message']}" if image.get("message") else ""
    ok = state == "Ready"
    return Check(section="endpoint", name="image cache", state="ok" if ok else "warn", blocks_serving=False,
                 detail=f"{state}, {nodes}{message}",
                 next_step="" if ok else ("the operator's DaemonSet is still pulling; pods pull the image themselves "
                                          "meanwhile" if state in _CACHE_WAIT else
                                          "'kubectl describe modelimagecache -A' and the DaemonSet's pod events"))


def _weights_cache_check(names: EndpointNames, weights: dict[str, Any], found: list[dict[str, Any]] | None) -> Check:
    host_path = weights.get("hostPath", "/opt/dlami/nvme")
    if found is None:
        return Check(section="endpoint", name="weights cache", state="warn", blocks_serving=False,
                     detail="on, but the cluster has no ModelWeightsCacheConfig CRD",
                     next_step="the weights cache needs operator v3.3 (add-on v1.4.0): check the add-on version")
    if not found:
        return Check(section="endpoint", name="weights cache", state="warn", blocks_serving=False,
                     detail=f"on ({host_path}), but no ModelWeightsCacheConfig for {names.name} yet",
                     next_step="the operator creates it after the endpoint; 'hyperpod-dpd logs operator'")
    rows = []
    for obj in found:
        st = obj.get("status") or {}
        message = f": {st['message']}" if st.get("message") else ""
        rows.append((str(st.get("state") or "Pending"),
                     f"{obj['metadata']['name']} {st.get('state') or 'Pending'}, "
                     f"{st.get('readyNodes', 0)}/{st.get('targetNodes', '?')} nodes{message}"))
    ok = all(state == "Ready" for state, _ in rows)
    failed = any(state == "Failed" for state, _ in rows)
    return Check(section="endpoint", name="weights cache", state="ok" if ok else "warn", blocks_serving=False,
                 detail=f"{host_path}: " + "; ".join(text for _, text in rows),
                 next_step="" if ok else (
                     f"'kubectl describe modelweightscacheconfig -n {names.namespace}'; check that {host_path} is "
                     "a mount point on the nodes (the lifecycle log says so) and has room for the model"
                     if failed else "the cache fills after the first download; pods load from S3 meanwhile"))
