"""Do prefill and decode serve one model with one engine? The skew guard of ``status`` and ``smoke``.

Prefill and decode are two Deployments that roll independently: the InferenceEndpointConfig has no rollout
control, and nothing couples the two (``shared/reference/review-4/k8s-review.md``, defect 1). LMCache keys the cache
on vLLM's ``--model`` (the same review, defect 2): while the roles run different ``--model`` values the decoder
never finds the keys prefill sends, recomputes every prompt, and the KV prefill pushed stays in the decoder's PD
buffer, which LMCache 0.4.3 never evicts (``lmcache/v1/storage_backend/pd_backend.py:283``, "no eviction and
busy_loop in PD"; an entry is freed only when the decoder retrieves it, ``lmcache/v1/cache_engine.py:859-863``):
the buffer fills and transfers stall on ``Failed to allocate memory object, retrying...`` (``pd_backend.py:536-543``).
Another vLLM or LMCache build may not read the transfer at all.

Three findings, from each role's Deployment (:class:`hyperpod_dpd.kube.RoleWorkers`):

* ``image``: the Ready pods of the two roles run more than one image in their vLLM container;
* ``model``: ... more than one ``--model`` (the model path, which carries the model's revision);
* ``rollout``: the live pods of one role run more than one pod template (label ``pod-template-hash``, Kubernetes
  docs "Deployments"), or another revision than their Deployment's (annotation ``deployment.kubernetes.io/revision``
  on the Deployment and its ReplicaSets): a rollout is under way, or stuck, e.g. a new pod Pending for GPUs that
  the old one holds.

Image and model compare Ready pods, the ones that serve. A rollout counts every pod that is not terminating: a
new pod that is not Ready yet is the rollout that is not finished. What cannot be compared is said, never taken for
a match (:func:`uncompared`): a role whose Deployment is not found, a role without a Ready pod, a Ready pod whose
model cannot be read from its command line.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from hyperpod_core.names import ROLES, Role

if TYPE_CHECKING:
    from hyperpod_dpd.kube import PodTarget, RoleWorkers

Kind = Literal["image", "model", "rollout"]


@dataclass(frozen=True, kw_only=True)
class Finding:
    kind: Kind
    role: Role | None
    """The role a ``rollout`` finding is about; ``None`` for a difference between the roles."""
    message: str


def _live(w: RoleWorkers) -> list[PodTarget]:
    return [p for p in w.pods if not p.terminating]


def _template(w: RoleWorkers, template_hash: str) -> str:
    revision = w.revisions.get(template_hash, "")
    return f"revision {revision} ({template_hash})" if revision else f"pod-template-hash {template_hash or '?'}"


def templates(w: RoleWorkers) -> list[dict[str, Any]]:
    """Per pod template of the role's live pods: its hash, its revision, how many pods run it, how many are Ready."""
    live = _live(w)
    counts = Counter(p.template_hash for p in live)
    return [{"pod_template_hash": h, "revision": w.revisions.get(h, ""), "pods": n,
             "ready": sum(1 for p in live if p.template_hash == h and p.ready)} for h, n in sorted(counts.items())]


def summary(w: RoleWorkers) -> dict[str, Any]:
    """What the role runs, for ``--json``: Deployment and revision, the images, model paths and served names of its
    live pods, and its pod templates."""
    live = _live(w)
    return {"deployment": w.deployment, "found": w.found, "revision": w.revision,
            "images": sorted({p.image for p in live}), "models": sorted({p.model for p in live}),
            "served_names": sorted({p.served_name for p in live if p.served_name}),
            "templates": templates(w)}


def describe(w: RoleWorkers) -> str:
    """One line: ``image X, model Y, revision 3 (5c9d8f7b6d): 1/1 Ready``."""
    if not w.found:
        return f"Deployment {w.deployment} not found [I: the operator's name for it]"
    live = _live(w)
    if not live:
        return f"Deployment {w.deployment} revision {w.revision or '?'}: no pod"
    images = ", ".join(sorted({p.image or "(no image)" for p in live}))
    models = ", ".join(sorted({p.model or "(model unknown)" for p in live}))
    parts = "; ".join(f"{_template(w, t['pod_template_hash'])}: {t['ready']}/{t['pods']} Ready" for t in templates(w))
    return f"image {images}, model {models}, {parts}"


def _differs(kind: Kind, label: str, values: dict[Role, set[str]]) -> Finding | None:
    if len(set().union(*values.values())) <= 1:
        return None
    shown = "; ".join(f"{role} runs {', '.join(sorted(v))}" for role, v in values.items() if v)
    return Finding(kind=kind, role=None, message=f"{label} differs: {shown}")


def findings(workers: dict[Role, RoleWorkers]) -> list[Finding]:
    """What makes the endpoint skewed, first the differences between the roles, then each role's rollout; none
    when both serve one image and one model path, each from one pod template at its Deployment's revision."""
    ready = {role: [p for p in _live(workers[role]) if p.ready] for role in ROLES if role in workers}
    out = [f for f in (
        _differs("image", "image", {r: {p.image or "(no image)" for p in pods} for r, pods in ready.items()}),
        # An unreadable model ("") is unknown, never equal to another unknown: uncompared() says so.
        _differs("model", "model path (--model)", {r: {p.model for p in pods if p.model}
                                                   for r, pods in ready.items()}),
    ) if f is not None]
    for role in ROLES:
        w = workers.get(role)
        if w is None or not _live(w):
            continue
        hashes = sorted({p.template_hash for p in _live(w)})
        if len(hashes) > 1:
            shown = "; ".join(f"{_template(w, t['pod_template_hash'])}: {t['ready']}/{t['pods']} Ready"
                              for t in templates(w))
            out.append(Finding(kind="rollout", role=role, message=f"{role} rollout in progress: its pods run "
                                                                  f"{len(hashes)} pod templates ({shown})"))
            continue
        running = w.revisions.get(hashes[0], "")
        if w.revision and running and running != w.revision:
            out.append(Finding(kind="rollout", role=role, message=f"{role} rollout in progress: its pods run "
                                                                  f"revision {running}, Deployment {w.deployment} "
                                                                  f"is at revision {w.revision}"))
    return out


def uncompared(workers: dict[Role, RoleWorkers]) -> list[str]:
    """Why prefill and decode cannot be compared, one reason each; none when every role has a Deployment and Ready
    pods whose model is read. A role missing from ``workers`` counts as not found."""
    out = []
    for role in ROLES:
        w = workers.get(role)
        if w is None or not w.found:
            name = w.deployment if w is not None else f"{role}-<iec>"
            out.append(f"Deployment {name} not found [I: the operator's name for it]")
            continue
        ready = [p for p in _live(w) if p.ready]
        if not ready:
            out.append(f"no Ready {role} pod")
        unknown = [p.pod for p in ready if not p.model]
        if unknown:
            out.append(f"the model of {role} pod {', '.join(unknown)} cannot be read from its vLLM command line")
    return out
