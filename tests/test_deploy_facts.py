"""Deployment facts: what a real HyperPod EKS account enforces and no schema check sees.

Every test runs on the synthesized output (CloudFormation templates and endpoint manifests) of EVERY config
under ``config/`` (the default and ``config/examples/*.yaml``), each synthesized once per session. Expected
values come from AWS's own documents and templates, written below as data with their source; the facts are
listed in ``/work/shared/reference/deploy-facts.md``. A failure here means the deployment would not serve on
AWS even though cfn-lint, cdk-nag and the CRD schema pass.
"""

from __future__ import annotations

import contextlib
import fnmatch
import io
import ipaddress
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperpod_core import pins
from hyperpod_core import sizing as facts
from hyperpod_core.config import EKS_UNSUPPORTED_AZ_IDS, Config, load_config, parse_config

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CONFIG_PATH = REPO_ROOT / "config" / "default.yaml"
CONFIG_FILES = [DEFAULT_CONFIG_PATH, *sorted((REPO_ROOT / "config" / "examples").glob("*.yaml"))]

# --- published data ---------------------------------------------------------------------------------------

#: AmazonEKS_CNI_Policy, policy version v5 (AWS Managed Policy reference,
#: docs.aws.amazon.com/aws-managed-policy/latest/reference/AmazonEKS_CNI_Policy.html, edited 2024-03-04):
#: (actions, resource) per statement. The VPC CNI runs on the HyperPod nodes with the execution role.
AMAZON_EKS_CNI_POLICY: tuple[tuple[tuple[str, ...], str], ...] = (
    (("ec2:AssignPrivateIpAddresses", "ec2:AttachNetworkInterface", "ec2:CreateNetworkInterface",
      "ec2:DeleteNetworkInterface", "ec2:DescribeInstances", "ec2:DescribeTags", "ec2:DescribeNetworkInterfaces",
      "ec2:DescribeInstanceTypes", "ec2:DescribeSubnets", "ec2:DetachNetworkInterface",
      "ec2:ModifyNetworkInterfaceAttribute", "ec2:UnassignPrivateIpAddresses"), "*"),
    (("ec2:CreateTags",), "arn:aws:ec2:*:*:network-interface/*"),
)

#: The HyperPod execution role of AWS's console templates: aws/sagemaker-hyperpod-cluster-setup
#: ``eks/cloudformation/sagemaker-iam-role-template.yaml`` @ 225929764f92613e15ff951569564a71f3711470
#: (inline policies ``<prefix>_AmazonEKS_CNI_Policy`` and ``<prefix>-Policy``; none has a Condition).
HYPERPOD_EXECUTION_ROLE_TEMPLATE: tuple[str, ...] = (
    "ec2:AttachNetworkInterface", "ec2:DescribeInstances", "ec2:DescribeTags", "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeInstanceTypes", "ec2:DescribeSubnets", "ec2:CreateTags", "ec2:AssignPrivateIpAddresses",
    "ec2:CreateNetworkInterface", "ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterface",
    "ec2:DeleteNetworkInterfacePermission", "ec2:ModifyNetworkInterfaceAttribute",
    "ec2:UnassignPrivateIpAddresses", "ec2:DescribeVpcs", "ec2:DescribeDhcpOptions", "ec2:DescribeSecurityGroups",
    "ec2:DetachNetworkInterface", "ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage",
    "ecr:GetAuthorizationToken", "ecr:GetDownloadUrlForLayer", "cloudwatch:DescribeAlarms",
    "eks-auth:AssumeRoleForPodIdentity", "s3:ListBucket", "s3:GetObject",
)
HYPERPOD_MANAGED_POLICY = "AmazonSageMakerClusterInstanceRolePolicy"

#: The inference operator's execution role (docs: sagemaker-hyperpod-model-deployment-setup, "Set up the
#: execution role"): the AWS managed policy ``AmazonSageMakerHyperPodInferenceAccess``, trusted by SageMaker.
INFERENCE_MANAGED_POLICY = "AmazonSageMakerHyperPodInferenceAccess"

#: What the operator's components call besides the operator itself (same setup page, dependencies): KEDA queries
#: the managed Prometheus workspace for Prometheus triggers (AMP user guide, "IAM permissions": the query actions),
#: and the Mountpoint for S3 CSI driver reads the model bucket (Mountpoint CSI driver docs, minimum permissions
#: for read-only mounts).
KEDA_PROMETHEUS_ACTIONS: tuple[str, ...] = (
    "aps:QueryMetrics", "aps:GetLabels", "aps:GetSeries", "aps:GetMetricMetadata")
