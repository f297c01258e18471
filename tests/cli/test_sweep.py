"""``hyperpod-dpd sweep`` against moto (SageMaker, ELBv2, ACM, EC2, S3).

Ownership tags are the ones the creators set: ``elbv2.k8s.aws/cluster=<cluster>`` by the AWS Load Balancer
Controller on load balancers, target groups and its security groups (aws-load-balancer-controller#3701 and its IAM
policy), ``CreatedBy=HyperPodInference`` by the operator (the conditions of the AmazonSageMakerHyperPodInferenceAccess
policy, operator.md S12) plus this deployment's ``spec.tags`` where it propagates them (CRD),
``aws:cloudformation:stack-name`` by CloudFormation on the VPC. GuardDuty's endpoint service is
``com.amazonaws.<region>.guardduty-data`` (GuardDuty runtime-monitoring-agent-connectivity).
"""

from __future__ import annotations

import io
import json
import sys
from typing import Any

import boto3
import pytest
from botocore.config import Config as BotoConfig
from botocore.exceptions import ClientError
from day2_fakes import EKS_CLUSTER, free_port, one_line_error

from aws_faults import fail_first
from hyperpod_dpd import aws
from hyperpod_dpd.commands import sweep as sweep_module
from hyperpod_dpd.commands.sweep import ORDER
from two_deployments import Tenant, certificate_arns, operator_creates, sagemaker_names

pytest_plugins = ("day2_fixtures",)

REGION = "us-west-2"
OURS = [{"Key": "elbv2.k8s.aws/cluster", "Value": EKS_CLUSTER}]
THEIRS = [{"Key": "elbv2.k8s.aws/cluster", "Value": "someone-elses-cluster"}]
OPERATOR = [{"Key": "CreatedBy", "Value": "HyperPodInference"}]
#: The default config's deployment (name hyperpod-dpd) and another one in the same account.
A = Tenant("hyperpod-dpd", EKS_CLUSTER)
B = Tenant("team-b", "team-b-eks")
#: What the operator puts on the SageMaker resources and certificates of A's endpoints (spec.tags propagated).
OPERATOR_A = OPERATOR + A.spec_tags


def _world(region: str = REGION) -> dict[str, Any]:
    """Our leftovers and look-alikes of other deployments, plus the model bucket with data, in ``region``."""
    ec2 = boto3.client("ec2", region_name=region)
    ids: dict[str, Any] = {}
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    ec2.create_tags(Resources=[vpc], Tags=[{"Key": "aws:cloudformation:stack-name", "Value": "hyperpod-dpd-network"}])
    other_vpc = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24", AvailabilityZone=f"{region}{az}")
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
    ids["gd"] = ec2.create_vpc_endpoint(VpcId=vpc, ServiceName=f"com.amazonaws.{region}.guardduty-data",
                                        VpcEndpointType="Interface")["VpcEndpoint"]["VpcEndpointId"]
    elbv2 = boto3.client("elbv2", region_name=region)
    ids["lb"] = elbv2.create_load_balancer(Name="k8s-default-llama-abc", Subnets=subnets, Tags=OURS)[
        "LoadBalancers"][0]["LoadBalancerArn"]
    ids["other_lb"] = elbv2.create_load_balancer(Name="k8s-other", Subnets=subnets, Tags=THEIRS)[
        "LoadBalancers"][0]["LoadBalancerArn"]
    ids["tg"] = elbv2.create_target_group(Name="k8s-default-llama-tg", Protocol="HTTP", Port=8081, VpcId=vpc,
                                          TargetType="ip", Tags=OURS)["TargetGroups"][0]["TargetGroupArn"]
    acm = boto3.client("acm", region_name=region)
    ids["cert"] = acm.request_certificate(DomainName="llama.example.com", Tags=OPERATOR_A)["CertificateArn"]
    ids["other_cert"] = acm.request_certificate(DomainName="mine.example.com")["CertificateArn"]
    sm = boto3.client("sagemaker", region_name=region)
    role = "arn:aws:iam::123456789012:role/SageMakerHyperPodInference-x"
    container = {"Image": "123456789012.dkr.ecr.us-west-2.amazonaws.com/x:1"}
    sm.create_model(ModelName="llama-3-3-70b-instruct", ExecutionRoleArn=role, PrimaryContainer=container,
                    Tags=OPERATOR_A)
    sm.create_model(ModelName="unrelated-model", ExecutionRoleArn=role, PrimaryContainer=container)
    variant = [{"VariantName": "v", "ModelName": "llama-3-3-70b-instruct", "InitialInstanceCount": 1,
                "InstanceType": "ml.m5.large"}]
    sm.create_endpoint_config(EndpointConfigName="llama-config", ProductionVariants=variant, Tags=OPERATOR_A)
    sm.create_endpoint(EndpointName="llama-endpoint", EndpointConfigName="llama-config", Tags=OPERATOR_A)
    s3 = boto3.client("s3", region_name=region)
    s3.create_bucket(Bucket="model-bucket", **({"CreateBucketConfiguration": {"LocationConstraint": region}}
                                                if region != "us-east-1" else {}))  # S3: us-east-1 takes none
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
    result = _sweep(cli, config_file, "--json", "--region", REGION)  # the deployment's own region: accepted
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


