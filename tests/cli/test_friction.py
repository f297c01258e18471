"""The friction a new user hit (issue 12, "Why"), one test per fix."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml

from hyperpod_core.config import parse_config
from hyperpod_core.errors import ConfigError
from hyperpod_core.inputs import read_outputs_file, stack_names

#: These tests run the entry points in the repository itself (its cdk.out/ and dist/, scripts/setup): one
#: xdist worker runs them all, one after another (scripts/test: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("repository-root")

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIG_FILES = sorted([REPO_ROOT / "config" / "default.yaml", *(REPO_ROOT / "config" / "examples").glob("*.yaml")])


# --- per-role defaults merge field by field --------------------------------------------------------------

def test_overriding_one_role_field_keeps_the_role_defaults(default_config_dict) -> None:
    """``endpoint.prefill.max_num_seqs`` alone must not drop prefill's default ``--enforce-eager``."""
    data = copy.deepcopy(default_config_dict)
    data["endpoint"]["prefill"] = {"max_num_seqs": 8}
    data["endpoint"]["decode"] = {"replicas": 1}
    config = parse_config(data)
    assert config.spec().endpoint.prefill.max_num_seqs == 8
    assert config.spec().endpoint.prefill.extra_args == ("--enforce-eager",)
    assert config.spec().endpoint.decode.max_num_seqs == 32  # decode's default, although the file named none


def test_overriding_one_autoscaling_field_keeps_the_role_defaults(default_config_dict) -> None:
    data = copy.deepcopy(default_config_dict)
    data["endpoint"]["autoscaling"] = {"decode": {"max_replicas": 1}}
    assert parse_config(data).spec().endpoint.autoscaling.decode.target_value == 0.8


def test_unknown_role_keys_are_still_rejected(default_config_dict) -> None:
    data = copy.deepcopy(default_config_dict)
    data["endpoint"]["prefill"] = {"max_num_seq": 8}
    with pytest.raises(ConfigError, match=r"endpoint\.prefill\.max_num_seq is not a known setting"):
        parse_config(data)


# --- JSON Schema ------------------------------------------------------------------------------------------

def test_committed_schema_is_the_one_the_model_generates() -> None:
    from hyperpod_dpd.schema import committed, render

    assert committed()[0].read_text() == render(), "run: hyperpod-dpd schema --write"


def test_committed_reference_is_the_one_the_model_generates() -> None:
    from hyperpod_dpd.schema import committed, render_docs

    assert committed()[1].read_text() == render_docs(), "run: hyperpod-dpd schema --write"


def test_every_key_is_described_with_its_default() -> None:
    """Every field's docstring reaches the schema (use_attribute_docstrings) and says what happens without it."""
    from hyperpod_dpd.schema import config_keys, config_schema

    schema = config_schema()
    properties = [(f"{name}.{key}", prop) for name, d in schema["$defs"].items()
                  for key, prop in d.get("properties", {}).items()]
    properties += list(schema["properties"].items())
    undescribed = [name for name, prop in properties if not prop.get("description")]
    assert not undescribed, f"no docstring: {undescribed}"
    silent = [name for name, prop in properties if not re.search(r"\b(Default|Required)\b", prop["description"])]
    assert not silent, f"no 'Default: ...' (or 'Required'): {silent}"
    keys = {k.path for k in config_keys(schema)}
    assert {"endpoints[].decode.max_num_seqs", "endpoints[].model.s3_prefix", "hyperpod.instance_groups[].pool",
            "benchmark.scenarios[].traffic",
            "observability.grafana_workspace.workspace_id"} <= keys
    twice = sum(len(schema["$defs"][role]["properties"]) for role in ("RoleConfig", "RoleAutoscalingConfig"))
    twice += len(schema["$defs"]["SloConfig"]["properties"])  # observability.slo and each endpoint's own slo
    assert len(keys) == len(properties) + twice, "every field is a key; a role's fields once per role"


