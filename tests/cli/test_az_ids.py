"""``validate`` knows the AZ IDs AWS publishes per region (``hyperpod_core.config.az_ids``) and says when one does not
exist, offline: the GPU AZ ID, an instance group's and the two control-plane ones.

Expected IDs: AWS documentation, "AWS Availability Zones"
(https://docs.aws.amazon.com/global-infrastructure/latest/regions/aws-availability-zones.html, read 2026-12-03):
us-west-2 has usw2-az1 to usw2-az4; us-east-1 has use1-az1 to use1-az6, and EKS creates no control plane in use1-az3
(EKS user guide, subnet requirements).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperpod_core.config import AWS_REGIONS, EKS_UNSUPPORTED_AZ_IDS, az_id_prefix, default_control_plane_az_ids
from hyperpod_core.config.az_ids import PUBLISHED_AZ_IDS, published_az_ids

USW2 = "usw2-az1, usw2-az2, usw2-az3, usw2-az4"


def _validate(run_cli: Callable[..., Any], tmp_path: Path, data: dict[str, Any]) -> Any:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    return run_cli("validate", "--config", str(path))


def _set(data: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    data = copy.deepcopy(data)
    *parents, leaf = dotted.split(".")
    node: Any = data
    for key in parents:
        node = node[int(key)] if key.isdigit() else node.setdefault(key, {})
    node[int(leaf) if leaf.isdigit() else leaf] = value
    return data


def test_an_az_id_that_does_not_exist_is_one_line_with_the_regions_real_ids(run_cli, tmp_path,
                                                                            default_config_dict) -> None:
    result = _validate(run_cli, tmp_path, _set(default_config_dict, "network.gpu_availability_zone_id", "usw2-az9"))
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (f"error: network.gpu_availability_zone_id must be an AZ ID of us-west-2 ({USW2}), "
                             "got 'usw2-az9'\n")


def test_an_instance_groups_az_id_that_does_not_exist_is_named(run_cli, tmp_path, default_config_dict) -> None:
    data = _set(default_config_dict, "network.gpu_availability_zone_id", "usw2-az5")
    for group in data["hyperpod"]["instance_groups"]:
        group["availability_zone_id"] = "usw2-az5"
    result = _validate(run_cli, tmp_path, data)
    assert result.exit_code == 2
    assert result.stderr == (f"error: hyperpod.instance_groups[0].availability_zone_id must be an AZ ID of us-west-2 "
                             f"({USW2}), got 'usw2-az5'\n")


def test_a_control_plane_az_id_that_does_not_exist_is_named_with_the_ids_eks_supports(
        run_cli, tmp_path, default_config_dict) -> None:
    data = _set(default_config_dict, "region", "us-east-1")
    data = _set(data, "network.gpu_availability_zone_id", "use1-az2")
    data = _set(data, "network.control_plane_availability_zone_ids", ["use1-az1", "use1-az7"])
    result = _validate(run_cli, tmp_path, data)
    assert result.exit_code == 2
    assert result.stderr == ("error: network.control_plane_availability_zone_ids[1] must be an AZ ID of us-east-1 "
                             "where EKS creates control planes (use1-az1, use1-az2, use1-az4, use1-az5, use1-az6), "
                             "got 'use1-az7'\n")


def test_the_table_holds_every_region_the_config_allows_but_china_and_govcloud() -> None:
    """The page lists the aws partition; the regions it lacks keep the prefix check (one per region, and a note)."""
    assert AWS_REGIONS - set(PUBLISHED_AZ_IDS) == {"cn-north-1", "cn-northwest-1", "us-gov-east-1", "us-gov-west-1"}
    assert set(PUBLISHED_AZ_IDS) <= AWS_REGIONS
    for region, ids in PUBLISHED_AZ_IDS.items():
        assert ids and all(i.startswith(f"{az_id_prefix(region)}-az") for i in ids), region
        assert list(ids) == sorted(set(ids), key=lambda i: int(i.rsplit("az", 1)[1])), region


def test_a_region_without_the_table_keeps_the_prefix_check_and_says_so(run_cli, tmp_path,
                                                                      default_config_dict) -> None:
    data = _set(default_config_dict, "region", "us-gov-west-1")
    data = _set(data, "network.gpu_availability_zone_id", "usgw1-az9")
    data = _set(data, "eks.admin_principal_arn", None)
    result = _validate(run_cli, tmp_path, data)
    assert result.exit_code == 0, result.output
    assert published_az_ids("us-gov-west-1") is None
    assert ("  AZ IDs: us-gov-west-1 is not in the offline table of published AZ IDs (its region prefix is checked); "
            "preflight checks them in your account") in result.stdout
    bad = _validate(run_cli, tmp_path, _set(data, "network.gpu_availability_zone_id", "usw2-az1"))
    assert bad.stderr == ("error: network.gpu_availability_zone_id must be an AZ ID of us-gov-west-1 such as "
                          "usgw1-az1, got 'usw2-az1'\n")


@pytest.mark.parametrize("region", sorted(PUBLISHED_AZ_IDS))
def test_the_default_control_plane_az_ids_exist_and_eks_supports_them(region: str) -> None:
    ids = default_control_plane_az_ids(region)
    assert set(ids) <= set(PUBLISHED_AZ_IDS[region]) and not set(ids) & EKS_UNSUPPORTED_AZ_IDS
