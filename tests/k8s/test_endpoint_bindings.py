"""The typed bindings come from the pinned CRD, which is resolved, verified, and never committed."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from hyperpod_core import pins

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_crd_resolves_to_the_pinned_file():
    from hyperpod_k8s.crd_source import resolve_crd

    path = resolve_crd()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == pins.INFERENCE_ENDPOINT_CONFIG_CRD.sha256


def test_bindings_are_generated_for_v1_with_pdspec():
    from hyperpod_k8s.imports.com.amazon.aws.sagemaker import inference as iec

    gvk = iec.InferenceEndpointConfig.GVK
    assert (gvk.api_version, gvk.kind) == ("inference.sagemaker.aws.amazon.com/v1", "InferenceEndpointConfig")
    assert hasattr(iec, "InferenceEndpointConfigSpecPdSpec")


def test_repository_holds_no_copy_of_the_crd_or_the_bindings():
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True,
                             check=True).stdout.splitlines()
    assert not [f for f in tracked if f.endswith(".yaml") and "inferenceendpointconfig" in f.lower()]
    assert not [f for f in tracked if f.startswith("k8s/hyperpod_k8s/imports/")]