def test_the_reference_defaults_are_what_a_config_that_leaves_them_out_gets() -> None:
    """The model is the oracle: a config naming only its instance group loads to exactly the defaults the page
    shows, each role's own included (prefill's max_num_seqs and --enforce-eager are not decode's)."""
    import yaml as pyyaml

    from hyperpod_dpd.schema import config_keys

    loaded = parse_config({"hyperpod": {"instance_groups": [{"name": "g", "instance_count": 2}]}}).model_dump(
        mode="json")
    checked = 0
    for key in config_keys():
        if key.path == "endpoints":
            assert key.default == "`[{}]`"  # one endpoint, every key at its default: the keys below say which
            continue
        path = key.path.replace("endpoints[].", "endpoints.0.", 1)  # the one default endpoint's keys
        if "[]" in path or key.default in ("", "(required)"):
            continue
        *parents, leaf = path.split(".")
        section: dict | None = loaded
        for part in parents:
            section = (section[int(part)] if part.isdigit() else section[part]) if section is not None else None
        if section is None:
            continue  # a key of a section that is off by default (observability.grafana_workspace)
        value = section[leaf]
        if key.default == "`null`" and value is not None:
            continue  # derived from name and region when left out (its description says how)
        text = pyyaml.safe_dump(value, default_flow_style=True, width=1 << 20).strip().removesuffix("...").strip()
        assert key.default == f"`{text}`", key.path
        checked += 1
    assert checked > 80


@pytest.mark.parametrize("path", CONFIG_FILES, ids=lambda p: p.name)
def test_every_config_file_names_the_schema_and_passes_it(path: Path) -> None:
    from hyperpod_dpd.schema import modeline, render

    assert path.read_text().splitlines()[0] == modeline(path)
    jsonschema.Draft202012Validator(json.loads(render())).validate(yaml.safe_load(path.read_text()))


def test_schema_rejects_what_the_model_rejects(default_config_dict) -> None:
    from hyperpod_dpd.schema import render

    validator = jsonschema.Draft202012Validator(json.loads(render()))
    bad = copy.deepcopy(default_config_dict)
    bad["endpoint"]["routing_strategy"] = "random"
    bad["network"]["typo"] = 1
    messages = sorted(e.message for e in validator.iter_errors(bad))
    assert any("'random' is not one of" in m for m in messages)
    assert any("'typo' was unexpected" in m for m in messages)


# --- the cdk8s app refuses outputs of another deployment -------------------------------------------------

def test_stack_names_match_the_cdk_app(stacks, default_config) -> None:
    assert set(stack_names(default_config)) == {s.stack_name for s in stacks.all()}


@pytest.mark.parametrize(("outputs", "message"), [
    ({"other-network": {"Region": "us-west-2"}}, "stack 'other-network' does not belong to config name"),
    ({"hyperpod-dpd-cluster": {"EksClusterName": "team-b"}},
     "hyperpod-dpd-cluster.EksClusterName is 'team-b' but config eks.cluster_name is 'hyperpod-dpd-eks'"),
    ({"hyperpod-dpd-hyperpod": {"HyperPodClusterName": "team-b"}}, "config hyperpod.cluster_name is"),
    ({"hyperpod-dpd-hyperpod": {"HyperPodClusterArn": "arn:aws:sagemaker:us-east-1:111122223333:cluster/x"}},
     "is in region 'us-east-1' but config region is 'us-west-2'"),
    ({"hyperpod-dpd-platform": {"InferenceExecutionRoleArn": "arn:aws:iam::111122223333:role/a",
                                "KedaRoleArn": "arn:aws:iam::444455556666:role/b"}},
     "outputs name several AWS accounts (111122223333, 444455556666)"),
])
def test_outputs_of_another_deployment_are_refused(default_config, tmp_path, outputs, message) -> None:
    path = tmp_path / "cdk-outputs.json"
    path.write_text(json.dumps(outputs))
    with pytest.raises(ConfigError) as info:
        read_outputs_file(path, default_config)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_outputs_in_another_account_than_the_config_names_are_refused(default_config_dict, tmp_path) -> None:
    data = copy.deepcopy(default_config_dict)
    data["eks"]["admin_principal_arn"] = "arn:aws:iam::111122223333:role/Admin"
    path = tmp_path / "cdk-outputs.json"
    path.write_text(json.dumps({"hyperpod-dpd-platform": {"KedaRoleArn": "arn:aws:iam::444455556666:role/k"}}))
    with pytest.raises(ConfigError, match="is in account 444455556666 but the config's ARNs name account 1111"):
        read_outputs_file(path, parse_config(data))


# --- dist/ and cdk.out/ are replaced atomically ----------------------------------------------------------

