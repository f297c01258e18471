"""``hyperpod-dpd sweep``: what the operator and the load balancer controller left outside CloudFormation.

These resources block ``cdk destroy`` (a security group or ENI still in the VPC, a certificate in use) or survive
it (billed load balancers, SageMaker endpoints). Each is tied to this deployment by tag or name:

* SageMaker endpoints, endpoint configs, models and ACM certificates carrying the operator's tag
  ``CreatedBy=HyperPodInference`` *and* something that makes them this deployment's: the tag
  ``deployment=<name>`` (the endpoints' ``spec.tags``), a tag naming this EKS cluster, or, for a certificate,
  being in use by one of this cluster's load balancers (the endpoint janitor's rules,
  :meth:`hyperpod_runtime.cleanup.Janitor.owner`). The operator tags what it creates for every deployment alike, so
  the operator's resources that carry another deployment's tag, or nothing that names their owner, are
  *reported* (with the reason) and never deleted. Unlike the janitor, ``sweep`` does not read the cluster's
  objects (the cluster may be gone, and a kubeconfig context could name another deployment's cluster);
* load balancers and target groups tagged ``elbv2.k8s.aws/cluster=<EKS cluster>``;
* the controller's security groups: tag ``elbv2.k8s.aws/cluster=<EKS cluster>`` (the controller tags the managed
  and the shared backend security group so, kubernetes-sigs/aws-load-balancer-controller#3701 and its IAM
  policy's ``aws:ResourceTag/elbv2.k8s.aws/cluster`` conditions);
* in this deployment's VPC (tag ``aws:cloudformation:stack-name=<name>-network``): ENIs left ``available``
  (detached) and not requester-managed, and GuardDuty's VPC endpoints (service ``com.amazonaws.<region>.
  guardduty-data``, created by GuardDuty's automated agent, GuardDuty runtime-monitoring-agent-connectivity).

Only in the deployment's region: every tie above is a name, and names are unique per region only, so ``--region``
naming another region is refused before any AWS call (:func:`hyperpod_dpd.deployment.require_region`; a deployment
of the same ``name`` there is another deployment).

Everything is listed before anything is deleted, so a failed lookup deletes nothing. On a terminal ``sweep`` then
asks whether to delete what it listed; ``--yes`` deletes without asking, ``--dry-run`` (or no terminal, or
``--json``) only lists. It deletes in dependency order, each step freeing what the next needs: SageMaker
endpoints (waited for: an endpoint config must not be deleted while an endpoint uses it), endpoint configs,
models; load balancers (waited for), target groups, certificates; GuardDuty endpoints; network interfaces;
security groups (a group cannot be deleted while an ENI uses it). S3 is never touched: the model bucket (and its
data) stays whatever this command finds.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hyperpod_core.errors import CommandFailed, UsageError
from hyperpod_core.inputs import eks_cluster_arn, read_outputs_file
from hyperpod_core.names import DEPLOYMENT_TAG
from hyperpod_dpd.commands.options import (
    ConfigOption,
    DeploymentRegionOption,
    EnvOption,
    JsonOption,
    OutputOption,
    OutputsFileOption,
    ProfileOption,
)
from hyperpod_dpd.confirm import DryRunOption, confirm
from hyperpod_dpd.deployment import Deployment, load
from hyperpod_dpd.render import console, emit, output_format

#: Deletion order (see the module docstring): a kind is deleted only after every kind before it.
ORDER = ("SageMaker endpoint", "SageMaker endpoint config", "SageMaker model", "Load balancer", "Target group",
         "ACM certificate", "GuardDuty VPC endpoint", "Network interface", "Security group")


#: Errors of a security group or ENI still in use, and how long to wait for the user to go away (10 minutes).
#: Written by hand on purpose: these are not throttling or transient errors, so no botocore retry mode retries them
#: (standard and adaptive retry throttling codes, 5xx and connection errors only: botocore ``retries/standard.py``,
#: Boto3 guide "Retries"); what ends them is the ENI detaching, minutes later (tests/cli/test_sweep.py checks it).
IN_USE_CODES = frozenset({"DependencyViolation", "InvalidNetworkInterface.InUse"})
IN_USE_ATTEMPTS = 40
IN_USE_DELAY_SECONDS = 15.0


@dataclass(frozen=True, kw_only=True)
class Item:
    kind: str
    name: str
    id: str
    why: str
    """How it is tied to this deployment (or, for what is left alone, why it is not this deployment's)."""
    effect: str
    """``blocks destroy`` or ``survives destroy``."""


@dataclass(frozen=True, kw_only=True)
class Found:
    items: list[Item]
    """This deployment's leftovers, in deletion order."""
    left_alone: list[Item]
    """The operator's resources that are not this deployment's: reported, never deleted."""


def register(app: typer.Typer) -> None:
    app.command("sweep")(sweep)


def sweep(
    config: ConfigOption = None, env: EnvOption = None, as_json: JsonOption = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Delete what is listed, in a safe order, without asking."
                                      )] = False,
    dry_run: DryRunOption = False,
    output: OutputOption = None, region: DeploymentRegionOption = None, profile: ProfileOption = None,
    outputs_file: OutputsFileOption = None,
) -> None:
    """List what would block `cdk destroy` or survive it, then (asked, or --yes) delete it. Never touches S3.

    --region, when given, must be the deployment's region: a deployment of the same name in another region is
    another deployment.
    """
    from hyperpod_dpd import aws  # boto3 loads when the command runs, not for --help
    from hyperpod_runtime.cleanup import AwsUnavailable

    fmt = output_format(output, as_json)
    as_json = fmt.data  # below: a JSON or YAML document instead of the table
    # another region's deployment is not ours
    dep = load(config, env, region=region, changing="sweep", outputs_file=outputs_file)
    clients = {s: aws.client(s, dep.region) for s in ("sagemaker", "elbv2", "acm", "ec2")}
    with aws.aws_errors("listing leftovers"):
        try:
            found = discover(dep, clients)
        except AwsUnavailable as exc:  # throttled after botocore's retries: the throttling error, in one line
            raise exc.__cause__ or exc from None
    items, alone = found.items, [asdict(i) for i in found.left_alone]
    out = console(highlight=False)
    if as_json and not yes:
        emit({"items": [asdict(i) for i in items], "deleted": [], "left_alone": alone}, fmt)
        return
    if not as_json:
        _print(out, dep, found)
    if yes and dry_run:
        raise UsageError("pass --yes (delete) or --dry-run (only list), not both")
    if not yes:
        if not items or dry_run or as_json or not sys.stdin.isatty():
            if items and not as_json:
                out.print("dry run: nothing deleted" if dry_run else
                          "run again with --yes to delete them in this order")
            return
        confirm(f"delete these {len(items)} resources of {dep.env.config.name} in this order?", yes=False,
                command="hyperpod-dpd sweep", cancelled="nothing deleted")
    deleted: list[Item] = []
    for item in items:
        try:
            with aws.aws_errors(f"deleting {item.kind} {item.name}"):
                delete(item, clients)
        except CommandFailed as exc:
            left = len(items) - len(deleted)
            if as_json:
                emit({"items": [asdict(i) for i in items], "deleted": [asdict(i) for i in deleted],
                      "left_alone": alone, "error": str(exc)}, fmt)
            raise CommandFailed(f"{exc} ({len(deleted)} deleted, {left} left; run sweep again)") from None
        deleted.append(item)
        if not as_json:
            out.print(f"deleted {item.kind} {escape(item.name)}")
    if as_json:
        emit({"items": [asdict(i) for i in items], "deleted": [asdict(i) for i in deleted],
              "left_alone": alone}, fmt)


