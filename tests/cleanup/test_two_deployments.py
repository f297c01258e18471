"""Destroying deployment A leaves every resource of deployment B (and of unknown owner) in the same account.

Two deployments (different ``name``, different EKS cluster) share one moto account; each has what the
operator creates for an endpoint (``tests/two_deployments.py``), and a third set carries only the operator's tag
and is named by no object. A's janitor runs its Delete flow against A's cluster (a fake Kubernetes API holding
A's InferenceEndpointConfig and SageMakerEndpointRegistration, whose status names A's resources), with the
operator gone (its objects removed by hand). Both hypotheses about the operator's tags are covered: it copies
the IEC's ``spec.tags`` onto what it creates, or it does not (lifecycle-facts.md, "Isolation": no public source
shows either for models, endpoint configs and certificates [I]).
"""

from __future__ import annotations

from typing import Any

import pytest
from janitor_fakes import REGISTRATIONS, FakeClock, FakeKubeApi

from hyperpod_constructs.endpoint_janitor_handler import index
from hyperpod_runtime.cleanup import Janitor
from hyperpod_runtime.eks.kube import KubeClient
from two_deployments import Tenant, certificate_arns, operator_creates, sagemaker_names

A = Tenant("team-a", "team-a-eks")
B = Tenant("team-b", "team-b-eks")
PROPS = {"ClusterName": A.cluster, "ClusterArn": A.cluster_arn, "WaitSeconds": "1500",
         "DeploymentTagKey": "deployment", "DeploymentTagValue": A.name}


def _factory(cluster: FakeKubeApi, aws: dict[str, Any], clock: FakeClock):  # type: ignore[no-untyped-def]
    def factory(props: dict[str, Any]) -> Janitor:
        return Janitor(cluster_name=props["ClusterName"], cluster_arn=props["ClusterArn"],
                       kube=KubeClient(cluster),
                       deployment_tag=index.deployment_tag(props),
                       **{k: aws[k] for k in ("sagemaker", "elbv2", "acm", "ec2")})
    return factory


@pytest.mark.parametrize("propagated", [True, False], ids=["spec-tags-propagated", "operator-tag-only"])
def test_destroying_a_removes_a_and_leaves_b_and_the_unknown_one_reported(
        aws: dict[str, Any], clock: FakeClock, caplog: pytest.LogCaptureFixture, propagated: bool) -> None:
    """Fails on main: its janitor deleted every CreatedBy=HyperPodInference endpoint and certificate without a
    cluster tag (B's and the unknown one's) and left A's endpoint configs and models behind."""
    sm, acm = aws["sagemaker"], aws["acm"]
    a = operator_creates(sm, acm, "a", A, propagated=propagated)
    b = operator_creates(sm, acm, "b", B, propagated=propagated)
    unknown = operator_creates(sm, acm, "stray", None, propagated=False)
    a_cluster = FakeKubeApi()
    a_cluster.add("inferenceendpointconfigs", "default", "llama", spec={"endpointName": a.endpoint},
                  status=a.iec_status())
    a_cluster.add(REGISTRATIONS, "default", "llama", finalizers=(), status=a.registration_status())
    factory = _factory(a_cluster, aws, clock)
    event = {"RequestType": "Delete", "PhysicalResourceId": f"endpoint-janitor-{A.cluster}",
             "StackId": aws["stack_id"], "ResourceProperties": dict(PROPS)}
    event = {**event, **index.on_event(event, factory=factory, clock=clock)}
    a_cluster.objects.clear()  # the operator is gone: finalizers removed by hand, its AWS resources stayed

    with caplog.at_level("INFO"):
        polls = [index.is_complete(event, factory=factory, clock=clock)]
        while not polls[-1]["IsComplete"] and len(polls) < 5:
            clock.now += 30
            polls.append(index.is_complete(event, factory=factory, clock=clock))

    assert polls[-1] == {"IsComplete": True}
    assert sagemaker_names(sm) == b.sagemaker_names() | unknown.sagemaker_names()
    assert certificate_arns(acm) == {b.certificate, unknown.certificate}
    deleted = [r.getMessage() for r in caplog.records if r.getMessage().startswith("deleted ")]
    assert [m.split(" (")[0] for m in deleted] == [  # endpoints first; configs and models once no endpoint is left
        f"deleted SageMaker endpoint {a.endpoint}", "deleted ACM certificate a.example.com",
        f"deleted SageMaker endpoint config {a.endpoint_config}", f"deleted SageMaker model {a.model}"]
    reported = caplog.text
    b_reason = "tag deployment=team-b: another deployment's" if propagated else "owner unknown"
    assert f"left alone (not this deployment's): SageMaker endpoint {b.endpoint}" in reported
    assert f"{b.certificate}): {b_reason}" in reported
    assert f"left alone (not this deployment's): SageMaker model {unknown.model}" in reported
    assert f"{unknown.certificate}): owner unknown" in reported