def test_a_failed_cdk8s_synth_leaves_the_previous_dist(default_config, tmp_path, monkeypatch) -> None:
    from hyperpod_core.inputs import resolve_inputs
    from hyperpod_k8s import charts, main

    dist = tmp_path / "dist"
    inputs = resolve_inputs(default_config, None)
    first = main.synth(default_config, dist, inputs)
    before = {p: p.read_bytes() for p in sorted(dist.rglob("*")) if p.is_file()}
    assert set(first) < set(before)  # the manifests and dashboards, and placeholders/README.txt beside them

    def broken(*_args: object) -> None:
        raise RuntimeError("chart failed")

    monkeypatch.setattr(charts, "build_endpoint_charts", broken)
    with pytest.raises(RuntimeError, match="chart failed"):
        main.synth(default_config, dist, inputs)
    assert {p: p.read_bytes() for p in sorted(dist.rglob("*")) if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dist"], "no temp folder left behind"


def test_a_failed_main_job_leaves_the_previous_cdk_out(tmp_path, monkeypatch) -> None:
    from hyperpod_mainjob import job as mainjob

    cdk_out, dist = tmp_path / "cdk.out", tmp_path / "dist"
    cdk_out.mkdir()
    (cdk_out / "manifest.json").write_text("previous")

    def half_written(_config: object, _path: Path, outdir: Path) -> None:
        (outdir / "manifest.json").write_text("half")
        raise RuntimeError("synth failed")

    monkeypatch.setattr(mainjob, "synth_templates", half_written)
    with pytest.raises(RuntimeError, match="synth failed"):
        mainjob.run(REPO_ROOT / "config" / "default.yaml", cdk_out, dist, None)
    assert (cdk_out / "manifest.json").read_text() == "previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cdk.out"]


@pytest.mark.slow
def test_plain_cdk8s_cli_is_quiet_and_keeps_dist_on_failure(tmp_path) -> None:
    """Plain ``npx cdk8s synth`` (cdk8s.yaml) writes dist/ atomically; the CLI's own folder is a scratch link.

    Quiet with no variable set: .npmrc preloads scripts/npx-env.cjs, which defaults CDK8S_CHECK_UPGRADE=false
    (the CLI reads every option from a ``CDK8S_`` variable; offline its upgrade check prints an HTTP stack
    trace and "A new version undefined") and silences jsii's Node 20 banner.
    """
    env = {k: v for k, v in os.environ.items()
           if k not in ("CDK8S_CHECK_UPGRADE", "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION")}
    # The default config, copied outside the checkout: its folder is my.out/ beside it, not the checkout's root (a
    # developer's dist/ and cdk-outputs.json stay out of the test).
    config, temp = tmp_path / "my.yaml", tmp_path / "temp"
    good = (REPO_ROOT / "config/default.yaml").read_text()
    config.write_text(good)
    dist = tmp_path / "my.out" / "dist"
    temp.mkdir()
    env["HYPERPOD_CONFIG"] = str(config)
    ok = subprocess.run(["npx", "--no-install", "cdk8s", "synth"], cwd=REPO_ROOT, env={**env, "TMPDIR": str(temp)},
                        capture_output=True, text=True, timeout=300, check=False)
    assert ok.returncode == 0, ok.stderr
    assert sorted(p.name for p in temp.iterdir()) == [], "nothing left in the temp folder"
    assert "new version" not in ok.stderr + ok.stdout and "Error" not in ok.stderr and "!!" not in ok.stderr
    assert "llama-3-3-70b-dpd.k8s.yaml" in ok.stdout  # the CLI lists what the app wrote
    before = {p: p.read_bytes() for p in sorted(dist.rglob("*")) if p.is_file()}
    assert before
    config.write_text(good.replace("max_model_len: 16384", "max_model_len: 1024"))
    failed = subprocess.run(["npx", "--no-install", "cdk8s", "synth"], cwd=REPO_ROOT, env=env,
                            capture_output=True, text=True, timeout=300, check=False)
    assert failed.returncode != 0
    assert {p: p.read_bytes() for p in sorted(dist.rglob("*")) if p.is_file()} == before


