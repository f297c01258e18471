"""The platform and observability stacks as the app wires them: whole-app facts of config/default.yaml (the
session's default app: stack names and order, stack dependencies, cross-stack references read by value through
the exporting stack's output) and of the config matrix. What each stack does alone: test_platform_stack.py,
test_platform_observability.py, test_platform_iam.py."""

from __future__ import annotations

import json

from aws_cdk.assertions import Match
from tests.infra.stand_ins import exported_value

from hyperpod_core import outputs

#: The config of the matrix that turns observability off (config/examples/).
OBSERVABILITY_OFF = "reserved-b200-us-east-1.yaml"


def test_stack_ids_names_and_order(stacks, default_config) -> None:
    assert stacks.platform.node.id == "Platform"
    assert stacks.platform.stack_name == f"{default_config.name}-platform"
    assert stacks.observability is not None and stacks.observability.node.id == "Observability"
    assert stacks.observability.stack_name == f"{default_config.name}-observability"
    assert stacks.observability_addon is not None and stacks.observability_addon.node.id == "ObservabilityAddon"
    assert stacks.observability_addon.stack_name == f"{default_config.name}-observability-addon"
    order = [s.node.id for s in stacks.all()]
    assert order.index("Observability") < order.index("Platform") and order.index("HyperPod") < order.index("Platform")
    assert order.index("HyperPod") < order.index("ObservabilityAddon")


def test_platform_deploys_after_cluster_hyperpod_and_observability(stacks, templates) -> None:
    """(``templates`` first: cross-stack references become dependencies at synth.)"""
    deps = set(stacks.platform.dependencies)
    assert {stacks.cluster, stacks.hyperpod, stacks.observability} <= deps
    assert stacks.platform not in stacks.hyperpod.dependencies  # no cycle through the model-read grant


def test_observability_addon_waits_for_pod_identity_and_hyperpod_nodes(stacks, templates) -> None:
    assert {stacks.cluster, stacks.hyperpod, stacks.observability} <= set(stacks.observability_addon.dependencies)


def test_nothing_the_platform_needs_waits_for_gpu_nodes(stacks, templates) -> None:
    """Issue 20 item 6: the platform stack needs no GPU node; the node wait (the add-on's) is in a stack no other
    stack depends on, and the workspace stack depends on nothing, so it deploys alongside the network."""
    assert stacks.observability.dependencies == []
    dependants = [s for s in stacks.all() if stacks.observability_addon in s.dependencies]
    assert dependants == []
    assert stacks.platform not in stacks.observability_addon.dependencies


def test_every_platform_addon_targets_the_cluster_stacks_eks_cluster(templates) -> None:
    (eks,) = templates["Cluster"].find_resources("AWS::EKS::Cluster")
    addons = templates["Platform"].find_resources("AWS::EKS::Addon").values()
    assert len(addons) == 5  # the operator and its four dependencies
    for addon in addons:
        assert exported_value(templates, addon["Properties"]["ClusterName"]) == ("Cluster", {"Ref": eks})


def _operator_configuration(templates) -> list:
    (operator,) = [r for r in templates["Platform"].find_resources("AWS::EKS::Addon").values()
                   if r["Properties"]["AddonName"] == "amazon-sagemaker-hyperpod-inference"]
    return operator["Properties"]["ConfigurationValues"]["Fn::Join"][1]


def test_operator_gets_the_real_hyperpod_cluster_arn(templates) -> None:
    """The ``hyperpodClusterArn`` the operator is configured with is the HyperPod stack's cluster (read by value:
    the output the import names)."""
    parts = _operator_configuration(templates)
    (arn,) = [parts[i + 1] for i, p in enumerate(parts) if isinstance(p, str) and p.endswith('"hyperpodClusterArn":"')]
    hyperpod_id = next(iter(templates["HyperPod"].find_resources("AWS::SageMaker::Cluster")))
    assert exported_value(templates, arn) == ("HyperPod", {"Fn::GetAtt": [hyperpod_id, "ClusterArn"]})


def test_hyperpod_instances_read_only_the_model_prefix(templates, stacks, default_config) -> None:
    # The policy lives in the bucket's stack: references run platform -> hyperpod, never back.
    assert stacks.hyperpod in stacks.platform.dependencies and stacks.platform not in stacks.hyperpod.dependencies
    (policy,) = [r["Properties"] for k, r in templates["Platform"].find_resources("AWS::IAM::Policy").items()
                 if k.startswith("HyperPodExecutionRoleModelRead")]
    (role,) = policy["Roles"]
    (execution_role,) = templates["HyperPod"].find_resources("AWS::IAM::Role", {"Properties": {
        "AssumeRolePolicyDocument": {"Statement": [Match.object_like({
            "Principal": {"Service": "sagemaker.amazonaws.com"}})]}}})
    assert exported_value(templates, role) == ("HyperPod", {"Ref": execution_role})
    text = json.dumps(policy["PolicyDocument"])
    assert f"/{default_config.spec().model.s3_prefix}*" in text and "kms:Decrypt" in text


def test_irsa_roles_trust_the_cluster_oidc_provider(templates) -> None:
    roles = templates["Platform"].find_resources("AWS::IAM::Role")
    web = [s for k, r in roles.items() if k.startswith("InferenceIam")
           for s in r["Properties"]["AssumeRolePolicyDocument"]["Statement"]
           if s["Action"] == "sts:AssumeRoleWithWebIdentity"]
    assert len(web) == 4
    (oidc,) = templates["Cluster"].find_resources("AWS::IAM::OIDCProvider")
    assert all(exported_value(templates, s["Principal"]["Federated"]) == ("Cluster", {"Ref": oidc}) for s in web)


def test_outputs_file_has_everything_the_endpoint_manifests_need(templates) -> None:
    """Across stacks, ``cdk deploy --outputs-file`` carries each contract output exactly once."""
    ids = [oid for t in templates.values() for oid in t.find_outputs("*")]
    for oid in (outputs.REGION, outputs.EKS_CLUSTER_NAME, outputs.HYPERPOD_CLUSTER_NAME,
                outputs.HYPERPOD_CLUSTER_ARN, outputs.MODEL_BUCKET_NAME, outputs.TLS_BUCKET_NAME,
                outputs.AMP_WORKSPACE_ENDPOINT, outputs.AMP_WORKSPACE_ARN, outputs.INFERENCE_EXECUTION_ROLE_ARN,
                outputs.KEDA_ROLE_ARN):
        assert ids.count(oid) == 1, oid


def test_observability_disabled_leaves_its_stacks_and_alert_rules_out(synthesize_matrix) -> None:
    """The config matrix's example with observability off: no workspace stack, no add-on stack, no alert rules in
    any stack (autoscaling, which needs the workspace, is off there too)."""
    s = synthesize_matrix(OBSERVABILITY_OFF).require()
    assert s.config.observability.enabled is False
    assert set(s.templates) == {f"{s.config.name}-{stack}" for stack in ("network", "cluster", "hyperpod", "platform")}
    assert not [k for t in s.templates.values() for k, r in t["Resources"].items()
                if r["Type"] == "AWS::APS::RuleGroupsNamespace"]