def test_a_hand_made_endpoint_our_object_declares_is_reported_and_does_not_block_the_destroy(
        aws: dict[str, Any], clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    """The review's run (review-4 lifecycle #5). Fails on main: the untagged endpoint was rightly not deleted but
    counted as "still deleting", so this deployment's endpoint config and model were never deleted and the destroy
    failed at its deadline, on every retry. A person made ``llama-3-3-70b`` by hand (no tags); this deployment's
    IEC declares that name (its operator could not create its own under it), and its own endpoint, config, model
    and certificate carry ``deployment=dpd``."""
    dpd = Tenant("dpd", "dpd-eks")
    sm, acm = aws["sagemaker"], aws["acm"]
    sm.create_model(ModelName="llama-3-3-70b-model", ExecutionRoleArn="arn:aws:iam::123456789012:role/person",
                    PrimaryContainer={"Image": "123456789012.dkr.ecr.us-west-2.amazonaws.com/vllm:1"})
    sm.create_endpoint_config(EndpointConfigName="llama-3-3-70b-config", ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": "llama-3-3-70b-model", "InitialInstanceCount": 1,
        "InstanceType": "ml.m5.large"}])
    sm.create_endpoint(EndpointName="llama-3-3-70b", EndpointConfigName="llama-3-3-70b-config")
    ours = operator_creates(sm, acm, "a-full", dpd, propagated=True)
    cluster = FakeKubeApi()
    cluster.add("inferenceendpointconfigs", "default", "llama-3-3-70b", spec={"endpointName": "llama-3-3-70b"},
                status={"tlsCertificate": {"certificateARN": ours.certificate}})
    props = {"ClusterName": dpd.cluster, "ClusterArn": dpd.cluster_arn, "WaitSeconds": "1500",
             "DeploymentTagKey": "deployment", "DeploymentTagValue": dpd.name}
    factory = _factory(cluster, aws, clock)
    event = {"RequestType": "Delete", "PhysicalResourceId": f"endpoint-janitor-{dpd.cluster}",
             "StackId": aws["stack_id"], "ResourceProperties": props}
    event = {**event, **index.on_event(event, factory=factory, clock=clock)}
    cluster.finalize()  # the operator is gone after the first call

    with caplog.at_level("INFO"):
        polls = [index.is_complete(event, factory=factory, clock=clock)]
        while not polls[-1]["IsComplete"] and clock.now < float(event["Data"]["Deadline"]):
            clock.now += 30
            polls.append(index.is_complete(event, factory=factory, clock=clock))

    assert polls[-1] == {"IsComplete": True} and len(polls) <= 3  # done within a minute, not at the deadline
    assert sagemaker_names(sm) == {"llama-3-3-70b", "llama-3-3-70b-config", "llama-3-3-70b-model"}
    assert certificate_arns(acm) == set()
    assert "left alone (not this deployment's): SageMaker endpoint llama-3-3-70b" in caplog.text
    assert "its name is declared by this cluster's objects" in caplog.text