def test_the_warmed_up_cfn_lint_finds_what_cfn_lint_finds(tmp_path) -> None:
    """The main job's lint child runs cfn-lint's own Runner with .cfnlintrc.yaml: E3002 on an unknown property."""
    import sys

    bad = tmp_path / "Bad.template.json"
    bad.write_text(json.dumps({"Resources": {"B": {"Type": "AWS::S3::Bucket", "Properties": {"Nope": 1}}}}))
    good = tmp_path / "Good.template.json"
    good.write_text(json.dumps({"Resources": {"B": {"Type": "AWS::S3::Bucket"}}}))
    cmd = [sys.executable, "-m", "hyperpod_mainjob.lint_worker", str(REPO_ROOT / ".cfnlintrc.yaml"), "us-west-2"]
    found = subprocess.run(cmd, input=f"{good}\n{bad}\n", capture_output=True, text=True, timeout=120, check=False)
    assert found.returncode == 2
    assert found.stdout.startswith("E3002 ") and str(bad) in found.stdout and str(good) not in found.stdout
    clean = subprocess.run(cmd, input=f"{good}\n", capture_output=True, text=True, timeout=120, check=False)
    assert (clean.returncode, clean.stdout) == (0, "")


def _lint(cdk_out: Path, cache: Path, region: str = "us-west-2") -> tuple[int, str, int]:
    from hyperpod_mainjob.job import CfnLint

    lint = CfnLint(region, cache)
    try:
        lint.send(cdk_out)
        rc, output = lint.wait()
    finally:
        lint.kill()
    return rc, output, lint.unchanged


def test_a_template_that_linted_clean_is_not_linted_again_until_it_changes(tmp_path) -> None:
    """Like ``eslint --cache``: the key is cfn-lint's version, .cfnlintrc.yaml, the region and the bytes."""
    cdk_out, cache = tmp_path / "cdk.out", tmp_path / "cache"
    cdk_out.mkdir()
    good = cdk_out / "Good.template.json"
    good.write_text(json.dumps({"Resources": {"B": {"Type": "AWS::S3::Bucket"}}}))
    assert _lint(cdk_out, cache) == (0, "", 0)
    assert _lint(cdk_out, cache) == (0, "", 1)
    assert _lint(cdk_out, cache, region="eu-west-1") == (0, "", 0), "another region is another key"
    good.write_text(json.dumps({"Resources": {"B": {"Type": "AWS::S3::Bucket", "Properties": {"Nope": 1}}}}))
    rc, output, unchanged = _lint(cdk_out, cache)
    assert (rc, unchanged) == (2, 0) and output.startswith("E3002 ")


def test_findings_are_never_cached(tmp_path) -> None:
    cdk_out, cache = tmp_path / "cdk.out", tmp_path / "cache"
    cdk_out.mkdir()
    (cdk_out / "Bad.template.json").write_text(
        json.dumps({"Resources": {"B": {"Type": "AWS::S3::Bucket", "Properties": {"Nope": 1}}}}))
    (cdk_out / "Good.template.json").write_text(json.dumps({"Resources": {"B": {"Type": "AWS::S3::Bucket"}}}))
    for _ in range(2):
        rc, output, unchanged = _lint(cdk_out, cache)
        assert (rc, unchanged) == (2, 0) and "Bad.template.json" in output
    assert not cache.exists() or list(cache.iterdir()) == [], "nothing is recorded from a run with findings"


def test_the_lint_cache_can_be_moved_or_turned_off(monkeypatch, tmp_path) -> None:
    from hyperpod_mainjob.job import lint_cache

    monkeypatch.delenv("HYPERPOD_CFN_LINT_CACHE", raising=False)
    assert lint_cache() == REPO_ROOT / ".cache" / "cfn-lint"  # README: "cfn-lint ... (`.cache/cfn-lint/`"
    monkeypatch.setenv("HYPERPOD_CFN_LINT_CACHE", "off")
    assert lint_cache() is None
    monkeypatch.setenv("HYPERPOD_CFN_LINT_CACHE", str(tmp_path))
    assert lint_cache() == tmp_path


def test_schema_check_fails_on_a_stale_copy(run_cli, tmp_path, monkeypatch) -> None:
    from hyperpod_dpd import schema

    assert run_cli("schema", "--check").exit_code == 0
    stale = tmp_path / "schema.json"
    stale.write_text("{}\n")
    monkeypatch.setattr(schema, "COMMITTED", stale)
    result = run_cli("schema", "--check")
    assert result.exit_code == 1
    assert result.stderr.strip() == f"error: {stale} is stale; run: hyperpod-dpd schema --write"
    assert run_cli("schema", "--write").exit_code == 0
    assert stale.read_text() == schema.render()


