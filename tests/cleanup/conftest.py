"""Fixtures for the endpoint janitor tests: the fake Kubernetes API (also over HTTPS), moto, a fake clock."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from janitor_fakes import REGION, FakeClock, FakeKubeApi, self_signed_certificate, served_over_https
from stack_fakes import stack_in_status

from hyperpod_runtime.eks.kube import HttpsTransport, KubeClient


@pytest.fixture
def kube_api() -> FakeKubeApi:
    return FakeKubeApi()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(scope="session")
def _moto() -> Iterator[dict[str, Any]]:
    """One moto backend for the session (an EC2 backend costs ~1 s to build); tests clean up after."""
    import boto3
    from moto import mock_aws

    with pytest.MonkeyPatch.context() as patch:
        for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                           "AWS_SESSION_TOKEN": "testing", "AWS_DEFAULT_REGION": REGION,
                           "AWS_REGION": REGION}.items():
            patch.setenv(key, value)
        with mock_aws():
            clients: dict[str, Any] = {name: boto3.client(name, region_name=REGION)
                                       for name in ("sagemaker", "elbv2", "acm", "ec2", "eks", "cloudformation")}
            ec2 = clients["ec2"]
            vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
            clients["vpc_id"] = vpc
            clients["subnet_ids"] = [
                ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24",
                                  AvailabilityZone=f"{REGION}{az}")["Subnet"]["SubnetId"]
                for i, az in ((1, "a"), (2, "b"))]
            yield clients


@pytest.fixture
def aws(_moto: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """moto-backed clients for SageMaker, ELBv2, ACM, EKS and CloudFormation; every test starts with none of their
    resources but ``stack_id``: the stack holding the janitor, being deleted (``DELETE_IN_PROGRESS``), as it is
    when CloudFormation sends the Delete of a ``cdk destroy``."""
    cloudformation = _moto["cloudformation"]
    stack_id = stack_in_status(cloudformation, "dpd-platform", "DELETE_IN_PROGRESS")
    yield {**_moto, "stack_id": stack_id}
    cloudformation.delete_stack(StackName=stack_id)
    sm, elb, acm = _moto["sagemaker"], _moto["elbv2"], _moto["acm"]
    for endpoint in sm.list_endpoints(MaxResults=100)["Endpoints"]:
        sm.delete_endpoint(EndpointName=endpoint["EndpointName"])
    for config in sm.list_endpoint_configs(MaxResults=100)["EndpointConfigs"]:
        sm.delete_endpoint_config(EndpointConfigName=config["EndpointConfigName"])
    for model in sm.list_models(MaxResults=100)["Models"]:
        sm.delete_model(ModelName=model["ModelName"])
    for lb in elb.describe_load_balancers()["LoadBalancers"]:
        elb.delete_load_balancer(LoadBalancerArn=lb["LoadBalancerArn"])
    for tg in elb.describe_target_groups()["TargetGroups"]:
        elb.delete_target_group(TargetGroupArn=tg["TargetGroupArn"])
    for cert in acm.list_certificates(Includes={"keyTypes": ["RSA_2048", "EC_prime256v1"]})["CertificateSummaryList"]:
        acm.delete_certificate(CertificateArn=cert["CertificateArn"])


@pytest.fixture(scope="session")
def cluster_ca() -> tuple[str, str]:
    """``(certificate PEM, key PEM)`` of the fake EKS API server's certificate authority."""
    return self_signed_certificate()


@pytest.fixture
def https_kube(kube_api: FakeKubeApi, cluster_ca: tuple[str, str], clock: FakeClock, tmp_path: Path,
               monkeypatch: pytest.MonkeyPatch) -> Iterator[KubeClient]:
    """A :class:`KubeClient` over the Lambda's :class:`HttpsTransport`, talking to ``kube_api`` served over HTTPS
    (the cluster CA of ``cluster_ca``). urllib3's retry waits go to ``clock`` instead of sleeping."""
    import urllib3.util.retry

    monkeypatch.setattr(urllib3.util.retry.time, "sleep", clock.sleep)
    tokens = iter(f"k8s-aws-v1.token-{i}" for i in range(100))
    with served_over_https(kube_api, *cluster_ca, tmp_path) as url:
        yield KubeClient(HttpsTransport(url, cluster_ca[0], lambda: next(tokens)))


@pytest.fixture
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """botocore's retry waits (``botocore.endpoint`` sleeps between attempts), recorded instead of slept."""
    import botocore.endpoint

    waits: list[float] = []
    monkeypatch.setattr(botocore.endpoint.time, "sleep", waits.append)
    return waits


@pytest.fixture
def janitor_clients(_moto: dict[str, Any]) -> dict[str, Any]:
    """Fresh moto-backed clients configured as the janitor's are (``index.BOTO_CONFIG``: botocore's standard retry
    mode), for tests that inject errors into them (:func:`aws_faults.fail_first`)."""
    import boto3

    from hyperpod_constructs.endpoint_janitor_handler import index

    return {name: boto3.client(name, region_name=REGION, config=index.BOTO_CONFIG)
            for name in ("sagemaker", "elbv2", "acm", "ec2")}