S3_CSI_READ_ACTIONS: tuple[str, ...] = ("s3:ListBucket", "s3:GetObject")

#: Condition keys that only match at resource creation: a statement conditioned on them does not allow a
#: standalone call on an existing resource (IAM: "ec2:CreateAction ... the name of a resource-creating API").
CREATION_ONLY_CONDITION_KEYS = ("ec2:CreateAction",)

#: The EKS-managed cluster security group's rules (EKS user guide, "View Amazon EKS security group
#: requirements for clusters", default rules): inbound all traffic from itself; outbound all traffic.
#: Managed node groups without a launch template carry this group (same page).
EKS_CLUSTER_SG = "ClusterSecurityGroupId"


# --- synthesis, once per config per session ----------------------------------------------------------------

@dataclass
class Deployment:
    name: str
    config: Config
    templates: dict[str, dict]
    """stack name -> CloudFormation template"""
    manifests: list[dict] = field(default_factory=list)


def _synth_templates(config: Config) -> dict[str, dict]:
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    from hyperpod_infra.app_builder import build

    app = cdk.App(context={"aws:cdk:disable-asset-staging": True})
    return {s.stack_name: Template.from_stack(s).to_json() for s in build(app, config).all()}


def _synth_manifests(config_path: Path, outdir: Path) -> list[dict]:
    from hyperpod_k8s import main

    saved_env, saved_cwd = os.environ.pop(main.OUTPUTS_ENV, None), Path.cwd()
    outdir.mkdir(parents=True, exist_ok=True)
    os.chdir(outdir)  # no stray ./cdk-outputs.json
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            main.main(["--config", str(config_path), "--outdir", str(outdir / "dist")])
    finally:
        os.chdir(saved_cwd)
        if saved_env is not None:
            os.environ[main.OUTPUTS_ENV] = saved_env
    return [d for p in sorted((outdir / "dist").rglob("*.k8s.yaml")) for d in yaml.safe_load_all(p.read_text()) if d]


@pytest.fixture(scope="session")
def _cache() -> dict[str, Deployment]:
    return {}


@pytest.fixture(scope="session", params=[p.name for p in CONFIG_FILES])
def deployment(request, _cache, stacks, templates, tmp_path_factory) -> Deployment:
    name = request.param
    if name not in _cache:
        path = next(p for p in CONFIG_FILES if p.name == name)
        config = load_config(path)
        if path == DEFAULT_CONFIG_PATH:  # the root conftest already synthesized it
            synthesized = {s.stack_name: templates[s.node.id].to_json() for s in stacks.all()}
        else:
            synthesized = _synth_templates(config)
        _cache[name] = Deployment(name=name, config=config, templates=synthesized,
                                  manifests=_synth_manifests(path, tmp_path_factory.mktemp(path.stem)))
    return _cache[name]


# --- a small model of the templates --------------------------------------------------------------------------

class Model:
    """Resolves references across stacks (``Ref``, ``Fn::GetAtt``, ``Fn::ImportValue``) to ``stack/logicalId``."""

    def __init__(self, templates: dict[str, dict]) -> None:
        self.templates = templates
        self.exports = {o["Export"]["Name"]: (stack, o["Value"]) for stack, t in templates.items()
                        for o in t.get("Outputs", {}).values() if "Export" in o}

    def resources(self, resource_type: str) -> list[tuple[str, dict]]:
        return [(f"{stack}/{lid}", r) for stack, t in self.templates.items()
                for lid, r in t["Resources"].items() if r["Type"] == resource_type]

    def resolve(self, stack: str, value: Any) -> str:
        if isinstance(value, str):
            return value
        if "Ref" in value:
            return f"{stack}/{value['Ref']}"
        if "Fn::GetAtt" in value:
            lid, attr = value["Fn::GetAtt"]
            return f"{stack}/{lid}" + ("" if attr in ("GroupId", "Arn") else f".{attr}")
        if "Fn::ImportValue" in value:
            other, exported = self.exports[value["Fn::ImportValue"]]
            return self.resolve(other, exported)
        raise AssertionError(f"cannot resolve {value!r} in {stack}")

    def resource(self, key: str) -> dict:
        stack, lid = key.split("/", 1)
        return self.templates[stack]["Resources"][lid.split(".")[0]]

    def subnet_cidrs(self, stack: str, subnet_refs: list[Any]) -> list[str]:
        return [self.resource(self.resolve(stack, s))["Properties"]["CidrBlock"] for s in subnet_refs]