def test_schema_bad_input_is_one_line_and_exit_2(run_cli) -> None:
    result = run_cli("schema", "--check", "--write")
    assert (result.exit_code, result.stderr.strip()) == (2, "error: pass --check or --write, not both")


def test_unchanged_assets_are_linked_not_copied(tmp_path) -> None:
    """The CDK skips staging an ``asset.<hash>`` that exists; the main job links the previous ones in."""
    from hyperpod_mainjob.job import reuse_assets

    previous, new = tmp_path / "cdk.out", tmp_path / "next"
    (previous / "asset.abc").mkdir(parents=True)
    (previous / "asset.abc" / "index.py").write_text("x")
    (previous / "asset.def.zip").write_bytes(b"zip")
    (previous / "Network.template.json").write_text("{}")
    new.mkdir()
    reuse_assets(previous, new)
    assert sorted(p.name for p in new.iterdir()) == ["asset.abc", "asset.def.zip"]
    assert (new / "asset.def.zip").stat().st_ino == (previous / "asset.def.zip").stat().st_ino
    assert (new / "asset.abc" / "index.py").stat().st_ino == (previous / "asset.abc" / "index.py").stat().st_ino


def test_the_raw_next_command_passes_the_parameters_the_templates_require(tmp_path, default_config) -> None:
    """A template parameter without a default (the cluster stack's AdminPrincipalArn) must be on the command."""
    from hyperpod_core.environment import Environment
    from hyperpod_mainjob.job import next_steps

    cdk_out = tmp_path / "cdk.out"
    cdk_out.mkdir()
    (cdk_out / "manifest.json").write_text(json.dumps({"artifacts": {"Cluster": {
        "type": "aws:cloudformation:stack",
        "properties": {"templateFile": "Cluster.template.json", "stackName": "hyperpod-dpd-cluster"}}}}))
    (cdk_out / "Cluster.template.json").write_text(json.dumps({"Parameters": {
        "AdminPrincipalArn": {"Type": "String"},
        "BootstrapVersion": {"Type": "AWS::SSM::Parameter::Value<String>", "Default": "/cdk-bootstrap/x/version"}}}))
    env = Environment(config_path=Path("c.yaml"), config=default_config, workdir=tmp_path)
    first, deploy, again = next_steps(env, deployed=False, via_cli=False)
    assert again.startswith("./scripts/synth c.yaml") and "placeholders/ is not deployable" in again
    assert first.startswith("ADMIN_ARN=$(aws sts get-caller-identity")
    assert deploy.startswith(f"npx cdk deploy --app {cdk_out} --all --outputs-file {tmp_path}/cdk-outputs.json"
                             ' --parameters hyperpod-dpd-cluster:AdminPrincipalArn="$ADMIN_ARN"')


def _deployed_env(tmp_path: Path, config) -> object:  # type: ignore[no-untyped-def]
    """An environment folder with the outputs file ``cdk deploy`` writes for the default config and a cdk.out
    CloudFormation accepts (no stack to refuse)."""
    from hyperpod_core.environment import Environment

    (tmp_path / "cdk.out").mkdir()
    (tmp_path / "cdk.out" / "manifest.json").write_text(json.dumps({"artifacts": {}}))
    (tmp_path / "cdk-outputs.json").write_text(json.dumps({
        "hyperpod-dpd-platform": {"ModelBucketName": "team-models"},
        "hyperpod-dpd-cluster": {"EksClusterArn": "arn:aws:eks:us-west-2:111122223333:cluster/hyperpod-dpd-eks"}}))
    return Environment(config_path=Path("c.yaml"), config=config, workdir=tmp_path)


def test_a_record_of_other_weights_makes_staging_the_next_step_not_apply(tmp_path, default_config) -> None:
    """A staged-weights record of another prefix (model.s3_prefix changed since) leaves the revision a placeholder:
    the next step is stage-model and a synth, never kubectl apply first (it used to count any record as known)."""
    from hyperpod_core import staged_model
    from hyperpod_mainjob.job import next_steps

    env = _deployed_env(tmp_path, default_config)
    staged_model.write(tmp_path / staged_model.RECORD_FILE, bucket="team-models", s3_prefix="models/other/",
                       manifest_bytes=b"m", files=1)
    steps = next_steps(env, deployed=True, via_cli=False)
    assert steps[0].startswith("hyperpod-dpd stage-model ./<model folder> --config c.yaml   # records the weights' "
                               "revision")
    assert steps[1].startswith("./scripts/synth c.yaml   # again: ") and "until model_revision is resolved" in steps[1]
    assert not any(s.startswith("npx cdk deploy") for s in steps), "the outputs are there: no deploy remedy"


