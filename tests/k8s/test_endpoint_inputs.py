"""Deploy-time inputs from the CDK outputs file: precedence, provenance and one-line errors."""

from __future__ import annotations

import copy
import json
import re

import pytest

from hyperpod_core.config import parse_config
from hyperpod_core.errors import ConfigError
from hyperpod_core.inputs import placeholders, resolve_inputs

AMP = "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-abc123"
#: The ARN EKS gives cluster hyperpod-dpd-eks (the default config's) in account 111122223333 (EKS API reference,
#: Cluster.arn: arn:aws:eks:<region>:<account>:cluster/<name>).
EKS_ARN = "arn:aws:eks:us-west-2:111122223333:cluster/hyperpod-dpd-eks"


@pytest.fixture
def write_outputs(tmp_path):
    # Short keys stand for the default config's stacks: an outputs file must name this config's stacks.
    names = {"A": "hyperpod-dpd-network", "B": "hyperpod-dpd-platform", "C": "hyperpod-dpd-observability",
             "S": "hyperpod-dpd-cluster"}

    def write(**stacks: dict) -> object:
        path = tmp_path / "cdk-outputs.json"
        path.write_text(json.dumps({names[k]: v for k, v in stacks.items()}))
        return path
    return write


def _config(base: dict, **endpoint_autoscaling):
    data = copy.deepcopy(base)
    data["endpoint"]["autoscaling"].update(endpoint_autoscaling)
    return parse_config(data)


def test_without_outputs_file_only_placeholders_and_config(default_config):
    inputs = resolve_inputs(default_config, None)
    assert placeholders(inputs) == ["model_bucket_name", "eks_cluster_arn", "model_revision"]
    assert inputs.eks_cluster_arn.value == "UNRESOLVED-EksClusterArn"
    assert inputs.region.source == "config: region"
    assert inputs.amp_workspace_endpoint.value is None


def test_autoscaling_without_outputs_gets_a_placeholder_workspace(default_config_dict):
    inputs = resolve_inputs(_config(default_config_dict, enabled=True), None)
    assert placeholders(inputs) == ["model_bucket_name", "amp_workspace_endpoint", "eks_cluster_arn",
                                    "model_revision"]
    assert inputs.amp_workspace_endpoint.value.endswith("/workspaces/ws-UNRESOLVED-AmpWorkspaceEndpoint")


def test_values_are_found_in_any_stack(default_config, write_outputs):
    path = write_outputs(A={"Region": "us-west-2"}, B={"ModelBucketName": "my-models"},
                         C={"AmpWorkspaceEndpoint": AMP + "/"}, S={"EksClusterArn": EKS_ARN})
    inputs = resolve_inputs(default_config, path)
    assert inputs.model_bucket_name.value == "my-models"
    assert inputs.model_bucket_name.source.endswith("hyperpod-dpd-platform.ModelBucketName")
    assert inputs.amp_workspace_endpoint.value == AMP
    assert inputs.eks_cluster_arn.value == EKS_ARN
    assert inputs.eks_cluster_arn.source.endswith("hyperpod-dpd-cluster.EksClusterArn")
    assert placeholders(inputs) == ["model_revision"]  # no staged weights yet (test_model_revision.py)


def test_existing_bucket_in_config_wins_and_must_agree(default_config_dict, write_outputs):
    data = copy.deepcopy(default_config_dict)
    data["model_bucket"]["existing_name"] = "team-models"
    config = parse_config(data)
    assert resolve_inputs(config, None).model_bucket_name.source == "config: model_bucket.existing_name"
    with pytest.raises(ConfigError, match=r"model_bucket\.existing_name"):
        resolve_inputs(config, write_outputs(S={"ModelBucketName": "other"}))


def test_fails_when_outputs_file_is_of_another_region(default_config, write_outputs):
    with pytest.raises(ConfigError, match="config region is 'us-west-2'"):
        resolve_inputs(default_config, write_outputs(S={"Region": "us-east-1"}))


def test_fails_when_amp_endpoint_is_in_another_region(default_config, write_outputs):
    """The endpoint's host is ``aps-workspaces.<region>.amazonaws.com`` (AWS General Reference, "Amazon Managed
    Service for Prometheus endpoints and quotas"): a us-east-1 workspace is not this us-west-2 deployment's."""
    other = AMP.replace("us-west-2", "us-east-1")
    with pytest.raises(ConfigError, match=r"hyperpod-dpd-observability\.AmpWorkspaceEndpoint is in region "
                                          r"'us-east-1' but config region is 'us-west-2'"):
        resolve_inputs(default_config, write_outputs(C={"AmpWorkspaceEndpoint": other}))


def test_fails_when_amp_endpoint_is_not_a_workspace(default_config, write_outputs):
    with pytest.raises(ConfigError, match="AmpWorkspaceEndpoint must look like"):
        resolve_inputs(default_config, write_outputs(S={"AmpWorkspaceEndpoint": "http://prometheus:9090"}))


