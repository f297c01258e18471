"""The composition root with several endpoints (issue 34): what ``app_builder`` makes of ``config.specs()``.

The mapping itself is read without a synth (``instance_groups`` is plain data); the whole-app facts come from the
two-model example of the config matrix (``config/examples/two-models.yaml``, synthesized once per session with
cdk-nag, its templates passing cfn-lint and checkov with every other matrix config: tests/infra/test_validation.py,
and the deployment facts: tests/test_deploy_facts.py).
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from tests.matrix import REPO_ROOT

from hyperpod_core.config import load_config, parse_config
from hyperpod_core.names import INSTANCE_GROUP_NODE_LABEL
from hyperpod_infra.app_builder import instance_groups

TWO_MODELS = "two-models.yaml"
TWO_MODELS_PATH = REPO_ROOT / "config" / "examples" / TWO_MODELS
POOL = "hyperpod-dpd/pool"


def test_a_group_an_endpoints_role_names_carries_its_name() -> None:
    """Every role of the two-model example names its group (``instance_group``), so every group carries
    ``hyperpod-dpd/instance-group: <group>`` beside its pool label: what the roles' nodeSelector selects."""
    labels = {g.name: {POOL: g.pool, **g.labels} for g in instance_groups(load_config(TWO_MODELS_PATH))}
    assert labels == {
        "prefill": {POOL: "prefill", INSTANCE_GROUP_NODE_LABEL: "prefill"},
        "decode": {POOL: "decode", INSTANCE_GROUP_NODE_LABEL: "decode"},
        "small": {POOL: "shared", INSTANCE_GROUP_NODE_LABEL: "small"}}


def test_a_group_no_role_names_keeps_its_labels(default_config, default_config_dict: dict) -> None:
    """The default config names no group: its groups keep the pool label alone (the template does not change).
    Naming one role's group labels that group only."""
    assert [dict(g.labels) for g in instance_groups(default_config)] == [{}, {}]
    data = copy.deepcopy(default_config_dict)
    data["endpoint"]["decode"]["instance_group"] = "decode"
    assert [dict(g.labels) for g in instance_groups(parse_config(data))] == [{}, {INSTANCE_GROUP_NODE_LABEL: "decode"}]


# --- the two-model example through the whole app (the config matrix) -----------------------------------------

def _list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def _rendered(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        return "".join(_rendered(p) for p in value["Fn::Join"][1])
    return "<ref>"


@pytest.mark.parametrize("name", [TWO_MODELS])
def test_the_two_model_example_reads_each_prefix_in_its_bucket_and_no_bucket_whole(synthesize_matrix,
                                                                                  name: str) -> None:
    """Every reader of the weights (S3 CSI driver, HyperPod nodes) reads below both models' ``s3_prefix`` and
    nowhere else: the 70B's in the deployment's bucket (a reference), the 8B's in its own ``model.bucket`` (a
    literal ARN); each endpoint's benchmark Jobs read their own model; no object resource is a bucket's root. The
    8B's list, read and decrypt statements against AWS's published resource types:
    tests/test_deploy_facts.py ``test_an_endpoints_own_bucket_is_read_below_its_prefix_with_its_key``."""
    s = synthesize_matrix(name).require()
    specs = s.config.specs()
    assert [spec.model.bucket is not None for spec in specs] == [False, True]  # what this test is about
    prefixes = [f"arn:<ref>:s3:::{spec.model.bucket}/{spec.model.s3_prefix}*" if spec.model.bucket
                else f"<ref>/{spec.model.s3_prefix}*" for spec in specs]
    template = s.templates[f"{s.config.name}-platform"]
    policies = {k: r["Properties"] for k, r in template["Resources"].items() if r["Type"] == "AWS::IAM::Policy"}
    readers = {k: p["PolicyDocument"]["Statement"] for k, p in policies.items()
               if any(st.get("Sid") == "ReadModelObjects" for st in p["PolicyDocument"]["Statement"])}

    def read(statements: list[dict]) -> list[str]:
        (objects,) = [st for st in statements if st.get("Sid") == "ReadModelObjects"]
        return sorted(_rendered(r) for r in _list(objects["Resource"]))  # cdk.json's minimizePolicies sorts them

    for reader in ("InferenceIamS3CsiPolicy", "HyperPodExecutionRoleModelRead"):
        (statements,) = [v for k, v in readers.items() if k.startswith(reader)]
        assert read(statements) == sorted(prefixes), reader
    benchmark = sorted(read(v) for k, v in readers.items() if k.startswith("BenchmarkClient"))
    assert benchmark == sorted([p] for p in prefixes)
    for logical_id, statements in readers.items():
        roots = [r for st in statements for r in map(_rendered, _list(st["Resource"]))
                 if re.fullmatch(r"(<ref>|arn:<ref>:s3:::[^/]+)/\*", r)]
        assert roots == [], logical_id


@pytest.mark.parametrize("name", [TWO_MODELS])
def test_the_two_model_example_gives_each_endpoint_its_benchmark_identity(synthesize_matrix, name: str) -> None:
    s = synthesize_matrix(name).require()
    template = s.templates[f"{s.config.name}-platform"]
    associations = sorted((r["Properties"]["Namespace"], r["Properties"]["ServiceAccount"])
                          for r in template["Resources"].values() if r["Type"] == "AWS::EKS::PodIdentityAssociation")
    assert associations == sorted((spec.namespace, f"{spec.name}-benchmark") for spec in s.config.specs())


@pytest.mark.parametrize("name", [TWO_MODELS])
def test_the_two_model_example_labels_every_group_its_roles_name(synthesize_matrix, name: str) -> None:
    s = synthesize_matrix(name).require()
    (cluster,) = [r for r in s.templates[f"{s.config.name}-hyperpod"]["Resources"].values()
                  if r["Type"] == "AWS::SageMaker::Cluster"]
    labels = {g["InstanceGroupName"]: g["KubernetesConfig"]["Labels"] for g in cluster["Properties"]["InstanceGroups"]}
    assert {group: lab.get(INSTANCE_GROUP_NODE_LABEL) for group, lab in labels.items()} == {
        "prefill": "prefill", "decode": "decode", "small": "small"}
