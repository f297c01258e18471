"""Bad configs fail before any stack is built, with the one-line error from config.py."""

from __future__ import annotations

import copy

import pytest

from hyperpod_infra.config import parse_config
from hyperpod_infra.errors import ConfigError


def _with_groups(default_config_dict: dict, *changes: dict) -> dict:
    data = copy.deepcopy(default_config_dict)
    for group, change in zip(data["hyperpod"]["instance_groups"], changes, strict=False):
        group.update(change)
    return data


def _error(data: dict) -> str:
    with pytest.raises(ConfigError) as exc:
        parse_config(data)
    message = str(exc.value)
    assert "\n" not in message
    return message


def test_fails_when_p5_groups_are_in_two_azs(default_config_dict) -> None:
    data = _with_groups(default_config_dict, {"availability_zone_id": "usw2-az1"},
                        {"availability_zone_id": "usw2-az2"})
    assert _error(data).startswith("hyperpod.instance_groups[*].availability_zone_id must resolve to exactly "
                                   "one AZ ID")


def test_fails_when_the_gpu_subnet_cannot_address_the_instances(default_config_dict) -> None:
    data = _with_groups(default_config_dict, {"instance_count": 500})
    message = _error(data)
    assert message.startswith("network.gpu_cidr must hold")
    assert "got '10.1.0.0/16'" in message


def test_fails_when_an_instance_type_has_no_efa_rdma(default_config_dict) -> None:
    data = _with_groups(default_config_dict, {"instance_type": "ml.g5.48xlarge"})
    assert _error(data).startswith("hyperpod.instance_groups[0].instance_type must be an EFA RDMA instance type")


def test_fails_when_kubernetes_version_is_not_supported_by_hyperpod(default_config_dict) -> None:
    data = copy.deepcopy(default_config_dict)
    data["eks"]["kubernetes_version"] = "1.27"
    assert _error(data).startswith("eks.kubernetes_version must be one of")


def test_cli_prints_one_line_and_exits_2(tmp_path, default_config_dict) -> None:
    import subprocess
    import sys

    import yaml
    from tests.conftest import REPO_ROOT

    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(_with_groups(default_config_dict, {"instance_type": "ml.g5.48xlarge"})))
    result = subprocess.run([sys.executable, str(REPO_ROOT / "app.py")], capture_output=True, text=True,
                            env={"HYPERPOD_CONFIG": str(bad), "PATH": "/usr/bin:/bin",
                                 "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"},
                            cwd=tmp_path, check=False, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "instance_type must be an EFA RDMA instance type" in result.stderr
