"""What every preflight check is built from, split from :mod:`hyperpod_dpd.preflight` (which re-exports it):
the result type, the facts the checks take (:class:`Target`), the AWS clients, and the one-line ``UNKNOWN``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from botocore.exceptions import ClientError

from hyperpod_core import paths, pins
from hyperpod_core.config.cluster import EksConfig, HyperPodConfig, NetworkConfig
from hyperpod_dpd import aws
from hyperpod_dpd.aws import explain

Status = Literal["PASS", "WARN", "FAIL", "UNKNOWN"]
#: Statuses that make the command exit 1 (and ``"ok": false``).
NOT_OK: frozenset[str] = frozenset({"FAIL", "UNKNOWN"})
DEFAULT_QUALIFIER = "hnb659fds"
#: aws-cdk-lib's synthesized templates refuse bootstrap versions 1-5 (the CheckBootstrapVersion rule).
MIN_BOOTSTRAP_VERSION = 6
TOTAL_HYPERPOD_QUOTA = "Total number of instances allowed across SageMaker HyperPod clusters"
VPC_QUOTA, NAT_QUOTA, EIP_QUOTA = "VPCs per Region", "NAT gateways per Availability Zone", "EC2-VPC Elastic IPs"



@dataclass(frozen=True, kw_only=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""


@dataclass(frozen=True, kw_only=True)
class ModelBucket:
    """A bucket model weights are read from that the deployment does not create, with the key the config names."""

    name: str
    kms_key_arn: str | None
    field: str
    """The key that names the bucket, for messages: ``model_bucket.existing_name`` or ``endpoints[i].model.bucket``."""
    key_field: str
    """The key that names its KMS key: ``model_bucket.existing_kms_key_arn`` or ``endpoints[i].model.kms_key_arn``."""
    endpoints: tuple[str, ...] = ()
    """The endpoints whose own ``model.bucket`` it is; empty for the deployment's bucket."""

    @property
    def label(self) -> str:
        """``model bucket``, or ``model bucket of <endpoints>`` for an endpoint's own bucket (check names)."""
        return "model bucket" + (f" of {', '.join(self.endpoints)}" if self.endpoints else "")


@dataclass(frozen=True, kw_only=True)
class Target:
    """What preflight checks: the deployment's facts, read from the config by the command
    (:func:`hyperpod_dpd.commands.preflight.target`)."""

    deployment: str
    """The config's ``name`` (stack names)."""
    region: str
    network: NetworkConfig
    eks: EksConfig
    hyperpod: HyperPodConfig
    accounts: frozenset[str]
    """The AWS accounts the config's own ARNs name (``Config.arn_accounts``)."""
    model_buckets: tuple[ModelBucket, ...]
    """Each bucket the weights are read from that the deployment does not create, once."""


def make_clients(region: str) -> Clients:
    """Real clients (bounded retries) in ``region``."""
    return Clients(lambda service: aws.client(service, region))


class Clients:
    """boto3 clients by (service, purpose), created on first use; tests hand in moto or stubbed clients."""

    def __init__(self, factory: Callable[[str], Any]) -> None:
        self._factory = factory
        self._cache: dict[tuple[str, str], Any] = {}
        self.quota_names: dict[str, dict[str, dict[str, Any]]] = {}

    def get(self, service: str, purpose: str = "") -> Any:
        key = (service, purpose)
        if key not in self._cache:
            self._cache[key] = self._factory(service)
        return self._cache[key]

    def put(self, service: str, purpose: str, client: Any) -> None:
        self._cache[(service, purpose)] = client


def addon_pins() -> tuple[pins.AddonPin, ...]:
    """The pinned EKS add-ons (``pins.ADDONS``)."""
    return tuple(pins.ADDONS)


def bootstrap_qualifier() -> str:
    """``@aws-cdk/core:bootstrapQualifier`` from the checkout's cdk.json, else (or without a checkout) the CDK
    default."""
    if paths.CHECKOUT is None:
        return DEFAULT_QUALIFIER
    try:
        context = json.loads((paths.CHECKOUT / "cdk.json").read_text()).get("context", {})
    except (OSError, ValueError):
        return DEFAULT_QUALIFIER
    return str(context.get("@aws-cdk/core:bootstrapQualifier", DEFAULT_QUALIFIER))


def _error(exc: Exception) -> str:
    """``<code>: <one line>`` of a botocore error (an HTML page reduced to its title)."""
    e = explain(exc)
    return f"{e.code}: {e.message}".rstrip(": ")


def _code(exc: Exception) -> str:
    return exc.response.get("Error", {}).get("Code", "") if isinstance(exc, ClientError) else ""


def _unknown(name: str, what: str, exc: Exception, fix: str) -> Check:
    """A check that could not complete: what it could not do, the error in one line, and the fix the error's code
    calls for (``fix`` when the code calls for nothing in particular)."""
    e = explain(exc)
    return Check(name=name, status="UNKNOWN", detail=f"could not {what} ({e.code}: {e.message})".replace(": )", ")"),
                 fix=e.fix or fix)
