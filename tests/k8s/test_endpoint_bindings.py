"""The typed bindings come from the pinned v3.3 CRD, which is resolved, verified, and never committed.

Each pin's sha256 is that of the byte-identical copy in ../shared/crds/v3.3, whose git blob ids SOURCES.md lists
(``git hash-object``): the test recomputes both, so a pin that drifts from the published file fails here.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from hyperpod_core import pins

REPO_ROOT = Path(__file__).resolve().parents[2]


#: (pin, git blob id from shared/crds/v3.3/SOURCES.md)
PINNED = [
    (pins.INFERENCE_ENDPOINT_CONFIG_CRD, "c25a22b15d0f03d7914d28305a19687a26c0c0f8"),
    (pins.MODEL_WEIGHTS_CACHE_CONFIG_CRD, "7f4a6202f21c815453ece9e3c18810896efde56c"),
    (pins.MODEL_IMAGE_CACHE_CRD, "e9ccc635520693d25628591547d11b5a63d1b1b9"),
]


def _blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # what `git hash-object` computes


@pytest.mark.parametrize(("pin", "blob_id"), PINNED, ids=[p.file_name for p, _ in PINNED])
def test_crd_resolves_to_the_pinned_v33_file(pin, blob_id):
    from hyperpod_k8s.crd_source import resolve_crd

    data = resolve_crd(pin).read_bytes()
    assert hashlib.sha256(data).hexdigest() == pin.sha256
    assert _blob_id(data) == blob_id
    assert pin.url.startswith("https://raw.githubusercontent.com/aws/sagemaker-hyperpod-cli/"
                              "0986f2cc4eb14070d3aeb159c2c9b09d1b5f287b/")  # chart 2.3.0, appVersion "3.3"
    assert pin.url.endswith("inference.sagemaker.aws.amazon.com_" + pin.file_name)


def test_a_crd_of_another_version_is_refused(tmp_path, monkeypatch):
    """A directory holding other bytes under the pinned name (the v3.2 file, an edited copy) fails the hash."""
    from hyperpod_core.errors import ConfigError
    from hyperpod_k8s.crd_source import ENV_VAR, resolve_crd

    good = resolve_crd().read_bytes()
    (tmp_path / pins.INFERENCE_ENDPOINT_CONFIG_CRD.file_name).write_bytes(good.replace(b"idleTimeoutSeconds", b"x"))
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    with pytest.raises(ConfigError, match="expected the pinned 9a0e6117cfb09a55"):
        resolve_crd()


def test_the_shared_folder_is_the_pinned_versions():
    from hyperpod_k8s.crd_source import CACHE_DIR, SHARED_DIR

    assert SHARED_DIR.as_posix() == "../shared/crds/v3.3" and CACHE_DIR.as_posix() == ".cache/crds/v3.3"


def test_a_local_clone_finds_the_shared_crds_beside_its_origin(tmp_path):
    """``git clone /work/main /tmp/fresh``: the clone's ``../shared`` does not exist, its origin's does."""
    from hyperpod_core.paths import beside_checkout, origin_checkout

    origin, clone, elsewhere = tmp_path / "work" / "main", tmp_path / "tmp" / "fresh", tmp_path / "other"
    for folder in (origin, elsewhere):
        subprocess.run(["git", "init", "-q", str(folder)], check=True)
    subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True, capture_output=True)
    assert origin_checkout(clone) == origin.resolve()
    subprocess.run(["git", "-C", str(clone), "remote", "set-url", "origin", f"file://{origin}"], check=True)
    assert origin_checkout(clone) == origin.resolve()
    for url in ("https://github.com/x/y.git", "git@github.com:x/y.git", str(tmp_path / "gone")):
        subprocess.run(["git", "-C", str(clone), "remote", "set-url", "origin", url], check=True)
        assert origin_checkout(clone) is None, url
    assert origin_checkout(elsewhere) is None  # no remote
    subprocess.run(["git", "-C", str(clone), "remote", "set-url", "origin", str(origin)], check=True)
    assert beside_checkout("shared", "metrics", root=clone) == (tmp_path / "tmp" / "shared" / "metrics",
                                                               tmp_path / "work" / "shared" / "metrics")


def test_bindings_are_generated_for_v1_with_pdspec():
    from hyperpod_k8s.imports.com.amazon.aws.sagemaker import inference as iec

    gvk = iec.InferenceEndpointConfig.GVK
    assert (gvk.api_version, gvk.kind) == ("inference.sagemaker.aws.amazon.com/v1", "InferenceEndpointConfig")
    assert hasattr(iec, "InferenceEndpointConfigSpecPdSpec")
    # operator v3.3 additions (shared/crds/v3.3/SOURCES.md, "Schema diff")
    assert hasattr(iec, "InferenceEndpointConfigSpecModelCacheConfigWeightsCache")
    assert "idle_timeout_seconds" in iec.InferenceEndpointConfigSpecLoadBalancer.__init__.__code__.co_varnames


def test_repository_holds_no_copy_of_the_crd_or_the_bindings():
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True,
                             check=True).stdout.splitlines()
    assert not [f for f in tracked if f.endswith(".yaml") and "inferenceendpointconfig" in f.lower()]
    assert not [f for f in tracked if f.startswith("k8s/hyperpod_k8s/imports/")]