def test_only_the_endpoints_whose_own_inputs_hold_placeholders_are_not_deployable(tmp_path,
                                                                                  two_models_config) -> None:
    """Each endpoint resolves its inputs on its own (its weights' revision): with the 70B's weights staged and the
    8B's not, only the 8B's folder holds placeholders. Fails before: the step named every endpoint's
    ``placeholders/`` folder (``.../llama-3-3-70b/placeholders/, .../llama-3-1-8b/placeholders/ are not
    deployable``)."""
    from hyperpod_core import staged_model
    from hyperpod_core.environment import Environment
    from hyperpod_mainjob.job import next_steps

    (tmp_path / "cdk.out").mkdir()
    (tmp_path / "cdk.out" / "manifest.json").write_text(json.dumps({"artifacts": {}}))
    (tmp_path / "cdk-outputs.json").write_text(json.dumps({
        "two-models-platform": {"ModelBucketName": "team-models"},
        "two-models-cluster": {"EksClusterArn": "arn:aws:eks:us-west-2:111122223333:cluster/two-models-eks"}}))
    staged_model.write(tmp_path / staged_model.RECORD_FILE, bucket="team-models",
                       s3_prefix=two_models_config.spec("llama-3-3-70b").model.s3_prefix, manifest_bytes=b"m", files=1)
    env = Environment(config_path=Path("c.yaml"), config=two_models_config, workdir=tmp_path)
    steps = next_steps(env, deployed=True, via_cli=False)
    assert steps[0].startswith("hyperpod-dpd stage-model ./<model folder> --config c.yaml --endpoint llama-3-1-8b ")
    assert steps[1] == (f"./scripts/synth c.yaml   # again: {tmp_path}/dist/llama-3-1-8b/placeholders/ is not "
                        "deployable until model_revision is resolved")


def test_with_every_value_resolved_both_ways_to_apply_are_printed_with_when_each_fits(tmp_path,
                                                                                     default_config) -> None:
    """Whether the endpoint is live is unknown offline: apply (nothing live yet) and hyperpod-dpd rollout (live:
    blue/green, in place or replace, whichever is safe), one line each (issue 36: one way to change an endpoint)."""
    from hyperpod_core import staged_model
    from hyperpod_mainjob.job import next_steps

    env = _deployed_env(tmp_path, default_config)
    staged_model.write(tmp_path / staged_model.RECORD_FILE, bucket="team-models",
                       s3_prefix=default_config.spec().model.s3_prefix, manifest_bytes=b"m", files=1)
    apply, replace = next_steps(env, deployed=True, via_cli=False)
    endpoint = f"{tmp_path}/dist/llama-3-3-70b/endpoint/"
    assert apply.startswith(f"kubectl apply -f {endpoint}   # nothing of it live yet: the endpoint and its stable "
                            "Service")
    assert replace.startswith("hyperpod-dpd rollout --config c.yaml   # it is live: blue/green, in place "
                              "or replace, whichever is safe")


def test_schema_write_marks_every_config_file(run_cli, tmp_path, monkeypatch) -> None:
    """A config file added later (e.g. a new example) gets its schema line from ``schema --write``."""
    from hyperpod_dpd import schema

    (tmp_path / "config" / "examples").mkdir(parents=True)
    monkeypatch.setattr(schema, "COMMITTED", tmp_path / "config" / "schema.json")
    new = tmp_path / "config" / "examples" / "new.yaml"
    new.write_text("# yaml-language-server: $schema=old.json\nname: x\n")
    assert run_cli("schema", "--write").exit_code == 0
    assert new.read_text() == "# yaml-language-server: $schema=../schema.json\nname: x\n"
    assert run_cli("schema", "--check").exit_code == 0
    new.write_text("name: x\n")
    result = run_cli("schema", "--check")
    assert (result.exit_code, result.stderr.strip()) == (
        1, f"error: {new}: no schema line; run: hyperpod-dpd schema --write")
