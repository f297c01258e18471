"""Values the manifests need that only exist after ``cdk deploy``: read from the CDK outputs file.

``cdk deploy --outputs-file cdk-outputs.json`` writes ``{"<stack name>": {"<output id>": "<value>"}}``.
Output IDs are the constants of :mod:`hyperpod_core.outputs`; every stack is searched for them.

The deployment's values are resolved once (:class:`DeploymentInputs`); each endpoint adds its model's bucket and
revision (:func:`endpoint_inputs`, an :class:`EndpointInputs` per endpoint, what its charts take).

Precedence, per value (each resolved value records where it came from, and :meth:`DeploymentInputs.lines`
prints one line per value):

* model bucket (per endpoint): the endpoint's ``model.bucket``, else ``model_bucket.existing_name`` in the config,
  else ``ModelBucketName`` from the outputs file, else the placeholder ``UNRESOLVED-ModelBucketName``. The
  placeholder is deliberately *not* a valid bucket name: a manifest synthesized before ``cdk deploy`` can never read
  from somebody else's bucket.
  There is no derived bucket name (the CDK side names the bucket itself, scoped to account and region).
* region: always ``region`` from the config; an outputs file with a different ``Region``, or whose AMP workspace
  endpoint (``https://aps-workspaces.<region>.amazonaws.com/...``) is in another region, is an error.
* ownership: an outputs file whose stack names, cluster names, ARN account, ARN region, ``Region`` or AMP
  endpoint region do not belong to the config is refused before anything is read from it
  (:func:`check_ownership`).
* AMP workspace endpoint (KEDA ``serverAddress``): ``AmpWorkspaceEndpoint`` from the outputs file, else a
  placeholder workspace ``ws-UNRESOLVED-AmpWorkspaceEndpoint`` (only used when some endpoint autoscales).
* GPU availability-zone *name* (``pdSpec.topologySpec.availabilityZone``): ``GpuAvailabilityZone`` from
  the outputs file, else omitted. The config holds the AZ *ID*; the name differs per account.
* EKS cluster ARN (the endpoints' ``spec.tags`` value of ``eks-cluster-arn``): ``EksClusterArn`` from the
  outputs file (it must name ``eks.cluster_name`` in ``region``), else derived from the config when it names
  exactly one account (``eks.admin_principal_arn``, training plans): ``arn:<partition>:eks:<region>:<account>:
  cluster/<eks.cluster_name>``, the format EKS gives every cluster; else the placeholder
  ``UNRESOLVED-EksClusterArn``. The janitor and ``sweep`` read a tag value with that prefix as naming no cluster,
  and the ``deployment`` tag (always the config's ``name``) still ties the resources to this deployment.
* role ARNs (inference execution, KEDA): reported for the record; the InferenceEndpointConfig has no
  field for them (the operator add-on holds them).
* model revision (per endpoint; the last segment of vLLM's ``--model`` and of the weights' mount path): the
  endpoint's ``model.revision``, else ``sha256-<16 hex>`` of the manifest ``hyperpod-dpd stage-model`` staged, read
  from its local record (:mod:`hyperpod_core.staged_model`, ``staged-model.json`` beside the outputs file) when the
  record holds the endpoint's prefix and bucket, else the placeholder ``UNRESOLVED-ModelRevision``: two stagings
  under one name must never share an LMCache key, so weights of unknown identity are not deployable. A staged
  revision is also where the weights are (``<model.s3_prefix><revision>/``,
  :func:`hyperpod_core.staged_model.weights_prefix`).

Each placeholder has its own remedy (:func:`remedy`): the deploy outputs come from ``cdk deploy --outputs-file``,
the revision from ``stage-model`` or ``model.revision``. ``--require-outputs`` turns any placeholder into an
error, for the apply path.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Final

from hyperpod_core import outputs, staged_model
from hyperpod_core.config import Config, aws_partition, is_bucket_name
from hyperpod_core.config.spec import EndpointSpec
from hyperpod_core.errors import ConfigError, shown
from hyperpod_core.names import IAM_ROLE_ARN_PATTERN

#: Proposed output of the network stack: the AZ *name* of the GPU subnet (``us-west-2b``).
GPU_AVAILABILITY_ZONE: Final = outputs.GPU_AVAILABILITY_ZONE

PLACEHOLDER_PREFIX: Final = "UNRESOLVED-"
_AMP_RE = re.compile(r"^https://aps-workspaces\.[a-z0-9-]+\.amazonaws\.com/workspaces/ws-[a-zA-Z0-9-]+$", re.ASCII)
#: The region of an AMP workspace endpoint: its host is the data-plane endpoint
#: ``aps-workspaces.<region>.amazonaws.com`` (AWS General Reference, "Amazon Managed Service for Prometheus
#: endpoints and quotas").
_AMP_REGION_RE = re.compile(r"^https://aps-workspaces\.(?P<region>[a-z0-9-]+)\.amazonaws\.com/", re.ASCII)
_ARN_RE = re.compile(IAM_ROLE_ARN_PATTERN, re.ASCII)
_AZ_NAME_RE = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d[a-z]$", re.ASCII)


@dataclass(frozen=True, kw_only=True)
class Resolved:
    """One input value and the place it came from."""

    value: str | None
    source: str
    placeholder: bool = False


def _line(name: str, r: Resolved) -> str:
    return f"input {name} = {r.value if r.value is not None else '-'} ({r.source})"


@dataclass(frozen=True, kw_only=True)
class SharedInputs:
    """The deploy-time values every endpoint of a deployment shares, and the deployment's model bucket."""

    model_bucket_name: Resolved
    """The deployment's bucket (``model_bucket``); in :class:`EndpointInputs`, the endpoint's (its ``model.bucket``
    when that names another)."""
    region: Resolved
    amp_workspace_endpoint: Resolved
    gpu_availability_zone: Resolved
    inference_execution_role_arn: Resolved
    keda_role_arn: Resolved
    eks_cluster_arn: Resolved