@dataclass(frozen=True)
class Rule:
    group: str
    inbound: bool
    protocol: str
    from_port: int
    to_port: int
    peer_group: str | None = None
    peer_cidr: str | None = None

    def covers(self, protocol: str, port: int) -> bool:
        if self.protocol == "-1":
            return True
        if protocol == "-1":  # asking for all traffic: only an all-traffic rule covers it
            return False
        names = {"6": "tcp", "17": "udp", "1": "icmp"}
        return names.get(self.protocol, self.protocol) == protocol and self.from_port <= port <= self.to_port


@dataclass(frozen=True)
class Endpoint:
    """Something that sends and receives traffic: the security groups it carries and its subnets' CIDRs."""

    name: str
    groups: frozenset[str]
    cidrs: tuple[str, ...]


def _rule(model: Model, stack: str, group: str, spec: dict, inbound: bool) -> Rule:
    peer = spec.get("SourceSecurityGroupId" if inbound else "DestinationSecurityGroupId")
    return Rule(group=group, inbound=inbound, protocol=str(spec["IpProtocol"]),
                from_port=int(spec.get("FromPort", -1)), to_port=int(spec.get("ToPort", -1)),
                peer_group=model.resolve(stack, peer) if peer is not None else None, peer_cidr=spec.get("CidrIp"))


def security_rules(model: Model) -> list[Rule]:
    """Every ingress/egress rule in the templates, plus the implicit ones CloudFormation and EKS create."""
    rules: list[Rule] = []
    for key, r in model.resources("AWS::EC2::SecurityGroup"):
        stack, props = key.split("/")[0], r["Properties"]
        rules += [_rule(model, stack, key, s, True) for s in props.get("SecurityGroupIngress", [])]
        if "SecurityGroupEgress" in props:
            rules += [_rule(model, stack, key, s, False) for s in props["SecurityGroupEgress"]]
        else:  # AWS::EC2::SecurityGroup: "If you do not specify an egress rule, we add ... all outbound"
            rules.append(Rule(group=key, inbound=False, protocol="-1", from_port=-1, to_port=-1, peer_cidr="0.0.0.0/0"))
    for resource_type, inbound in (("AWS::EC2::SecurityGroupIngress", True), ("AWS::EC2::SecurityGroupEgress", False)):
        for key, r in model.resources(resource_type):
            stack = key.split("/")[0]
            group = model.resolve(stack, r["Properties"]["GroupId"])
            rules.append(_rule(model, stack, group, r["Properties"], inbound))
    for key, _ in model.resources("AWS::EKS::Cluster"):
        sg = f"{key}.{EKS_CLUSTER_SG}"
        rules += [Rule(group=sg, inbound=True, protocol="-1", from_port=-1, to_port=-1, peer_group=sg),
                  Rule(group=sg, inbound=False, protocol="-1", from_port=-1, to_port=-1, peer_cidr="0.0.0.0/0")]
    return rules


def _peer_matches(rule: Rule, endpoint: Endpoint) -> bool:
    if rule.peer_group is not None:
        return rule.peer_group in endpoint.groups
    net = ipaddress.ip_network(rule.peer_cidr or "255.255.255.255/32")
    return bool(endpoint.cidrs) and all(ipaddress.ip_network(c).subnet_of(net) for c in endpoint.cidrs)  # type: ignore[arg-type]


def can_reach(rules: list[Rule], src: Endpoint, dst: Endpoint, protocol: str, port: int = -1) -> bool:
    """Security groups are stateful: a flow needs an egress rule on one of ``src``'s groups towards ``dst`` and
    an ingress rule on one of ``dst``'s groups from ``src`` (EC2 user guide, "Security group rules")."""
    out = any(not r.inbound and r.group in src.groups and r.covers(protocol, port) and _peer_matches(r, dst)
              for r in rules)
    into = any(r.inbound and r.group in dst.groups and r.covers(protocol, port) and _peer_matches(r, src)
               for r in rules)
    return out and into


