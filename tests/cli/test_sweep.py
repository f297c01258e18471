"""``hyperpod-dpd sweep`` against moto (SageMaker, ELBv2, ACM, EC2, S3).

Ownership tags are the ones the creators set: ``elbv2.k8s.aws/cluster=<cluster>`` by the AWS Load Balancer
Controller on load balancers, target groups and its security groups (aws-load-balancer-controller#3701 and its IAM
policy), ``CreatedBy=HyperPodInference`` by the operator (the conditions of the AmazonSageMakerHyperPodInferenceAccess
policy, operator.md S12), ``aws:cloudformation:stack-name`` by CloudFormation on the VPC. GuardDuty's endpoint
service is ``com.amazonaws.<region>.guardduty-data`` (GuardDuty runtime-monitoring-agent-connectivity).
"""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.config import Config as BotoConfig
from botocore.exceptions import ClientError
from day2_fakes import EKS_CLUSTER, free_port, one_line_error

from hyperpod_dpd import aws
from hyperpod_dpd.commands import sweep as sweep_module
from hyperpod_dpd.commands.sweep import ORDER

pytest_plugins = ("day2_fixtures",)

REGION = "us-west-2"
OURS = [{"Key": "elbv2.k8s.aws/cluster", "Value": EKS_CLUSTER}]
THEIRS = [{"Key": "elbv2.k8s.aws/cluster", "Value": "someone-elses-cluster"}]
OPERATOR = [{"Key": "CreatedBy", "Value": "HyperPodInference"}]


def _world() -> dict[str, Any]:
    """Our leftovers and look-alikes of other deployments, plus the model bucket with data."""
    ec2 = boto3.client("ec2", region_name=REGION)
    ids: dict[str, Any] = {}
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    ec2.create_tags(Resources=[vpc], Tags=[{"Key": "aws:cloudformation:stack-name", "Value": "hyperpod-dpd-network"}])
    other_vpc = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24", AvailabilityZone=f"{REGION}{az}")
               ["Subnet"]["SubnetId"] for i, az in enumerate("ab")]
    other_subnet = ec2.create_subnet(VpcId=other_vpc, CidrBlock="10.9.0.0/24")["Subnet"]["SubnetId"]
    ids["sg"] = ec2.create_security_group(
        GroupName="k8s-traffic-dpdeks-1234", Description="lbc", VpcId=vpc,
        TagSpecifications=[{"ResourceType": "security-group", "Tags": OURS}])["GroupId"]
    ids["other_sg"] = ec2.create_security_group(
        GroupName="k8s-traffic-other", Description="lbc", VpcId=other_vpc,
        TagSpecifications=[{"ResourceType": "security-group", "Tags": THEIRS}])["GroupId"]
    ids["eni"] = ec2.create_network_interface(SubnetId=subnets[0], Description="aws-K8S-i-0abc")[
        "NetworkInterface"]["NetworkInterfaceId"]
    ids["other_eni"] = ec2.create_network_interface(SubnetId=other_subnet)["NetworkInterface"]["NetworkInterfaceId"]
    ids["gd"] = ec2.create_vpc_endpoint(VpcId=vpc, ServiceName=f"com.amazonaws.{REGION}.guardduty-data",
                                        VpcEndpointType="Interface")["VpcEndpoint"]["VpcEndpointId"]
    elbv2 = boto3.client("elbv2", region_name=REGION)
    ids["lb"] = elbv2.create_load_balancer(Name="k8s-default-llama-abc", Subnets=subnets, Tags=OURS)[
        "LoadBalancers"][0]["LoadBalancerArn"]
    ids["other_lb"] = elbv2.create_load_balancer(Name="k8s-other", Subnets=subnets, Tags=THEIRS)[
        "LoadBalancers"][0]["LoadBalancerArn"]
    ids["tg"] = elbv2.create_target_group(Name="k8s-default-llama-tg", Protocol="HTTP", Port=8081, VpcId=vpc,
                                          TargetType="ip", Tags=OURS)["TargetGroups"][0]["TargetGroupArn"]
    acm = boto3.client("acm", region_name=REGION)
    ids["cert"] = acm.request_certificate(DomainName="llama.example.com", Tags=OPERATOR)["CertificateArn"]
    ids["other_cert"] = acm.request_certificate(DomainName="mine.example.com")["CertificateArn"]
    sm = boto3.client("sagemaker", region_name=REGION)
    role = "arn:aws:iam::123456789012:role/SageMakerHyperPodInference-x"
    container = {"Image": "123456789012.dkr.ecr.us-west-2.amazonaws.com/x:1"}
    sm.create_model(ModelName="llama-3-3-70b-instruct", ExecutionRoleArn=role, PrimaryContainer=container,
                    Tags=OPERATOR)
    sm.create_model(ModelName="unrelated-model", ExecutionRoleArn=role, PrimaryContainer=container)
    variant = [{"VariantName": "v", "ModelName": "llama-3-3-70b-instruct", "InitialInstanceCount": 1,
                "InstanceType": "ml.m5.large"}]
    sm.create_endpoint_config(EndpointConfigName="llama-config", ProductionVariants=variant, Tags=OPERATOR)
    sm.create_endpoint(EndpointName="llama-endpoint", EndpointConfigName="llama-config", Tags=OPERATOR)
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="model-bucket", CreateBucketConfiguration={"LocationConstraint": REGION})
    s3.put_object(Bucket="model-bucket", Key="models/Llama-3.3-70B-Instruct/config.json", Body=b"{}")
    return ids


