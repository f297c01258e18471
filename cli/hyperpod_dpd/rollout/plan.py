"""What a rollout changes and how it can change it: pure functions over the synthesized endpoint, the live one, the
free GPUs of the live nodes and the live Deployments' strategy.

The decision (:func:`decide`), in this order:

* **no change**: the live spec holds everything the target says (:func:`changes` is empty);
* **blue/green** when a second copy of the whole endpoint fits the free GPUs (both roles, every replica:
  :func:`place`): the new revision runs beside the old one as ``<endpoint>-r<N>`` and takes over once it is ready and
  answers; no downtime, no mixed prefill/decode window;
* **in place** only when the live Deployments' strategy lets both roles move, played round by round as the
  Deployment controller and the scheduler would (:func:`hyperpod_dpd.rollout.capacity.in_place`): ``Recreate`` (the
  old pods go first: one cold start of downtime), or ``RollingUpdate`` whose new pods all find GPUs as the old ones
  go (no downtime unless ``maxUnavailable`` covers every replica, but each role runs old and new pods side by side
  until both finish); both roles in one apply;
* **replace** otherwise: delete the live endpoint, wait until it is gone, apply the new one: one cold start of
  downtime (:func:`downtime`), stated before anything happens; refused when the new pods would not fit even on the
  GPUs the deleted endpoint frees (the endpoint would stay down until nodes are added).

A blue/green revision name the fleet's name rules refuse skips blue/green, never the rollout. The Kubernetes facts
the capacity checks rest on are in :mod:`hyperpod_dpd.rollout.capacity`.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from hyperpod_analysis.plan.coldstart import ColdStart
from hyperpod_core.names import REVISION_LABEL, ROLES, Role
from hyperpod_core.telemetry.queries import POD_SUFFIX
from hyperpod_dpd.rollout.capacity import (
    ROLE_SPEC,
    NodeRoom,
    Strategy,
    demands,
    free_by_selector,
    in_place,
    place,
)
from hyperpod_dpd.vllm_args import model_of_argv

Kind = Literal["none", "create", "blue-green", "in-place", "replace"]
Category = Literal["image", "model", "args", "parallelism", "roles", "caches", "other"]
CATEGORIES: Final[tuple[Category, ...]] = ("image", "model", "args", "parallelism", "roles", "caches", "other")


# --- the manifest of a revision ----------------------------------------------------------------------------------

def revision_manifest(doc: Mapping[str, Any], name: str, number: int) -> dict[str, Any]:
    """The InferenceEndpointConfig ``doc`` as revision ``number`` named ``name``: metadata reduced to what a manifest
    carries (name, namespace, labels with :data:`REVISION_LABEL`, annotations), and the autoscaling queries, which
    select the role pods by their name (``<role>-<IEC name>-<hash>-<suffix>``), re-anchored on the new name."""
    out = copy.deepcopy(dict(doc))
    meta = out.get("metadata") or {}
    old = str(meta.get("name") or "")
    out["metadata"] = {"name": name, "namespace": meta.get("namespace"),
                       "labels": {**(meta.get("labels") or {}), REVISION_LABEL: str(number)},
                       **({"annotations": dict(meta["annotations"])} if meta.get("annotations") else {})}
    spec = out.get("spec") or {}
    for scaling in (spec.get("autoScalingSpec"), (spec.get("pdSpec") or {}).get("autoScalingSpec")):
        if isinstance(scaling, dict) and old and old != name:
            _rename_queries(scaling, old, name)
    return out


def as_manifest(obj: dict[str, Any]) -> dict[str, Any]:
    """A live InferenceEndpointConfig as the manifest that would make it again (no status, no server fields): what
    ``rollout`` records as revision 0 of an endpoint applied by hand, and what ``bench`` restores."""
    meta = obj.get("metadata") or {}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k != "kubectl.kubernetes.io/last-applied-configuration"}
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
            "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace"),
                         "labels": dict(meta.get("labels") or {}), **({"annotations": annotations} if annotations
                                                                       else {})},
            "spec": obj.get("spec") or {}}


def _rename_queries(node: Any, old: str, new: str) -> None:
    """Every ``query`` below ``node``: the pod-name anchors of endpoint ``old`` (``prefill-<old>-``, ``decode-<old>-``,
    ``(prefill|decode)-<old>-``, ``"<old>-``, each followed by the pod suffix) renamed to ``new``."""
    pattern = re.compile(r'(?:(?<=prefill-)|(?<=decode-)|(?<=\)-)|(?<="))' + re.escape(old)
                         + r"-(?=" + re.escape(POD_SUFFIX) + ")")
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "query" and isinstance(value, str):
                node[key] = pattern.sub(f"{new}-", value)
            else:
                _rename_queries(value, old, new)
    elif isinstance(node, list):
        for item in node:
            _rename_queries(item, old, new)


# --- what changes ------------------------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class Change:
    category: Category
    path: str
    """Where in ``spec`` (``worker.image``, ``pdSpec.prefillSpec.replicas``, vLLM flags as ``--model``)."""
    before: Any
    """The live value; ``None`` when the live spec has no such field."""
    after: Any
    """The target value; ``None`` when the target removes the field."""

    def line(self) -> str:
        return f"{self.category}: {self.path}: {_shown(self.before)} -> {_shown(self.after)}"


def _shown(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, list):
        return " ".join(str(v) for v in value) if all(not isinstance(v, (dict, list)) for v in value) else str(value)
    return str(value)


#: vLLM flags of ``worker.args`` shown on their own, with their category.
_FLAGS: Final[dict[str, Category]] = {"--model": "model", "--tensor-parallel-size": "parallelism"}
#: Top-level keys a target may drop while the live spec keeps them (the API server adds none of these).
_DROPPABLE: Final = ("pdSpec", "autoScalingSpec", "kvCacheSpec", "modelCacheConfig", "intelligentRoutingSpec",
                     "dataCapture", "tlsConfig", "dnsConfig", "kubernetes", "nodeAffinity", "endpointName")


def _category(path: str) -> Category:
    if path == "worker.image":
        return "image"
    if path.startswith(("modelName", "modelSourceConfig", "worker.modelVolumeMount", "modelVersion")):
        return "model"
    if path.startswith(("kvCacheSpec", "modelCacheConfig")):
        return "caches"
    if path == "replicas" or ".resources" in path or path.startswith("worker.resources") or path.endswith(
            ".replicas"):
        return "parallelism"
    if path.endswith(".args") or path.startswith(("worker.args", "worker.environmentVariables")):
        return "args"
    if path.startswith(("pdSpec", "autoScalingSpec", "intelligentRoutingSpec", "instanceType")):
        return "roles"
    return "other"


def _flag(args: list[Any], flag: str) -> str | None:
    if flag == "--model":
        return model_of_argv([str(a) for a in args]) or None
    found = None
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            found = str(args[i + 1])
        elif str(arg).startswith(f"{flag}="):
            found = str(arg).split("=", 1)[1]
    return found


def _without_flags(args: list[Any]) -> list[str]:
    out: list[str] = []
    skip = False
    for arg in (str(a) for a in args):
        if skip:
            skip = False
            continue
        if arg in _FLAGS:
            skip = True
            continue
        if any(arg.startswith(f"{flag}=") for flag in _FLAGS):
            continue
        out.append(arg)
    return out


def changes(live_spec: Mapping[str, Any], target_spec: Mapping[str, Any]) -> list[Change]:
    """What the target changes of the live spec, by category: every field the target sets that the live spec holds
    otherwise (the API server adds defaults, so a field the target leaves out is not compared), the fields the target
    drops (:data:`_DROPPABLE`, ``pdSpec.autoScalingSpec``), and ``worker.args`` flag by flag for ``--model`` and
    ``--tensor-parallel-size`` (the rest of the list as a whole)."""
    found: list[Change] = []

    def walk(live: Any, want: Any, path: str) -> None:
        if path == "worker.args" and isinstance(want, list):
            have = live if isinstance(live, list) else []
            for flag, category in _FLAGS.items():
                if _flag(have, flag) != _flag(want, flag):
                    found.append(Change(category=category, path=flag, before=_flag(have, flag),
                                        after=_flag(want, flag)))
            if _without_flags(have) != _without_flags(want):
                found.append(Change(category="args", path=path, before=_without_flags(have) if live else None,
                                    after=_without_flags(want)))
            return
        if isinstance(want, dict):
            if not isinstance(live, dict):
                found.append(Change(category=_category(path), path=path, before=live, after=want))
                return
            for key, value in want.items():
                walk(live.get(key), value, f"{path}.{key}" if path else key)
            return
        if isinstance(want, list) and isinstance(live, list) and len(want) == len(live) and all(
                isinstance(w, dict) for w in want):
            if any(not _holds(a, b) for a, b in zip(live, want, strict=True)):
                found.append(Change(category=_category(path), path=path, before=live, after=want))
            return
        if not _same(live, want):
            found.append(Change(category=_category(path), path=path, before=live, after=want))

    walk(live_spec, target_spec, "")
    for key in _DROPPABLE:
        if key in live_spec and key not in target_spec:
            found.append(Change(category=_category(key), path=key, before="(set)", after=None))
    live_pd, want_pd = live_spec.get("pdSpec"), target_spec.get("pdSpec")
    if isinstance(live_pd, dict) and isinstance(want_pd, dict):
        if "autoScalingSpec" in live_pd and "autoScalingSpec" not in want_pd:
            found.append(Change(category="roles", path="pdSpec.autoScalingSpec", before="(set)", after=None))
        for key in ROLE_SPEC.values():  # a role moved onto a group it shares: synth writes no nodeSelector
            live_role, want_role = live_pd.get(key), want_pd.get(key)
            if isinstance(live_role, dict) and isinstance(want_role, dict) and "nodeSelector" in live_role \
                    and "nodeSelector" not in want_role:
                found.append(Change(category="roles", path=f"pdSpec.{key}.nodeSelector",
                                    before=live_role["nodeSelector"], after=None))
    return sorted(found, key=lambda c: CATEGORIES.index(c.category))


def _same(live: Any, want: Any) -> bool:
    """Equal, with a number and its string read alike (the API server keeps a quantity as written; ``8`` == ``"8"``)."""
    if live == want:
        return True
    return live is not None and want is not None and not isinstance(live, (dict, list)) \
        and not isinstance(want, (dict, list)) and str(live) == str(want)


def _holds(live: Any, want: Any) -> bool:
    if isinstance(want, dict):
        return isinstance(live, dict) and all(_holds(live.get(k), v) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(live, list) and len(live) == len(want) and all(
            _holds(a, b) for a, b in zip(live, want, strict=True))
    return _same(live, want)


# --- downtime -----------------------------------------------------------------------------------------------------

def downtime(figures: Iterable[ColdStart] | None, *, source_type: str, weights_cache: bool,
             model_changes: bool) -> str:
    """The planned downtime of one cold start, from the planner's published figures (``figures``; ``None`` when the
    model's size is unknown): the S3 load unless the NVMe weights cache holds these weights already (on, and the
    model unchanged: the same nodes read them locally; AWS publishes no time for that)."""
    if figures is None:
        return "one cold start (no estimate: the model's size is unknown; set model.parameters_billion)"
    by_source = {f.source: f for f in figures}
    s3 = by_source.get("s3")
    if source_type != "s3" or s3 is None or s3.seconds is None:
        return f"one cold start (no published time for model source {source_type!r})"
    fast, slow = s3.seconds
    s3_text = f"{fast / 60:.1f}-{slow / 60:.1f} min from S3 [{s3.note}]"
    if not weights_cache:
        return f"one cold start: {s3_text}; weights cache off"
    if model_changes:
        return (f"one cold start: {s3_text}; the NVMe weights cache holds the old weights, and the first start of "
                "new weights on a node pays the S3 time")
    return (f"one cold start: the NVMe weights cache holds these weights (AWS publishes no load time for a hit); at "
            f"most {s3_text}")


# --- KV safety ----------------------------------------------------------------------------------------------------

def model_identity(spec: Mapping[str, Any]) -> tuple[str, str]:
    """The served model's name and its weights' location (``modelSourceConfig`` with ``modelLocation`` without its
    trailing ``/``)."""
    source = dict(spec.get("modelSourceConfig") or {})
    if "modelLocation" in source:
        source["modelLocation"] = str(source["modelLocation"]).strip("/")
    return str(spec.get("modelName") or ""), repr(sorted(source.items()))


def _l2(spec: Mapping[str, Any]) -> str | None:
    kv = spec.get("kvCacheSpec") or {}
    if not kv.get("enableL2Cache"):
        return None
    return str((kv.get("l2CacheSpec") or {}).get("l2CacheBackend") or "the L2 backend")


def kv_safety(live_spec: Mapping[str, Any], target_spec: Mapping[str, Any], *, flushed: bool = False
              ) -> tuple[str | None, str]:
    """``(refusal, note)`` for the KV a model change could reuse. LMCache keys every chunk on vLLM's ``--model``
    value, never on the weights (docs/endpoint.md, "Model identity"; issue 33): when the model changes (its name or
    its weights' location) while ``--model`` stays the same string and an L2 cache keeps keys beyond the pods
    (``kvCacheSpec.enableL2Cache``, live or target), the new weights would read KV the old ones wrote. That is
    refused (unless ``flushed``: the L2 was flushed); otherwise the note says whether the keys differ."""
    before, after = model_identity(live_spec), model_identity(target_spec)
    if before == after:
        return None, "KV: the model does not change"
    old = model_of_argv([str(a) for a in (live_spec.get("worker") or {}).get("args") or []])
    new = model_of_argv([str(a) for a in (target_spec.get("worker") or {}).get("args") or []])
    if old != new:
        return None, f"KV: the model changes and so do the LMCache keys (--model {old} -> {new}): no KV is reused"
    l2 = _l2(live_spec) or _l2(target_spec)
    if l2 is None:
        return None, (f"KV: the model changes but --model stays {new}: no L2 cache keeps keys beyond the pods, and "
                      "the old pods' L1 goes with them")
    if flushed:
        return None, f"KV: the model changes with the same --model {new}; the L2 ({l2}) was flushed (--kv-flushed)"
    return (f"refusing: the model changes but vLLM's --model stays {new!r}, and LMCache keys carry only --model "
            f"(docs/endpoint.md, Model identity): with the L2 cache on ({l2}) the new weights would read the KV the "
            "old ones wrote; give the new weights their own model.revision (or let stage-model name them), or flush "
            "the L2 and pass --kv-flushed"), ""


#: Changes that scale a role's Deployment without changing its pod template (``pdSpec.<role>Spec.replicas``), or
#: touch no Deployment (the autoscaling objects).
_SCALE_ONLY: Final = ("pdSpec.prefillSpec.replicas", "pdSpec.decodingSpec.replicas")


def rolling_roles(found: Iterable[Change]) -> set[str]:
    """The roles whose pod template the changes touch: a change under ``pdSpec.<role>Spec`` (but its replicas) moves
    that role; ``pdSpec.autoScalingSpec`` and the replicas move none (a scaling event, no rollout); any other change
    (the worker, the model, the caches, ...) moves both: how the operator builds each role's template from the spec
    is unpublished [I], so a shared field is taken to reach both."""
    roles: set[str] = set()
    for c in found:
        if c.path in _SCALE_ONLY or c.path.startswith("pdSpec.autoScalingSpec"):
            continue
        role = next((r for r, key in ROLE_SPEC.items() if c.path.startswith(f"pdSpec.{key}.")), None)
        if role is None:
            return set(ROLES)
        roles.add(role)
    return roles


# --- the decision ------------------------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class Plan:
    kind: Kind
    endpoint: str
    namespace: str
    live: str | None
    """The live InferenceEndpointConfig's name (``None``: nothing live)."""
    target: str
    """The name the target runs under."""
    changes: tuple[Change, ...]
    capacity: tuple[str, ...]
    """Free GPUs per role's nodes (:func:`free_by_selector`)."""
    reasons: tuple[str, ...]
    """Why this kind: blue/green's fit, the in-place verdict."""
    downtime: str | None
    kv: str
    refusal: str | None = None
    service: str = ""
    """The stable Service's state (:func:`hyperpod_dpd.rollout.address.state`)."""
    service_change: bool = False
    """The Service must be created or repointed at :attr:`target`."""


def decide(*, endpoint: str, namespace: str, live_name: str | None, live_spec: Mapping[str, Any] | None,
           target_spec: Mapping[str, Any], blue_green_name: str, nodes: Iterable[NodeRoom],
           strategies: Mapping[Role, Strategy | None], selectors: Mapping[Role, Mapping[str, str]],
           cold_start: str, cold_start_unchanged: str, live_owners: Iterable[str],
           blue_green_problem: str | None = None, kv_flushed: bool = False, service: str = "",
           service_change: bool = False) -> Plan:
    """The plan (module docstring). ``cold_start``: :func:`downtime` of the target; ``cold_start_unchanged``: the same
    when the weights do not change (a replace that changes no weights finds them in the weights cache).
    ``live_owners``: the owners (:attr:`NodeRoom.held`'s keys) of the live endpoint's pods, whose GPUs a replace
    frees; a replace whose new pods do not fit even then is refused (it would leave the endpoint down until nodes are
    added). ``blue_green_problem``: why the blue/green revision's name may not be used
    (:func:`revision_name_problem`); then the plan goes on to in place or replace, which keep the live name."""
    rooms = list(nodes)
    capacity = tuple(free_by_selector(rooms, demands(target_spec, selectors)))
    if live_spec is None or live_name is None:
        short = place(rooms, demands(target_spec, selectors))
        fit = "it fits" if not short else f"it does not fit yet ({'; '.join(short)}): its pods wait Pending"
        return Plan(kind="create", endpoint=endpoint, namespace=namespace, live=None, target=endpoint, changes=(),
                    capacity=capacity, reasons=(f"nothing live: the endpoint is applied; {fit}",), downtime=None,
                    kv="KV: nothing live", service=service, service_change=True)
    found = tuple(changes(live_spec, target_spec))
    refusal, kv = kv_safety(live_spec, target_spec, flushed=kv_flushed)
    if not found:
        return Plan(kind="none", endpoint=endpoint, namespace=namespace, live=live_name, target=live_name,
                    changes=(), capacity=capacity, reasons=(), downtime=None, kv=kv, service=service,
                    service_change=service_change)
    model_changes = any(c.category == "model" for c in found)
    outage = cold_start if model_changes else cold_start_unchanged
    short = place(rooms, demands(target_spec, selectors))
    fit_line = (f"blue/green: a second copy does not fit: {'; '.join(short)}" if short
                else f"blue/green: not possible: {blue_green_problem}" if blue_green_problem
                else "blue/green: a second copy fits")
    replaced = Plan(kind="replace", endpoint=endpoint, namespace=namespace, live=live_name, target=live_name,
                    changes=found, capacity=capacity, reasons=(fit_line,), downtime=outage, kv=kv, refusal=refusal,
                    service=service, service_change=True)
    if not short and not blue_green_problem:
        return dataclasses.replace(replaced, kind="blue-green", target=blue_green_name, downtime=None)
    verdict = in_place(live_spec, target_spec, strategies, rooms, selectors, namespace, rolling=rolling_roles(found))
    if verdict.fits:
        return dataclasses.replace(replaced, kind="in-place", reasons=(fit_line, *verdict.lines),
                                   downtime=outage if verdict.downtime else None)
    stranded = place(rooms, demands(target_spec, selectors), released={owner: 1.0 for owner in live_owners})
    if stranded and refusal is None:
        refusal = (f"refusing: a replace would leave {namespace}/{endpoint} down: even with {live_name} deleted, "
                   f"{'; '.join(stranded)}; add nodes to the instance group, or lower the target's replicas or GPUs, "
                   "then run rollout again")
    return dataclasses.replace(replaced, reasons=(fit_line, *verdict.lines), refusal=refusal)


_TITLE: Final[dict[Kind, str]] = {
    "none": "no change", "create": "CREATE", "blue-green": "BLUE/GREEN", "in-place": "IN PLACE", "replace": "REPLACE"}


def steps_of(kind: str, source: str | None, target: str) -> tuple[str, ...]:
    """The executor's steps of a change, each ``<action> <source|target> <IEC name>``
    (:mod:`hyperpod_dpd.rollout.executor`). ``discard`` undoes an unfinished blue/green (or create): the Service back
    to the source, the new revision deleted."""
    s, t = f"source {source}", f"target {target}"
    return {
        "none": (f"service {t}",),
        "create": (f"apply {t}", f"ready {t}", f"service {t}"),
        "blue-green": (f"apply {t}", f"ready {t}", f"smoke {t}", f"service {t}", f"remove {s}"),
        "in-place": (f"update {t}", f"rolled {t}", f"service {t}"),
        "replace": (f"remove {s}", f"apply {t}", f"ready {t}", f"service {t}"),
        "discard": ((f"service {s}",) if source else ()) + (f"remove {t}",),
    }[kind]


def step_text(step: str, endpoint: str, namespace: str) -> str:
    """What a step does, in words."""
    action, _, name = step.split(" ", 2)
    return {
        "apply": f"apply {name}",
        "update": f"apply the new spec over {name} in place (both roles in one apply)",
        "ready": f"wait until {name} is ready",
        "rolled": f"wait until {name} is ready and both roles' rollouts are finished",
        "smoke": f"smoke test {name}: a short and a long prompt",
        "service": f"point Service {namespace}/{endpoint} at {name}",
        "remove": f"delete {name} and wait until it is gone",
    }[action]


def describe_steps(plan: Plan) -> list[str]:
    """What the rollout will do, in order (:func:`steps_of`)."""
    if plan.kind == "none" and not plan.service_change:
        return []
    return [step_text(step, plan.endpoint, plan.namespace) for step in steps_of(plan.kind, plan.live, plan.target)]


def render(plan: Plan) -> list[str]:
    """The plan as printed before anything happens."""
    where = f"{plan.namespace}/{plan.endpoint}"
    lines = [f"rollout of endpoint {where}: live {f'InferenceEndpointConfig {plan.live}' if plan.live else 'none'}"]
    if plan.changes:
        lines.append("changes:")
        lines += [f"  {c.line()}" for c in plan.changes]
    lines.append("free GPUs (allocatable minus the GPU requests of the pods bound there):")
    lines += [f"  {line}" for line in plan.capacity]
    lines += plan.reasons
    lines.append(plan.kv)
    if plan.service:
        lines.append(plan.service)
    lines.append(f"plan: {_TITLE[plan.kind]}" + (f" as {plan.target}" if plan.kind in ("blue-green", "create") else "")
                 + (": nothing to do" if plan.kind == "none" and not describe_steps(plan) else ""))
    if plan.kind in ("replace", "in-place"):
        lines.append(f"planned downtime: {plan.downtime}" if plan.downtime else "planned downtime: none")
    elif plan.kind == "blue-green":
        lines.append("planned downtime: none (the Service moves once the new revision answers)")
    lines += [f"  {i}. {step}" for i, step in enumerate(describe_steps(plan), 1)]
    return lines


def revision_name_problem(name: str, namespace: str, others: Mapping[str, Any]) -> str | None:
    """Why revision name ``name`` cannot be used, or ``None``: every name it derives (:meth:`hyperpod_core.names.
    EndpointNames.derived`) must be a DNS label (at most 63 characters) and none may be one that another endpoint of
    the deployment derives (``others``: endpoint name -> its :class:`~hyperpod_core.names.EndpointNames`), the
    fleet's name rule (:func:`hyperpod_core.config.rules.derived_names_are_unique`)."""
    from hyperpod_core.names import EndpointNames

    mine = EndpointNames(name=name, namespace=namespace).derived()
    for kind, ns, derived in mine:
        if len(derived) > 63:
            return (f"revision {name} would derive the {kind} {derived!r} in {ns!r}, longer than 63 characters: "
                    "shorten the endpoint's name or namespace")
    for other, names in others.items():
        shared = set(mine) & set(names.derived())
        if shared:
            kind, ns, derived = sorted(shared)[0]
            return (f"revision {name} would derive the {kind} {derived!r} in {ns!r}, which endpoint {other!r} "
                    "derives too: rename one of them")
    return None