def endpoints(model: Model) -> dict[str, list[Endpoint]]:
    """GPU nodes (one per HyperPod instance group), the EKS control-plane ENIs and the system nodes."""
    found: dict[str, list[Endpoint]] = {"gpu": [], "control-plane": [], "system": []}
    for key, r in model.resources("AWS::SageMaker::Cluster"):
        stack, props = key.split("/")[0], r["Properties"]
        for g in props["InstanceGroups"]:
            vpc = g.get("OverrideVpcConfig") or props["VpcConfig"]
            found["gpu"].append(Endpoint(
                name=f"HyperPod group {g['InstanceGroupName']}",
                groups=frozenset(model.resolve(stack, s) for s in vpc["SecurityGroupIds"]),
                cidrs=tuple(model.subnet_cidrs(stack, vpc["Subnets"]))))
    for key, r in model.resources("AWS::EKS::Cluster"):
        stack, vpc = key.split("/")[0], r["Properties"]["ResourcesVpcConfig"]
        found["control-plane"].append(Endpoint(
            name="EKS control plane",
            groups=frozenset([f"{key}.{EKS_CLUSTER_SG}",
                              *(model.resolve(stack, s) for s in vpc.get("SecurityGroupIds", []))]),
            cidrs=tuple(model.subnet_cidrs(stack, vpc["SubnetIds"]))))
    for key, r in model.resources("AWS::EKS::Nodegroup"):
        stack, props = key.split("/")[0], r["Properties"]
        assert "LaunchTemplate" not in props, "model knows only node groups that carry the cluster security group"
        cluster = model.resolve(stack, props["ClusterName"])
        found["system"].append(Endpoint(name=f"node group {key}", groups=frozenset([f"{cluster}.{EKS_CLUSTER_SG}"]),
                                        cidrs=tuple(model.subnet_cidrs(stack, props["Subnets"]))))
    assert all(found.values()), f"missing endpoints: {found}"
    return found


# --- networking ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("src", "dst", "protocol", "port", "why"), [
    ("gpu", "control-plane", "tcp", 443, "kubelet registers and aws-node reaches the API server"),
    ("control-plane", "gpu", "tcp", 10250, "the API server reaches the kubelet (logs, exec, webhooks)"),
    ("gpu", "system", "udp", 53, "GPU pods resolve names with CoreDNS on the system nodes"),
    ("gpu", "system", "tcp", 53, "DNS over TCP for large answers"),
    ("system", "gpu", "tcp", 8000, "the DPD router and scrapers on the system nodes reach the workers"),
    ("gpu", "gpu", "-1", -1, "EFA needs all traffic between the nodes' own group"),
])
def test_node_security_groups_admit_the_flows_the_cluster_needs(deployment, src, dst, protocol, port, why) -> None:
    """Reachability over the security-group graph of the templates (deploy-facts.md, "Networking"). The
    control-plane ENIs carry the EKS cluster security group (self-only ingress) and CDK's control-plane group
    (no ingress, aws/aws-cdk#30498); HyperPod nodes carry only the groups of ``VpcConfig`` /
    ``OverrideVpcConfig``. Port 8000 is ``endpoint.container_port`` of the default config."""
    model = Model(deployment.templates)
    rules, points = security_rules(model), endpoints(model)
    port = deployment.config.endpoint.container_port if port == 8000 else port
    blocked = [f"{s.name} -> {d.name}" for s in points[src] for d in points[dst]
               if not can_reach(rules, s, d, protocol, port)]
    assert not blocked, f"{protocol}/{port} blocked ({why}): {blocked}"


def test_execution_role_may_create_enis_with_every_group_the_nodes_carry(deployment) -> None:
    """HyperPod creates each node's ENIs with the groups of its ``OverrideVpcConfig``; ``CreateNetworkInterface``
    is authorized on the security-group resources too (EC2 service authorization reference), so a scope that
    misses one group fails node creation."""
    model = Model(deployment.templates)
    carried = {g for e in endpoints(model)["gpu"] for g in e.groups}
    for key, _ in model.resources("AWS::SageMaker::Cluster"):
        role = _hyperpod_execution_role(model, key)
        scoped = {model.resolve(key.split("/")[0], part)
                  for s in _role_statements(model, role) if "ec2:createnetworkinterface" in _actions(s)
                  for res in _list(s.get("Resource")) if isinstance(res, dict)
                  for part in res.get("Fn::Join", ["", []])[1] if isinstance(part, dict)}
        unrestricted = any("ec2:createnetworkinterface" in _actions(s) and "*" in _list(s.get("Resource"))
                           for s in _role_statements(model, role))
        assert unrestricted or carried <= scoped, f"CreateNetworkInterface misses {sorted(carried - scoped)}"


def test_every_subnet_is_placed_by_az_id_in_an_az_eks_supports(deployment) -> None:
    """``Fn::GetAZs`` index placement can land in an AZ EKS does not support (EKS user guide, subnet
    requirements: use1-az3, usw1-az2, cac1-az3); AZ IDs mean the same physical AZ in every account."""
    model = Model(deployment.templates)
    for key, r in model.resources("AWS::EC2::Subnet"):
        props = r["Properties"]
        assert "AvailabilityZone" not in props and "AvailabilityZoneId" in props, key
    for key, r in model.resources("AWS::EKS::Cluster"):
        stack = key.split("/")[0]
        az_ids = [model.resource(model.resolve(stack, s))["Properties"]["AvailabilityZoneId"]
                  for s in r["Properties"]["ResourcesVpcConfig"]["SubnetIds"]]
        assert len(set(az_ids)) >= 2 and not set(az_ids) & EKS_UNSUPPORTED_AZ_IDS, az_ids