class _Terminal(io.StringIO):
    """stdin as a terminal whose user types the given answer."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("answer", "code", "deleted"), [("n\n", 1, 0), ("y\n", 0, 9)])
def test_on_a_terminal_it_asks_before_deleting(cli, config_file, world, monkeypatch, answer, code, deleted) -> None:
    monkeypatch.setattr(sys, "stdin", _Terminal(answer))
    result = _sweep(cli, config_file)
    assert result.code == code, result.err
    assert "delete these 9 resources of hyperpod-dpd in this order? [y/N]" in result.err
    if not deleted:
        assert result.err.rstrip().endswith("cancelled: nothing deleted")
    assert result.out.count("deleted ") == deleted
    left = boto3.client("elbv2", region_name=REGION).describe_load_balancers()["LoadBalancers"]
    assert len(left) == (2 if not deleted else 1)


def test_dry_run_only_lists_even_on_a_terminal(cli, config_file, world, monkeypatch) -> None:
    monkeypatch.setattr(sys, "stdin", _Terminal("y\n"))
    result = _sweep(cli, config_file, "--dry-run")
    assert result.code == 0 and "[y/N]" not in result.err and "dry run: nothing deleted" in result.out
    assert len(boto3.client("elbv2", region_name=REGION).describe_load_balancers()["LoadBalancers"]) == 2


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
    assert one_line_error(result).startswith("error: listing leftovers: UnauthorizedOperation: denied by test; fix: "
                                             "allow the IAM action of describe_network_interfaces")
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
    assert line.endswith("(8 deleted, 1 left; run sweep again)")
    ec2 = boto3.client("ec2", region_name=REGION)
    assert ec2.describe_security_groups(GroupIds=[world["sg"]])["SecurityGroups"]  # the last step


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
    assert one_line_error(result).startswith(
        "error: listing leftovers: EndpointConnectionError: Could not connect to the endpoint URL")


def test_unknown_environment_is_exit_2(cli, aws_env) -> None:
    result = cli("sweep", "--env", "nowhere")
    assert result.code == 2
    assert one_line_error(result).startswith("error: --env 'nowhere'")


# --- two deployments in one account ---------------------------------------------------------------------------

def _in_use_by(certificate_arn: str, load_balancer_arn: str) -> None:
    """What ACM reports once a listener of the load balancer serves the certificate (ACM DescribeCertificate
    ``InUseBy``); moto's ELBv2 does not record it, its ACM backend takes it directly."""
    from moto.acm.models import acm_backends

    acm_backends["123456789012"][REGION].set_certificate_in_use_by(certificate_arn, load_balancer_arn)