def test_fails_when_stacks_disagree_on_an_output(default_config, write_outputs):
    with pytest.raises(ConfigError, match="differs between stacks hyperpod-dpd-network and hyperpod-dpd-platform"):
        resolve_inputs(default_config, write_outputs(A={"ModelBucketName": "x1"}, B={"ModelBucketName": "x2"}))


def test_fails_when_outputs_file_is_not_json(default_config, tmp_path):
    bad = tmp_path / "out.json"
    bad.write_text("{")
    with pytest.raises(ConfigError, match="is not valid JSON"):
        resolve_inputs(default_config, bad)


def test_fails_when_az_output_is_not_an_az_name_of_the_region(default_config, write_outputs):
    with pytest.raises(ConfigError, match="GpuAvailabilityZone must be an AZ name in us-west-2"):
        resolve_inputs(default_config, write_outputs(S={"GpuAvailabilityZone": "usw2-az2"}))


def test_the_cluster_arn_is_derived_from_the_one_account_the_config_names(default_config_dict):
    data = copy.deepcopy(default_config_dict)
    data["eks"]["admin_principal_arn"] = "arn:aws:iam::111122223333:role/Admin"
    inputs = resolve_inputs(parse_config(data), None)
    assert inputs.eks_cluster_arn.value == EKS_ARN
    assert not inputs.eks_cluster_arn.placeholder and inputs.eks_cluster_arn.source.startswith("derived:")


@pytest.mark.parametrize("value", [
    "arn:aws:eks:us-east-1:111122223333:cluster/hyperpod-dpd-eks",   # another region
    "arn:aws:eks:us-west-2:111122223333:cluster/other-eks",          # another cluster
    "hyperpod-dpd-eks",
])
def test_fails_when_the_cluster_arn_output_is_not_this_clusters(default_config, write_outputs, value):
    with pytest.raises(ConfigError, match=r"EksClusterArn (must be the ARN of EKS cluster 'hyperpod-dpd-eks' in "
                                          r"us-west-2|is in region)"):
        resolve_inputs(default_config, write_outputs(S={"EksClusterArn": value}))


def test_require_outputs_refuses_placeholders_before_synth(monkeypatch, tmp_path, capsys):
    from hyperpod_core import paths
    from hyperpod_k8s import main

    config = tmp_path / "c.yaml"  # outside the checkout: its folder holds no cdk-outputs.json
    config.write_bytes((paths.checkout("the test") / paths.DEFAULT_CONFIG).read_bytes())
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(main.OUTPUTS_ENV, raising=False)
    with pytest.raises(ConfigError, match=re.escape("--require-outputs: unresolved model_bucket_name, eks_cluster_arn: "
                                                    "deploy with --outputs-file cdk-outputs.json")):
        main.main(["--require-outputs", "--config", str(config), "--outdir", str(tmp_path / "dist")])
    assert not (tmp_path / "dist").exists()


def test_when_only_the_revision_is_unresolved_the_remedy_is_stage_model_not_the_outputs(monkeypatch, tmp_path,
                                                                                        write_outputs, checkout_copy):
    """The deploy outputs are there; only the weights' revision is missing. Telling the user to pass the outputs
    file (again) would be the wrong remedy: each value names its own, in the synth's error, its placeholders
    README and the main job's next steps."""
    from hyperpod_core.dist_layout import placeholders_readme
    from hyperpod_k8s import main

    outputs = write_outputs(B={"ModelBucketName": "my-models"}, S={"EksClusterArn": EKS_ARN})
    monkeypatch.delenv(main.STAGED_MODEL_ENV, raising=False)  # the default config, of a checkout of its own
    with pytest.raises(ConfigError) as err:
        main.main(["--require-outputs", "--outputs-file", str(outputs), "--outdir", str(tmp_path / "dist")])
    assert str(err.value) == ("--require-outputs: unresolved model_revision: run hyperpod-dpd stage-model SRC (it "
                              "records the revision) or set model.revision")
    readme = placeholders_readme(["model_revision"], "llama-3-3-70b")
    assert "stage-model" in readme and "--outputs-file" not in readme and "Deploy the stacks" not in readme
    both = placeholders_readme(["model_bucket_name", "model_revision"], "llama-3-3-70b")
    assert "  model_bucket_name: deploy with --outputs-file cdk-outputs.json" in both
    assert "  model_revision: run hyperpod-dpd stage-model SRC" in both


def test_a_named_outputs_file_must_exist(monkeypatch, tmp_path):
    from hyperpod_k8s import main

    monkeypatch.setenv(main.OUTPUTS_ENV, str(tmp_path / "missing.json"))
    with pytest.raises(ConfigError, match="does not exist"):
        main.outputs_path(None)