def discover(dep: Deployment, clients: dict[str, Any]) -> Found:
    """Every leftover of this deployment, in deletion order, and the operator's resources left alone."""
    from hyperpod_runtime.cleanup import ALB_CLUSTER_TAG, Janitor

    sm, elbv2, acm, ec2 = clients["sagemaker"], clients["elbv2"], clients["acm"], clients["ec2"]
    config = dep.env.config
    outputs_found = read_outputs_file(dep.env.outputs_file, config) if dep.env.outputs_file.is_file() else {}
    arn = eks_cluster_arn(config, outputs_found, str(dep.env.outputs_file))
    janitor = Janitor(cluster_name=dep.eks_cluster, cluster_arn="" if arn.placeholder else arn.value or "",
                      kube=None, sagemaker=sm, elbv2=elbv2, acm=acm, deployment_tag=(DEPLOYMENT_TAG, config.name))
    items: list[Item] = []
    alone: list[Item] = []
    sagemaker = janitor.sagemaker_survey()
    for left in sagemaker.ours:
        items.append(Item(kind=left.kind, name=left.name, id=left.name, why=left.why,
                          effect="survives destroy (billed)" if left.kind == "SageMaker endpoint"
                          else "survives destroy"))
    alone += [Item(kind=x.kind, name=x.name, id=x.name, why=x.why, effect="left alone") for x in sagemaker.others]
    cluster_why = f"tag {ALB_CLUSTER_TAG}={dep.eks_cluster}"
    load_balancers = janitor.load_balancer_leftovers()
    for left in load_balancers:
        kind = "Load balancer" if left.kind == "Load balancer" else "Target group"
        items.append(Item(kind=kind, name=left.name, id=left.arn, why=cluster_why,
                          effect="blocks destroy (holds ENIs in the VPC's subnets)" if kind == "Load balancer"
                          else "survives destroy"))
    certificates = janitor.certificate_survey(our_load_balancers=[x.arn for x in load_balancers
                                                                  if x.kind == "Load balancer"])
    for left in certificates.ours:
        items.append(Item(kind="ACM certificate", name=left.name or left.arn, id=left.arn, why=left.why,
                          effect="survives destroy"))
    alone += [Item(kind=x.kind, name=x.name or x.arn, id=x.arn, why=x.why, effect="left alone")
              for x in certificates.others]
    vpc_id = _vpc_id(ec2, f"{dep.env.config.name}-network")
    if vpc_id:
        service = f"com.amazonaws.{dep.region}.guardduty-data"
        for ep in _listed(ec2, "describe_vpc_endpoints", "VpcEndpoints", Filters=[
                {"Name": "vpc-id", "Values": [vpc_id]}, {"Name": "service-name", "Values": [service]}]):
            if ep.get("State", "").lower() not in ("deleted", "deleting"):
                items.append(Item(kind="GuardDuty VPC endpoint", name=ep["VpcEndpointId"], id=ep["VpcEndpointId"],
                                  why=f"{service} in {vpc_id}", effect="blocks destroy (VPC not empty)"))
    for sg in _listed(ec2, "describe_security_groups", "SecurityGroups",
                      Filters=[{"Name": f"tag:{ALB_CLUSTER_TAG}", "Values": [dep.eks_cluster]}]):
        items.append(Item(kind="Security group", name=sg.get("GroupName", sg["GroupId"]), id=sg["GroupId"],
                          why=cluster_why, effect="blocks destroy (VPC not empty)"))
    if vpc_id:
        for eni in _listed(ec2, "describe_network_interfaces", "NetworkInterfaces", Filters=[
                {"Name": "vpc-id", "Values": [vpc_id]}, {"Name": "status", "Values": ["available"]}]):
            if eni.get("RequesterManaged"):
                continue  # owned by a service (VPC endpoint, load balancer): goes with its owner
            items.append(Item(kind="Network interface", name=eni.get("Description") or eni["NetworkInterfaceId"],
                              id=eni["NetworkInterfaceId"], why=f"detached in {vpc_id}",
                              effect="blocks destroy (subnet not empty)"))
    return Found(items=sorted(items, key=lambda i: ORDER.index(i.kind)), left_alone=alone)