@pytest.fixture
def world(moto_isolated: None) -> dict[str, Any]:
    return _world()


def _sweep(cli, config_file, *args):  # type: ignore[no-untyped-def]
    return cli("sweep", "--config", str(config_file), *args)


def _names(result_out: str, key: str = "items") -> list[tuple[str, str]]:
    return [(i["kind"], i["name"]) for i in json.loads(result_out)[key]]


EXPECTED = [
    ("SageMaker endpoint", "llama-endpoint"), ("SageMaker endpoint config", "llama-config"),
    ("SageMaker model", "llama-3-3-70b-instruct"), ("Load balancer", "k8s-default-llama-abc"),
    ("Target group", "k8s-default-llama-tg"), ("ACM certificate", "llama.example.com"),
]


def _listed(out: str) -> list[tuple[str, str]]:
    return [n for n in _names(out) if n[0] not in ("GuardDuty VPC endpoint", "Security group", "Network interface")]


def test_lists_only_what_this_deployment_left(cli, config_file, world) -> None:
    result = _sweep(cli, config_file, "--json")
    assert result.code == 0, result.err
    items = json.loads(result.out)["items"]
    assert _listed(result.out) == EXPECTED
    ids = {i["kind"]: i["id"] for i in items}
    assert ids["GuardDuty VPC endpoint"] == world["gd"]
    assert ids["Security group"] == world["sg"]
    assert ids["Network interface"] == world["eni"]
    assert [i["kind"] for i in items] == sorted((i["kind"] for i in items), key=ORDER.index)
    assert json.loads(result.out)["deleted"] == []
    table = _sweep(cli, config_file)
    assert table.code == 0, table.err
    assert "k8s-default-llama-abc" in table.out and "never swept" in table.out and "--yes" in table.out
    assert len(boto3.client("elbv2", region_name=REGION).describe_load_balancers()["LoadBalancers"]) == 2


def test_yes_deletes_in_order_and_never_touches_the_model_bucket(cli, config_file, world) -> None:
    result = _sweep(cli, config_file, "--yes", "--json")
    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert [i["kind"] for i in report["deleted"]] == [i["kind"] for i in report["items"]]
    assert len(report["deleted"]) == 9
    again = _sweep(cli, config_file, "--json")
    assert json.loads(again.out)["items"] == []
    elbv2 = boto3.client("elbv2", region_name=REGION)
    assert [lb["LoadBalancerArn"] for lb in elbv2.describe_load_balancers()["LoadBalancers"]] == [world["other_lb"]]
    ec2 = boto3.client("ec2", region_name=REGION)
    assert ec2.describe_security_groups(GroupIds=[world["other_sg"]])["SecurityGroups"]
    assert ec2.describe_network_interfaces(NetworkInterfaceIds=[world["other_eni"]])["NetworkInterfaces"]
    assert boto3.client("acm", region_name=REGION).describe_certificate(CertificateArn=world["other_cert"])
    sm = boto3.client("sagemaker", region_name=REGION)
    assert [m["ModelName"] for m in sm.list_models()["Models"]] == ["unrelated-model"]
    s3 = boto3.client("s3", region_name=REGION)
    assert s3.get_object(Bucket="model-bucket", Key="models/Llama-3.3-70B-Instruct/config.json")["Body"].read() == b"{}"


