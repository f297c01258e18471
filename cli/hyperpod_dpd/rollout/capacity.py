"""What fits where, and how the operator's Deployments move from the old pods to the new ones: pure functions over the
GPUs of the live nodes (:class:`NodeRoom`), the pods an endpoint spec runs (:func:`demands`) and the live Deployments'
``spec.strategy`` (:class:`Strategy`).

:func:`in_place` plays a rollout of both roles' Deployments round by round as the Deployment controller and the
scheduler would (kubernetes/kubernetes ``pkg/controller/deployment``: ``rolling.go``, ``recreate.go``,
``util/deployment_util.go``): each round the new ReplicaSet is scaled up to what ``maxSurge`` allows, the new pods
bind where their GPUs fit (first fit by node name, largest pods first), the old ReplicaSet is scaled down by what
``maxUnavailable`` allows given the new pods not yet available, and the pods bound in a round are available in the
next one (a cold start later). It ends when every new pod runs and no old pod is left, or stops when a round changes
nothing: the rollout would never finish (a deadlock, the fourth review's k8s defect 1). A role whose available pods
reach 0 on the way is down for a cold start.

Kubernetes facts used (Kubernetes docs, "Deployments", section "Strategy"; the API reference of
``RollingUpdateDeployment``): ``RollingUpdate`` is the default; ``maxSurge`` and ``maxUnavailable`` default to 25 %,
of the Deployment's (new) ``spec.replicas``; a percentage of ``maxSurge`` is rounded up, one of ``maxUnavailable``
down, and when both come to 0 ``maxUnavailable`` is 1 (``ResolveFenceposts``); the new ReplicaSet may grow until
old plus new pods reach replicas + maxSurge (``NewRSNewReplicas``); the old one may shrink by all pods - (replicas -
maxUnavailable) - new pods not yet available (``reconcileOldReplicaSets``), unscheduled pods first; ``Recreate`` kills
every old pod before it creates new ones. A pod whose GPU request fits no node stays ``Pending`` ("Insufficient
nvidia.com/gpu"). The operator's strategy is unpublished [I]: it is read from the live Deployments.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from hyperpod_core.errors import UsageError
from hyperpod_core.names import INSTANCE_TYPE_NODE_LABEL, PD_SPEC_KEYS, ROLES, Role
from hyperpod_dpd.kube import GPU_RESOURCE

#: The pdSpec keys of each role (:data:`hyperpod_core.names.PD_SPEC_KEYS`).
ROLE_SPEC: Final[dict[str, str]] = PD_SPEC_KEYS


# --- capacity ------------------------------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class NodeRoom:
    """One node as the GPU scheduler sees it."""

    name: str
    labels: Mapping[str, str]
    allocatable: int
    """``status.allocatable`` of :data:`hyperpod_dpd.kube.GPU_RESOURCE`."""
    held: Mapping[str, int] = field(default_factory=dict)
    """GPUs requested by the pods bound to the node (not Succeeded or Failed), by owner: ``<namespace>/<Deployment>``
    for a Deployment's pod, ``<namespace>/<pod>`` for any other."""
    schedulable: bool = True
    """Ready, not cordoned, without a ``NoSchedule`` taint (HyperPod's deep health checks keep one)."""

    @property
    def used(self) -> int:
        return sum(self.held.values())

    @property
    def free(self) -> int:
        return max(self.allocatable - self.used, 0) if self.schedulable else 0

    def matches(self, selector: Mapping[str, str]) -> bool:
        return all(self.labels.get(k) == v for k, v in selector.items())


#: A node-affinity term (its ``matchExpressions``): ``(key, operator, values)`` each, all of which must hold.
Term = tuple[tuple[str, str, tuple[str, ...]], ...]


@dataclass(frozen=True, kw_only=True)
class Demand:
    """Pods of one role to place: each needs ``gpus`` GPUs on one node that ``selector`` selects and, when
    ``affinity`` has terms, one of them (the required node affinity of a colocated endpoint)."""

    role: str
    selector: Mapping[str, str]
    gpus: int
    pods: int
    affinity: tuple[Term, ...] = ()

    def selects(self, node: NodeRoom) -> bool:
        return node.matches(self.selector) and (not self.affinity or any(
            all(_holds(node.labels.get(key), operator, values) for key, operator, values in term)
            for term in self.affinity))

    def where(self) -> str:
        if not self.affinity:
            return selector_text(self.selector)
        terms = " or ".join(", ".join(f"{key} {operator} {'|'.join(values)}".rstrip() for key, operator, values in t)
                            for t in self.affinity)
        return f"{selector_text(self.selector)}; {terms}" if self.selector else terms