def delete(item: Item, clients: dict[str, Any]) -> None:
    sm, elbv2, acm, ec2 = clients["sagemaker"], clients["elbv2"], clients["acm"], clients["ec2"]
    if item.kind == "SageMaker endpoint":
        sm.delete_endpoint(EndpointName=item.id)
        sm.get_waiter("endpoint_deleted").wait(EndpointName=item.id, WaiterConfig={"Delay": 15, "MaxAttempts": 80})
    elif item.kind == "SageMaker endpoint config":
        sm.delete_endpoint_config(EndpointConfigName=item.id)
    elif item.kind == "SageMaker model":
        sm.delete_model(ModelName=item.id)
    elif item.kind == "Load balancer":
        elbv2.delete_load_balancer(LoadBalancerArn=item.id)
        elbv2.get_waiter("load_balancers_deleted").wait(LoadBalancerArns=[item.id],
                                                        WaiterConfig={"Delay": 10, "MaxAttempts": 60})
    elif item.kind == "Target group":
        elbv2.delete_target_group(TargetGroupArn=item.id)
    elif item.kind == "ACM certificate":
        acm.delete_certificate(CertificateArn=item.id)
    elif item.kind == "GuardDuty VPC endpoint":
        ec2.delete_vpc_endpoints(VpcEndpointIds=[item.id])
    elif item.kind == "Security group":
        _while_in_use(lambda: ec2.delete_security_group(GroupId=item.id))
    elif item.kind == "Network interface":
        _while_in_use(lambda: ec2.delete_network_interface(NetworkInterfaceId=item.id))
    else:  # pragma: no cover - ORDER and this function list the same kinds
        raise AssertionError(item.kind)


