"""The rules that compare fields of the config, one function each (and one failing test each).

They run, in :data:`RULES` order, after every field has passed its own type (:mod:`hyperpod_core.config.types`),
from the one model validator of :class:`~hyperpod_core.config.model.Config`. Each raises :class:`ConfigError`
with one line: the field, what is allowed, and the bad value.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from hyperpod_core import pins, sizing
from hyperpod_core.config.types import BENCHMARK_PATH_MARGIN, az_id_prefix, scenario_token_range
from hyperpod_core.errors import ConfigError, shown
from hyperpod_core.names import ROLES, EndpointNames

if TYPE_CHECKING:
    from hyperpod_core.config.model import Config

#: IP addresses one ml.p5.48xlarge-class node takes from its subnet on EKS (VPC CNI, EFA interfaces and
#: pods), per the HyperPod capacity-planning guide; we double it for rolling replacement.
IPS_PER_GPU_NODE: Final = 81
SUBNET_HEADROOM_FACTOR: Final = 2
#: AWS reserves the first four and the last address of every subnet.
AWS_RESERVED_IPS_PER_SUBNET: Final = 5


def _fail(field: str, value: Any, allowed: str) -> None:
    raise ConfigError(f"{field} {allowed}, got {shown(value)}")


# --- names ------------------------------------------------------------------------------------------------

def router_service_name_fits(c: Config) -> None:
    """The operator names the router Service ``<name>-<namespace>-routing-service``: a DNS label."""
    if len(EndpointNames.of(c).router_service) > 63:
        _fail("endpoint.name", c.endpoint.name,
              "plus endpoint.namespace must stay under 63 characters in '<name>-<namespace>-routing-service'")


def instance_group_names_are_unique(c: Config) -> None:
    seen: set[str] = set()
    for i, g in enumerate(c.hyperpod.instance_groups):
        if g.name in seen:
            _fail(f"hyperpod.instance_groups[{i}].name", g.name, "must be unique")
        seen.add(g.name)


def existing_bucket_is_kept(c: Config) -> None:
    if c.model.existing_bucket_name is not None and c.model.delete_on_destroy:
        _fail("model.delete_on_destroy", True, "cannot be true for an existing bucket we did not create")


# --- region and the one GPU AZ ----------------------------------------------------------------------------

def _in_region(c: Config, field: str, az: str) -> None:
    prefix = az_id_prefix(c.region)
    if not az.startswith(prefix + "-"):
        _fail(field, az, f"must be an AZ ID of {c.region} such as {prefix}-az1")


def gpu_az_ids_are_in_the_region(c: Config) -> None:
    for i, g in enumerate(c.hyperpod.instance_groups):
        if g.availability_zone_id:
            _in_region(c, f"hyperpod.instance_groups[{i}].availability_zone_id", g.availability_zone_id)
        else:
            _in_region(c, "network.gpu_availability_zone_id", c.network.gpu_availability_zone_id)


def _group_az_ids(c: Config) -> set[str]:
    return {g.availability_zone_id or c.network.gpu_availability_zone_id for g in c.hyperpod.instance_groups}


def gpu_groups_share_one_az(c: Config) -> None:
    if len(azs := _group_az_ids(c)) != 1:
        _fail("hyperpod.instance_groups[*].availability_zone_id", sorted(azs),
              "must resolve to exactly one AZ ID (DPD moves the KV cache over EFA within one AZ)")


def control_plane_az_ids_are_in_the_region(c: Config) -> None:
    for i, az in enumerate(c.network.control_plane_availability_zone_ids):
        _in_region(c, f"network.control_plane_availability_zone_ids[{i}]", az)


def control_plane_az_ids_differ(c: Config) -> None:
    cp = c.network.control_plane_availability_zone_ids
    if cp[0] == cp[1]:
        _fail("network.control_plane_availability_zone_ids", list(cp),
              "must name two different AZ IDs (EKS needs subnets in at least two AZs)")


def gpu_subnet_is_in_the_groups_az(c: Config) -> None:
    azs = _group_az_ids(c)
    if c.network.gpu_availability_zone_id not in azs:
        _fail("network.gpu_availability_zone_id", c.network.gpu_availability_zone_id,
              f"must be the AZ ID of the GPU instance groups ({sorted(azs)[0]})")


def training_plans_are_in_the_region(c: Config) -> None:
    for i, g in enumerate(c.hyperpod.instance_groups):
        if g.training_plan_arn is not None and g.training_plan_arn.split(":")[3] != c.region:
            _fail(f"hyperpod.instance_groups[{i}].training_plan_arn", g.training_plan_arn,
                  f"must be a training plan in region {c.region} (a plan reserves capacity in one region)")


# --- instance types, parallelism, capacity ----------------------------------------------------------------

def endpoint_instance_type_has_a_group(c: Config) -> None:
    if c.endpoint.instance_type not in {g.instance_type for g in c.hyperpod.instance_groups}:
        _fail("endpoint.instance_type", c.endpoint.instance_type,
              "must be the instance type of at least one hyperpod.instance_groups entry")


def tensor_parallel_divides_the_node(c: Config) -> None:
    e = c.endpoint
    per_node = sizing.DPD_INSTANCE_GPUS[e.instance_type]
    if per_node % e.tensor_parallel_size:
        _fail("endpoint.tensor_parallel_size", e.tensor_parallel_size,
              f"must divide the {per_node} GPUs of one {e.instance_type} (1, 2, 4 or 8)")


def role_gpus_fit_one_node(c: Config) -> None:
    e = c.endpoint
    per_node = sizing.DPD_INSTANCE_GPUS[e.instance_type]
    for role in ROLES:
        gpus = getattr(e, role).gpus
        if gpus > per_node:
            _fail(f"endpoint.{role}.gpus", gpus, f"must fit one {e.instance_type} node (<= {per_node})")
        if gpus != e.tensor_parallel_size:
            _fail(f"endpoint.{role}.gpus", gpus,
                  f"must equal endpoint.tensor_parallel_size ({e.tensor_parallel_size}): one vLLM engine per pod")


def roles_fit_their_pools(c: Config) -> None:
    e = c.endpoint
    for role in ROLES:
        r = getattr(e, role)
        need, have = sizing.peak_replicas(e, role) * r.gpus, sizing.pool_gpus(c, role)
        if need > have:
            _fail(f"endpoint.{role}.replicas", r.replicas,
                  f"needs {need} GPUs at peak but instance groups for the {role} pool (and 'shared') hold {have}")


def roles_fit_all_gpus(c: Config) -> None:
    e = c.endpoint
    peak_total = sum(sizing.peak_replicas(e, role) * getattr(e, role).gpus for role in ROLES)
    total = sum(g.instance_count * sizing.DPD_INSTANCE_GPUS[g.instance_type] for g in c.hyperpod.instance_groups)
    if peak_total > total:
        _fail("endpoint", f"{peak_total} GPUs",
              f"prefill + decode must fit the {total} GPUs of all hyperpod.instance_groups")


# --- routing and the operator's limits --------------------------------------------------------------------

def threshold_is_below_max_model_len(c: Config) -> None:
    e = c.endpoint
    if e.routing_threshold_tokens >= e.max_model_len:
        _fail("endpoint.routing_threshold_tokens", e.routing_threshold_tokens,
              f"must be below endpoint.max_model_len ({e.max_model_len}) or no prompt is ever disaggregated")


def kvaware_routing_has_the_completions_path(c: Config) -> None:
    e = c.endpoint
    if e.routing_strategy == "kvaware" and (
            not e.invocation_path.endswith("completions") or "chat" in e.invocation_path):
        _fail("endpoint.routing_strategy", e.routing_strategy,
              "'kvaware' needs endpoint.invocation_path 'v1/completions' (not chat), per the operator docs")


def decode_replicas_within_the_operator_limit(c: Config) -> None:
    """Decode only (the role type is shared with prefill, so this bound cannot be its field type)."""
    if c.endpoint.decode.replicas > pins.DPD_MAX_DECODE_REPLICAS:
        _fail("endpoint.decode.replicas", c.endpoint.decode.replicas,
              f"must be <= {pins.DPD_MAX_DECODE_REPLICAS}: operator v{pins.INFERENCE_OPERATOR_APP_VERSION} "
              "runs a single decoder with several prefillers (DPD guide, Limitations)")


def l2_cache_has_a_backend(c: Config) -> None:
    kv = c.endpoint.kv_cache
    if kv.enable_l2_cache and kv.l2_cache_backend is None:
        _fail("endpoint.kv_cache.l2_cache_backend", None, "must be 'redis' or 'tieredstorage' when L2 is on")


# --- autoscaling ------------------------------------------------------------------------------------------

def autoscaling_min_is_not_above_max(c: Config) -> None:
    a = c.endpoint.autoscaling
    for role in ROLES:
        r = getattr(a, role)
        if r.min_replicas > r.max_replicas:
            _fail(f"endpoint.autoscaling.{role}.min_replicas", r.min_replicas,
                  f"must be <= endpoint.autoscaling.{role}.max_replicas ({r.max_replicas})")


def decode_autoscaling_within_the_operator_limit(c: Config) -> None:
    """Decode only, as :func:`decode_replicas_within_the_operator_limit`."""
    a = c.endpoint.autoscaling
    if a.decode.max_replicas > pins.DPD_MAX_DECODE_REPLICAS:
        _fail("endpoint.autoscaling.decode.max_replicas", a.decode.max_replicas,
              f"must be <= {pins.DPD_MAX_DECODE_REPLICAS} (operator v{pins.INFERENCE_OPERATOR_APP_VERSION} "
              "runs a single decoder)")


def prefill_does_not_outscale_decode(c: Config) -> None:
    """Prefill scaled past what the decoders admit only moves the queue to the decoders and back."""
    a, e = c.endpoint.autoscaling, c.endpoint
    prefill_seqs, decode_seqs = (a.prefill.max_replicas * e.prefill.max_num_seqs,
                                 a.decode.max_replicas * e.decode.max_num_seqs)
    if a.enabled and prefill_seqs > decode_seqs:
        _fail("endpoint.autoscaling.prefill.max_replicas", a.prefill.max_replicas,
              f"x endpoint.prefill.max_num_seqs ({prefill_seqs} sequences) must not exceed "
              f"endpoint.autoscaling.decode.max_replicas x endpoint.decode.max_num_seqs ({decode_seqs})")


def decode_target_is_a_ratio(c: Config) -> None:
    """Decode only: its target is a KV-cache usage ratio (prefill's is a queue length)."""
    target = c.endpoint.autoscaling.decode.target_value
    if not 0 < target <= 1:
        _fail("endpoint.autoscaling.decode.target_value", target, "is a KV-cache usage ratio and must be in (0, 1]")


def autoscaling_has_metrics(c: Config) -> None:
    if c.endpoint.autoscaling.enabled and not c.observability.enabled:
        _fail("endpoint.autoscaling.enabled", True,
              "needs observability.enabled (KEDA scales on metrics in the managed Prometheus workspace)")


# --- CIDRs and worker requests ----------------------------------------------------------------------------

def cidrs_do_not_overlap(c: Config) -> None:
    vpc, gpu = ipaddress.IPv4Network(c.network.vpc_cidr), ipaddress.IPv4Network(c.network.gpu_cidr)
    if vpc.overlaps(gpu):
        _fail("network.gpu_cidr", str(gpu), f"must not overlap network.vpc_cidr ({vpc})")


def gpu_subnet_holds_the_nodes(c: Config) -> None:
    gpu = ipaddress.IPv4Network(c.network.gpu_cidr)
    nodes = sum(g.instance_count for g in c.hyperpod.instance_groups)
    needed = nodes * IPS_PER_GPU_NODE * SUBNET_HEADROOM_FACTOR
    usable = gpu.num_addresses - AWS_RESERVED_IPS_PER_SUBNET
    if usable < needed:
        _fail("network.gpu_cidr", str(gpu),
              f"must hold {needed} IPs for {nodes} GPU nodes ({IPS_PER_GPU_NODE} each, x{SUBNET_HEADROOM_FACTOR} "
              f"headroom) but has {usable} usable")


def worker_requests_fit_the_node(c: Config) -> None:
    """Worker requests must fit the node: allocatable (kubelet reservation) minus DaemonSets and sidecars."""
    e = c.endpoint
    tpc = sorted({g.threads_per_core for g in c.hyperpod.instance_groups if g.instance_type == e.instance_type})
    where = f"one {e.instance_type} (threads_per_core {'/'.join(map(str, tpc))}) leaves a worker"
    for role in ROLES:
        r, budget = getattr(e, role), sizing.worker_budget(c, role)
        if r.cpu is not None and r.cpu > budget.cpu:
            _fail(f"endpoint.{role}.cpu", r.cpu,
                  f"must be <= {budget.cpu}: {where} {budget.cpu} CPUs after kubelet, DaemonSet and "
                  "operator-sidecar reservations")
        if r.memory_gib is not None and r.memory_gib > budget.memory_gib:
            _fail(f"endpoint.{role}.memory_gib", r.memory_gib,
                  f"must be <= {budget.memory_gib}: {where} {budget.memory_gib} GiB after kubelet, DaemonSet and "
                  "operator-sidecar reservations")


# --- benchmark --------------------------------------------------------------------------------------------

def scenario_job_names_fit(c: Config) -> None:
    """The longest Job name, ``<endpoint>-bench-colocated-<scenario>-c<concurrency>``, is a DNS label."""
    for i, s in enumerate(c.benchmark_scenarios()):
        name = f"{c.endpoint.name}-bench-colocated-{s.name}-c{max(c.benchmark_concurrency(s))}"
        if len(name) > 63:
            _fail(f"benchmark.scenarios[{i}].name", s.name,
                  f"must keep the Job name {name!r} within 63 characters (with endpoint.name)")


def scenario_names_are_unique(c: Config) -> None:
    names: set[str] = set()
    for i, s in enumerate(c.benchmark_scenarios()):
        if s.name in names:
            _fail(f"benchmark.scenarios[{i}].name", s.name, "must be a unique DNS label of at most 24 characters")
        names.add(s.name)


def scenarios_fit_max_model_len(c: Config) -> None:
    for i, s in enumerate(c.benchmark_scenarios()):
        _, in_max, out_max = scenario_token_range(s.traffic)
        if in_max + out_max > c.endpoint.max_model_len:
            _fail(f"benchmark.scenarios[{i}].traffic", s.traffic,
                  f"input plus output tokens must fit endpoint.max_model_len ({c.endpoint.max_model_len})")


def scenario_prompts_take_their_path(c: Config) -> None:
    """A ``dpd`` scenario's prompts stay well above the routing threshold, a ``direct`` one's well below."""
    t = c.endpoint.routing_threshold_tokens
    low, high = t * (1 + BENCHMARK_PATH_MARGIN), t * (1 - BENCHMARK_PATH_MARGIN)
    for i, s in enumerate(c.benchmark_scenarios()):
        in_min, in_max, _ = scenario_token_range(s.traffic)
        if s.path == "dpd" and in_min < low:
            _fail(f"benchmark.scenarios[{i}].traffic", s.traffic,
                  f"takes path 'dpd', so its prompts must be at least {int(low)} tokens (endpoint.routing_threshold_"
                  f"tokens {t} + {BENCHMARK_PATH_MARGIN:.0%}: the router estimates tokens)")
        if s.path == "direct" and in_max > high:
            _fail(f"benchmark.scenarios[{i}].traffic", s.traffic,
                  f"takes path 'direct', so its prompts must be at most {int(high)} tokens (endpoint.routing_"
                  f"threshold_tokens {t} - {BENCHMARK_PATH_MARGIN:.0%})")


def some_scenario_fits(c: Config) -> None:
    if not c.benchmark_scenarios():
        _fail("benchmark.scenarios", [], "must name at least one scenario (none of the defaults fits this endpoint)")


def experiments_select_a_scenario(c: Config) -> None:
    """``benchmark.experiments`` must leave at least one scenario to run."""
    chosen = [s for s in c.benchmark_scenarios() if s.experiment in c.benchmark.experiments]
    if not chosen:
        have = sorted({s.experiment for s in c.benchmark_scenarios()})
        _fail("benchmark.experiments", list(c.benchmark.experiments),
              f"must select an experiment some scenario belongs to ({', '.join(have)}; `path: reference` "
              "scenarios are aws-reference, the others equal-gpu)")


def load_balancer_target_is_complete(c: Config) -> None:
    """``target: load_balancer`` needs the URL and the CA Secret (checked only then: unused otherwise)."""
    b = c.benchmark
    if b.target != "load_balancer":
        return
    if not b.load_balancer_url or not re.fullmatch(r"https://[A-Za-z0-9.-]+(:\d+)?/?", b.load_balancer_url):
        _fail("benchmark.load_balancer_url", b.load_balancer_url,
              "must be https://<host>[:port] when benchmark.target is load_balancer")
    if not b.ca_secret_name or not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", b.ca_secret_name, re.ASCII):
        _fail("benchmark.ca_secret_name", b.ca_secret_name,
              "must name the Secret holding the endpoint's TLS PEM (ca.pem) when benchmark.target is load_balancer")


#: Every rule, in the order they run (the first one broken is the one reported).
RULES: Final[tuple[Callable[[Config], None], ...]] = (
    router_service_name_fits, instance_group_names_are_unique, existing_bucket_is_kept,
    gpu_az_ids_are_in_the_region, gpu_groups_share_one_az, control_plane_az_ids_are_in_the_region,
    control_plane_az_ids_differ, gpu_subnet_is_in_the_groups_az, training_plans_are_in_the_region,
    endpoint_instance_type_has_a_group, tensor_parallel_divides_the_node, role_gpus_fit_one_node,
    roles_fit_their_pools, roles_fit_all_gpus,
    threshold_is_below_max_model_len, kvaware_routing_has_the_completions_path,
    decode_replicas_within_the_operator_limit, l2_cache_has_a_backend,
    autoscaling_min_is_not_above_max, decode_autoscaling_within_the_operator_limit, prefill_does_not_outscale_decode,
    decode_target_is_a_ratio, autoscaling_has_metrics,
    cidrs_do_not_overlap, gpu_subnet_holds_the_nodes, worker_requests_fit_the_node,
    scenario_job_names_fit, scenario_names_are_unique, scenarios_fit_max_model_len, scenario_prompts_take_their_path,
    some_scenario_fits, experiments_select_a_scenario, load_balancer_target_is_complete,
)


def check(c: Config) -> None:
    """Run every rule; the first broken one raises :class:`ConfigError`."""
    for rule in RULES:
        rule(c)