# --- compute ------------------------------------------------------------------------------------------------

def _quantity_millis(value: Any) -> int:
    text = str(value)
    return int(text[:-1]) if text.endswith("m") else int(float(text) * 1000)


def _quantity_mib(value: Any) -> int:
    units = {"Gi": 1024, "Mi": 1, "Ti": 1024 * 1024}
    match = re.fullmatch(r"(\d+)(Gi|Mi|Ti)", str(value))
    assert match, value
    return int(match.group(1)) * units[match.group(2)]


def test_the_instance_table_holds_the_published_p5_shape() -> None:
    """The fit check below sizes nodes from ``instance_facts``; its p5 rows must be what is published
    (shared/reference/deploy-facts.md, "Compute": ml.p5.48xlarge 192 vCPUs, 96 cores; 2,048 GiB per
    p5/p5e/p5en node; EC2 accelerated-computing specifications: 8 GPUs)."""
    for instance_type in ("ml.p5.48xlarge", "ml.p5e.48xlarge", "ml.p5en.48xlarge"):
        row = facts.INSTANCE_FACTS[instance_type]
        assert (row.vcpus, row.cores, row.memory_gib, row.gpus) == (192, 96, 2048, 8), instance_type
    assert facts.node_budget("ml.p5.48xlarge", 1).cpus == 96  # ThreadsPerCore 1 exposes the 96 cores


def test_worker_requests_fit_the_nodes_they_select(deployment) -> None:
    """Pod requests <= node allocatable minus what runs there first (deploy-facts.md, "Compute"): CPUs are
    vCPUs x ThreadsPerCore / 2 of the instance (EC2 specifications and CPU options, ``ThreadsPerCore`` read
    from the HyperPod template), minus ``kubeReserved`` (awslabs/amazon-eks-ami nodeadm formula), the
    DaemonSet budget and the operator's sidecars per worker (``hyperpod_core.sizing``)."""
    model = Model(deployment.templates)
    groups = [g for _, r in model.resources("AWS::SageMaker::Cluster") for g in r["Properties"]["InstanceGroups"]]
    specs = []
    for doc in deployment.manifests:
        if doc.get("kind") != "InferenceEndpointConfig":
            continue
        spec = doc["spec"]
        pd = spec.get("pdSpec")
        roles = [("prefill", pd["prefillSpec"]), ("decode", pd["decodingSpec"])] if pd else [("worker", spec["worker"])]
        specs += [(doc["metadata"]["name"], role, spec["instanceType"], s) for role, s in roles]
    assert specs
    for name, role, instance_type, s in specs:
        requests, selector = s["resources"]["requests"], s.get("nodeSelector") or {}
        nodes = [g for g in groups if g["InstanceType"] == instance_type
                 and all(g.get("KubernetesConfig", {}).get("Labels", {}).get(k) == v for k, v in selector.items())]
        assert nodes, f"{name} {role}: no instance group matches {instance_type} {selector}"
        gpus = int(requests["nvidia.com/gpu"])
        for g in nodes:
            budget = facts.node_budget(instance_type, int(g["ThreadsPerCore"]))
            pods = facts.INSTANCE_FACTS[instance_type].gpus // gpus
            cpu = pods * (_quantity_millis(requests["cpu"]) + facts.SIDECAR_CPU_MILLIS) + facts.DAEMONSET_CPU_MILLIS
            mem = pods * (_quantity_mib(requests["memory"]) + facts.SIDECAR_MEMORY_MIB) + facts.DAEMONSET_MEMORY_MIB
            assert cpu <= budget.allocatable_cpu_millis, (
                f"{name} {role} on {g['InstanceGroupName']}: {pods} x {requests['cpu']} CPU + sidecars + "
                f"DaemonSets = {cpu}m > allocatable {budget.allocatable_cpu_millis}m")
            assert mem <= budget.allocatable_memory_mib, (
                f"{name} {role} on {g['InstanceGroupName']}: {mem}Mi > allocatable {budget.allocatable_memory_mib}Mi")


