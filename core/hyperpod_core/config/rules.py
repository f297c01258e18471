"""The rules that compare fields of the config, one function each (and one failing test each).

They run, in :data:`RULES` order, after every field has passed its own type (:mod:`hyperpod_core.config.types`),
from :func:`~hyperpod_core.config.loader.parse_config`, the one way a file becomes a
:class:`~hyperpod_core.config.model.Config`. Each raises :class:`ConfigError`
with one line: the field, what is allowed, and the bad value.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from typing import Final, cast

from hyperpod_core import fit, instances, pins
from hyperpod_core.config import placement
from hyperpod_core.config.az_ids import published_az_ids
from hyperpod_core.config.model import Config
from hyperpod_core.config.rules_workload import (
    experiments_select_a_scenario,
    fail,
    gpu_memory_holds_the_model,
    gpu_memory_holds_the_pd_buffer,
    model_size_is_complete,
    scenario_job_names_fit,
    scenario_names_are_unique,
    scenario_prompts_take_their_path,
    scenarios_fit_max_model_len,
    some_scenario_fits,
)
from hyperpod_core.config.spec import EndpointSpec, group_gpus
from hyperpod_core.config.types import (
    EKS_UNSUPPORTED_AZ_IDS,
    aws_partition,
    az_id_prefix,
)
from hyperpod_core.names import ROLES, EndpointNames

#: IP addresses one ml.p5.48xlarge-class node takes from its subnet on EKS (VPC CNI, EFA interfaces and
#: pods), per the HyperPod capacity-planning guide; we double it for rolling replacement.
IPS_PER_GPU_NODE: Final = 81
SUBNET_HEADROOM_FACTOR: Final = 2
#: AWS reserves the first four and the last address of every subnet.
AWS_RESERVED_IPS_PER_SUBNET: Final = 5


# --- names ------------------------------------------------------------------------------------------------

def router_service_name_fits(s: EndpointSpec) -> None:
    """The operator names the router Service ``<name>-<namespace>-routing-service``: a DNS label."""
    if len(EndpointNames.of(s.endpoint).router_service) > 63:
        fail(f"{s.at}.name", s.endpoint.name,
              f"plus {s.at}.namespace must stay under 63 characters in '<name>-<namespace>-routing-service'")


#: ``-r<N>``: how ``hyperpod-dpd rollout`` names a blue/green revision of an endpoint (``<endpoint>-r<N>``).
_REVISION_SUFFIX: Final = re.compile(r".*-r[0-9]+")


def endpoint_name_is_no_revision_name(s: EndpointSpec) -> None:
    """A name ending in ``-r<N>`` is a blue/green revision's (``hyperpod-dpd rollout``): the pod-name patterns of the
    dashboards, alerts and status read an endpoint's pods as ``<role>-<endpoint>[-r<N>]-...``
    (:data:`hyperpod_core.telemetry.queries.REVISION`), so endpoint ``x-r1`` would be counted as a revision of
    ``x``."""
    if _REVISION_SUFFIX.fullmatch(s.endpoint.name):
        fail(f"{s.at}.name", s.endpoint.name,
              "must not end in -r<N> (with N digits): hyperpod-dpd rollout names an endpoint's blue/green revisions "
              "<name>-r<N>")


def endpoint_names_are_unique(c: Config) -> None:
    """One name per endpoint: the command line's ``--endpoint NAME`` and ``dist/<name>/``."""
    seen: set[str] = set()
    for i, e in enumerate(c.endpoints):
        if e.name in seen:
            fail(f"endpoints[{i}].name", e.name, "must be unique among endpoints")
        seen.add(e.name)


def derived_names_are_unique(c: Config) -> None:
    """The names the operator and we derive from an endpoint (the router Deployment and Service and the Ingress in
    the operator's namespace: ``<name>-<namespace>-...``; the role Deployments and the benchmark ServiceAccount in
    the endpoint's namespace) must not collide across endpoints: ``chat-prod`` in ``team`` and ``chat`` in
    ``prod-team`` both give ``chat-prod-team-routing-service`` (fourth review, k8s defect 7)."""
    owner: dict[tuple[str, str, str], str] = {}
    for sp in c.specs():
        for key in sp.names.derived():
            other = owner.setdefault(key, sp.name)
            if other != sp.name:
                kind, namespace, name = key
                fail(sp.field("name"), sp.name,
                      f"in namespace {sp.namespace!r} must not derive the {kind} {name!r} in {namespace!r}, which "
                      f"endpoint {other!r} derives too: rename one of them")


