"""Whether the fleet's worker pods fit the instance groups: every endpoint's roles at their peak, on the groups each
may land on (:meth:`~hyperpod_core.config.spec.EndpointSpec.role_groups`), as GPUs in total and pod by pod on nodes.
The capacity rule (``hyperpod_core.config.rules.endpoints_fit_the_groups_together``) refuses what does not fit, and
``hyperpod-dpd plan``'s fleet table (``hyperpod_analysis.plan.fleet``) shows the margin, from the same functions.

In total (:func:`short_groups`): the roles' peak GPUs flow to the groups they may land on, each group taking at most
its GPUs (a maximum flow). When some GPUs find no group, the groups the last search still reached are the set whose
GPUs the roles confined to them exceed (the minimum cut; Hall's condition over every union of the roles' groups, not
only each role's groups and all of them). Written out because it is a dozen lines over at most 40 roles; no graph
library is a dependency of core.

Pod by pod (:func:`unplaced`): each pod takes ``tensor_parallel_size`` GPUs of ONE node, so totals that fit may
still leave a pod without a node with that many free GPUs. A first-fit pass places the largest pods first, and among
pods of one size those with the fewest groups first, into per-node GPU bins.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from hyperpod_core.config.cluster import InstanceGroupConfig
from hyperpod_core.config.spec import EndpointSpec
from hyperpod_core.instances import DPD_INSTANCE_GPUS
from hyperpod_core.names import ROLES, Role


@dataclass(frozen=True, kw_only=True)
class RolePlacement:
    """One role of one endpoint at its peak, and the instance groups it may land on."""

    endpoint: str
    role: Role
    field: str
    """The role's key as the file names it: ``endpoint.prefill`` or ``endpoints[1].decode``."""
    groups: tuple[str, ...]
    """Names of the groups its pods may land on, in the config's order."""
    pods: int
    """Replicas at the autoscaling maximum (or fixed replicas)."""
    gpus_per_pod: int

    @property
    def gpus(self) -> int:
        return self.pods * self.gpus_per_pod


def role_placements(specs: Sequence[EndpointSpec]) -> tuple[RolePlacement, ...]:
    """Every role of every endpoint in ``specs`` (the deployment's, in the file's order)."""
    return tuple(
        RolePlacement(endpoint=s.name, role=role, field=s.field(role),
                      groups=tuple(g.name for g in s.role_groups(role)), pods=s.endpoint.peak_replicas(role),
                      gpus_per_pod=getattr(s.endpoint, role).gpus)
        for s in specs for role in ROLES)


def confined(placements: Sequence[RolePlacement], groups: Collection[str]) -> tuple[RolePlacement, ...]:
    """The roles whose every group is one of ``groups``."""
    return tuple(p for p in placements if p.groups and set(p.groups) <= set(groups))


def short_groups(placements: Sequence[RolePlacement], gpus: Mapping[str, int]) -> tuple[str, ...]:
    """The instance groups (in ``gpus``' order: group name -> GPUs of all its nodes) whose GPUs the roles confined to
    them exceed at peak; ``()`` when every role's peak GPUs fit the groups together (module docstring)."""
    need = [p.gpus for p in placements]
    free = dict(gpus)
    flow: dict[tuple[int, str], int] = {}
    while True:
        # Breadth-first over the residual graph from every role with GPUs left: role -> any of its groups; group ->
        # a role that already sends it GPUs (which may send them elsewhere instead).
        parent: dict[tuple[str, int | str], tuple[str, int | str] | None] = {("role", i): None
                                                                             for i, n in enumerate(need) if n}
        queue, end = deque(parent), None
        while queue and end is None:
            node = queue.popleft()
            if node[0] == "role":
                for g in placements[int(node[1])].groups:
                    if ("group", g) not in parent:
                        parent[("group", g)] = node
                        queue.append(("group", g))
                        if free[g] > 0:
                            end = ("group", g)
                            break
            else:
                for (i, g), sent in flow.items():
                    if g == node[1] and sent > 0 and ("role", i) not in parent:
                        parent[("role", i)] = node
                        queue.append(("role", i))
        if end is None:
            reached = {key for kind, key in parent if kind == "group"}
            return tuple(g for g in gpus if g in reached) if any(need) else ()
        path: list[tuple[str, int | str]] = []
        step: tuple[str, int | str] | None = end
        while step is not None:
            path.append(step)
            step = parent[step]
        path.reverse()  # role, group, role, group, ..., group with free GPUs
        moves = [(int(r[1]), str(g[1])) for r, g in zip(path[0::2], path[1::2], strict=True)]
        undo = [(int(r[1]), str(g[1])) for g, r in zip(path[1::2], path[2::2], strict=False)]
        amount = min(need[moves[0][0]], free[str(end[1])], *(flow[k] for k in undo))
        need[moves[0][0]] -= amount
        free[str(end[1])] -= amount
        for k in moves:
            flow[k] = flow.get(k, 0) + amount
        for k in undo:
            flow[k] -= amount


def unplaced(placements: Sequence[RolePlacement], groups: Sequence[InstanceGroupConfig]) -> RolePlacement | None:
    """The first role one of whose peak pods finds no node with ``gpus_per_pod`` free GPUs among its groups, when
    the pods are placed largest first (then those with the fewest groups first, then in the file's order), each on
    the first node of its groups (in the config's order) with room; ``None`` when every pod has a node."""
    nodes = {g.name: [DPD_INSTANCE_GPUS[g.instance_type]] * g.instance_count for g in groups}
    for p in sorted(placements, key=lambda p: (-p.gpus_per_pod, len(p.groups))):
        for _ in range(p.pods):
            slot = next(((g, i) for g in p.groups for i, left in enumerate(nodes[g]) if left >= p.gpus_per_pod),
                        None)
            if slot is None:
                return p
            nodes[slot[0]][slot[1]] -= p.gpus_per_pod
    return None
