"""Pytest fixtures shared by the day-2 command tests (imported by each test module, no conftest needed)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from day2_fakes import EKS_CLUSTER, HYPERPOD_CLUSTER, FakeCluster, deployed_at, kube_server

from hyperpod_dpd.app import main

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CONFIG = REPO_ROOT / "config" / "default.yaml"
TWO_MODELS = REPO_ROOT / "config" / "examples" / "two-models.yaml"
#: The endpoints of config/examples/two-models.yaml, in its order.
FLEET = ("llama-3-3-70b", "llama-3-1-8b")


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_SESSION_TOKEN": "testing", "AWS_DEFAULT_REGION": "us-west-2",
                       "AWS_EC2_METADATA_DISABLED": "true", "COLUMNS": "220"}.items():
        monkeypatch.setenv(var, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("HYPERPOD_CONFIG", raising=False)


@pytest.fixture
def moto_isolated(aws_env: None) -> Iterator[None]:
    """moto with this test's state only.

    moto 5 resets its backends only when the outermost ``mock_aws`` starts; a session-wide mock of another suite
    (``tests/cleanup``) keeps one running, so a nested ``mock_aws()`` would see, and leave, other tests' resources.
    The backends are therefore reset on entry and on exit.
    """
    from moto import mock_aws
    from moto.core.base_backend import BackendDict

    with mock_aws():
        BackendDict.reset()
        try:
            yield
        finally:
            BackendDict.reset()


@pytest.fixture
def config_file(tmp_path: Path, aws_env: None) -> Path:
    """The default config with a ``cdk deploy`` outputs file next to it (``<config>.out/cdk-outputs.json``)."""
    path = tmp_path / "deploy.yaml"
    shutil.copy(DEFAULT_CONFIG, path)
    (tmp_path / "deploy.out").mkdir()
    (tmp_path / "deploy.out" / "cdk-outputs.json").write_text(json.dumps({
        "hyperpod-dpd-cluster": {"EksClusterName": EKS_CLUSTER, "Region": "us-west-2"},
        "hyperpod-dpd-hyperpod": {"HyperPodClusterName": HYPERPOD_CLUSTER},
        "hyperpod-dpd-platform": {"ModelBucketName": "model-bucket", "TlsCertificatesBucketName": "hyperpod-tls-test"},
    }))
    return path


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster()


@pytest.fixture
def kubeconfig(tmp_path: Path, cluster: FakeCluster, config_file: Path) -> Iterator[Path]:
    """A kubeconfig whose current context is the fake cluster, which the outputs file names as this deployment's."""
    path = tmp_path / "kubeconfig"
    with kube_server(cluster, path) as url:
        deployed_at(config_file, url)
        yield path


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    """Run the ``hyperpod-dpd`` entry point in-process; returns exit code, stdout and stderr."""
    def run(*args: str) -> Result:
        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)
    return run


@pytest.fixture
def llama_config(config_file: Path) -> Path:
    """The test config with ``endpoint.name: llama``, whose pods' names start like those of ``llama-3-3-70b``
    (``prefill-llama-...``): the two endpoints of k8s-review defect 6."""
    text = config_file.read_text()
    assert "\n  name: llama-3-3-70b\n" in text  # endpoint.name of config/default.yaml
    config_file.write_text(text.replace("\n  name: llama-3-3-70b\n", "\n  name: llama\n"))
    return config_file


@pytest.fixture
def fleet_config(config_file: Path) -> Path:
    """config/examples/two-models.yaml (the 70B and the 8B, both in namespace ``default``) in place of the test
    config, named like it (``hyperpod-dpd``) so that the outputs file beside it is this deployment's."""
    text = TWO_MODELS.read_text()
    assert "\nname: two-models\n" in text
    config_file.write_text(text.replace("\nname: two-models\n", "\nname: hyperpod-dpd\n"))
    return config_file