def endpoint_models_keep_the_bucket_keys_out(s: EndpointSpec) -> None:
    """``model.existing_bucket_name``/``model.delete_on_destroy`` are deprecated names of deployment-wide keys:
    read from the top-level ``model`` only, never from an entry of ``endpoints``."""
    if s.at == "endpoint":
        return
    for old, new in (("existing_bucket_name", "existing_name"), ("delete_on_destroy", "delete_on_destroy")):
        value = vars(s.model).get(old)  # the stored value: reading the attribute warns that the key is deprecated
        if value is not None:
            fail(s.model_field(old), value,
                  f"must be left out of an endpoint's model (the deployment's bucket is model_bucket.{new}; a "
                  f"model in another bucket names it in {s.model_field('bucket')})")


def model_key_belongs_to_its_bucket(s: EndpointSpec) -> None:
    if s.model.kms_key_arn is not None and s.model.bucket is None:
        fail(s.model_field("kms_key_arn"), s.model.kms_key_arn,
              f"must be left out unless {s.model_field('bucket')} is set (the deployment's bucket's key is "
              "model_bucket.existing_kms_key_arn)")


def instance_group_names_are_unique(c: Config) -> None:
    seen: set[str] = set()
    for i, g in enumerate(c.hyperpod.instance_groups):
        if g.name in seen:
            fail(f"hyperpod.instance_groups[{i}].name", g.name, "must be unique")
        seen.add(g.name)


def existing_bucket_is_kept(c: Config) -> None:
    """We never delete a bucket we did not create (the construct refuses it too: ``ModelBucketProps``)."""
    if c.model_bucket.existing_name is not None and c.model_bucket.delete_on_destroy:
        fail("model_bucket.delete_on_destroy", True,
              "cannot be true for an existing bucket we did not create (model_bucket.existing_name)")