#: (agent, CPU millis, memory MiB, source): the requests the agents' published charts set (chart defaults; the
#: managed add-ons render from AWS manifests that are not public).
PUBLISHED_AGENT_REQUESTS: tuple[tuple[str, int, int, str], ...] = (
    ("aws-node + aws-eks-nodeagent", 25 + 25, 0, "aws/amazon-vpc-cni-k8s charts/aws-vpc-cni/values.yaml "
     "'requests: cpu: 25m' (v1.18.3, v1.23.1); the node agent falls back to it (templates/daemonset.yaml)"),
    ("kube-proxy", 100, 0, "eksctl pkg/addons/default/testdata/sample-1.25.json (an EKS kube-system dump): "
     "'requests': {'cpu': '100m'}"),
    ("eks-pod-identity-agent", 0, 0, "aws/eks-pod-identity-agent charts/eks-pod-identity-agent/values.yaml "
     "'resources: {}'"),
    ("nvidia-device-plugin 0.16.1", 0, 0, "NVIDIA/k8s-device-plugin v0.16.1 deployments/helm/nvidia-device-plugin/"
     "values.yaml 'resources: {}' (the version the HyperPod chart pins)"),
    ("aws-efa-k8s-device-plugin", 10, 20, "aws/eks-charts stable/aws-efa-k8s-device-plugin/values.yaml "
     "'cpu: 10m, memory: 20Mi' (v0.5.3 to v0.5.30)"),
    ("health-monitoring-agent", 500, 512, "aws/sagemaker-hyperpod-cli helm_chart/HyperPodHelmChart/charts/"
     "health-monitoring-agent/templates/health-monitoring-agent.yaml 'requests: cpu: 500m memory: 512Mi'"),
    ("s3-csi-node (3 containers)", 3 * 10, 3 * 40, "awslabs/mountpoint-s3-csi-driver chart values.yaml node "
     "'cpu: 10m memory: 40Mi', inherited by both sidecars (v1.14.1, v2.7.0)"),
    ("fsx-csi-node (3 containers)", 3 * 10, 40 + 32 + 32, "kubernetes-sigs/aws-fsx-csi-driver chart >= 1.12.0 "
     "values.yaml: node 10m/40Mi, sidecars 10m/32Mi each (driver 1.6.0 = chart 1.13.0)"),
)


def test_the_daemonset_budget_covers_the_published_agent_requests() -> None:
    """The budget holds what the agents' published charts request, with room for the observability add-on's
    four node pods, which publish none, of at least 500m and 1 GiB each."""
    cpu = sum(row[1] for row in PUBLISHED_AGENT_REQUESTS)
    mem = sum(row[2] for row in PUBLISHED_AGENT_REQUESTS)
    assert facts.DAEMONSET_CPU_MILLIS - cpu >= 4 * 500, f"{facts.DAEMONSET_CPU_MILLIS}m budget, {cpu}m published"
    assert facts.DAEMONSET_MEMORY_MIB - mem >= 4 * 1024, f"{facts.DAEMONSET_MEMORY_MIB}Mi budget, {mem}Mi published"


# --- IAM ----------------------------------------------------------------------------------------------------

def _list(value: Any) -> list:
    return value if isinstance(value, list) else [value] if value is not None else []


def _actions(statement: dict) -> list[str]:
    return [a.lower() for a in _list(statement.get("Action"))]


def _allows(statement: dict, action: str) -> bool:
    if statement.get("Effect") != "Allow" or not any(fnmatch.fnmatch(action.lower(), a) for a in _actions(statement)):
        return False
    keys = {k for cond in (statement.get("Condition") or {}).values() for k in cond}
    return not keys & set(CREATION_ONLY_CONDITION_KEYS)


def _role_statements(model: Model, role: str) -> list[dict]:
    """Inline policies of the role plus every ``AWS::IAM::Policy`` attached to it, in any stack."""
    statements = [s for p in model.resource(role)["Properties"].get("Policies", [])
                  for s in p["PolicyDocument"]["Statement"]]
    for key, r in model.resources("AWS::IAM::Policy"):
        stack = key.split("/")[0]
        if role in {model.resolve(stack, x) for x in r["Properties"].get("Roles", [])}:
            statements += r["Properties"]["PolicyDocument"]["Statement"]
    return statements


def _managed_policies(model: Model, role: str) -> str:
    return json.dumps(model.resource(role)["Properties"].get("ManagedPolicyArns", []))


def _hyperpod_execution_role(model: Model, cluster_key: str) -> str:
    stack = cluster_key.split("/")[0]
    groups = model.resource(cluster_key)["Properties"]["InstanceGroups"]
    (role,) = {model.resolve(stack, g["ExecutionRole"]) for g in groups}
    return role


