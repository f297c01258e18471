"""``scripts/refresh-addon-versions`` against the real EKS service model.

moto does not implement ``eks:DescribeAddonVersions`` (moto's EKS backend covers clusters, node groups, Fargate
profiles and add-ons, not add-on versions), so the client is a real botocore EKS client with botocore's
``Stubber``: every request is validated against the service model's input shape and every canned answer against
its output shape, exactly as botocore would parse the real service's reply.
"""

from __future__ import annotations

import datetime
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import boto3
import pytest
from botocore.stub import Stubber

from hyperpod_core import pins

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "refresh-addon-versions"
TODAY = datetime.date(2026, 12, 1)


@pytest.fixture(scope="module")
def script() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("refresh_addon_versions", str(SCRIPT))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[loader.name] = module  # dataclasses resolve annotations through sys.modules
    loader.exec_module(module)
    return module


@pytest.fixture()
def eks():
    client = boto3.client("eks", region_name="us-west-2", aws_access_key_id="test", aws_secret_access_key="test")
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def _answer(pin: pins.AddonPin, cluster_versions: tuple[str, ...], *, other: str = "v0.0.1-eksbuild.1") -> dict:
    """A DescribeAddonVersions reply (output shape of the EKS model) offering ``pin.version`` for
    ``cluster_versions`` next to an unrelated version."""
    return {"addons": [{
        "addonName": pin.name, "type": "networking", "publisher": "eks", "owner": "aws",
        "addonVersions": [
            {"addonVersion": pin.version, "architecture": ["amd64", "arm64"],
             "compatibilities": [{"clusterVersion": v, "platformVersions": ["*"], "defaultVersion": False}
                                 for v in cluster_versions]},
            {"addonVersion": other, "architecture": ["amd64"],
             "compatibilities": [{"clusterVersion": "1.99", "platformVersions": ["*"], "defaultVersion": True}]},
        ]}]}


def _stub_table(stubber: Stubber, overrides: dict[str, tuple[str, ...] | None]) -> None:
    for pin in pins.ADDONS:
        versions = overrides.get(pin.name, pin.kubernetes_versions)
        answer = _answer(pin, versions) if versions is not None else {"addons": []}
        stubber.add_response("describe_addon_versions", answer, {"addonName": pin.name})


def test_unchanged_table_exits_zero(script, eks, capsys) -> None:
    client, stubber = eks
    _stub_table(stubber, {})
    assert script.refresh("us-west-2", client=client, today=TODAY) == 0
    out = capsys.readouterr().out
    assert "pins.ADDONS matches EKS (checked 2026-12-01)" in out and "CHANGED" not in out


def test_changed_rows_are_printed_as_lines_for_pins(script, eks, capsys) -> None:
    client, stubber = eks
    _stub_table(stubber, {"vpc-cni": ("1.33", "1.34"), "aws-fsx-csi-driver": None})
    assert script.refresh("us-west-2", client=client, today=TODAY) == 1
    out = capsys.readouterr().out
    assert 'vpc-cni: kubernetes_versions=("1.33", "1.34"), checked="2026-12-01"' in out
    assert f"aws-fsx-csi-driver: version {pins.FSX_CSI.version} is not offered any more" in out
    assert out.count("CHANGED") == 2


def test_all_pages_are_read(script, eks) -> None:
    client, stubber = eks
    stubber.add_response("describe_addon_versions", {"addons": [], "nextToken": "page-2"},
                         {"addonName": pins.COREDNS.name})
    stubber.add_response("describe_addon_versions", _answer(pins.COREDNS, ("1.32", "1.33")),
                         {"addonName": pins.COREDNS.name, "nextToken": "page-2"})
    assert script.offered_versions(client, pins.COREDNS.name, pins.COREDNS.version) == ("1.32", "1.33")


def test_aws_errors_are_one_line_and_exit_two(script, eks, capsys) -> None:
    client, stubber = eks
    stubber.add_client_error("describe_addon_versions", service_error_code="AccessDeniedException",
                             service_message="User is not authorized to perform: eks:DescribeAddonVersions",
                             http_status_code=403)
    assert script.refresh("us-west-2", client=client, today=TODAY) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: eks:DescribeAddonVersions in us-west-2 failed (AccessDeniedException)")
    assert err.count("\n") == 1