@dataclass(frozen=True, kw_only=True)
class EndpointInputs(SharedInputs):
    """The deploy-time values of one endpoint's manifests: the deployment's, and its model's bucket and revision."""

    model_revision: Resolved

    def lines(self) -> list[str]:
        """``input <name> = <value> (<source>)``, one line per value, for the synth log."""
        return [_line(f.name, getattr(self, f.name)) for f in fields(self)]


#: The values each endpoint resolves for itself (its model's); the others are the deployment's.
ENDPOINT_VALUES: Final = ("model_bucket_name", "model_revision")


@dataclass(frozen=True, kw_only=True)
class DeploymentInputs(SharedInputs):
    """The deploy-time values of a deployment: the ones its endpoints share, and each endpoint's own
    (:attr:`by_endpoint`)."""

    by_endpoint: Mapping[str, EndpointInputs] = dataclasses.field(default_factory=dict)
    """Endpoint name -> its inputs, in the config's order."""

    def endpoint(self, name: str) -> EndpointInputs:
        """The inputs of endpoint ``name``."""
        return self.by_endpoint[name]

    def lines(self) -> list[str]:
        """``input <name> = <value> (<source>)``, one line per value, for the synth log: one endpoint's as
        :meth:`EndpointInputs.lines` gives them; with several, the shared values once, then each endpoint's own as
        ``input <name>[<endpoint>]``."""
        if len(self.by_endpoint) == 1:
            return next(iter(self.by_endpoint.values())).lines()
        shared = [_line(f.name, getattr(self, f.name)) for f in fields(SharedInputs)
                  if f.name not in ENDPOINT_VALUES]
        own = [_line(f"{value}[{name}]", getattr(e, value)) for name, e in self.by_endpoint.items()
               for value in ENDPOINT_VALUES]
        return shared + own


#: Stack-name suffixes of one deployment (``<config name>-<suffix>``; ``hyperpod_infra.app_builder.build``).
STACK_SUFFIXES: Final = ("network", "cluster", "hyperpod", "observability", "platform", "observability-addon")
_ARN_PARTS_RE = re.compile(r"^arn:aws[a-z-]*:(?P<service>[a-z0-9-]+):(?P<region>[a-z0-9-]*):(?P<account>\d{12}):")