@pytest.mark.parametrize("propagated", [True, False], ids=["spec-tags-propagated", "operator-tag-only"])
def test_sweep_of_a_leaves_b_and_the_unknown_one_and_reports_them(
        cli, config_file, moto_isolated, propagated: bool) -> None:
    """Fails on main, which deleted every CreatedBy=HyperPodInference endpoint, endpoint config, model and
    certificate without a cluster tag: B's and the unknown one's too. Now: what carries A's deployment tag, and a
    certificate in use by A's load balancer, is deleted; everything else carrying the operator's tag is listed
    under ``left_alone`` with the reason. Without propagated tags nothing ties A's SageMaker resources to A
    outside A's cluster, so the sweep reports them instead of guessing (the janitor, which reads the cluster's
    objects, deletes them: tests/cleanup/test_two_deployments.py)."""
    sm, acm = boto3.client("sagemaker", region_name=REGION), boto3.client("acm", region_name=REGION)
    elbv2, ec2 = boto3.client("elbv2", region_name=REGION), boto3.client("ec2", region_name=REGION)
    a = operator_creates(sm, acm, "a", A, propagated=propagated)
    b = operator_creates(sm, acm, "b", B, propagated=propagated)
    unknown = operator_creates(sm, acm, "stray", None, propagated=False)
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24", AvailabilityZone=f"{REGION}{az}")
               ["Subnet"]["SubnetId"] for i, az in enumerate("ab")]
    lbs = {t.name: elbv2.create_load_balancer(Name=f"k8s-{t.name}", Subnets=subnets, Tags=[
        {"Key": "elbv2.k8s.aws/cluster", "Value": t.cluster}])["LoadBalancers"][0]["LoadBalancerArn"] for t in (A, B)}
    _in_use_by(a.certificate, lbs[A.name])
    _in_use_by(b.certificate, lbs[B.name])

    result = _sweep(cli, config_file, "--yes", "--json")

    assert result.code == 0, result.err
    report = json.loads(result.out)
    left_alone = {i["name"]: i["why"] for i in report["left_alone"]}
    b_reason = "tag deployment=team-b: another deployment's" if propagated else "owner unknown"
    for name in (*b.sagemaker_names(), "b.example.com"):
        assert left_alone[name].startswith(b_reason), name
    for name in (*unknown.sagemaker_names(), "stray.example.com"):
        assert left_alone[name].startswith("owner unknown"), name
    a_sagemaker = set() if propagated else a.sagemaker_names()  # reported, not deleted, when nothing ties them
    assert sagemaker_names(sm) == b.sagemaker_names() | unknown.sagemaker_names() | a_sagemaker
    assert certificate_arns(acm) == {b.certificate, unknown.certificate}
    assert [lb["LoadBalancerArn"] for lb in elbv2.describe_load_balancers()["LoadBalancers"]] == [lbs[B.name]]
    assert {i["name"] for i in report["deleted"]} == (
        {"k8s-hyperpod-dpd", "a.example.com"} | (a.sagemaker_names() if propagated else set()))


# --- dependency order -----------------------------------------------------------------------------------------

class _Recorder:
    """Proxies a boto3 client and appends ``(method, identifier)`` of every delete call to ``calls``."""

    def __init__(self, client: Any, calls: list[tuple[str, str]]) -> None:
        self._client, self._calls = client, calls

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not name.startswith("delete_"):
            return attr

        def call(**kwargs: Any) -> Any:
            (value,) = (v[0] if isinstance(v, list) else v for v in kwargs.values())
            self._calls.append((name, value))
            return attr(**kwargs)
        return call


