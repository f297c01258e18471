"""The rules that compare fields of the config, one function each (and one failing test each).

They run, in :data:`RULES` order, after every field has passed its own type (:mod:`hyperpod_core.config.types`),
from :func:`~hyperpod_core.config.loader.parse_config`, the one way a file becomes a
:class:`~hyperpod_core.config.model.Config`. Each raises :class:`ConfigError`
with one line: the field, what is allowed, and the bad value.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Callable
from typing import Any, Final

from hyperpod_core import fit, instances, pins
from hyperpod_core.config.az_ids import published_az_ids
from hyperpod_core.config.model import Config
from hyperpod_core.config.types import (
    BENCHMARK_PATH_MARGIN,
    EKS_UNSUPPORTED_AZ_IDS,
    aws_partition,
    az_id_prefix,
    scenario_token_range,
)
from hyperpod_core.errors import ConfigError, shown
from hyperpod_core.names import ROLES, EndpointNames, Role

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
    if len(EndpointNames.of(c.endpoint).router_service) > 63:
        _fail("endpoint.name", c.endpoint.name,
              "plus endpoint.namespace must stay under 63 characters in '<name>-<namespace>-routing-service'")


def instance_group_names_are_unique(c: Config) -> None:
    seen: set[str] = set()
    for i, g in enumerate(c.hyperpod.instance_groups):
        if g.name in seen:
            _fail(f"hyperpod.instance_groups[{i}].name", g.name, "must be unique")
        seen.add(g.name)


def existing_bucket_is_kept(c: Config) -> None:
    """We never delete a bucket we did not create (the construct refuses it too: ``ModelBucketProps``)."""
    if c.model_bucket.existing_name is not None and c.model_bucket.delete_on_destroy:
        _fail("model_bucket.delete_on_destroy", True,
              "cannot be true for an existing bucket we did not create (model_bucket.existing_name)")


def bucket_key_belongs_to_an_existing_bucket(c: Config) -> None:
    """A created bucket's key is the platform stack's own: a key named without ``existing_name`` would be unused."""
    b = c.model_bucket
    if b.existing_kms_key_arn is not None and b.existing_name is None:
        _fail("model_bucket.existing_kms_key_arn", b.existing_kms_key_arn,
              "must be left out unless model_bucket.existing_name is set (a created bucket uses a key of its own)")


def bucket_key_is_in_the_region(c: Config) -> None:
    """The bucket is in ``region`` (preflight checks it), and an S3 bucket's default encryption uses a KMS key of
    its own region (Amazon S3 User Guide, "Configuring default encryption": only KMS keys "available in the same
    AWS Region as the bucket").

    The key's account is deliberately not compared with ``Config.arn_accounts()``: S3 takes a key of another
    account (S3 API Reference, ``ServerSideEncryptionByDefault.KMSMasterKeyID``, in botocore's S3 model: "If you are
    using encryption with cross-account or Amazon Web Services service operations, you must use a fully qualified
    KMS key ARN"), and docs/platform.md
    ("Known limits") supports that case once the other account's key policy admits the readers. A key that is not
    the bucket's is caught by preflight, which compares it with the bucket's default encryption."""
    arn = c.model_bucket.existing_kms_key_arn
    if arn is None:
        return
    _, partition, _, region = arn.split(":")[:4]
    want = aws_partition(c.region)
    if (partition, region) != (want, c.region):
        _fail("model_bucket.existing_kms_key_arn", arn,
              f"must be a key in region {c.region} (arn:{want}:kms:{c.region}:<account>:key/<key id>), where the "
              "bucket is: S3 encrypts a bucket only with a KMS key of its own region")


# --- region and the one GPU AZ ----------------------------------------------------------------------------

def _in_region(c: Config, field: str, az: str, *, control_plane: bool = False) -> None:
    """``az`` is one of the AZ IDs AWS publishes for the region (:mod:`hyperpod_core.config.az_ids`; for a
    control-plane subnet, one where EKS creates control planes); for a region the table does not hold, one with the
    region's prefix."""
    published = published_az_ids(c.region)
    if published is None:
        prefix = az_id_prefix(c.region)
        if not az.startswith(prefix + "-"):
            _fail(field, az, f"must be an AZ ID of {c.region} such as {prefix}-az1")
        return
    allowed = [i for i in published if not (control_plane and i in EKS_UNSUPPORTED_AZ_IDS)]
    if az not in allowed:
        where = " where EKS creates control planes" if control_plane else ""
        _fail(field, az, f"must be an AZ ID of {c.region}{where} ({', '.join(allowed)})")


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
        _in_region(c, f"network.control_plane_availability_zone_ids[{i}]", az, control_plane=True)


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


def reserved_only_types_have_a_training_plan(c: Config) -> None:
    for i, g in enumerate(c.hyperpod.instance_groups):
        if g.instance_type in instances.RESERVED_ONLY_INSTANCE_TYPES and g.training_plan_arn is None:
            _fail(f"hyperpod.instance_groups[{i}].training_plan_arn", None,
                  f"must name a SageMaker training plan for {g.instance_type}: AWS's price list shows no on-demand "
                  "HyperPod offer for it in any region")


def alert_topic_is_in_the_account(c: Config) -> None:
    """AMP's alert manager routes only to SNS topics in the same account (AMP user guide, "Alert Manager")."""
    arn, accounts = c.observability.alerts.topic_arn, c.arn_accounts()
    if arn is not None and len(accounts) == 1 and arn.split(":")[4] not in accounts:
        _fail("observability.alerts.topic_arn", arn,
              f"must be a topic of account {min(accounts)}, the one eks.admin_principal_arn and the training plans "
              "name (AMP's alert manager routes only to SNS topics in its own account)")


# --- instance types, parallelism, capacity ----------------------------------------------------------------

def endpoint_instance_type_has_a_group(c: Config) -> None:
    if c.endpoint.instance_type not in {g.instance_type for g in c.hyperpod.instance_groups}:
        _fail("endpoint.instance_type", c.endpoint.instance_type,
              "must be the instance type of at least one hyperpod.instance_groups entry")


def tensor_parallel_divides_the_node(c: Config) -> None:
    e = c.endpoint
    per_node = instances.DPD_INSTANCE_GPUS[e.instance_type]
    if per_node % e.tensor_parallel_size:
        _fail("endpoint.tensor_parallel_size", e.tensor_parallel_size,
              f"must divide the {per_node} GPUs of one {e.instance_type} (1, 2, 4 or 8)")


def role_gpus_fit_one_node(c: Config) -> None:
    e = c.endpoint
    per_node = instances.DPD_INSTANCE_GPUS[e.instance_type]
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
        need, have = e.peak_replicas(role) * r.gpus, c.hyperpod.pool_gpus(role)
        if need > have:
            _fail(f"endpoint.{role}.replicas", r.replicas,
                  f"needs {need} GPUs at peak but instance groups for the {role} pool (and 'shared') hold {have}")


def roles_fit_all_gpus(c: Config) -> None:
    e = c.endpoint
    peak_total = sum(e.peak_replicas(role) * getattr(e, role).gpus for role in ROLES)
    total = sum(g.instance_count * instances.DPD_INSTANCE_GPUS[g.instance_type] for g in c.hyperpod.instance_groups)
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


# --- cold start and the load balancer (operator v3.3) ------------------------------------------------------

def weights_cache_has_an_instance_store(c: Config) -> None:
    """The NVMe weights cache needs instance storage on the endpoint's instance type (EC2 instance-store table)."""
    unavailable = instances.weights_cache_unavailable(c.endpoint.instance_type)
    if c.endpoint.model_cache.weights_cache is True and unavailable is not None:
        _fail("endpoint.model_cache.weights_cache", True, f"must be false or null: {unavailable}")


def idle_timeout_outlasts_the_first_token(c: Config) -> None:
    """No byte flows before the first token, so an idle timeout below the TTFT objective cuts requests the SLO
    still calls good."""
    timeout, ttft = c.endpoint.load_balancer_idle_timeout_seconds, c.observability.slo.ttft_p95_seconds
    if timeout is not None and timeout < ttft:
        _fail("endpoint.load_balancer_idle_timeout_seconds", timeout,
              f"must be at least observability.slo.ttft_p95_seconds ({ttft:g}): the ALB closes a connection that "
              "carries no bytes that long, and none flow before the first token")


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


#: The ranges of the Amazon VPC User Guide's table "IPv4 CIDR block association restrictions" (VPC CIDR blocks,
#: docs.aws.amazon.com/vpc/latest/userguide/vpc-cidr-blocks.html): a row per range the primary CIDR is in, and
#: what a secondary block may then come from. Everything outside these rows is "publicly routable, or
#: 100.64.0.0/10", whose own row permits only its own kind.
_RFC1918: Final = tuple(ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))
_NET_198_19: Final = ipaddress.IPv4Network("198.19.0.0/16")
_SHARED_100_64: Final = ipaddress.IPv4Network("100.64.0.0/10")
#: Extra blocks each RFC 1918 row restricts, on top of the other RFC 1918 ranges and 198.19.0.0/16:
#: (primary range, "if any VPC CIDR is in", "no secondary block in").
_RESTRICTED_WITHIN: Final = (
    (ipaddress.IPv4Network("10.0.0.0/8"), ipaddress.IPv4Network("10.0.0.0/15"), ipaddress.IPv4Network("10.0.0.0/16")),
    (ipaddress.IPv4Network("172.16.0.0/12"), ipaddress.IPv4Network("172.16.0.0/12"),
     ipaddress.IPv4Network("172.31.0.0/16")),
)


def _association_range(net: ipaddress.IPv4Network) -> ipaddress.IPv4Network | None:
    """The table row of ``net``: its RFC 1918 range, 198.19.0.0/16, or ``None`` (publicly routable/100.64/10)."""
    return next((r for r in (*_RFC1918, _NET_198_19) if net.subnet_of(r)), None)


def gpu_cidr_can_join_the_vpc(c: Config) -> None:
    """EC2 refuses to associate a secondary block from another RFC 1918 range than the primary (and the other
    restrictions of the VPC User Guide's table); the network stack would fail at ``AWS::EC2::VPCCidrBlock``."""
    vpc, gpu = ipaddress.IPv4Network(c.network.vpc_cidr), ipaddress.IPv4Network(c.network.gpu_cidr)
    primary, secondary = _association_range(vpc), _association_range(gpu)
    if primary is not None and primary != _NET_198_19:
        allowed = (f"must be in the RFC 1918 range of network.vpc_cidr ({primary}) or in {_SHARED_100_64} "
                   "(Amazon VPC User Guide, IPv4 CIDR block association restrictions)")
        if secondary != primary and not gpu.subnet_of(_SHARED_100_64):
            _fail("network.gpu_cidr", str(gpu), allowed)
        for row, any_in, banned in _RESTRICTED_WITHIN:
            if primary == row and vpc.subnet_of(any_in) and gpu.overlaps(banned):
                _fail("network.gpu_cidr", str(gpu),
                      f"must not be in {banned} when network.vpc_cidr ({vpc}) is in {any_in} (Amazon VPC User "
                      "Guide, IPv4 CIDR block association restrictions)")
    elif secondary is not None:  # primary in 198.19.0.0/16, 100.64.0.0/10 or publicly routable
        _fail("network.gpu_cidr", str(gpu),
              f"must be in {_SHARED_100_64} (or publicly routable) when network.vpc_cidr ({vpc}) is outside "
              "RFC 1918 (Amazon VPC User Guide, IPv4 CIDR block association restrictions)")


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
    """Worker requests must fit the node: at most ``fit.WORKER_SHARE_PERCENT`` of it for all its workers, and
    what allocatable (kubelet reservation) leaves after the DaemonSets, the router and the sidecars."""
    e = c.endpoint
    tpc = sorted({g.threads_per_core for g in c.hyperpod.instance_groups if g.instance_type == e.instance_type})
    pods = fit.workers_per_node(e.instance_type, e.tensor_parallel_size)
    where = (f"one {e.instance_type} (threads_per_core {'/'.join(map(str, tpc))}) leaves each of its {pods} "
             f"worker(s)")
    share = f"{fit.WORKER_SHARE_PERCENT} % of the node, the rest for kubelet, DaemonSets, router and sidecars"
    if (tiered := c.tiered_storage_percent()) is not None:
        share += f"; {tiered} % of its memory is HyperPod tiered storage's"
    for role in ROLES:
        r, budget = getattr(e, role), c.worker_budget(role)
        if r.cpu is not None and r.cpu > budget.cpu:
            _fail(f"endpoint.{role}.cpu", r.cpu, f"must be <= {budget.cpu}: {where} {budget.cpu} CPUs ({share})")
        if r.memory_gib is not None and r.memory_gib > budget.memory_gib:
            _fail(f"endpoint.{role}.memory_gib", r.memory_gib,
                  f"must be <= {budget.memory_gib}: {where} {budget.memory_gib} GiB ({share})")


# --- GPU memory -------------------------------------------------------------------------------------------

def model_size_is_complete(c: Config) -> None:
    """A model described by size needs both numbers: the weights and the KV cache per token."""
    m = c.model
    if (m.parameters_billion is None) != (m.kv_cache_kib_per_token is None):
        missing = "model.kv_cache_kib_per_token" if m.kv_cache_kib_per_token is None else "model.parameters_billion"
        given = "model.parameters_billion" if missing.endswith("per_token") else "model.kv_cache_kib_per_token"
        _fail(missing, None, f"must be set with {given} (the GPU-memory check needs the weights and the KV cache)")


def _utilization_field(c: Config, role: Role) -> str:
    own = c.endpoint.role_gpu_memory_utilization(role) != c.endpoint.gpu_memory_utilization
    return f"endpoint.{role}.extra_args {fit.UTILIZATION_FLAG}" if own else "endpoint.gpu_memory_utilization"


def gpu_memory_holds_the_pd_buffer(c: Config) -> None:
    """vLLM reserves its share first, then LMCache allocates the PD buffer on the same GPU, on every prefill and
    decode rank (lifecycle-facts.md: ``v1/worker/gpu_worker.py``, LMCache ``pd_backend.py``): share + buffer + the
    runtime margin must fit the GPU. The colocated baseline, which has no buffer, gets the share back up to what this
    rule allows without one (:meth:`EndpointConfig.colocated_gpu_memory_utilization`)."""
    e = c.endpoint
    for role in ROLES:
        utilization = e.role_gpu_memory_utilization(role)
        gpu = fit.gpu_memory_fit(e.instance_type, utilization, e.pd_buffer_size_bytes)
        if not gpu.fits:
            knob = _utilization_field(c, role)
            _fail("endpoint.pd_buffer_size_bytes", e.pd_buffer_size_bytes,
                  f"({gpu.pd_buffer_gib:g} GiB per rank) plus {role}'s vLLM share ({utilization:g} x "
                  f"{gpu.gpu_memory_gib:.1f} GiB {gpu.gpu} = {gpu.vllm_share_gib:.1f} GiB) and the "
                  f"{gpu.margin_gib:g} GiB CUDA-graph/runtime margin must fit the GPU ("
                  f"{gpu.vllm_share_gib + gpu.pd_buffer_gib + gpu.margin_gib:.1f} GiB > {gpu.gpu_memory_gib:.1f} GiB): "
                  f"lower {knob} to <= {gpu.max_utilization:.2f} or the buffer to <= {gpu.max_pd_buffer_gib} GiB")


def gpu_memory_holds_the_model(c: Config) -> None:
    """vLLM's share of one GPU must hold that GPU's weights and the KV cache of one ``max_model_len`` sequence, or
    the engine does not start. Checked when the model's size is known (:meth:`ModelConfig.memory`)."""
    e = c.endpoint
    memory = c.model.memory(e.tensor_parallel_size)
    if memory is None:
        return
    gpu = instances.INSTANCE_FACTS[e.instance_type].gpu
    for role in ROLES:
        utilization = e.role_gpu_memory_utilization(role)
        engine = fit.model_fit(memory, instance_type=e.instance_type, utilization=utilization,
                               tensor_parallel_size=e.tensor_parallel_size, max_model_len=e.max_model_len)
        if engine.fits:
            continue
        needed = math.ceil(engine.needed_gib / gpu.memory_gib * 100) / 100
        knob = _utilization_field(c, role)
        _fail(knob, utilization,
              f"gives {role} {engine.vllm_share_gib:.1f} GiB per {gpu.short_name} ({gpu.memory_gib:.1f} GiB), which "
              f"must hold {engine.weights_gib:.1f} GiB of {memory.name} weights per GPU (tensor_parallel_size "
              f"{e.tensor_parallel_size}) and {engine.kv_gib:.1f} GiB of KV cache for one endpoint.max_model_len "
              f"({e.max_model_len}) sequence: raise it to >= {needed:.2f}, raise endpoint.tensor_parallel_size or "
              "lower endpoint.max_model_len")


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
    bucket_key_belongs_to_an_existing_bucket, bucket_key_is_in_the_region,
    gpu_az_ids_are_in_the_region, gpu_groups_share_one_az, control_plane_az_ids_are_in_the_region,
    control_plane_az_ids_differ, gpu_subnet_is_in_the_groups_az, training_plans_are_in_the_region,
    reserved_only_types_have_a_training_plan, alert_topic_is_in_the_account,
    endpoint_instance_type_has_a_group, tensor_parallel_divides_the_node, role_gpus_fit_one_node,
    roles_fit_their_pools, roles_fit_all_gpus,
    threshold_is_below_max_model_len, kvaware_routing_has_the_completions_path,
    decode_replicas_within_the_operator_limit, l2_cache_has_a_backend,
    weights_cache_has_an_instance_store, idle_timeout_outlasts_the_first_token,
    autoscaling_min_is_not_above_max, decode_autoscaling_within_the_operator_limit, prefill_does_not_outscale_decode,
    decode_target_is_a_ratio, autoscaling_has_metrics,
    cidrs_do_not_overlap, gpu_cidr_can_join_the_vpc, gpu_subnet_holds_the_nodes, worker_requests_fit_the_node,
    model_size_is_complete, gpu_memory_holds_the_pd_buffer, gpu_memory_holds_the_model,
    scenario_job_names_fit, scenario_names_are_unique, scenarios_fit_max_model_len, scenario_prompts_take_their_path,
    some_scenario_fits, experiments_select_a_scenario, load_balancer_target_is_complete,
)


def check(c: Config) -> None:
    """Run every rule; the first broken one raises :class:`ConfigError`."""
    for rule in RULES:
        rule(c)
