"""The root of the config: :class:`Config`, the whole deployment, with its top-level `model_bucket` section; the
other sections live in their own modules (:mod:`.cluster`, :mod:`.endpoint`, :mod:`.observability`,
:mod:`.benchmark`).

Field types with a single-field rule come from :mod:`hyperpod_core.config.types`; the rules that compare
fields run after validation from :mod:`hyperpod_core.config.rules` (:func:`hyperpod_core.config.loader.parse_config`
runs them). Every field's docstring reaches ``config/schema.json`` and ``docs/config.md``
(``use_attribute_docstrings``): it says what the field is and, after ``Default:``, what happens when the file leaves
it out.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import model_validator

from hyperpod_core import fit, pins
from hyperpod_core.config.benchmark import (
    AWS_REFERENCE_CONCURRENCY,
    BenchmarkConfig,
    BenchmarkScenarioConfig,
    default_scenarios,
)
from hyperpod_core.config.cluster import EksConfig, HyperPodConfig, NetworkConfig
from hyperpod_core.config.endpoint import EndpointConfig, IdleTimeout, ModelConfig, ResolvedModelCache
from hyperpod_core.config.observability import ObservabilityConfig
from hyperpod_core.config.section import Section
from hyperpod_core.config.types import (
    AWS_REGIONS,
    BucketName,
    DeploymentName,
    KmsKeyArn,
    Region,
    default_control_plane_az_ids,
)
from hyperpod_core.errors import ConfigError, shown
from hyperpod_core.instances import weights_cache_unavailable


class ModelBucketConfig(Section):
    """The S3 bucket the model weights are read from: created by the platform stack, or one that exists. A created
    bucket is kept on destroy with its KMS key (and its access-log bucket); `hyperpod-dpd destroy` prints the
    `existing_name` and `existing_kms_key_arn` lines that let the next deployment read it again."""

    existing_name: BucketName | None = None
    """Read the weights from this bucket, in `region`, instead of creating one: nothing is created, changed or
    deleted, and the readers may read only below `model.s3_prefix`. Formerly `model.existing_bucket_name` (still
    read). Default: none: the platform stack creates a bucket, encrypted with a key of its own."""
    existing_kms_key_arn: KmsKeyArn | None = None
    """The customer managed KMS key, in `region`, that encrypts the objects of `existing_name` (its key ARN: IAM
    names a key by its key ARN only). Every reader of the weights gets `kms:Decrypt` on exactly this key;
    `hyperpod-dpd preflight` compares it with the bucket's default encryption. Only with `existing_name`. Default:
    none: no `kms:Decrypt` (for a bucket encrypted with SSE-S3 or the AWS managed key `aws/s3`)."""
    delete_on_destroy: bool = False
    """Empty (every object version) and delete the created bucket, its key and its access-log bucket on destroy;
    never a bucket named by `existing_name`. Formerly `model.delete_on_destroy` (still read). Default: keep them
    (RETAIN), so that a later deployment reads the weights again through `existing_name`."""


#: Keys `model_bucket` took over from `model`: ``(key under model, key under model_bucket)``. The old ones stay in
#: :class:`ModelConfig`, deprecated, and :meth:`Config._move_deprecated_keys` reads them into `model_bucket`.
MOVED_TO_MODEL_BUCKET: tuple[tuple[str, str], ...] = (
    ("existing_bucket_name", "existing_name"), ("delete_on_destroy", "delete_on_destroy"))


#: ``TieredStorageConfig.InstanceMemoryAllocationPercentage`` of AWS's managed KV cache example (awslabs
#: ai-on-sagemaker-hyperpod, "HyperPod Managed KV Cache with LMCache": ``{"Mode": "Enable",
#: "InstanceMemoryAllocationPercentage": 20}``); the SageMaker API publishes no default (ClusterTieredStorageConfig).
TIERED_STORAGE_DEFAULT_PERCENT = 20


class Config(Section):
    """The whole deployment. `config/default.yaml` is the AWS DPD walkthrough."""

    name: DeploymentName = "hyperpod-dpd"
    """Prefix of every stack name and, by default, of every account-unique name (clusters, buckets, log groups):
    two deployments differ only in `name`. Also the Kubernetes label `app.kubernetes.io/part-of`. Default:
    `hyperpod-dpd`."""
    region: Region = "us-west-2"
    """AWS region of everything. Default: `us-west-2`."""
    network: NetworkConfig
    """The VPC. Default: every key at its default."""
    eks: EksConfig
    """The EKS cluster. Default: every key at its default."""
    hyperpod: HyperPodConfig
    """The HyperPod cluster. Required (its `instance_groups` have no default)."""
    model: ModelConfig = ModelConfig()
    """The model and where its files are. Default: every key at its default."""
    model_bucket: ModelBucketConfig = ModelBucketConfig()
    """The S3 bucket of the model files. Default: a bucket the platform stack creates and keeps on destroy."""
    endpoint: EndpointConfig = EndpointConfig()
    """The DPD inference endpoint. Default: every key at its default."""
    observability: ObservabilityConfig = ObservabilityConfig()
    """Metrics, alerts and dashboards. Default: every key at its default."""
    benchmark: BenchmarkConfig = BenchmarkConfig()
    """The benchmark matrix. Default: every key at its default."""

    def arn_accounts(self) -> set[str]:
        """AWS accounts the config's own ARNs name (``eks.admin_principal_arn``, training plans): when exactly one,
        the deployment's account is known without asking AWS."""
        arns = [self.eks.admin_principal_arn, *(g.training_plan_arn for g in self.hyperpod.instance_groups)]
        return {parts[4] for a in arns if a and len(parts := a.split(":")) > 5
                and re.fullmatch(r"[0-9]{12}", parts[4], re.ASCII)}

    def benchmark_scenarios(self) -> tuple[BenchmarkScenarioConfig, ...]:
        """``benchmark.scenarios``, else the defaults sized from the endpoint."""
        return self.benchmark.scenarios or default_scenarios(self.endpoint)

    def resolved_model_cache(self) -> ResolvedModelCache:
        """``endpoint.model_cache`` with the weights cache's default decided by the instance type."""
        m = self.endpoint.model_cache
        unavailable = weights_cache_unavailable(self.endpoint.instance_type)
        weights = m.weights_cache if m.weights_cache is not None else unavailable is None
        return ResolvedModelCache(
            image_cache=m.image_cache, weights_cache=weights, weights_cache_host_path=m.weights_cache_host_path,
            weights_cache_off_reason=unavailable if m.weights_cache is None and not weights else None)

    def load_balancer_idle_timeout(self) -> IdleTimeout:
        """``endpoint.load_balancer_idle_timeout_seconds``, else the longest answer the SLOs allow (clamped)."""
        e, slo = self.endpoint, self.observability.slo
        if e.load_balancer_idle_timeout_seconds is not None:
            return IdleTimeout(seconds=e.load_balancer_idle_timeout_seconds, derived_seconds=None)
        derived = slo.ttft_p95_seconds + e.max_model_len * slo.tpot_p95_seconds
        low, high = pins.LOAD_BALANCER_IDLE_TIMEOUT_RANGE_SECONDS
        # Rounded first: 2 + 16384 x 0.1 is 1640.4000000000001 in floating point, and an exact product must not
        # gain a second from the last bit.
        return IdleTimeout(seconds=min(max(math.ceil(round(derived, 6)), low), high), derived_seconds=derived)

    def tiered_storage_percent(self) -> int | None:
        """The share of node memory HyperPod's tiered storage takes, or ``None`` when it stays off:
        ``hyperpod.tiered_storage_memory_percent``, else 20 when the endpoint's L2 cache is ``tieredstorage``."""
        if self.hyperpod.tiered_storage_memory_percent is not None:
            return self.hyperpod.tiered_storage_memory_percent
        kv = self.endpoint.kv_cache
        return TIERED_STORAGE_DEFAULT_PERCENT if kv.enable_l2_cache and kv.l2_cache_backend == "tieredstorage" \
            else None

    def worker_budget(self, role: Literal["prefill", "decode", "colocated"]) -> fit.PodRequests:
        """The most one worker of ``role`` may request: the smallest node budget among the instance groups of
        ``endpoint.instance_type`` it can land on (its pool and ``shared``; any pool for the colocated baseline),
        shared by as many workers as the node has GPUs for."""
        e = self.endpoint
        pools: tuple[str, ...] = ("prefill", "decode", "shared") if role == "colocated" else (role, "shared")
        groups = [g for g in self.hyperpod.instance_groups if g.instance_type == e.instance_type and g.pool in pools]
        groups = groups or [g for g in self.hyperpod.instance_groups if g.instance_type == e.instance_type]
        return fit.worker_budget(e.instance_type, e.tensor_parallel_size, (g.threads_per_core for g in groups),
                                 self.tiered_storage_percent() or 0)

    def worker_requests(self, role: Literal["prefill", "decode", "colocated"]) -> fit.PodRequests:
        """CPU and memory requests of one worker of ``role``: the configured ones, else the node budget. The
        colocated baseline runs the decode role's engine and takes its requests."""
        budget = self.worker_budget(role)
        r = self.endpoint.decode if role == "colocated" else getattr(self.endpoint, role)
        return fit.PodRequests(cpu=min(r.cpu or budget.cpu, budget.cpu),
                               memory_gib=min(r.memory_gib or budget.memory_gib, budget.memory_gib))

    def benchmark_concurrency(self, scenario: BenchmarkScenarioConfig) -> tuple[int, ...]:
        """The levels ``scenario`` runs at: AWS's published ones in the aws-reference experiment, else
        ``benchmark.concurrency``."""
        return AWS_REFERENCE_CONCURRENCY if scenario.experiment == "aws-reference" else self.benchmark.concurrency

    @model_validator(mode="before")
    @classmethod
    def _derive_defaults(cls, data: Any) -> Any:
        """Fill what derives from ``name`` and ``region`` when the YAML leaves it out or sets ``null``:
        ``eks.cluster_name`` (``<name>-eks``), ``hyperpod.cluster_name`` (``<name>``) and
        ``network.control_plane_availability_zone_ids``. After loading these are always plain values."""
        if not isinstance(data, dict):
            return data
        name = data.get("name", cls.model_fields["name"].default)
        region = data.get("region", cls.model_fields["region"].default)
        data = dict(data)
        derived: list[tuple[str, str, Any, bool]] = []
        if isinstance(name, str):
            derived += [("eks", "cluster_name", f"{name}-eks", True),
                        ("hyperpod", "cluster_name", name, False)]
        if isinstance(region, str):
            # An unknown region gets placeholders here; the region's own rule then reports the region itself
            # (its field comes before network's, and the first error is the one reported).
            cp = default_control_plane_az_ids(region) if region in AWS_REGIONS else ("", "")
            derived.append(("network", "control_plane_availability_zone_ids", cp, True))
        for section, key, value, create in derived:
            sub = data.get(section)
            if sub is None and create:
                sub = {}
            if isinstance(sub, dict) and sub.get(key) is None:
                data[section] = {**sub, key: value}
        return data

    @model_validator(mode="before")
    @classmethod
    def _move_deprecated_keys(cls, data: Any) -> Any:
        """Read ``model.existing_bucket_name`` and ``model.delete_on_destroy`` (deprecated) into ``model_bucket``,
        so a file with the old keys loads to the same config as one with the new; a file that sets an old key and
        its new one is refused in one line naming both. A key set to ``null`` counts as not set."""
        if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
            return data
        model, bucket = dict(data["model"]), data.get("model_bucket")
        moved: dict[str, Any] = {}
        for old, new in MOVED_TO_MODEL_BUCKET:
            value = model.pop(old, None)
            if value is None:
                continue
            if isinstance(bucket, dict) and bucket.get(new) is not None:
                raise ConfigError(f"model.{old} must be left out when model_bucket.{new} is set (it is that key's "
                                  f"deprecated name: keep model_bucket.{new} only), got {shown(value)}")
            moved[new] = value
        if bucket is None:
            bucket = {}
        if isinstance(bucket, dict):
            bucket = {**bucket, **moved}
        return {**data, "model": model, "model_bucket": bucket}