def stack_names(config: Config) -> tuple[str, ...]:
    """The CloudFormation stack names ``config`` deploys (observability included whether enabled or not)."""
    return tuple(f"{config.name}-{suffix}" for suffix in STACK_SUFFIXES)


def check_ownership(config: Config, path: Path, data: dict[str, dict[str, object]]) -> None:
    """Refuse an outputs file written by another deployment: stack names, cluster names, account, region.

    One line naming the offending value (ConfigError, exit 2). The outputs are what ``cdk deploy
    --outputs-file`` wrote for this config's stacks, so each must carry this config's names.
    """
    where = f"outputs file {str(path)!r}"
    allowed = stack_names(config)
    for stack in sorted(data):
        if stack not in allowed:
            raise ConfigError(f"{where}: stack {stack!r} does not belong to config name {config.name!r} "
                              f"(expected {', '.join(allowed)}); outputs file of another deployment?")
    checks = ((outputs.EKS_CLUSTER_NAME, config.eks.cluster_name, "eks.cluster_name"),
              (outputs.HYPERPOD_CLUSTER_NAME, config.hyperpod.cluster_name, "hyperpod.cluster_name"))
    accounts: dict[str, str] = {}
    for stack in sorted(data):
        for key, value in data[stack].items():
            for output_id, expected, field in checks:
                if key == output_id and str(value) != expected:
                    raise ConfigError(f"{where}: {stack}.{key} is {str(value)!r} but config {field} is "
                                      f"{expected!r} (outputs file of another deployment?)")
            _check_region(config.region, where, f"{stack}.{key}", key, str(value))
            m = _ARN_PARTS_RE.match(str(value))
            if m is None:
                continue
            if m["region"] and m["region"] != config.region:
                raise ConfigError(f"{where}: {stack}.{key} is in region {m['region']!r} but config region is "
                                  f"{config.region!r} (outputs file of another deployment?)")
            accounts.setdefault(m["account"], f"{stack}.{key}")
    expected_accounts = config.arn_accounts()  # admin principal, training plans: the outputs must match
    if len(accounts) > 1:
        raise ConfigError(f"{where}: outputs name several AWS accounts ({', '.join(sorted(accounts))}); "
                          f"one deployment lives in one account")
    for account, source in accounts.items():
        if expected_accounts and account not in expected_accounts:
            raise ConfigError(f"{where}: {source} is in account {account} but the config's ARNs name account "
                              f"{', '.join(sorted(expected_accounts))} (outputs file of another deployment?)")


def _check_region(expected: str, where: str, source: str, key: str, value: str) -> None:
    """The outputs that name a region without being an ARN (``Region`` itself and the AMP workspace endpoint) must
    name ``expected``, the config's."""
    region = value if key == outputs.REGION else None
    if key == outputs.AMP_WORKSPACE_ENDPOINT:
        m = _AMP_REGION_RE.match(value)
        region = m["region"] if m else None
    if region is not None and region != expected:
        what = "is" if key == outputs.REGION else "is in region"
        raise ConfigError(f"{where}: {source} {what} {region!r} but config region is {expected!r} "
                          f"(outputs file of another deployment?)")


def eks_cluster_arn(config: Config, found: dict[str, tuple[str, str]], where: str) -> Resolved:
    """The EKS cluster's ARN: from the outputs (``found``, :func:`read_outputs_file`), derived, or a placeholder
    (module docstring). ``where`` names the outputs file in messages."""
    name = config.eks.cluster_name
    if outputs.EKS_CLUSTER_ARN in found:
        stack, value = found[outputs.EKS_CLUSTER_ARN]
        source = f"outputs file {where}: {stack}.{outputs.EKS_CLUSTER_ARN}"
        pattern = rf"arn:aws[a-z-]*:eks:{re.escape(config.region)}:\d{{12}}:cluster/{re.escape(name)}"
        if not re.fullmatch(pattern, value, re.ASCII):
            raise ConfigError(f"{source} must be the ARN of EKS cluster {name!r} in {config.region} "
                              f"(arn:aws:eks:{config.region}:<account>:cluster/{name}), got {value!r}")
        return Resolved(value=value, source=source)
    accounts = sorted(config.arn_accounts())
    if len(accounts) == 1:
        return Resolved(value=f"arn:{aws_partition(config.region)}:eks:{config.region}:{accounts[0]}:cluster/{name}",
                        source="derived: config region, the account of its ARNs and eks.cluster_name")
    return Resolved(value=PLACEHOLDER_PREFIX + outputs.EKS_CLUSTER_ARN, placeholder=True,
                    source=f"PLACEHOLDER: no {outputs.EKS_CLUSTER_ARN} and no account in the config (pass "
                           f"--outputs-file); the tag then names no cluster, the deployment tag still holds")


