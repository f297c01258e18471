"""The fleet's GPUs at peak: what every endpoint's roles may hold in the instance groups they may land on, against
the GPUs those groups have (``hyperpod-dpd plan``'s fleet table).

A role may land on the groups :meth:`~hyperpod_core.config.spec.EndpointSpec.role_groups` names (the group its
``instance_group`` names, else those of its pool and ``shared``) and may hold
:meth:`~hyperpod_core.config.spec.EndpointSpec.peak_gpus` GPUs there (replicas at the autoscaling maximum x GPUs per
worker). One row per set of groups some role may use, and one for all groups: the roles confined to the set (their
groups are all in it) must fit its GPUs. These are the sets the config's rule checks (``hyperpod_core.config.rules``,
``endpoints_fit_the_groups_together``), so a config that loads has no row over its GPUs; the table shows the margin.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hyperpod_core.config.spec import EndpointSpec, group_gpus
from hyperpod_core.names import ROLES


@dataclass(frozen=True, kw_only=True)
class RolePeak:
    endpoint: str
    role: str
    gpus: int
    """GPUs the role may hold at peak (:meth:`EndpointSpec.peak_gpus`)."""


@dataclass(frozen=True, kw_only=True)
class GroupPeak:
    """One set of instance groups and the roles that run only there."""

    groups: tuple[str, ...]
    """Instance group names, in the config's order."""
    gpus: int
    """GPUs of every node of these groups."""
    roles: tuple[RolePeak, ...]
    """The roles whose every group is in :attr:`groups`."""

    @property
    def peak_gpus(self) -> int:
        return sum(r.gpus for r in self.roles)

    @property
    def free_gpus(self) -> int:
        """GPUs no role holds even at peak (negative: the roles do not fit)."""
        return self.gpus - self.peak_gpus

    def as_dict(self) -> dict[str, object]:
        return {"groups": list(self.groups), "gpus": self.gpus, "peak_gpus": self.peak_gpus,
                "free_gpus": self.free_gpus,
                "roles": [{"endpoint": r.endpoint, "role": r.role, "peak_gpus": r.gpus} for r in self.roles]}


def fleet_peaks(specs: Sequence[EndpointSpec]) -> list[GroupPeak]:
    """Per set of groups some role may use (smallest first), then all groups together: their GPUs and the roles
    confined to them at peak. ``specs``: every endpoint of the deployment (they share its instance groups)."""
    if not specs:
        return []
    groups = specs[0].instance_groups
    order = {g.name: i for i, g in enumerate(groups)}
    gpus = {g.name: group_gpus(g) for g in groups}
    placed = [(s.name, role, frozenset(g.name for g in s.role_groups(role)), s.peak_gpus(role))
              for s in specs for role in ROLES]
    sets = sorted({p for _, _, p, _ in placed if p}, key=lambda p: (len(p), sorted(order[g] for g in p)))
    everything = frozenset(gpus)
    rows = []
    for placement in [*sets, *([everything] if everything not in sets else [])]:
        rows.append(GroupPeak(
            groups=tuple(sorted(placement, key=order.__getitem__)), gpus=sum(gpus[g] for g in placement),
            roles=tuple(RolePeak(endpoint=e, role=r, gpus=n) for e, r, p, n in placed if p and p <= placement)))
    return rows