def test_yes_deletes_users_before_what_they_use(cli, config_file, world, monkeypatch) -> None:
    """moto deletes in any order; AWS does not. Recorded order of the delete calls: a detached ENI that still
    carries the controller's security group before that group (EC2 DeleteSecurityGroup: DependencyViolation while
    an ENI uses it; fails on main, which deleted groups first), load balancers before their target groups and
    security groups (a target group in use by a listener: ResourceInUse), endpoints before their endpoint configs
    before their models (SageMaker DeleteEndpointConfig: not while an endpoint uses it)."""
    ec2 = boto3.client("ec2", region_name=REGION)
    subnet = ec2.describe_network_interfaces(NetworkInterfaceIds=[world["eni"]])["NetworkInterfaces"][0]["SubnetId"]
    eni_with_sg = ec2.create_network_interface(SubnetId=subnet, Groups=[world["sg"]], Description="left by a pod")[
        "NetworkInterface"]["NetworkInterfaceId"]
    calls: list[tuple[str, str]] = []
    real = aws.client
    monkeypatch.setattr(aws, "client", lambda name, region, session=None: _Recorder(real(name, region, session), calls))
    monkeypatch.setattr(sweep_module, "IN_USE_DELAY_SECONDS", 0.0)  # should moto refuse a group still in use

    result = _sweep(cli, config_file, "--yes", "--json")

    assert result.code == 0, result.err
    position = {c: i for i, c in enumerate(calls)}
    first = {method: min(i for (m, _), i in position.items() if m == method) for method, _ in calls}
    last = {method: max(i for (m, _), i in position.items() if m == method) for method, _ in calls}
    assert position[("delete_network_interface", eni_with_sg)] < position[("delete_security_group", world["sg"])]
    assert last["delete_network_interface"] < first["delete_security_group"]
    assert last["delete_load_balancer"] < first["delete_target_group"]
    assert last["delete_load_balancer"] < first["delete_security_group"]
    assert last["delete_endpoint"] < first["delete_endpoint_config"] < first["delete_model"]
    assert last["delete_endpoint_config"] < first["delete_model"]


# --- the region rule (issue 30 item 2) ------------------------------------------------------------------------

def _remaining(region: str) -> dict[str, int]:
    sm, elbv2 = boto3.client("sagemaker", region_name=region), boto3.client("elbv2", region_name=region)
    ec2, acm = boto3.client("ec2", region_name=region), boto3.client("acm", region_name=region)
    return {"endpoints": len(sm.list_endpoints()["Endpoints"]), "configs": len(sm.list_endpoint_configs()[
        "EndpointConfigs"]), "models": len(sm.list_models()["Models"]), "certificates": len(acm.list_certificates()[
        "CertificateSummaryList"]), "load balancers": len(elbv2.describe_load_balancers()["LoadBalancers"]),
        "target groups": len(elbv2.describe_target_groups()["TargetGroups"]),
        "security groups": len(ec2.describe_security_groups(Filters=[
            {"Name": "tag:elbv2.k8s.aws/cluster", "Values": [EKS_CLUSTER]}])["SecurityGroups"]),
        "network interfaces": len(ec2.describe_network_interfaces()["NetworkInterfaces"])}


def test_sweep_in_another_region_is_refused_and_deletes_nothing(cli, config_file, moto_isolated, monkeypatch) -> None:
    """The fourth review's run (lifecycle-review.md section 2): a deployment of the same name in us-east-1 (its
    endpoint, config, model, certificate, ALB, target group, security group, ENI), swept with the us-west-2 config
    and ``--region us-east-1``. Ownership compares names that are unique per region only, so main deleted all of
    it; now the region must be the deployment's (its outputs file says us-west-2): one line, exit 2, before any
    AWS call, and everything in us-east-1 is still there."""
    _world("us-east-1")
    before = _remaining("us-east-1")
    made: list[str] = []
    real = aws.client
    monkeypatch.setattr(aws, "client", lambda name, region, session=None: made.append(name) or real(name, region,
                                                                                                    session))
    result = _sweep(cli, config_file, "--region", "us-east-1", "--yes", "--json")
    assert result.code == 2, result.err
    assert one_line_error(result).startswith(
        f"error: --region must be this deployment's region us-west-2 ({config_file.with_suffix('.out')}"
        "/cdk-outputs.json: hyperpod-dpd-cluster.Region) for hyperpod-dpd sweep, which deletes what its operator and "
        "load balancer controller left, got 'us-east-1'")
    assert made == [] and result.out == ""
    assert _remaining("us-east-1") == before and before["endpoints"] == 1 and before["load balancers"] == 2