def _holds(value: str | None, operator: str, values: tuple[str, ...]) -> bool:
    """One ``matchExpressions`` entry on a node label's value (Kubernetes API, NodeSelectorRequirement: In, NotIn,
    Exists, DoesNotExist; Gt and Lt compare integers)."""
    if operator == "In":
        return value in values
    if operator == "NotIn":
        return value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and value.lstrip("-").isdigit() and values:
        return int(value) > int(values[0]) if operator == "Gt" else int(value) < int(values[0])
    return False


def node_affinity(spec: Mapping[str, Any]) -> tuple[Term, ...]:
    """The terms of ``spec.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`` (CRD v3.3: a Kubernetes
    NodeAffinity; terms are ORed, a term's expressions ANDed)."""
    required = (spec.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    return tuple(tuple((str(e.get("key")), str(e.get("operator")), tuple(str(v) for v in e.get("values") or ()))
                       for e in term.get("matchExpressions") or ())
                 for term in required.get("nodeSelectorTerms") or ())


def selector_text(selector: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "any node"


def place(nodes: Iterable[NodeRoom], demands: Iterable[Demand], *, released: Mapping[str, float] | None = None
          ) -> list[str]:
    """Place every pod of ``demands`` on the nodes' free GPUs, largest pods first, each on the first node (by name)
    that its selector selects and that has room: what the scheduler can do at best for GPU-only requests. Returns
    one line per role whose pods do not all fit (empty: all fit). ``released``: the share of its GPUs each owner
    (the keys of :attr:`NodeRoom.held`) gives back first (1: every old pod of a ``Recreate``)."""
    rooms = sorted(nodes, key=lambda n: n.name)
    return _place(rooms, _free(rooms, released or {}), demands)


def _free(rooms: list[NodeRoom], released: Mapping[str, float]) -> dict[str, int]:
    """Node name -> free GPUs once each owner of ``released`` gives back its share of what it holds there (rounded
    down; on schedulable nodes)."""
    return {n.name: n.free + (sum(math.floor(g * released[o]) for o, g in n.held.items() if o in released)
                              if n.schedulable else 0) for n in rooms}


def _place(rooms: list[NodeRoom], free: dict[str, int], demands: Iterable[Demand],
           bound: dict[str, list[str]] | None = None) -> list[str]:
    """:func:`place` on ``free`` (node name -> free GPUs), which it updates; ``bound``: role -> the nodes its pods
    were bound to, appended to."""
    short: list[str] = []
    for d in sorted(demands, key=lambda d: -d.gpus):
        for _ in range(d.pods):
            node = next((n for n in rooms if d.selects(n) and free[n.name] >= d.gpus), None)
            if node is None:
                seen = ", ".join(f"{n.name}: {free[n.name]}" for n in rooms if d.selects(n)) or "no node"
                short.append(f"{d.role}: a pod of {d.gpus} GPUs fits no node of {d.where()} "
                             f"(free: {seen})")
                break
            free[node.name] -= d.gpus
            if bound is not None:
                bound.setdefault(d.role, []).append(node.name)
    return short


def free_by_selector(nodes: Iterable[NodeRoom], wanted: Iterable[Demand]) -> list[str]:
    """One line per demand (role): the free GPUs of the nodes it may use, node by node."""
    rooms = sorted(nodes, key=lambda n: n.name)
    lines = []
    for d in wanted:
        picked = [n for n in rooms if d.selects(n)]
        total = sum(n.allocatable for n in picked)
        each = ", ".join(f"{n.name}: {n.free}" + ("" if n.schedulable else " (not schedulable)") for n in picked)
        lines.append(f"{d.role} ({d.where()}): {sum(n.free for n in picked)} of {total} GPUs free on "
                     f"{len(picked)} node{'s' if len(picked) != 1 else ''}" + (f" ({each})" if picked else ""))
    return lines


def _gpus(resources: Any) -> int:
    """GPUs a container's ``resources`` asks for: the request, else the limit (for an extended resource Kubernetes
    sets the request to the limit when only the limit is given)."""
    if not isinstance(resources, dict):
        return 0
    for key in ("requests", "limits"):
        value = (resources.get(key) or {}).get(GPU_RESOURCE)
        if value is not None:
            return _count(value, 0, f"{key}.{GPU_RESOURCE}")
    return 0


def _count(value: Any, default: int, what: str) -> int:
    """A whole count from an int or a numeric string (a quantity as written: ``8``, ``"8"``); ``None``: ``default``;
    anything else is bad input (one line), never a traceback."""
    if value is None:
        return default
    try:
        number = float(str(value))
    except ValueError:
        raise UsageError(f"{what} is {value!r}, not a whole number") from None
    if not math.isfinite(number) or number != int(number) or number < 0:
        raise UsageError(f"{what} is {value!r}, not a whole number")
    return int(number)


def is_dpd(spec: Mapping[str, Any]) -> bool:
    return isinstance(spec.get("pdSpec"), dict)


def demands(spec: Mapping[str, Any], selectors: Mapping[Role, Mapping[str, str]]) -> list[Demand]:
    """The pods an endpoint spec runs: per DPD role its ``replicas`` of its ``resources`` (the role's selector:
    ``selectors``); a colocated endpoint's ``replicas`` of ``worker.resources`` on the nodes its required
    ``nodeAffinity`` selects (what the synth writes) and, when set, of its ``instanceType``."""
    if is_dpd(spec):
        pd = spec["pdSpec"]
        return [Demand(role=role, selector=selectors[role], gpus=_gpus((pd.get(ROLE_SPEC[role]) or {}).get(
                    "resources")), pods=_count((pd.get(ROLE_SPEC[role]) or {}).get("replicas"), 1,
                                                 f"pdSpec.{ROLE_SPEC[role]}.replicas")) for role in ROLES]
    instance_type = spec.get("instanceType")
    return [Demand(role="worker", selector={INSTANCE_TYPE_NODE_LABEL: str(instance_type)} if instance_type else {},
                   gpus=_gpus((spec.get("worker") or {}).get("resources")),
                   pods=_count(spec.get("replicas"), 1, "replicas"), affinity=node_affinity(spec))]


# --- the live Deployments' strategy --------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class Strategy:
    """A Deployment's ``spec.strategy`` (apps/v1), with its replicas."""

    deployment: str
    type: str
    """``RollingUpdate`` or ``Recreate``."""
    replicas: int
    max_surge: int | str | None = None
    max_unavailable: int | str | None = None

    def surge(self) -> int:
        """``maxSurge`` in pods: a percentage of the replicas rounded up; default 25 %."""
        return _scaled(self.max_surge, self.replicas, up=True)

    def unavailable(self) -> int:
        """``maxUnavailable`` in pods: a percentage of the replicas rounded down; default 25 %. When it and
        :meth:`surge` both resolve to 0 the Deployment controller uses 1 ("on the theory that surge might not work
        due to quota": kubernetes/kubernetes, pkg/controller/deployment/util/deployment_util.go,
        ``ResolveFenceposts``), so the old pod stops first."""
        value = _scaled(self.max_unavailable, self.replicas, up=False)
        return 1 if value == 0 and self.surge() == 0 else value

    def describe(self) -> str:
        if self.type != "RollingUpdate":
            return f"{self.deployment} {self.type}"
        def shown(value: int | str | None, pods: int) -> str:
            given = "25%" if value is None else str(value)
            return given if given == str(pods) else f"{given} = {pods}"

        return (f"{self.deployment} RollingUpdate (maxSurge {shown(self.max_surge, self.surge())}, maxUnavailable "
                f"{shown(self.max_unavailable, self.unavailable())}, {self.replicas} replica"
                f"{'s' if self.replicas != 1 else ''})")


def _scaled(value: int | str | None, replicas: int, *, up: bool) -> int:
    if value is None:
        value = "25%"
    if isinstance(value, int) or str(value).isdigit():
        return int(value)
    percent = float(str(value).rstrip("%")) * replicas / 100
    return math.ceil(percent) if up else math.floor(percent)


@dataclass(frozen=True, kw_only=True)
class InPlace:
    fits: bool
    downtime: bool
    """A role's available pods reach 0 before its new ones serve (``Recreate``, or a ``maxUnavailable`` that covers
    every replica)."""
    lines: tuple[str, ...]


@dataclass(kw_only=True)
class _Rolling:
    """One role's Deployment during a played rollout."""

    demand: Demand
    """The new pods: ``pods`` is the Deployment's new ``spec.replicas``."""
    strategy: Strategy
    """Its strategy, with the new replicas (the fenceposts are resolved on them)."""
    old: list[str | None]
    """The node of each old pod (``None``: not bound)."""
    old_gpus: int
    scale_only: bool = False
    """The role's pod template does not change: the Deployment only scales (kubernetes/kubernetes
    pkg/controller/deployment: a scaling event is synced without a rollout, ``FindNewReplicaSet`` matches the
    template): its old pods stay, extra ones are added."""
    created: int = 0
    bound: list[str] = field(default_factory=list)
    ready: int = 0
    down: bool = False

    @property
    def available(self) -> int:
        return sum(1 for n in self.old if n is not None) + self.ready

    @property
    def done(self) -> bool:
        if self.scale_only:
            return self.ready == max(self.demand.pods - len(self.old), 0)
        return not self.old and self.ready == self.demand.pods


def _old_pods(rooms: list[NodeRoom], owner: str, gpus: int, replicas: int) -> list[str | None]:
    """Where the old pods of ``owner`` run (from the GPUs it holds per node), the rest of its replicas unbound."""
    found: list[str | None] = [n.name for n in rooms for _ in range(n.held.get(owner, 0) // gpus)] if gpus else []
    return found + [None] * max(replicas - len(found), 0)


def _stop(rooms: list[NodeRoom], free: dict[str, int], r: _Rolling, count: int) -> None:
    """Stop ``count`` old pods of ``r``, unscheduled ones first, then by node name; their GPUs are free again."""
    schedulable = {n.name for n in rooms if n.schedulable}
    for _ in range(count):
        node = min(r.old, key=lambda n: (n is not None, n or ""))
        r.old.remove(node)
        if node is not None and node in schedulable:
            free[node] += r.old_gpus


def _round(rooms: list[NodeRoom], free: dict[str, int], rolls: Mapping[str, _Rolling]) -> tuple[bool, list[str]]:
    """One round of the Deployment controllers and the scheduler; whether anything changed, and the new pods left
    Pending (one line per role, :func:`place`'s)."""
    changed = False

    def stop(r: _Rolling, count: int) -> None:
        _stop(rooms, free, r, count)

    for r in rolls.values():  # scale the new ReplicaSet up
        want = r.demand.pods
        if r.scale_only:
            want = max(want - len(r.old), 0)
        elif r.strategy.type == "Recreate":
            if r.old:
                stop(r, len(r.old))
                changed = True
        else:
            want = min(want, max(r.created, want + r.strategy.surge() - len(r.old)))
        if want > r.created:
            r.created, changed = want, True
    pending = [Demand(role=role, selector=r.demand.selector, gpus=r.demand.gpus, pods=r.created - len(r.bound))
               for role, r in rolls.items() if r.created > len(r.bound)]
    bound: dict[str, list[str]] = {}
    short = _place(rooms, free, pending, bound)  # bind what fits
    for role, where in bound.items():
        rolls[role].bound += where
        changed = True
    for r in rolls.values():  # scale the old ReplicaSet down
        if r.strategy.type != "Recreate" and r.old and not r.scale_only:
            min_available = r.demand.pods - r.strategy.unavailable()
            # first the old pods that are not available (unscheduled), up to all - min available - new unavailable;
            # then available ones, down to min available
            unscheduled = min(r.old.count(None), len(r.old) + r.ready - min_available)
            count = max(unscheduled, 0) + max(min(len(r.old) - r.old.count(None), r.available - min_available), 0)
            if count > 0:
                stop(r, count)
                changed = True
        if r.available == 0 and r.demand.pods:
            r.down = True
    for r in rolls.values():  # the pods bound this round serve from the next one
        if len(r.bound) > r.ready:
            r.ready, changed = len(r.bound), True
    return changed, short


def in_place(live_spec: Mapping[str, Any], target_spec: Mapping[str, Any], strategies: Mapping[Role, Strategy | None],
             nodes: Iterable[NodeRoom], selectors: Mapping[Role, Mapping[str, str]], namespace: str, *,
             rolling: Collection[str] = ROLES) -> InPlace:
    """Whether applying the target over the live endpoint finishes, both roles at once (one apply), played round by
    round (module docstring); downtime when a role's available pods reach 0. ``rolling``: the roles whose pod
    template changes; the others only scale (their old pods stay; a scale-down stops the unscheduled ones first). A mode
    change (``pdSpec`` added or removed) is never in place: what the operator does then is unpublished [I] (the
    fourth review, k8s defect 1); nor is a colocated endpoint's change (its Deployment's strategy is not read)."""
    if is_dpd(live_spec) != is_dpd(target_spec):
        return InPlace(fits=False, downtime=False, lines=(
            "in place: no: DPD <-> colocated in place is a transition the operator does not publish [I]",))
    if not is_dpd(target_spec):
        return InPlace(fits=False, downtime=False, lines=(
            "in place: no: a colocated endpoint changes by blue/green or replace (its Deployment's strategy is not "
            "read)",))
    known = {role: s for role, s in strategies.items() if s is not None}
    missing = [role for role in ROLES if role not in known]
    if missing:
        return InPlace(fits=False, downtime=False, lines=(
            f"in place: no: the {' and '.join(missing)} Deployment is not found, so its strategy is unknown",))
    rooms = sorted(nodes, key=lambda n: n.name)
    want = {d.role: d for d in demands(target_spec, selectors)}
    have = {d.role: d for d in demands(live_spec, selectors)}
    free = {n.name: n.free for n in rooms}
    rolls: dict[str, _Rolling] = {role: _Rolling(
        demand=want[role], strategy=dataclasses.replace(known[role], replicas=want[role].pods),
        old=_old_pods(rooms, f"{namespace}/{known[role].deployment}", have[role].gpus, known[role].replicas),
        old_gpus=have[role].gpus, scale_only=role not in rolling) for role in ROLES}
    for role, r in rolls.items():  # a new replica count is a scaling event first (syncDeployment: scale, sync.go)
        if r.scale_only and len(r.old) > r.demand.pods:
            _stop(rooms, free, r, len(r.old) - r.demand.pods)  # the extra old pods go at once
        elif not r.scale_only and r.old and len(r.old) != r.demand.pods:
            # before any rollout the old ReplicaSet is scaled to the new count: extra pods of the old template (an
            # old ReplicaSet at 0 is not active, so there is no scaling event: FilterActiveReplicaSets)
            if len(r.old) > r.demand.pods:
                _stop(rooms, free, r, len(r.old) - r.demand.pods)
            else:
                bound: dict[str, list[str]] = {}
                added = r.demand.pods - len(r.old)
                _place(rooms, free, [Demand(role=role, selector=r.demand.selector, gpus=r.old_gpus, pods=added)],
                       bound)
                r.old += [*bound.get(role, []), *[None] * (added - len(bound.get(role, [])))]
    lines = [f"live strategy: {'; '.join(known[role].describe() for role in ROLES)}"]
    short: list[str] = []
    for _ in range(4 * sum(r.demand.pods + len(r.old) for r in rolls.values()) + 4):
        if all(r.done for r in rolls.values()):
            break
        changed, short = _round(rooms, free, rolls)
        if not changed:
            break
    if not all(r.done for r in rolls.values()):
        pending = "; ".join(short) or "no pod can move"
        if all(r.scale_only for r in rolls.values()):
            return InPlace(fits=False, downtime=False, lines=(*lines, f"in place: no: the added pods do not fit: "
                                                                      f"{pending}"))
        if any(r.old for r in rolls.values() if not r.scale_only):
            return InPlace(fits=False, downtime=False, lines=(
                *lines, f"in place: would deadlock: {pending}; the old pods that maxUnavailable lets go are gone, "
                        "the rest stay until these new pods are Ready, and these stay Pending: the old pods serve "
                        "the old spec beside the new ones"))
        return InPlace(fits=False, downtime=False, lines=(*lines, f"in place: no: even after the old pods stop, "
                                                                  f"{pending}"))
    down = [role for role in ROLES if rolls[role].down]
    how = (f"the {' and '.join(down)} pods all stop before new ones serve: downtime of one cold start" if down else
           "old pods stop only as new ones serve: each role runs old and new pods side by side until both finish")
    return InPlace(fits=True, downtime=bool(down), lines=(*lines, f"in place: fits ({how})"))