def _load_outputs(path: Path) -> dict[str, dict[str, object]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"outputs file {str(path)!r} cannot be read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"outputs file {str(path)!r} must be UTF-8 JSON, got byte at offset {exc.start}") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"outputs file {str(path)!r} is not valid JSON (line {exc.lineno})") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ConfigError(f"outputs file {str(path)!r} must map stack names to {{output id: value}} objects")
    return data


def read_outputs_file(path: Path, config: Config | None = None) -> dict[str, tuple[str, str]]:
    """``{output id: (stack name, value)}`` across all stacks of a ``cdk deploy --outputs-file`` file.

    With ``config``, the file must belong to it (:func:`check_ownership`).
    """
    data = _load_outputs(path)
    if config is not None:
        check_ownership(config, path, data)
    found: dict[str, tuple[str, str]] = {}
    for stack in sorted(data):
        for key, value in data[stack].items():
            if key in found and found[key][1] != value:
                raise ConfigError(f"outputs file {str(path)!r}: output {key} differs between stacks "
                                  f"{found[key][0]} and {stack}")
            found.setdefault(key, (stack, str(value)))
    return found


def model_revision(spec: EndpointSpec, staged_model_file: Path | None, bucket: Resolved) -> Resolved:
    """The endpoint's ``model.revision``, else the staged manifest's digest from ``staged_model_file`` (its entry of
    the endpoint's prefix and bucket only), else a placeholder (module docstring)."""
    if spec.model.revision is not None:
        return Resolved(value=spec.model.revision, source=f"config: {spec.model_field('revision')}")
    placeholder = PLACEHOLDER_PREFIX + "ModelRevision"
    fix = remedy("model_revision")
    if staged_model_file is None or not staged_model_file.is_file():
        return Resolved(value=placeholder, placeholder=True,
                        source=f"PLACEHOLDER: no {spec.model_field('revision')} and no {staged_model.RECORD_FILE} of "
                               f"staged weights ({fix})")
    prefix = spec.model.s3_prefix
    record = staged_model.find(staged_model_file, s3_prefix=prefix,
                               bucket=None if bucket.placeholder else bucket.value)
    if record is None:
        held = ", ".join(f"s3://{m.bucket}/{m.s3_prefix}" for m in staged_model.read_all(staged_model_file))
        return Resolved(value=placeholder, placeholder=True,
                        source=f"PLACEHOLDER: {staged_model_file} records {held}, not endpoint {spec.name}'s "
                               f"s3://{bucket.value}/{prefix} ({fix})")
    return Resolved(value=record.revision, source=f"{staged_model_file}: manifest of s3://{record.bucket}/"
                                                  f"{record.s3_prefix} ({record.files} files, staged by stage-model)")


def model_bucket(spec: EndpointSpec, deployment_bucket: Resolved) -> Resolved:
    """Where the endpoint's weights are: its ``model.bucket``, else the deployment's bucket."""
    if spec.model.bucket is not None:
        return Resolved(value=spec.model.bucket, source=f"config: {spec.model_field('bucket')}")
    return deployment_bucket


def endpoint_inputs(spec: EndpointSpec, deployment: SharedInputs,
                    staged_model_file: Path | None = None) -> EndpointInputs:
    """Endpoint ``spec``'s inputs: the deployment's values, its model's bucket and revision."""
    bucket = model_bucket(spec, deployment.model_bucket_name)
    shared = {f.name: getattr(deployment, f.name) for f in fields(SharedInputs) if f.name not in ENDPOINT_VALUES}
    return EndpointInputs(**shared, model_bucket_name=bucket,
                          model_revision=model_revision(spec, staged_model_file, bucket))


def resolve_inputs(config: Config, outputs_file: Path | None,
                   staged_model_file: Path | None = None) -> DeploymentInputs:
    """Resolve every deploy-time value for ``config``, the deployment's once and each endpoint's own
    (:meth:`DeploymentInputs.endpoint`); ``outputs_file`` ``None`` means there is none; ``staged_model_file``: the
    record ``stage-model`` wrote (:func:`model_revision`)."""
    found = read_outputs_file(outputs_file, config) if outputs_file is not None else {}
    where = str(outputs_file)
    specs = config.specs()
    deployment = SharedInputs(
        model_bucket_name=_model_bucket_name(config.model_bucket.existing_name, found, where),
        region=Resolved(value=config.region, source="config: region"),  # an outputs file's Region: check_ownership
        amp_workspace_endpoint=_amp_workspace_endpoint(config.region, specs, found, where),
        gpu_availability_zone=_gpu_availability_zone(config.region, config.network.gpu_availability_zone_id,
                                                     found, where),
        inference_execution_role_arn=_role_arn(found, where, outputs.INFERENCE_EXECUTION_ROLE_ARN),
        keda_role_arn=_role_arn(found, where, outputs.KEDA_ROLE_ARN),
        eks_cluster_arn=eks_cluster_arn(config, found, where),
    )
    return DeploymentInputs(**{f.name: getattr(deployment, f.name) for f in fields(SharedInputs)},
                            by_endpoint={s.name: endpoint_inputs(s, deployment, staged_model_file) for s in specs})


def _from_outputs(found: dict[str, tuple[str, str]], where: str, output_id: str) -> Resolved | None:
    """Output ``output_id`` of the outputs file ``where`` (``found``: :func:`read_outputs_file`), or None."""
    if output_id not in found:
        return None
    stack, value = found[output_id]
    return Resolved(value=value, source=f"outputs file {where}: {stack}.{output_id}")


def _model_bucket_name(existing: str | None, found: dict[str, tuple[str, str]], where: str) -> Resolved:
    """``model_bucket.existing_name`` (``existing``; the outputs must agree), else the output, else a placeholder."""
    bucket = _from_outputs(found, where, outputs.MODEL_BUCKET_NAME)
    if existing is not None:
        if bucket is not None and bucket.value != existing:
            raise ConfigError(f"{bucket.source} is {bucket.value!r} but config model_bucket.existing_name "
                              f"is {existing!r}")
        bucket = Resolved(value=existing, source="config: model_bucket.existing_name")
    if bucket is not None and not is_bucket_name(bucket.value or ""):
        # The name goes into the manifests' S3 model source: never a name S3 could not have created.
        raise ConfigError(f"{bucket.source} must be a valid S3 bucket name (3-63 lowercase letters, digits, "
                          f"'.', '-'), got {shown(bucket.value)}")
    if bucket is None:
        bucket = Resolved(value=PLACEHOLDER_PREFIX + outputs.MODEL_BUCKET_NAME, placeholder=True,
                          source=f"PLACEHOLDER: no {outputs.MODEL_BUCKET_NAME} (pass --outputs-file)")
    return bucket


def _amp_workspace_endpoint(region: str, specs: Sequence[EndpointSpec], found: dict[str, tuple[str, str]],
                            where: str) -> Resolved:
    """The output without its trailing slash; without it a placeholder workspace when some endpoint's autoscaling
    needs one."""
    amp = _from_outputs(found, where, outputs.AMP_WORKSPACE_ENDPOINT)
    if amp is not None:
        normalized = (amp.value or "").rstrip("/")
        if not _AMP_RE.fullmatch(normalized):
            raise ConfigError(f"{amp.source} must look like https://aps-workspaces.<region>.amazonaws.com/"
                              f"workspaces/ws-<id>, got {amp.value!r}")
        return Resolved(value=normalized, source=amp.source)
    if any(s.endpoint.autoscaling.enabled for s in specs):
        return Resolved(
            value=(f"https://aps-workspaces.{region}.amazonaws.com/workspaces/ws-"
                   f"{PLACEHOLDER_PREFIX}{outputs.AMP_WORKSPACE_ENDPOINT}"),
            placeholder=True, source=f"PLACEHOLDER: no {outputs.AMP_WORKSPACE_ENDPOINT} (pass --outputs-file)")
    keys = ", ".join(s.field("autoscaling.enabled") for s in specs)
    return Resolved(value=None, source=f"not needed: {keys} {'is' if len(specs) == 1 else 'are'} false")


def _gpu_availability_zone(region: str, zone_id: str, found: dict[str, tuple[str, str]], where: str) -> Resolved:
    """The GPU subnet's AZ name from the outputs (one of ``region``), else omitted (every GPU node is in the AZ
    ``zone_id``)."""
    zone = _from_outputs(found, where, GPU_AVAILABILITY_ZONE)
    if zone is None:
        return Resolved(value=None, source=f"omitted: no {GPU_AVAILABILITY_ZONE} output; sameAZ still holds "
                                           f"and every GPU node is in {zone_id}")
    if not (_AZ_NAME_RE.fullmatch(zone.value or "") and (zone.value or "").startswith(region)):
        raise ConfigError(f"{zone.source} must be an AZ name in {region} such as {region}a, got {zone.value!r}")
    return zone


def _role_arn(found: dict[str, tuple[str, str]], where: str, output_id: str) -> Resolved:
    """A role ARN from the outputs, for the record only (no manifest field takes it)."""
    r = _from_outputs(found, where, output_id)
    if r is None:
        return Resolved(value=None, source=f"not in outputs (informational: the manifest has no field for "
                                           f"{output_id})")
    if not _ARN_RE.fullmatch(r.value or ""):
        raise ConfigError(f"{r.source} must be an IAM role ARN, got {r.value!r}")
    return Resolved(value=r.value, source=r.source + " (informational)")


def resolve_in_folder(config: Config, folder: Path) -> DeploymentInputs:
    """The inputs as the synth of an environment folder resolves them: its outputs file
    (:data:`hyperpod_core.outputs.DEFAULT_OUTPUTS_FILE`) and the staged-weights record beside it, each when present."""
    outputs_file, record = folder / outputs.DEFAULT_OUTPUTS_FILE, folder / staged_model.RECORD_FILE
    return resolve_inputs(config, outputs_file if outputs_file.is_file() else None,
                          record if record.is_file() else None)


def placeholders(inputs: EndpointInputs | DeploymentInputs) -> list[str]:
    """Names of the values still holding a placeholder: one endpoint's, or (of a deployment's inputs) those some
    endpoint still misses, in :class:`EndpointInputs`'s order."""
    every = inputs.by_endpoint.values() if isinstance(inputs, DeploymentInputs) else (inputs,)
    return [f.name for f in fields(EndpointInputs) if any(getattr(e, f.name).placeholder for e in every)]


#: What resolves the placeholder of the staged weights' revision (the one input no deploy writes).
REVISION_REMEDY: Final = "run hyperpod-dpd stage-model SRC (it records the revision) or set model.revision"


def remedy(name: str, deploy: str | None = None) -> str:
    """What resolves the placeholder of input ``name`` (one of :func:`placeholders`): the revision comes from
    ``stage-model`` or ``model.revision``; every other value from the deploy outputs (``deploy``: the command that
    writes them, when the caller knows it)."""
    if name == "model_revision":
        return REVISION_REMEDY
    return deploy or f"deploy with --outputs-file {outputs.DEFAULT_OUTPUTS_FILE}"


def remedies(missing: list[str], deploy: str | None = None) -> list[str]:
    """One line per remedy, naming the unresolved values it resolves: ``<names>: <remedy>``."""
    grouped: dict[str, list[str]] = {}
    for name in missing:
        grouped.setdefault(remedy(name, deploy), []).append(name)
    return [f"{', '.join(names)}: {fix}" for fix, names in grouped.items()]