def _ungranted(model: Model, role: str, actions: tuple[str, ...], resource: str = "*") -> list[str]:
    statements = _role_statements(model, role)
    missing = []
    for action in actions:
        usable = [s for s in statements if _allows(s, action)]
        if resource != "*":  # the published statement names a resource type: ours must name it too
            kind = resource.rsplit(":", 1)[-1].split("/")[0]
            usable = [s for s in usable if any(kind in json.dumps(r) or r == "*" for r in _list(s.get("Resource")))]
        if not usable:
            missing.append(action)
    return missing


def test_hyperpod_nodes_may_do_what_the_vpc_cni_does(deployment) -> None:
    """The VPC CNI (``aws-node``) on HyperPod nodes runs with the execution role; ``AmazonEKS_CNI_Policy`` lists
    what it calls. ipamd tags existing ENIs with a standalone ``CreateTags`` (aws/amazon-vpc-cni-k8s ``TagENI``;
    "failed to tag managed ENI" otherwise), so a creation-time-only condition does not count."""
    model = Model(deployment.templates)
    for key, _ in model.resources("AWS::SageMaker::Cluster"):
        role = _hyperpod_execution_role(model, key)
        missing = [a for actions, resource in AMAZON_EKS_CNI_POLICY for a in _ungranted(model, role, actions, resource)]
        assert not missing, f"execution role lacks VPC CNI actions {missing}"


def test_hyperpod_execution_role_covers_aws_template(deployment) -> None:
    """Every action of AWS's HyperPod execution role template (see ``HYPERPOD_EXECUTION_ROLE_TEMPLATE``) is
    granted, with the managed ``AmazonSageMakerClusterInstanceRolePolicy`` attached."""
    model = Model(deployment.templates)
    for key, _ in model.resources("AWS::SageMaker::Cluster"):
        role = _hyperpod_execution_role(model, key)
        assert HYPERPOD_MANAGED_POLICY in _managed_policies(model, role)
        missing = _ungranted(model, role, HYPERPOD_EXECUTION_ROLE_TEMPLATE)
        assert not missing, f"execution role lacks {missing}"


def test_inference_operator_role_has_the_published_policy(deployment) -> None:
    """The operator's execution role carries ``AmazonSageMakerHyperPodInferenceAccess`` and trusts SageMaker
    (sagemaker-hyperpod-model-deployment-setup)."""
    model = Model(deployment.templates)
    roles = [(k, r) for k, r in model.resources("AWS::IAM::Role")
             if INFERENCE_MANAGED_POLICY in _managed_policies(model, k)]
    assert len(roles) == 1
    trust = json.dumps(roles[0][1]["Properties"]["AssumeRolePolicyDocument"])
    assert "sagemaker.amazonaws.com" in trust
    # The role each component runs as, as the templates hand it over: the S3 CSI add-on's service-account
    # role, and KEDA's role in the operator add-on's configurationValues (keda.auth.aws.irsa.roleArn).
    addons = {r["Properties"]["AddonName"]: (k, r) for k, r in model.resources("AWS::EKS::Addon")}
    s3_key, s3_addon = addons["aws-mountpoint-s3-csi-driver"]
    s3_role = model.resolve(s3_key.split("/")[0], s3_addon["Properties"]["ServiceAccountRoleArn"])
    missing = _ungranted(model, s3_role, S3_CSI_READ_ACTIONS)
    assert not missing, f"the S3 CSI driver's role may not {missing}"
    if deployment.config.endpoint.autoscaling.enabled:
        op_key, operator = addons["amazon-sagemaker-hyperpod-inference"]
        values = operator["Properties"]["ConfigurationValues"]["Fn::Join"][1]
        keda = values[[i for i, v in enumerate(values) if isinstance(v, str) and '"keda"' in v][-1] + 1]
        missing = _ungranted(model, model.resolve(op_key.split("/")[0], keda), KEDA_PROMETHEUS_ACTIONS)
        assert not missing, f"KEDA's role may not {missing}"


# --- add-ons ------------------------------------------------------------------------------------------------