def bucket_key_belongs_to_an_existing_bucket(c: Config) -> None:
    """A created bucket's key is the platform stack's own: a key named without ``existing_name`` would be unused."""
    b = c.model_bucket
    if b.existing_kms_key_arn is not None and b.existing_name is None:
        fail("model_bucket.existing_kms_key_arn", b.existing_kms_key_arn,
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
        fail("model_bucket.existing_kms_key_arn", arn,
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
            fail(field, az, f"must be an AZ ID of {c.region} such as {prefix}-az1")
        return
    allowed = [i for i in published if not (control_plane and i in EKS_UNSUPPORTED_AZ_IDS)]
    if az not in allowed:
        where = " where EKS creates control planes" if control_plane else ""
        fail(field, az, f"must be an AZ ID of {c.region}{where} ({', '.join(allowed)})")


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
        fail("hyperpod.instance_groups[*].availability_zone_id", sorted(azs),
              "must resolve to exactly one AZ ID (DPD moves the KV cache over EFA within one AZ)")


def control_plane_az_ids_are_in_the_region(c: Config) -> None:
    for i, az in enumerate(c.network.control_plane_availability_zone_ids):
        _in_region(c, f"network.control_plane_availability_zone_ids[{i}]", az, control_plane=True)


def control_plane_az_ids_differ(c: Config) -> None:
    cp = c.network.control_plane_availability_zone_ids
    if cp[0] == cp[1]:
        fail("network.control_plane_availability_zone_ids", list(cp),
              "must name two different AZ IDs (EKS needs subnets in at least two AZs)")


def gpu_subnet_is_in_the_groups_az(c: Config) -> None:
    azs = _group_az_ids(c)
    if c.network.gpu_availability_zone_id not in azs:
        fail("network.gpu_availability_zone_id", c.network.gpu_availability_zone_id,
              f"must be the AZ ID of the GPU instance groups ({sorted(azs)[0]})")


def training_plans_are_in_the_region(c: Config) -> None:
    for i, g in enumerate(c.hyperpod.instance_groups):
        if g.training_plan_arn is not None and g.training_plan_arn.split(":")[3] != c.region:
            fail(f"hyperpod.instance_groups[{i}].training_plan_arn", g.training_plan_arn,
                  f"must be a training plan in region {c.region} (a plan reserves capacity in one region)")


def reserved_only_types_have_a_training_plan(c: Config) -> None:
    for i, g in enumerate(c.hyperpod.instance_groups):
        if g.instance_type in instances.RESERVED_ONLY_INSTANCE_TYPES and g.training_plan_arn is None:
            fail(f"hyperpod.instance_groups[{i}].training_plan_arn", None,
                  f"must name a SageMaker training plan for {g.instance_type}: AWS's price list shows no on-demand "
                  "HyperPod offer for it in any region")


def alert_topic_is_in_the_account(c: Config) -> None:
    """AMP's alert manager routes only to SNS topics in the same account (AMP user guide, "Alert Manager")."""
    arn, accounts = c.observability.alerts.topic_arn, c.arn_accounts()
    if arn is not None and len(accounts) == 1 and arn.split(":")[4] not in accounts:
        fail("observability.alerts.topic_arn", arn,
              f"must be a topic of account {min(accounts)}, the one eks.admin_principal_arn and the training plans "
              "name (AMP's alert manager routes only to SNS topics in its own account)")


# --- instance types, parallelism, capacity ----------------------------------------------------------------

def endpoint_instance_type_has_a_group(s: EndpointSpec) -> None:
    if s.endpoint.instance_type not in {g.instance_type for g in s.instance_groups}:
        fail(f"{s.at}.instance_type", s.endpoint.instance_type,
              "must be the instance type of at least one hyperpod.instance_groups entry")


def tensor_parallel_divides_the_node(s: EndpointSpec) -> None:
    e = s.endpoint
    per_node = instances.DPD_INSTANCE_GPUS[e.instance_type]
    if per_node % e.tensor_parallel_size:
        fail(f"{s.at}.tensor_parallel_size", e.tensor_parallel_size,
              f"must divide the {per_node} GPUs of one {e.instance_type} (1, 2, 4 or 8)")


def role_gpus_fit_one_node(s: EndpointSpec) -> None:
    e = s.endpoint
    per_node = instances.DPD_INSTANCE_GPUS[e.instance_type]
    for role in ROLES:
        gpus = getattr(e, role).gpus
        if gpus > per_node:
            fail(f"{s.at}.{role}.gpus", gpus, f"must fit one {e.instance_type} node (<= {per_node})")
        if gpus != e.tensor_parallel_size:
            fail(f"{s.at}.{role}.gpus", gpus,
                  f"must equal {s.at}.tensor_parallel_size ({e.tensor_parallel_size}): one vLLM engine per pod")


def role_instance_groups_exist(s: EndpointSpec) -> None:
    """A role's ``instance_group`` names a group of the cluster, of the endpoint's instance type."""
    groups = {g.name: g for g in s.instance_groups}
    for role in ROLES:
        named = getattr(s.endpoint, role).instance_group
        if named is None:
            continue
        if named not in groups:
            fail(f"{s.at}.{role}.instance_group", named,
                  f"must name one of hyperpod.instance_groups ({', '.join(groups)})")
        if groups[named].instance_type != s.endpoint.instance_type:
            fail(f"{s.at}.{role}.instance_group", named,
                  f"must name a group of {s.at}.instance_type {s.endpoint.instance_type} (its nodes are "
                  f"{groups[named].instance_type})")


def roles_fit_their_pools(s: EndpointSpec) -> None:
    e = s.endpoint
    for role in ROLES:
        r = getattr(e, role)
        need, have = s.peak_gpus(role), sum(group_gpus(g) for g in s.role_groups(role))
        if need > have:
            where = (f"instance group {r.instance_group!r} holds" if r.instance_group is not None
                     else f"instance groups for the {role} pool hold" if s.node_selector(role)
                     else f"the {e.instance_type} instance groups (no pool of its own: any of them) hold")
            fail(f"{s.at}.{role}.replicas", r.replicas, f"needs {need} GPUs at peak but {where} {have}")


def unpinned_roles_keep_off_named_groups(c: Config) -> None:
    """A role that names no ``instance_group`` may land on every group :meth:`EndpointSpec.role_groups` lists. Were
    one of them named by another role (of this or another endpoint), the scheduler, which places pods as they come,
    could give that group's nodes to this role first and leave the other Pending although the GPUs add up (review
    of issue 34, defect 1: the 70B's prefill on the 8B's group). Such a role names its group too, unless the named
    group is the only one it may land on (then both are confined to it and the capacity rule counts them
    together). With this rule any two roles' groups are the same or share none."""
    specs = c.specs()
    named: dict[str, str] = {}
    for sp in specs:
        for role in ROLES:
            group = getattr(sp.endpoint, role).instance_group
            if group is not None:
                named.setdefault(group, sp.field(role))
    for sp in specs:
        for role in ROLES:
            if getattr(sp.endpoint, role).instance_group is not None:
                continue
            groups = [g.name for g in sp.role_groups(role)]
            taken = next((g for g in groups if g in named and groups != [g]), None)
            if taken is not None:
                fail(sp.field(f"{role}.instance_group"), None,
                      f"must be set: without it the role may take group {taken!r}, which {named[taken]} names "
                      f"(the scheduler may give that group's nodes to this role first); it may land on "
                      f"{', '.join(groups)}")


def roles_fit_all_gpus(s: EndpointSpec) -> None:
    e = s.endpoint
    peak_total = s.peak_gpus("prefill") + s.peak_gpus("decode")
    total = sum(group_gpus(g) for g in s.instance_groups)
    if peak_total > total:
        fail(s.field(), f"{peak_total} GPUs",
              f"prefill + decode must fit the {total} GPUs of all hyperpod.instance_groups")
    del e


def endpoints_fit_the_groups_together(c: Config) -> None:
    """Every endpoint's roles at their peak fit the instance groups they may land on, all endpoints together
    (:mod:`hyperpod_core.config.placement`): in GPUs, for every union of the groups the roles may use (the groups a
    maximum flow leaves short name the overflow), then pod by pod, each pod on one node with enough free GPUs."""
    found = placement.role_placements(c.specs())
    gpus = {g.name: group_gpus(g) for g in c.hyperpod.instance_groups}
    short = placement.short_groups(found, gpus)
    if short:
        holders = placement.confined(found, short)
        need, have = sum(p.gpus for p in holders), sum(gpus[g] for g in short)
        fail(f"instance group{'s' if len(short) > 1 else ''} {', '.join(short)}", f"{need} GPUs at peak",
              f"must hold every endpoint's roles that run only there "
              f"({', '.join(f'{p.endpoint} {p.role} {p.gpus}' for p in holders)}) in {have} GPUs: add nodes, lower "
              f"replicas or autoscaling maxima, or pin a role to another group ({holders[0].field}.instance_group)")
    pod = placement.unplaced(found, c.hyperpod.instance_groups)
    if pod is not None:
        fail(f"{pod.field}.replicas", pod.pods,
              f"needs {pod.pods} pods of {pod.gpus_per_pod} GPUs at peak, each on ONE node of instance group"
              f"{'s' if len(pod.groups) > 1 else ''} {', '.join(pod.groups)}, but once the larger pods and those "
              f"with fewer groups are placed no node there has {pod.gpus_per_pod} GPUs free: add nodes, or pin the "
              "roles so that pods of one size share nodes")


# --- routing and the operator's limits --------------------------------------------------------------------

def threshold_is_below_max_model_len(s: EndpointSpec) -> None:
    e = s.endpoint
    if e.routing_threshold_tokens >= e.max_model_len:
        fail(f"{s.at}.routing_threshold_tokens", e.routing_threshold_tokens,
              f"must be below {s.at}.max_model_len ({e.max_model_len}) or no prompt is ever disaggregated")


def kvaware_routing_has_the_completions_path(s: EndpointSpec) -> None:
    e = s.endpoint
    if e.routing_strategy == "kvaware" and (
            not e.invocation_path.endswith("completions") or "chat" in e.invocation_path):
        fail(f"{s.at}.routing_strategy", e.routing_strategy,
              f"'kvaware' needs {s.at}.invocation_path 'v1/completions' (not chat), per the operator docs")


def decode_replicas_within_the_operator_limit(s: EndpointSpec) -> None:
    """Decode only (the role type is shared with prefill, so this bound cannot be its field type)."""
    if s.endpoint.decode.replicas > pins.DPD_MAX_DECODE_REPLICAS:
        fail(f"{s.at}.decode.replicas", s.endpoint.decode.replicas,
              f"must be <= {pins.DPD_MAX_DECODE_REPLICAS}: operator v{pins.INFERENCE_OPERATOR_APP_VERSION} "
              "runs a single decoder with several prefillers (DPD guide, Limitations)")


def l2_cache_has_a_backend(s: EndpointSpec) -> None:
    kv = s.endpoint.kv_cache
    if kv.enable_l2_cache and kv.l2_cache_backend is None:
        fail(f"{s.at}.kv_cache.l2_cache_backend", None, "must be 'redis' or 'tieredstorage' when L2 is on")


# --- cold start and the load balancer (operator v3.3) ------------------------------------------------------

def weights_cache_has_an_instance_store(s: EndpointSpec) -> None:
    """The NVMe weights cache needs instance storage on the endpoint's instance type (EC2 instance-store table)."""
    unavailable = instances.weights_cache_unavailable(s.endpoint.instance_type)
    if s.endpoint.model_cache.weights_cache is True and unavailable is not None:
        fail(f"{s.at}.model_cache.weights_cache", True, f"must be false or null: {unavailable}")


def idle_timeout_outlasts_the_first_token(s: EndpointSpec) -> None:
    """No byte flows before the first token, so an idle timeout below the TTFT objective cuts requests the SLO
    still calls good."""
    timeout, ttft = s.endpoint.load_balancer_idle_timeout_seconds, s.slo.ttft_p95_seconds
    if timeout is not None and timeout < ttft:
        fail(f"{s.at}.load_balancer_idle_timeout_seconds", timeout,
              f"must be at least observability.slo.ttft_p95_seconds ({ttft:g}): the ALB closes a connection that "
              "carries no bytes that long, and none flow before the first token")


# --- autoscaling ------------------------------------------------------------------------------------------

def autoscaling_min_is_not_above_max(s: EndpointSpec) -> None:
    a = s.endpoint.autoscaling
    for role in ROLES:
        r = getattr(a, role)
        if r.min_replicas > r.max_replicas:
            fail(f"{s.at}.autoscaling.{role}.min_replicas", r.min_replicas,
                  f"must be <= {s.at}.autoscaling.{role}.max_replicas ({r.max_replicas})")


def decode_autoscaling_within_the_operator_limit(s: EndpointSpec) -> None:
    """Decode only, as :func:`decode_replicas_within_the_operator_limit`."""
    a = s.endpoint.autoscaling
    if a.decode.max_replicas > pins.DPD_MAX_DECODE_REPLICAS:
        fail(f"{s.at}.autoscaling.decode.max_replicas", a.decode.max_replicas,
              f"must be <= {pins.DPD_MAX_DECODE_REPLICAS} (operator v{pins.INFERENCE_OPERATOR_APP_VERSION} "
              "runs a single decoder)")


def prefill_does_not_outscale_decode(s: EndpointSpec) -> None:
    """Prefill scaled past what the decoders admit only moves the queue to the decoders and back."""
    a, e = s.endpoint.autoscaling, s.endpoint
    prefill_seqs, decode_seqs = (a.prefill.max_replicas * e.prefill.max_num_seqs,
                                 a.decode.max_replicas * e.decode.max_num_seqs)
    if a.enabled and prefill_seqs > decode_seqs:
        fail(f"{s.at}.autoscaling.prefill.max_replicas", a.prefill.max_replicas,
              f"x {s.at}.prefill.max_num_seqs ({prefill_seqs} sequences) must not exceed "
              f"{s.at}.autoscaling.decode.max_replicas x {s.at}.decode.max_num_seqs ({decode_seqs})")


def decode_target_is_a_ratio(s: EndpointSpec) -> None:
    """Decode only: its target is a KV-cache usage ratio (prefill's is a queue length)."""
    target = s.endpoint.autoscaling.decode.target_value
    if not 0 < target <= 1:
        fail(f"{s.at}.autoscaling.decode.target_value", target, "is a KV-cache usage ratio and must be in (0, 1]")


def autoscaling_has_metrics(s: EndpointSpec) -> None:
    if s.endpoint.autoscaling.enabled and not s.observability.enabled:
        fail(f"{s.at}.autoscaling.enabled", True,
              "needs observability.enabled (KEDA scales on metrics in the managed Prometheus workspace)")


# --- CIDRs and worker requests ----------------------------------------------------------------------------

def cidrs_do_not_overlap(c: Config) -> None:
    vpc, gpu = ipaddress.IPv4Network(c.network.vpc_cidr), ipaddress.IPv4Network(c.network.gpu_cidr)
    if vpc.overlaps(gpu):
        fail("network.gpu_cidr", str(gpu), f"must not overlap network.vpc_cidr ({vpc})")


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
            fail("network.gpu_cidr", str(gpu), allowed)
        for row, any_in, banned in _RESTRICTED_WITHIN:
            if primary == row and vpc.subnet_of(any_in) and gpu.overlaps(banned):
                fail("network.gpu_cidr", str(gpu),
                      f"must not be in {banned} when network.vpc_cidr ({vpc}) is in {any_in} (Amazon VPC User "
                      "Guide, IPv4 CIDR block association restrictions)")
    elif secondary is not None:  # primary in 198.19.0.0/16, 100.64.0.0/10 or publicly routable
        fail("network.gpu_cidr", str(gpu),
              f"must be in {_SHARED_100_64} (or publicly routable) when network.vpc_cidr ({vpc}) is outside "
              "RFC 1918 (Amazon VPC User Guide, IPv4 CIDR block association restrictions)")


def gpu_subnet_holds_the_nodes(c: Config) -> None:
    gpu = ipaddress.IPv4Network(c.network.gpu_cidr)
    nodes = sum(g.instance_count for g in c.hyperpod.instance_groups)
    needed = nodes * IPS_PER_GPU_NODE * SUBNET_HEADROOM_FACTOR
    usable = gpu.num_addresses - AWS_RESERVED_IPS_PER_SUBNET
    if usable < needed:
        fail("network.gpu_cidr", str(gpu),
              f"must hold {needed} IPs for {nodes} GPU nodes ({IPS_PER_GPU_NODE} each, x{SUBNET_HEADROOM_FACTOR} "
              f"headroom) but has {usable} usable")


def worker_requests_fit_the_node(s: EndpointSpec) -> None:
    """Worker requests must fit the node: at most ``fit.WORKER_SHARE_PERCENT`` of it for all its workers, and
    what allocatable (kubelet reservation) leaves after the DaemonSets, the router and the sidecars."""
    e = s.endpoint
    tpc = sorted({g.threads_per_core for g in s.role_groups('prefill') + s.role_groups('decode')}
                 or {g.threads_per_core for g in s.instance_groups if g.instance_type == e.instance_type})
    pods = fit.workers_per_node(e.instance_type, e.tensor_parallel_size)
    where = (f"one {e.instance_type} (threads_per_core {'/'.join(map(str, tpc))}) leaves each of its {pods} "
             f"worker(s)")
    share = f"{fit.WORKER_SHARE_PERCENT} % of the node, the rest for kubelet, DaemonSets, router and sidecars"
    if (tiered := s.tiered_storage_percent) is not None:
        share += f"; {tiered} % of its memory is HyperPod tiered storage's"
    for role in ROLES:
        r, budget = getattr(e, role), s.worker_budget(role)
        if r.cpu is not None and r.cpu > budget.cpu:
            fail(f"{s.at}.{role}.cpu", r.cpu, f"must be <= {budget.cpu}: {where} {budget.cpu} CPUs ({share})")
        if r.memory_gib is not None and r.memory_gib > budget.memory_gib:
            fail(f"{s.at}.{role}.memory_gib", r.memory_gib,
                  f"must be <= {budget.memory_gib}: {where} {budget.memory_gib} GiB ({share})")


def load_balancer_target_is_complete(c: Config) -> None:
    """``target: load_balancer`` needs the URL and the CA Secret (checked only then: unused otherwise)."""
    b = c.benchmark
    if b.target != "load_balancer":
        return
    if not b.load_balancer_url or not re.fullmatch(r"https://[A-Za-z0-9.-]+(:\d+)?/?", b.load_balancer_url):
        fail("benchmark.load_balancer_url", b.load_balancer_url,
              "must be https://<host>[:port] when benchmark.target is load_balancer")
    if not b.ca_secret_name or not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", b.ca_secret_name, re.ASCII):
        fail("benchmark.ca_secret_name", b.ca_secret_name,
              "must name the Secret holding the endpoint's TLS PEM (ca.pem) when benchmark.target is load_balancer")


#: Every rule, in the order they run (the first one broken is the one reported). A rule that takes an
#: :class:`EndpointSpec` (:data:`ENDPOINT_RULES`) runs for each endpoint in the file's order.
RULES: Final[tuple[Callable[[Config], None] | Callable[[EndpointSpec], None], ...]] = (
    endpoint_names_are_unique, endpoint_name_is_no_revision_name, router_service_name_fits, derived_names_are_unique,
    endpoint_models_keep_the_bucket_keys_out, model_key_belongs_to_its_bucket,
    instance_group_names_are_unique, existing_bucket_is_kept,
    bucket_key_belongs_to_an_existing_bucket, bucket_key_is_in_the_region,
    gpu_az_ids_are_in_the_region, gpu_groups_share_one_az, control_plane_az_ids_are_in_the_region,
    control_plane_az_ids_differ, gpu_subnet_is_in_the_groups_az, training_plans_are_in_the_region,
    reserved_only_types_have_a_training_plan, alert_topic_is_in_the_account,
    endpoint_instance_type_has_a_group, role_instance_groups_exist, tensor_parallel_divides_the_node,
    role_gpus_fit_one_node, roles_fit_their_pools, roles_fit_all_gpus, unpinned_roles_keep_off_named_groups,
    endpoints_fit_the_groups_together,
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
#: The rules of one endpoint (they take an :class:`EndpointSpec`).
ENDPOINT_RULES: Final = frozenset({
    endpoint_name_is_no_revision_name, router_service_name_fits, endpoint_models_keep_the_bucket_keys_out,
    model_key_belongs_to_its_bucket,
    endpoint_instance_type_has_a_group, role_instance_groups_exist, tensor_parallel_divides_the_node,
    role_gpus_fit_one_node, roles_fit_their_pools, roles_fit_all_gpus, threshold_is_below_max_model_len,
    kvaware_routing_has_the_completions_path, decode_replicas_within_the_operator_limit, l2_cache_has_a_backend,
    weights_cache_has_an_instance_store, idle_timeout_outlasts_the_first_token, autoscaling_min_is_not_above_max,
    decode_autoscaling_within_the_operator_limit, prefill_does_not_outscale_decode, decode_target_is_a_ratio,
    autoscaling_has_metrics, worker_requests_fit_the_node, model_size_is_complete, gpu_memory_holds_the_pd_buffer,
    gpu_memory_holds_the_model, scenario_job_names_fit, scenario_names_are_unique, scenarios_fit_max_model_len,
    scenario_prompts_take_their_path, some_scenario_fits, experiments_select_a_scenario,
})


def check(c: Config) -> None:
    """Run every rule; the first broken one raises :class:`ConfigError`."""
    specs = c.specs()
    for rule in RULES:
        if rule in ENDPOINT_RULES:
            endpoint_rule = cast(Callable[[EndpointSpec], None], rule)
            for s in specs:
                endpoint_rule(s)
        else:
            cast(Callable[[Config], None], rule)(c)