def _failing(monkeypatch: pytest.MonkeyPatch, service: str, method: str, code: str) -> None:
    real = aws.client

    def client(name: str, region: str, session: Any = None) -> Any:
        c = real(name, region, session)
        if name == service:
            def fail(**_: Any) -> Any:
                raise ClientError({"Error": {"Code": code, "Message": "denied by test"}}, method)
            setattr(c, method, fail)
        return c

    monkeypatch.setattr(aws, "client", client)


def test_a_failed_lookup_deletes_nothing(cli, config_file, world, monkeypatch) -> None:
    _failing(monkeypatch, "ec2", "describe_network_interfaces", "UnauthorizedOperation")
    result = _sweep(cli, config_file, "--yes")
    assert result.code == 1
    assert one_line_error(result) == ("error: listing leftovers: UnauthorizedOperation: denied by test")
    assert boto3.client("sagemaker", region_name=REGION).list_endpoints()["Endpoints"]
    assert len(boto3.client("elbv2", region_name=REGION).describe_load_balancers()["LoadBalancers"]) == 2


def test_a_failed_delete_stops_and_says_what_is_left(cli, config_file, world, monkeypatch) -> None:
    _failing(monkeypatch, "ec2", "delete_security_group", "DependencyViolation")
    monkeypatch.setattr(sweep_module, "IN_USE_ATTEMPTS", 2)
    monkeypatch.setattr(sweep_module, "IN_USE_DELAY_SECONDS", 0.0)
    result = _sweep(cli, config_file, "--yes")
    assert result.code == 1
    line = one_line_error(result)
    assert line.startswith("error: deleting Security group k8s-traffic-dpdeks-1234: DependencyViolation")
    assert line.endswith("(7 deleted, 2 left; run sweep again)")
    ec2 = boto3.client("ec2", region_name=REGION)
    assert ec2.describe_network_interfaces(NetworkInterfaceIds=[world["eni"]])["NetworkInterfaces"]  # after SGs


def test_a_security_group_still_in_use_is_retried(cli, config_file, world, monkeypatch) -> None:
    """A deleted ALB frees its ENIs (and so its security group) minutes later: DependencyViolation is retried."""
    real = aws.client
    calls: list[str] = []

    def client(name: str, region: str, session: Any = None) -> Any:
        c = real(name, region, session)
        if name == "ec2":
            delete = c.delete_security_group

            def busy_once(**kwargs: Any) -> Any:
                calls.append(kwargs["GroupId"])
                if len(calls) == 1:
                    raise ClientError({"Error": {"Code": "DependencyViolation", "Message": "in use"}},
                                      "DeleteSecurityGroup")
                return delete(**kwargs)
            c.delete_security_group = busy_once
        return c

    monkeypatch.setattr(aws, "client", client)
    monkeypatch.setattr(sweep_module, "IN_USE_DELAY_SECONDS", 0.0)
    result = _sweep(cli, config_file, "--yes", "--json")
    assert result.code == 0, result.err
    assert calls == [world["sg"], world["sg"]]


def test_unreachable_aws_is_one_line(cli, config_file, aws_env, monkeypatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setattr(aws, "RETRIES", BotoConfig(retries={"max_attempts": 1}, connect_timeout=2))
    result = _sweep(cli, config_file)
    assert result.code == 1
    assert one_line_error(result).startswith("error: listing leftovers: Could not connect to the endpoint URL")


def test_unknown_environment_is_exit_2(cli, aws_env) -> None:
    result = cli("sweep", "--env", "nowhere")
    assert result.code == 2
    assert one_line_error(result).startswith("error: --env 'nowhere'")