def _while_in_use(call: Callable[[], Any]) -> None:
    """Retry a delete that fails while something still uses the resource: a deleted ALB releases its ENIs, and
    so its security groups, only minutes after ``DescribeLoadBalancers`` stops listing it."""
    from botocore.exceptions import ClientError

    for attempt in range(IN_USE_ATTEMPTS):
        try:
            call()
            return
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code not in IN_USE_CODES or attempt + 1 == IN_USE_ATTEMPTS:
                raise
            time.sleep(IN_USE_DELAY_SECONDS)


def _vpc_id(ec2: Any, network_stack: str) -> str | None:
    vpcs = ec2.describe_vpcs(Filters=[{"Name": "tag:aws:cloudformation:stack-name", "Values": [network_stack]}])
    found = vpcs.get("Vpcs", [])
    return str(found[0]["VpcId"]) if found else None


def _listed(client: Any, operation: str, key: str, **kwargs: Any) -> Iterator[dict[str, Any]]:
    """The ``key`` items of every page of ``operation`` (boto3's paginator)."""
    for page in client.get_paginator(operation).paginate(**kwargs):
        yield from page.get(key, [])


def _print(out: Console, dep: Deployment, found: Found) -> None:
    if found.left_alone:
        table = Table("kind", "name", "id", "why it is not this deployment's", title="left alone (never deleted)")
        for i in found.left_alone:
            table.add_row(i.kind, escape(i.name), escape(i.id), escape(i.why))
        out.print(table)
    if not found.items:
        out.print(f"nothing left behind by {dep.env.config.name} (EKS cluster {dep.eks_cluster}); "
                  "S3 buckets are never swept")
        return
    table = Table("kind", "name", "id", "tied by", "effect")
    for i in found.items:
        table.add_row(i.kind, escape(i.name), escape(i.id), escape(i.why), i.effect)
    out.print(table)
    out.print("S3 buckets (the model bucket included) are never swept")