def test_an_outputs_file_whose_amp_workspace_is_in_another_region_is_refused(cli, config_file, world) -> None:
    """The AMP workspace endpoint's host names its region (``aps-workspaces.<region>.amazonaws.com``: AWS General
    Reference, "Amazon Managed Service for Prometheus endpoints and quotas"); an outputs file whose workspace is in
    us-east-1 is not this us-west-2 deployment's. Fails on main, which accepted it."""
    outputs = config_file.with_suffix(".out") / "cdk-outputs.json"
    data = json.loads(outputs.read_text())
    data["hyperpod-dpd-platform"]["AmpWorkspaceEndpoint"] = (
        "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-0123abcd-4567-89ef-0123-456789abcdef/")
    outputs.write_text(json.dumps(data))
    result = _sweep(cli, config_file, "--yes", "--json")
    assert result.code == 2, result.err
    assert one_line_error(result) == (
        f"error: outputs file '{outputs}': hyperpod-dpd-platform.AmpWorkspaceEndpoint is in region 'us-east-1' but "
        "config region is 'us-west-2' (outputs file of another deployment?)")
    assert len(boto3.client("sagemaker", region_name=REGION).list_endpoints()["Endpoints"]) == 1


@pytest.mark.parametrize(("code", "attempts"), [*((c, 1) for c in sorted(sweep_module.IN_USE_CODES)),
                                                ("RequestLimitExceeded", 6)])
def test_botocore_retries_throttling_but_never_an_in_use_error(code: str, attempts: int, monkeypatch) -> None:
    """Why sweep waits for an in-use group or ENI itself (``sweep.IN_USE_CODES``): the command line's retry mode
    (``aws.RETRIES``, standard, 5 retries) retries EC2's throttling but gives up on an in-use error at once."""
    import botocore.endpoint

    monkeypatch.setattr(botocore.endpoint.time, "sleep", lambda _: None)
    ec2 = boto3.client("ec2", region_name=REGION, config=aws._retries(), aws_access_key_id="k",
                       aws_secret_access_key="s")
    failed = fail_first(ec2, "DeleteSecurityGroup", times=100, code=code)
    with pytest.raises(ClientError, match=code):
        ec2.delete_security_group(GroupId="sg-0123456789abcdef0")
    assert len(failed) == attempts


def test_throttling_that_outlasts_the_retries_is_one_line(cli, config_file, world, monkeypatch) -> None:
    """The janitor's survey leaves a lasting throttle to its next poll (``AwsUnavailable``); sweep says it in one
    line, as any other AWS error, after botocore's retries (``aws.RETRIES``: 6 attempts)."""
    import botocore.endpoint

    real, throttled = aws.client, []

    def client(name: str, region: str, session: Any = None) -> Any:
        c = real(name, region, session)
        if name == "sagemaker":
            throttled.append(fail_first(c, "ListEndpoints", times=100))
        return c

    monkeypatch.setattr(aws, "client", client)
    monkeypatch.setattr(botocore.endpoint.time, "sleep", lambda _: None)
    result = _sweep(cli, config_file, "--yes")
    assert result.code == 1
    assert one_line_error(result).startswith("error: listing leftovers: ThrottlingException: Rate exceeded")
    assert len(throttled[0]) == 6
    assert boto3.client("sagemaker", region_name=REGION).list_endpoints()["Endpoints"]
