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

import re
from collections import Counter
from dataclasses import replace
from typing import Annotated, Any

from pydantic import Field, PrivateAttr, model_validator

from hyperpod_core.config.benchmark import BenchmarkConfig
from hyperpod_core.config.cluster import EksConfig, HyperPodConfig, NetworkConfig
from hyperpod_core.config.endpoint import EndpointConfig
from hyperpod_core.config.observability import ObservabilityConfig, SloConfig
from hyperpod_core.config.section import Section
from hyperpod_core.config.spec import EndpointSpec
from hyperpod_core.config.types import (
    AWS_REGIONS,
    BucketName,
    DeploymentName,
    KmsKeyArn,
    Region,
    default_control_plane_az_ids,
)
from hyperpod_core.errors import ConfigError, shown
from hyperpod_core.names import ROLES


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

#: Most endpoints one deployment serves (each is an InferenceEndpointConfig with its own load balancer).
MAX_ENDPOINTS = 20


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
    model_bucket: ModelBucketConfig = ModelBucketConfig()
    """The S3 bucket of the model files. Default: a bucket the platform stack creates and keeps on destroy."""
    endpoints: Annotated[tuple[EndpointConfig, ...], Field(min_length=1, max_length=MAX_ENDPOINTS)] = (
        EndpointConfig(),)
    """The inference endpoints the cluster serves (1 to 20), each with its own `model`; their roles share the
    instance groups (their GPUs at peak must fit them). A file may instead hold one endpoint in the one-endpoint
    shape: a top-level `model:` and `endpoint:` (as before several endpoints), which loads as `endpoints:
    [<endpoint with its model>]`. Going from one endpoint to several (or back) renames the benchmark client's EKS
    Pod Identity association once: delete the old one first (docs/platform.md). Default: one endpoint with every key at
    its default."""
    observability: ObservabilityConfig = ObservabilityConfig()
    """Metrics, alerts and dashboards. Default: every key at its default."""
    benchmark: BenchmarkConfig = BenchmarkConfig()
    """The benchmark matrix, run against each endpoint. Default: every key at its default."""

    _one_endpoint_shape: bool = PrivateAttr(default=False)

    # --- the endpoints --------------------------------------------------------------------------------------

    def specs(self) -> tuple[EndpointSpec, ...]:
        """Every endpoint with the cluster facts it needs, in the file's order."""
        tiered = self.tiered_storage_percent()
        shape = self._one_endpoint_shape
        specs = tuple(
            EndpointSpec(endpoint=e, at="endpoint" if shape else f"endpoints[{i}]", deployment=self.name,
                         region=self.region, instance_groups=self.hyperpod.instance_groups,
                         tiered_storage_percent=tiered, observability=self.observability,
                         slo=_endpoint_slo(self.observability.slo, e.slo), benchmark=self.benchmark)
            for i, e in enumerate(self.endpoints))
        if len(specs) == 1:
            return specs
        # Each endpoint's router and image-cache pods may run on every group its workers may use (fit.RESERVATIONS).
        sharing = Counter(g for s in specs for g in {g.name for role in ROLES for g in s.role_groups(role)})
        by_group = tuple((g.name, sharing[g.name]) for g in self.hyperpod.instance_groups if sharing[g.name] > 1)
        return tuple(replace(s, endpoints_by_group=by_group) for s in specs)

    def spec(self, name: str | None = None) -> EndpointSpec:
        """The endpoint ``name``; with ``None``, the only one. A name the fleet does not hold, or ``None`` with
        several endpoints, is a :class:`ConfigError` naming the endpoints there are."""
        specs = self.specs()
        if name is None and len(specs) == 1:
            return specs[0]
        for s in specs:
            if s.name == name:
                return s
        names = ", ".join(s.name for s in specs)
        if name is None:
            raise ConfigError(f"endpoint must be named: this config serves {len(specs)} endpoints ({names})")
        raise ConfigError(f"endpoint must be one of this config's endpoints ({names}), got {shown(name)}")

    # --- deployment-wide derived settings -------------------------------------------------------------------

    def arn_accounts(self) -> set[str]:
        """AWS accounts the config's own ARNs name (``eks.admin_principal_arn``, training plans): when exactly one,
        the deployment's account is known without asking AWS."""
        arns = [self.eks.admin_principal_arn, *(g.training_plan_arn for g in self.hyperpod.instance_groups)]
        return {parts[4] for a in arns if a and len(parts := a.split(":")) > 5
                and re.fullmatch(r"[0-9]{12}", parts[4], re.ASCII)}

    def tiered_storage_percent(self) -> int | None:
        """The share of node memory HyperPod's tiered storage takes, or ``None`` when it stays off:
        ``hyperpod.tiered_storage_memory_percent``, else 20 when some endpoint's L2 cache is ``tieredstorage``."""
        if self.hyperpod.tiered_storage_memory_percent is not None:
            return self.hyperpod.tiered_storage_memory_percent
        tiered = any(e.kv_cache.enable_l2_cache and e.kv_cache.l2_cache_backend == "tieredstorage"
                     for e in self.endpoints)
        return TIERED_STORAGE_DEFAULT_PERCENT if tiered else None

    @model_validator(mode="wrap")
    @classmethod
    def _one_endpoint_file(cls, data: Any, handler: Any) -> Any:
        """A file in the one-endpoint shape (top-level ``model:`` and ``endpoint:``, no ``endpoints:``) loads as
        ``endpoints: [<endpoint with model>]``; remembered so that messages name its keys as written. A file that
        mixes the shapes is refused in one line."""
        shape = False
        if isinstance(data, dict):
            data, shape = _fold_one_endpoint(_move_deprecated_keys(data))
        config = handler(data)
        if shape and isinstance(config, Config):
            config._one_endpoint_shape = True
        return config

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





