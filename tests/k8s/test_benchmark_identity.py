"""The benchmark Jobs can read the tokenizer and write their results on a real cluster: the platform stack gives
the ServiceAccount the cdk8s chart writes an EKS Pod Identity association.

Sources: EKS user guide, "Assign an IAM role to a Kubernetes service account" (Pod Identity): the role's trust
policy names ``pods.eks.amazonaws.com`` with ``sts:AssumeRole`` and ``sts:TagSession``, and an association binds
(cluster, namespace, service account) to the role (``AWS::EKS::PodIdentityAssociation``). The runner fetches the
tokenizer from ``BENCH_TOKENIZER_S3`` and uploads results to ``BENCH_RESULTS_S3`` (runner.py).
"""

from __future__ import annotations

import json

import pytest
from tests.conftest import DEFAULT_CONFIG_PATH

from hyperpod_core.config import Config, load_config


def _only(template, kind: str) -> dict:
    (resource,) = template.find_resources(kind).values()
    return resource["Properties"]


def _statements(template, role_logical_id: str) -> list[dict]:
    return [s for p in template.find_resources("AWS::IAM::Policy").values()
            if {"Ref": role_logical_id} in p["Properties"]["Roles"]
            for s in p["Properties"]["PolicyDocument"]["Statement"]]


def test_the_jobs_service_account_has_an_association(templates, synthesized) -> None:
    docs = synthesized["default"].docs("-benchmark.k8s.yaml")
    (account,) = [d for d in docs if d["kind"] == "ServiceAccount"]
    jobs = [d for d in docs if d["kind"] == "Job"]
    association = _only(templates["Platform"], "AWS::EKS::PodIdentityAssociation")
    assert association["Namespace"] == account["metadata"]["namespace"]
    assert association["ServiceAccount"] == account["metadata"]["name"]
    assert {j["spec"]["template"]["spec"]["serviceAccountName"] for j in jobs} == {account["metadata"]["name"]}


def test_the_role_is_assumable_by_pod_identity_for_this_cluster_only(templates) -> None:
    platform = templates["Platform"]
    role_ref = _only(platform, "AWS::EKS::PodIdentityAssociation")["RoleArn"]["Fn::GetAtt"][0]
    (statement,) = platform.to_json()["Resources"][role_ref]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert sorted(statement["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
    assert set(statement["Condition"]["StringEquals"]) == {"aws:SourceAccount", "aws:SourceArn"}


def test_it_reads_the_model_prefix_and_writes_nothing_without_a_results_location(templates,
                                                                                 default_config: Config) -> None:
    platform = templates["Platform"]
    role_ref = _only(platform, "AWS::EKS::PodIdentityAssociation")["RoleArn"]["Fn::GetAtt"][0]
    statements = _statements(platform, role_ref)
    reads = [s for s in statements if s["Action"] == "s3:GetObject"]
    assert reads and all(json.dumps(s["Resource"]).endswith(f'/{default_config.spec().model.s3_prefix}*"]]}}')
                         for s in reads)
    assert not [s for s in statements if "s3:PutObject" in json.dumps(s["Action"])]


@pytest.fixture(scope="module", params=["s3://team-results/dpd/runs/", "s3://team-results/dpd/runs"])
def with_results(tmp_path_factory, request) -> dict:
    """With or without a trailing slash: the runner writes ``dpd/runs/<endpoint>/<mode>/...`` either way
    (``hyperpod_runtime.bench_runner.publish``), so ``dpd/runs-other/`` and another endpoint's folder must stay out
    of reach."""
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    from hyperpod_infra.app_builder import build

    text = DEFAULT_CONFIG_PATH.read_text() + f"\nbenchmark:\n  results_s3_uri: {request.param}\n"
    path = tmp_path_factory.mktemp("bench") / "config.yaml"
    path.write_text(text)
    app = cdk.App(context={"aws:cdk:disable-asset-staging": True})
    return Template.from_stack(build(app, load_config(path)).platform).to_json()


def test_with_a_results_location_it_writes_only_below_it(with_results: dict) -> None:
    puts = [s for r in with_results["Resources"].values() if r["Type"] == "AWS::IAM::Policy"
            for s in r["Properties"]["PolicyDocument"]["Statement"] if s["Action"] == "s3:PutObject"]
    assert len(puts) == 1
    assert puts[0]["Resource"] == {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"},
                                                     ":s3:::team-results/dpd/runs/llama-3-3-70b/*"]]}
