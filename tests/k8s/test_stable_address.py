"""The endpoint's one stable in-cluster address (issue 36 item 2): the Service ``<endpoint>`` the cdk8s app writes
beside the InferenceEndpointConfig, so that ``kubectl apply -f dist/<endpoint>/endpoint/`` creates both, and that
``hyperpod-dpd rollout`` repoints at a later revision.

Expected values: an ExternalName Service is a DNS CNAME to ``spec.externalName`` (Kubernetes docs, "Service", type
ExternalName); the operator's router Service is ``<iec>-<ns>-routing-service`` in ``hyperpod-inference-system``
(AWS DPD guide and ML blog, shared/reference/operator.md section (e)); Kubernetes 1.33's schema through
kubernetes-validate.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import yaml
from tests.k8s.conftest import REPO_ROOT

from hyperpod_core.config import parse_config
from hyperpod_core.errors import ConfigError
from hyperpod_core.names import EndpointNames

NAME, NS, PART_OF = "llama-3-3-70b-p5en", "inference", "hyperpod-dpd-p5en"  # config/examples/p5en-two-prefill.yaml


def _service(synthesized) -> dict:
    s = synthesized["p5en-two-prefill"]
    file = f"{NAME}-address.k8s.yaml"
    assert s.folders[file] == f"{NAME}/endpoint", "applied with the endpoint, by the same kubectl apply -f"
    (doc,) = [d for d in yaml.safe_load_all(s.files[file]) if d]
    return doc


def test_the_endpoint_folder_holds_an_external_name_service_to_the_endpoints_router(synthesized):
    import kubernetes_validate

    svc = _service(synthesized)
    kubernetes_validate.validate(svc, "1.33", strict=True)
    assert (svc["kind"], svc["metadata"]["name"], svc["metadata"]["namespace"]) == ("Service", NAME, NS)
    assert svc["spec"] == {
        "type": "ExternalName",
        "externalName": f"{NAME}-{NS}-routing-service.hyperpod-inference-system.svc.cluster.local"}


def test_rollout_owns_and_writes_the_same_service(synthesized):
    """No drift between the two writers: the Service rollout puts for the endpoint's own revision (0) is the one the
    synth wrote, and rollout treats the synthesized one as its own (it refuses to touch a Service without its label)."""
    from hyperpod_dpd.rollout.address import ours, stable_service

    svc = _service(synthesized)
    assert svc == stable_service(NAME, NS, EndpointNames(name=NAME, namespace=NS), 0, PART_OF)
    assert ours(SimpleNamespace(metadata=SimpleNamespace(labels=svc["metadata"]["labels"])))


def test_an_endpoints_stable_service_may_not_be_another_endpoints_router_service():
    """The fleet's name rule covers the stable Service: endpoint ``a-b-routing-service`` in the operator's namespace
    would own the Service that is endpoint ``a`` in ``b``'s router (config/examples/two-models.yaml, renamed)."""
    data = yaml.safe_load((REPO_ROOT / "config" / "examples" / "two-models.yaml").read_text(encoding="utf-8"))
    data["endpoints"][0].update(name="a", namespace="b")
    data["endpoints"][1].update(name="a-b-routing-service", namespace="hyperpod-inference-system")
    with pytest.raises(ConfigError, match=r"endpoints\[1\]\.name in namespace 'hyperpod-inference-system' must not "
                                          r"derive the Service 'a-b-routing-service' in 'hyperpod-inference-system', "
                                          r"which endpoint 'a' derives too"):
        parse_config(data)