def _fold_one_endpoint(data: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """``data`` with a top-level ``model:``/``endpoint:`` folded into ``endpoints``, and whether it was in that
    shape. ``model.existing_bucket_name``/``model.delete_on_destroy`` were read into ``model_bucket`` before."""
    has_model, has_endpoint = data.get("model") is not None, data.get("endpoint") is not None
    if "endpoints" in data:
        for key, present in (("model", has_model), ("endpoint", has_endpoint)):
            if present:
                raise ConfigError(f"{key} must be left out when endpoints is set (each entry of endpoints holds its "
                                  f"own {'model' if key == 'model' else 'endpoint keys'}: endpoints[].model), got "
                                  f"a top-level {key} block")
        return data, False
    endpoint = data.get("endpoint") if has_endpoint else {}
    rest = {k: v for k, v in data.items() if k not in ("model", "endpoint")}
    if not isinstance(endpoint, dict):
        return {**rest, "endpoints": (endpoint,)}, True  # the type error then names `endpoint`
    if endpoint.get("model") is not None:
        # Its keys would be read as the model's while the deprecated bucket keys (read from the top-level model
        # only) were dropped, and messages would name them model.x.
        raise ConfigError(f"endpoint.model must be the top-level model: in the one-endpoint shape (model: and "
                          f"endpoint:) write the model's keys under model:, or write endpoints: (each entry with "
                          f"its own model), got {shown(endpoint['model'])}")
    folded = {k: v for k, v in endpoint.items() if k != "model"}  # `model: null` counts as not set
    if has_model:
        folded["model"] = data["model"]
    return {**rest, "endpoints": (folded,)}, True


def _endpoint_slo(deployment: SloConfig, own: SloConfig | None) -> SloConfig:
    """``deployment`` with the keys ``own`` names replaced."""
    if own is None or not own.model_fields_set:
        return deployment
    return deployment.model_copy(update={k: getattr(own, k) for k in own.model_fields_set})


def _move_deprecated_keys(data: Any) -> Any:
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
