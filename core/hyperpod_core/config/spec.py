"""One endpoint of the fleet with the cluster facts it needs: what every consumer of an endpoint takes (the charts,
the telemetry definitions, the planner, the command line's day-2 commands) instead of the whole
:class:`~hyperpod_core.config.model.Config`. :meth:`Config.specs` builds one per entry of ``endpoints``.

The spec also knows how the file named the endpoint (:attr:`EndpointSpec.at`): ``endpoint`` for a file in the
one-endpoint shape (``model:`` + ``endpoint:``), ``endpoints[<i>]`` otherwise, so that a rule's message names the
key the user wrote.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from hyperpod_core import fit, pins
from hyperpod_core.config.benchmark import (
    AWS_REFERENCE_CONCURRENCY,
    BenchmarkConfig,
    BenchmarkScenarioConfig,
    default_scenarios,
)
from hyperpod_core.config.cluster import InstanceGroupConfig
from hyperpod_core.config.endpoint import EndpointConfig, IdleTimeout, ModelConfig, ResolvedModelCache
from hyperpod_core.config.observability import ObservabilityConfig, SloConfig
from hyperpod_core.instances import DPD_INSTANCE_GPUS, weights_cache_unavailable
from hyperpod_core.names import INSTANCE_GROUP_NODE_LABEL, POOL_NODE_LABEL, ROLES, EndpointNames

WorkerRole = Literal["prefill", "decode", "colocated"]


@dataclass(frozen=True, kw_only=True)
class EndpointSpec:
    """One entry of ``endpoints`` and the deployment's facts it is built with."""

    endpoint: EndpointConfig
    at: str
    """How the file names this endpoint: ``endpoint`` (one-endpoint shape) or ``endpoints[<i>]``."""
    deployment: str
    """The deployment's ``name``."""
    region: str
    instance_groups: tuple[InstanceGroupConfig, ...]
    tiered_storage_percent: int | None
    """The share of node memory HyperPod's tiered storage takes on every node, ``None`` when off."""
    observability: ObservabilityConfig
    """The deployment's ``observability`` section (its ``slo`` is the deployment-wide one: see :attr:`slo`)."""
    slo: SloConfig
    """``observability.slo`` with the keys this endpoint's ``slo`` names replaced."""
    benchmark: BenchmarkConfig
    endpoints_by_group: tuple[tuple[str, int], ...] = ()
    """``(instance group, endpoints whose workers may run on it)`` of the deployment (:meth:`Config.specs`); a group
    it leaves out counts one endpoint."""

    # --- naming ---------------------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.endpoint.name

    @property
    def namespace(self) -> str:
        return self.endpoint.namespace

    @property
    def model(self) -> ModelConfig:
        return self.endpoint.model

    @property
    def names(self) -> EndpointNames:
        """The operator's object names of this endpoint."""
        return EndpointNames.of(self.endpoint)

    def field(self, path: str = "") -> str:
        """The key ``path`` (below the endpoint) as the file names it: ``endpoint.prefill.gpus`` or
        ``endpoints[1].prefill.gpus``."""
        return f"{self.at}.{path}" if path else self.at

    def model_field(self, key: str) -> str:
        """A key of this endpoint's model as the file names it: ``model.<key>`` in the one-endpoint shape (the
        top-level ``model:`` block), else ``endpoints[<i>].model.<key>``."""
        return f"model.{key}" if self.at == "endpoint" else f"{self.at}.model.{key}"

    # --- placement ------------------------------------------------------------------------------------------

    def role_groups(self, role: WorkerRole) -> tuple[InstanceGroupConfig, ...]:
        """The instance groups a worker of ``role`` may land on: where its node selector (:meth:`node_selector`)
        lets the scheduler put it. The group its ``instance_group`` names; else, when every group of its pool and
        ``shared`` of the endpoint's instance type is its pool's, those (the pool label selects them); else every
        group of the instance type (no selector: any node of the type, the groups another role names included). The
        colocated baseline may land wherever either role may (its node affinity)."""
        if role == "colocated":
            either = {g.name for r in ROLES for g in self.role_groups(r)}
            return tuple(g for g in self.instance_groups if g.name in either)
        named = getattr(self.endpoint, role).instance_group
        if named is not None:
            return tuple(g for g in self.instance_groups if g.name == named)
        of_type = tuple(g for g in self.instance_groups if g.instance_type == self.endpoint.instance_type)
        pool = tuple(g for g in of_type if g.pool in (role, "shared"))
        return pool if pool and all(g.pool == role for g in pool) else of_type

    def node_selector(self, role: Literal["prefill", "decode"]) -> dict[str, str]:
        """The role's nodeSelector: the named group's label; else the pool label when every group it may land
        on is dedicated to the role; else none (it may land on any GPU node of the endpoint's instance type)."""
        named = getattr(self.endpoint, role).instance_group
        if named is not None:
            return {INSTANCE_GROUP_NODE_LABEL: named}
        groups = self.role_groups(role)
        if groups and all(g.pool == role for g in groups):
            return {POOL_NODE_LABEL: role}
        return {}

    def colocated_node_labels(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """Where the colocated baseline may run besides the instance type: wherever either role may
        (:meth:`role_groups` of ``colocated``). One ``(label, values)`` per label the roles' selectors use, the
        values in role order, each a node-affinity term of its own (terms are ORed); none when a role has no
        selector (any node of the instance type)."""
        selectors = [self.node_selector(role) for role in ROLES]
        if not all(selectors):
            return ()
        labels: dict[str, list[str]] = {}
        for selector in selectors:
            for label, value in selector.items():
                values = labels.setdefault(label, [])
                if value not in values:
                    values.append(value)
        return tuple((label, tuple(values)) for label, values in labels.items())

    def peak_gpus(self, role: Literal["prefill", "decode"]) -> int:
        """GPUs the role may hold at its autoscaling maximum (or fixed replicas)."""
        return self.endpoint.peak_replicas(role) * getattr(self.endpoint, role).gpus

    # --- derived settings -----------------------------------------------------------------------------------

    def resolved_model_cache(self) -> ResolvedModelCache:
        """``model_cache`` with the weights cache's default decided by the instance type."""
        m = self.endpoint.model_cache
        unavailable = weights_cache_unavailable(self.endpoint.instance_type)
        weights = m.weights_cache if m.weights_cache is not None else unavailable is None
        return ResolvedModelCache(
            image_cache=m.image_cache, weights_cache=weights, weights_cache_host_path=m.weights_cache_host_path,
            weights_cache_off_reason=unavailable if m.weights_cache is None and not weights else None)

    def load_balancer_idle_timeout(self) -> IdleTimeout:
        """``load_balancer_idle_timeout_seconds``, else the longest answer this endpoint's SLOs allow (clamped)."""
        e, slo = self.endpoint, self.slo
        if e.load_balancer_idle_timeout_seconds is not None:
            return IdleTimeout(seconds=e.load_balancer_idle_timeout_seconds, derived_seconds=None)
        derived = slo.ttft_p95_seconds + e.max_model_len * slo.tpot_p95_seconds
        low, high = pins.LOAD_BALANCER_IDLE_TIMEOUT_RANGE_SECONDS
        # Rounded first: 2 + 16384 x 0.1 is 1640.4000000000001 in floating point, and an exact product must not
        # gain a second from the last bit.
        return IdleTimeout(seconds=min(max(math.ceil(round(derived, 6)), low), high), derived_seconds=derived)

    def endpoints_on(self, group: str) -> int:
        """Endpoints of the deployment whose workers may run on ``group`` (at least one)."""
        return dict(self.endpoints_by_group).get(group, 1)

    def worker_budget(self, role: WorkerRole) -> fit.PodRequests:
        """The most one worker of ``role`` may request: the smallest node budget among the groups it may land on
        (:meth:`role_groups`; every group of the instance type when none qualifies), shared by as many workers as
        the node has GPUs for, beside the router and image-cache pods of every endpoint that may run there."""
        e = self.endpoint
        groups = self.role_groups(role) or tuple(g for g in self.instance_groups
                                                 if g.instance_type == e.instance_type)
        return fit.worker_budget(
            e.instance_type, e.tensor_parallel_size,
            (fit.NodeKind(threads_per_core=g.threads_per_core, endpoints=self.endpoints_on(g.name)) for g in groups),
            self.tiered_storage_percent or 0)

    def worker_requests(self, role: WorkerRole) -> fit.PodRequests:
        """CPU and memory requests of one worker of ``role``: the configured ones, else the node budget. The
        colocated baseline runs the decode role's engine and takes its requests."""
        budget = self.worker_budget(role)
        r = self.endpoint.decode if role == "colocated" else getattr(self.endpoint, role)
        return fit.PodRequests(cpu=min(r.cpu or budget.cpu, budget.cpu),
                               memory_gib=min(r.memory_gib or budget.memory_gib, budget.memory_gib))

    def benchmark_scenarios(self) -> tuple[BenchmarkScenarioConfig, ...]:
        """``benchmark.scenarios``, else the defaults sized from this endpoint."""
        return self.benchmark.scenarios or default_scenarios(self.endpoint)

    def benchmark_results_uri(self) -> str | None:
        """Where this endpoint's benchmark Jobs upload their files: ``<benchmark.results_s3_uri>/<name>`` (no
        trailing ``/``), a folder of its own, since two endpoints' runs of one scenario and concurrency have the same
        ``<mode>/<run>`` keys; ``None`` without ``results_s3_uri`` (the pod log)."""
        uri = self.benchmark.results_s3_uri
        return f"{uri.rstrip('/')}/{self.name}" if uri else None

    def benchmark_concurrency(self, scenario: BenchmarkScenarioConfig) -> tuple[int, ...]:
        """The levels ``scenario`` runs at: AWS's published ones in the aws-reference experiment, else
        ``benchmark.concurrency``."""
        return AWS_REFERENCE_CONCURRENCY if scenario.experiment == "aws-reference" else self.benchmark.concurrency


def group_gpus(group: InstanceGroupConfig) -> int:
    """GPUs of every node of ``group``."""
    return group.instance_count * DPD_INSTANCE_GPUS[group.instance_type]