def test_every_addon_version_is_offered_for_the_cluster_kubernetes_version(deployment) -> None:
    """A pinned add-on version must be offered for the pinned Kubernetes version (``CreateAddon`` rejected
    aws-fsx-csi-driver as "not supported in 1.33": aws/containers-roadmap#2625). The table is ``pins.ADDONS``
    (source and check date per row); the authority is ``aws eks describe-addon-versions``."""
    model = Model(deployment.templates)
    ((_, cluster),) = model.resources("AWS::EKS::Cluster")
    version = cluster["Properties"]["Version"]
    table = {(p.name, p.version): p for p in pins.ADDONS}
    addons = [(r["Properties"]["AddonName"], r["Properties"].get("AddonVersion"))
              for _, r in model.resources("AWS::EKS::Addon")]
    assert addons
    for name, addon_version in addons:
        pin = table.get((name, addon_version))
        assert pin is not None, f"{name} {addon_version} is not in the compatibility table pins.ADDONS"
        assert version in pin.kubernetes_versions, f"{name} {addon_version} is not offered for Kubernetes {version}"


# --- access -------------------------------------------------------------------------------------------------

def test_a_human_principal_gets_cluster_admin(deployment) -> None:
    """With API authentication, ``bootstrapClusterCreatorAdminPermissions`` makes the CloudFormation execution
    role admin, not the person who deployed (deploy-facts.md, "Access"). An access entry with
    ``AmazonEKSClusterAdminPolicy`` must name a principal this deployment does not create: a required
    parameter (no default) or the configured IAM role/user ARN."""
    model = Model(deployment.templates)
    humans = []
    for key, r in model.resources("AWS::EKS::AccessEntry"):
        props, stack = r["Properties"], key.split("/")[0]
        if "AmazonEKSClusterAdminPolicy" not in json.dumps(props.get("AccessPolicies", [])):
            continue
        principal = props["PrincipalArn"]
        if isinstance(principal, str):
            humans.append(principal)
        elif "Ref" in principal and principal["Ref"] in model.templates[stack].get("Parameters", {}):
            parameter = model.templates[stack]["Parameters"][principal["Ref"]]
            if "Default" not in parameter and "iam::" in parameter.get("AllowedPattern", ""):
                humans.append(principal["Ref"])
    assert humans, "no access entry gives a human principal cluster admin; kubectl apply would be Unauthorized"


# --- two environments side by side --------------------------------------------------------------------------

#: Properties that hold a physical name unique in an account/region (or globally, for buckets).
PHYSICAL_NAMES = {
    "AWS::S3::Bucket": "BucketName", "AWS::IAM::Role": "RoleName", "AWS::IAM::ManagedPolicy": "ManagedPolicyName",
    "AWS::IAM::InstanceProfile": "InstanceProfileName", "AWS::EKS::Cluster": "Name",
    "AWS::SageMaker::Cluster": "ClusterName", "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::Lambda::Function": "FunctionName", "AWS::APS::Workspace": "Alias", "AWS::APS::RuleGroupsNamespace": "Name",
    "AWS::KMS::Alias": "AliasName", "AWS::SSM::Parameter": "Name",
    "AWS::StepFunctions::StateMachine": "StateMachineName",
    "AWS::Events::Rule": "Name", "AWS::SQS::Queue": "QueueName", "AWS::SNS::Topic": "TopicName",
    "AWS::EC2::SecurityGroup": "GroupName", "AWS::EKS::AccessEntry": "Username",
}


def _render(stack: str, value: Any) -> str:
    """A physical name as text; anything resolved per stack (refs, stack IDs) keeps the stack's name."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(_render(stack, p) for p in parts)
    if isinstance(value, dict) and value.get("Ref", "").startswith("AWS::") and value["Ref"] != "AWS::StackId":
        return "${" + value["Ref"] + "}"
    return f"${{{stack}:{json.dumps(value, sort_keys=True)}}}"


def physical_names(templates: dict[str, dict]) -> set[str]:
    names = set(templates)  # stack names
    for stack, t in templates.items():
        names |= {o["Export"]["Name"] for o in t.get("Outputs", {}).values() if "Export" in o}
        for r in t["Resources"].values():
            prop = PHYSICAL_NAMES.get(r["Type"])
            if prop and prop in r.get("Properties", {}):
                names.add(f"{r['Type']}:{_render(stack, r['Properties'][prop])}")
    return names


@pytest.fixture(scope="session")
def renamed_default_templates(default_config_dict) -> dict[str, dict]:
    return _synth_templates(parse_config({**default_config_dict, "name": "hyperpod-dpd-b"}))


def test_a_second_deployment_differing_only_in_name_collides_nowhere(
        templates, stacks, renamed_default_templates) -> None:
    """Two environments side by side in one account and region (issue 9, item 10): every account-unique
    physical name (and stack and export name) must derive from ``name``."""
    first = physical_names({s.stack_name: templates[s.node.id].to_json() for s in stacks.all()})
    second = physical_names(renamed_default_templates)
    assert not first & second, sorted(first & second)
