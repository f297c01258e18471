"""EksCluster alone (a bare stack, the stand-in VPC, the pinned add-ons): the control plane HyperPod can attach to,
with its secrets encrypted and every control-plane log on, and its add-ons ordered around the system nodes. One
synth (about 0.8 s warm on 2 cores: aws_eks_v2 with its kubectl layer and handler)."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template
from tests.infra import stand_ins

from hyperpod_constructs import adopted_log_groups
from hyperpod_constructs.eks_cluster import AddonVersion, EksCluster, EksClusterProps
from hyperpod_core import pins
from hyperpod_infra import bundle

PUBLIC_CIDRS = ("203.0.113.0/24",)


def _addon(pin: pins.AddonPin) -> AddonVersion:
    return AddonVersion(name=pin.name, version=pin.version)


@pytest.fixture(scope="module")
def resources() -> dict[str, Any]:
    stack = stand_ins.stack()
    EksCluster(stack, "Eks", props=EksClusterProps(
        cluster_name=stand_ins.CLUSTER_NAME, kubernetes_version=pins.KUBERNETES_VERSION, vpc=stand_ins.vpc(stack),
        control_plane_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
        vpc_cni=_addon(pins.VPC_CNI), kube_proxy=_addon(pins.KUBE_PROXY), coredns=_addon(pins.COREDNS),
        pod_identity_agent=_addon(pins.POD_IDENTITY_AGENT),
        log_group_handler_modules=bundle.imported_by(adopted_log_groups.HANDLER_DIR / "index.py"),
        endpoint_public_access_cidrs=PUBLIC_CIDRS))
    return Template.from_stack(stack).to_json()["Resources"]


def test_the_control_plane_hyperpod_attaches_to(resources: dict[str, Any]) -> None:
    (key_id,) = [k for k, r in resources.items() if r["Type"] == "AWS::KMS::Key"]
    (cluster,) = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::EKS::Cluster"]
    # HyperPod EKS prerequisites: authentication mode API or API_AND_CONFIG_MAP (HyperPod adds its own access entry).
    assert (cluster["Version"], cluster["AccessConfig"]["AuthenticationMode"]) == (pins.KUBERNETES_VERSION, "API")
    vpc_config = cluster["ResourcesVpcConfig"]
    assert (vpc_config["EndpointPrivateAccess"], vpc_config["EndpointPublicAccess"],
            vpc_config["PublicAccessCidrs"]) == (True, True, list(PUBLIC_CIDRS))
    # EKS user guide, "Encrypt Kubernetes secrets with KMS": EncryptionConfig resources ["secrets"]; the key rotates.
    assert cluster["EncryptionConfig"] == [{"Provider": {"KeyArn": {"Fn::GetAtt": [key_id, "Arn"]}},
                                            "Resources": ["secrets"]}]
    assert resources[key_id]["Properties"]["EnableKeyRotation"] is True
    # EKS user guide, "Send control plane logs to CloudWatch Logs": the five log types.
    assert sorted(t["Type"] for t in cluster["Logging"]["ClusterLogging"]["EnabledTypes"]) == [
        "api", "audit", "authenticator", "controllerManager", "scheduler"]


def test_the_cni_comes_before_the_system_nodes_and_coredns_after(resources: dict[str, Any]) -> None:
    # Nodes become Ready only with a CNI; CoreDNS stays DEGRADED with no node to run on (terraform-aws-eks#3001,
    # cited in hyperpod_constructs.node_readiness).
    addons = {r["Properties"]["AddonName"]: (k, r) for k, r in resources.items() if r["Type"] == "AWS::EKS::Addon"}
    (nodegroup,) = [(k, r) for k, r in resources.items() if r["Type"] == "AWS::EKS::Nodegroup"]
    before = {addons[pin.name][0] for pin in (pins.VPC_CNI, pins.KUBE_PROXY, pins.POD_IDENTITY_AGENT)}
    assert before <= set(nodegroup[1]["DependsOn"])
    assert nodegroup[0] in addons[pins.COREDNS.name][1]["DependsOn"]
    assert {r["Properties"]["AddonVersion"] for _, r in addons.values()} == {
        pin.version for pin in (pins.VPC_CNI, pins.KUBE_PROXY, pins.POD_IDENTITY_AGENT, pins.COREDNS)}
