"""synth / diff / deploy / destroy / init act on the files of the config named, and nothing else.

The main job runs for real once per session (``hyperpod-dpd synth --env``); the real CDK CLI then reads the
assembly it wrote (``cdk ls --app <cdk.out>``), which is what ``cdk deploy --app`` deploys. Deploy/diff/
destroy cannot run without an AWS account, so they run against a fake ``npx`` on PATH that records its argv.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from lifecycle_fixtures import cli_process, copy_env

#: These tests run the entry points in the repository itself (its cdk.out/ and dist/, scripts/setup): one
#: xdist worker runs them all, one after another (scripts/test: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("repository-root")

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT = REPO_ROOT / "config" / "default.yaml"


_cli = cli_process


def _one_line_exit(result: subprocess.CompletedProcess[str], code: int, starts: str) -> None:
    assert result.returncode == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(starts), result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture(scope="session")
def synthesized(demo_env: tuple[Path, subprocess.CompletedProcess[str]],
                ) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The demo environment (``demo_env``, tests/cli/conftest.py): ``(cwd, the synth's result)``."""
    return demo_env


@pytest.fixture(autouse=True)
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials for the AWS credential chain (no AWS call is made with them): diff, deploy and destroy stop before
    the CDK CLI runs when the chain finds none (the tests of that delete them)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


@pytest.fixture
def fake_npx(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A fake ``npx`` first on PATH that records its argv (one per line) and exits ``$FAKE_NPX_RC`` (0)."""
    bin_dir, log = tmp_path / "bin", tmp_path / "npx-argv.txt"
    bin_dir.mkdir()
    script = bin_dir / "npx"
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{log}"\nexit ${{FAKE_NPX_RC:-0}}\n')
    script.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}, log


#: A fake ``npx`` that plays the CDK CLI's side of a deploy. It appends its argv to the log (one JSON list a line: a
#: deploy calls it twice when it checks change sets) and, for ``cdk deploy --method=prepare-change-set`` against a
#: moto server (``AWS_ENDPOINT_URL``), creates the change set of each stack named as the pinned CLI does
#: (``CreateChangeSet`` ``ChangeSetType: UPDATE``, a parameter given on the command line with its value, every
#: other deployed parameter ``UsePreviousValue``: its ``ParameterValues``, node_modules/aws-cdk/lib/index.js). The
#: template is the deployed one with an output added (moto refuses a change set without changes). ``FAKE_DEPLOY_RC``:
#: the exit code of a deploy that is not a change-set preparation (a deploy that fails after the check).
FAKE_CDK = """#!{python}
import json, os, sys
args = sys.argv[1:]
with open({log!r}, "a") as f:
    f.write(json.dumps(args) + "\\n")
if "--method=prepare-change-set" in args and os.environ.get("AWS_ENDPOINT_URL"):
    import boto3
    artifacts = json.load(open(os.path.join(args[args.index("--app") + 1], "manifest.json")))["artifacts"]
    given = {{}}
    for i, arg in enumerate(args[:-1]):
        if arg == "--parameters":
            stack, _, pair = args[i + 1].partition(":")
            given.setdefault(stack, {{}})[pair.partition("=")[0]] = pair.partition("=")[2]
    cfn = boto3.client("cloudformation")
    for sid in [a for a in args if a in artifacts]:
        stack = artifacts[sid]["properties"]["stackName"]
        body = dict(cfn.get_template(StackName=stack)["TemplateBody"])
        body["Outputs"] = {{"ChangedByThisDeploy": {{"Value": "yes"}}}}
        deployed = cfn.describe_stacks(StackName=stack)["Stacks"][0].get("Parameters", [])
        parameters = [{{"ParameterKey": p["ParameterKey"], "ParameterValue": given[stack][p["ParameterKey"]]}}
                      if p["ParameterKey"] in given.get(stack, {{}}) else
                      {{"ParameterKey": p["ParameterKey"], "UsePreviousValue": True}} for p in deployed]
        cfn.create_change_set(StackName=stack, ChangeSetName=args[args.index("--change-set-name") + 1],
                              ChangeSetType="UPDATE", TemplateBody=json.dumps(body), Parameters=parameters)
if "--method=prepare-change-set" not in args and os.environ.get("FAKE_DEPLOY_RC"):
    sys.exit(int(os.environ["FAKE_DEPLOY_RC"]))
sys.exit(int(os.environ.get("FAKE_NPX_RC", "0")))
"""


@pytest.fixture
def fake_cdk(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """:data:`FAKE_CDK` first on PATH; the log's lines are the argv lists of its calls, in order."""
    bin_dir, log = tmp_path / "cdk-bin", tmp_path / "npx-calls.jsonl"
    bin_dir.mkdir()
    script = bin_dir / "npx"
    script.write_text(FAKE_CDK.format(python=sys.executable, log=str(log)))
    script.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}, log


def _calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.is_file() else []


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    """One moto server for this module's commands that run as child processes (``AWS_ENDPOINT_URL``)."""
    from moto.server import ThreadedMotoServer

    from fake_http import free_port

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def moto_env(moto_url: str) -> Iterator[dict[str, str]]:
    """The environment of a child process that calls the moto server, which holds this test's state only."""
    from moto.core.base_backend import BackendDict

    BackendDict.reset()
    yield {"AWS_ENDPOINT_URL": moto_url, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_EC2_METADATA_DISABLED": "true", "AWS_DEFAULT_REGION": "us-west-2"}
    BackendDict.reset()


def _copy_env(cwd: Path, name: str, *, charts_fetched: bool) -> Path:
    """A copy of the demo environment as set-up with (or without) access to the charts' sources leaves it."""
    return copy_env(cwd / "envs" / "demo", cwd / "envs" / name, charts_fetched=charts_fetched)


def test_init_names_the_environment_and_points_at_the_schema(synthesized) -> None:
    cwd, _ = synthesized
    text = (cwd / "envs" / "demo" / "config.yaml").read_text()
    assert text.splitlines()[0].startswith("# yaml-language-server: $schema=")
    assert "\nname: demo\n" in text


def test_synth_writes_only_into_the_environment_folder(synthesized) -> None:
    cwd, result = synthesized
    env = cwd / "envs" / "demo"
    assert sorted(p.name for p in env.iterdir()) == ["cdk.out", "config.yaml", "dist"]
    assert {p.name for p in (env / "cdk.out").glob("*.template.json")} == {
        "Network.template.json", "Cluster.template.json", "HyperPod.template.json",
        "Observability.template.json", "Platform.template.json", "ObservabilityAddon.template.json"}
    manifest = json.loads((env / "cdk.out" / "manifest.json").read_text())
    names = {a["properties"]["stackName"] for a in manifest["artifacts"].values()
             if a["type"] == "aws:cloudformation:stack"}
    assert names == {f"demo-{s}" for s in ("network", "cluster", "hyperpod", "observability", "platform",
                                           "observability-addon")}
    # No outputs file yet: the manifests hold placeholders, so they are kept out of dist/<endpoint>/endpoint/.
    assert (env / "dist" / "llama-3-3-70b" / "placeholders" / "endpoint" / "llama-3-3-70b-dpd.k8s.yaml").is_file()
    assert not (env / "dist" / "endpoint").exists()
    assert not list(cwd.glob("**/.*.tmp-*")), "no temp folders left behind"
    assert sorted(p.name for p in (cwd / "temp").iterdir()) == [], "nothing left in the temp folder"
    assert "hyperpod-dpd deploy --env demo" in result.stdout


def test_synth_prints_a_progress_line_for_every_step(synthesized) -> None:
    _, result = synthesized
    lines = result.stderr.splitlines()
    starts = [line for line in lines if line.startswith("[")]
    assert [s.split("]")[0] for s in starts] == ["[1/3", "[2/3", "[3/3"]
    assert sum("done in" in line for line in lines) == 3


@pytest.mark.slow
def test_the_real_cdk_cli_reads_the_assembly_deploy_uses(synthesized) -> None:
    """``cdk ls --app <cdk.out>`` (the pinned CLI, offline) lists the stacks by the IDs deploy selects."""
    cwd, _ = synthesized
    result = subprocess.run(["npx", "--no-install", "cdk", "ls", "--app", str(cwd / "envs/demo/cdk.out")],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False,
                            env={**os.environ, "CDK_DISABLE_CLI_TELEMETRY": "true", "CDK_DISABLE_VERSION_CHECK": "1",
                                 "CI": "true"})  # CI mode: the CLI's messages go to stdout; none may appear
    assert result.returncode == 0, result.stderr
    listed = [line.split()[0] for line in result.stdout.splitlines() if line.strip()]
    assert set(listed) == {"Network", "Observability", "Cluster", "HyperPod", "Platform", "ObservabilityAddon"}
    assert listed.index("HyperPod") < listed.index("Platform") and listed.index("HyperPod") < listed.index(
        "ObservabilityAddon")


def test_deploy_deploys_that_cdk_out_and_writes_outputs_beside_it(synthesized, fake_cdk, moto_env) -> None:
    """A first deploy (no stack exists yet, moto): one CDK CLI call, no change set to check."""
    cwd, _ = synthesized
    env, log = fake_cdk
    _copy_env(cwd, "fetched", charts_fetched=True)
    admin = "arn:aws:iam::123456789012:role/Admin"
    result = _cli("deploy", "--env", "fetched", "--yes", "--admin-principal-arn", admin, "--region", "us-west-2",
                  cwd=cwd, **env, **moto_env)
    assert result.returncode == 0, result.stderr
    demo = (cwd / "envs" / "fetched").resolve()
    # The cluster stack's required AdminPrincipalArn parameter is filled for the stack that declares it
    # (the CDK CLI keys --parameters by CloudFormation stack name).
    # --concurrency: independent stacks deploy side by side (issue 20 item 6; the CDK CLI's deploy option
    # "Maximum number of simultaneous deployments (dependency permitting) to execute", aws-cdk 2.1148 cli-config).
    assert _calls(log) == [[
        "--no-install", "cdk", "deploy", "--app", str(demo / "cdk.out"), "--all",
        "--outputs-file", str(demo / "cdk-outputs.json"), "--concurrency", "6",
        "--parameters", f"demo-cluster:AdminPrincipalArn={admin}", "--require-approval", "never"]]
    assert "next: hyperpod-dpd synth --env fetched" in result.stdout
    assert result.stderr.splitlines()[0] == (
        "deploy: 6 stacks of demo (demo-network, demo-observability, demo-cluster, demo-hyperpod, "
        f"demo-observability-addon, demo-platform) from {demo / 'cdk.out'} to us-west-2; cluster admin {admin}; "
        "outputs to envs/fetched/cdk-outputs.json")


def test_deploy_asks_and_without_a_terminal_wants_yes(synthesized, fake_npx, moto_env) -> None:
    cwd, _ = synthesized
    env, log = fake_npx
    _copy_env(cwd, "fetched", charts_fetched=True)
    result = _cli("deploy", "--env", "fetched", "--admin-principal-arn", "arn:aws:iam::123456789012:role/Admin",
                  cwd=cwd, **env, **moto_env)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        "error: hyperpod-dpd deploy asks before it changes anything and stdin is not a terminal: pass --yes to go "
        "ahead without asking (or --dry-run to see what it would do)")
    assert not log.exists(), "the CDK CLI must not run"


def test_deploy_refuses_templates_cloudformation_would_refuse(synthesized, fake_npx) -> None:
    """Set-up could not fetch a pinned Helm chart: the template's rule fails every create/update, so deploy stops
    before the CDK CLI runs, naming what to run."""
    cwd, _ = synthesized
    env, log = fake_npx
    _copy_env(cwd, "unfetched", charts_fetched=False)
    result = _cli("deploy", "--env", "unfetched", "--yes", "--admin-principal-arn",
                  "arn:aws:iam::123456789012:role/Admin", cwd=cwd, **env)
    _one_line_exit(result, 1, "error: stack demo-cluster cannot deploy yet: Helm charts nvidia-device-plugin")
    assert "hyperpod-dpd synth --env unfetched, then deploy" in result.stderr
    assert not log.exists()
    network_only = _cli("deploy", "Network", "--env", "unfetched", "--yes", cwd=cwd, **env)
    assert network_only.returncode == 0, network_only.stderr  # the network stack does not need the charts


def test_a_failed_deploy_does_not_claim_nothing_changed(synthesized, fake_npx) -> None:
    cwd, _ = synthesized
    env, _ = fake_npx
    _copy_env(cwd, "fetched", charts_fetched=True)
    result = _cli("deploy", "Network", "--env", "fetched", "--yes", cwd=cwd, **env, FAKE_NPX_RC="1")
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1].startswith(
        "error: cdk deploy exited 1: no output (its whole output: envs/fetched/cdk-deploy.log)")
    assert "nothing else was changed" not in result.stderr
    assert "stacks deployed before it in this run stay deployed" in result.stderr


def test_diff_of_every_stack_passes_no_all(synthesized, fake_npx, moto_env) -> None:
    """``cdk diff`` has no ``--all`` option (the pinned CLI's option table, node_modules/aws-cdk/lib/cli/
    cli-type-registry.json); with no stack named it compares every top-level stack."""
    cwd, _ = synthesized
    env, log = fake_npx
    registry = json.loads((REPO_ROOT / "node_modules" / "aws-cdk" / "lib" / "cli" / "cli-type-registry.json")
                          .read_text())
    assert "all" not in registry["commands"]["diff"]["options"]
    assert "all" in registry["commands"]["deploy"]["options"] and "all" in registry["commands"]["destroy"]["options"]
    result = _cli("diff", "--env", "demo", cwd=cwd, **env, **moto_env)  # SageMaker for the deep-health-check line
    assert result.returncode == 0, result.stderr
    assert log.read_text().splitlines() == ["--no-install", "cdk", "diff", "--app",
                                            str((cwd / "envs/demo/cdk.out").resolve())]


def test_the_cdk_cli_takes_the_concurrency_option_deploy_passes() -> None:
    """The pinned CDK CLI's own option table (node_modules/aws-cdk/lib/cli/cli-config.js) lists ``concurrency`` for
    ``deploy``: a misspelt option would stop the real deploy with "Unknown argument"."""
    config = (REPO_ROOT / "node_modules" / "aws-cdk" / "lib" / "cli" / "cli-config.js").read_text()
    deploy = config[config.index("'deploy': {"):config.index("'validate': {")]
    assert "'concurrency': { type: 'number', desc: 'Maximum number of simultaneous deployments (dependency " \
           "permitting) to execute.'" in deploy


def test_diff_of_the_hyperpod_stack_says_when_deep_health_checks_refuse_the_update(synthesized, fake_npx,
                                                                                 moto_env) -> None:
    """HyperPod refuses UpdateCluster while deep health checks run (AWS HyperPod EKS deep health check page): with a
    node ``DeepHealthCheckInProgress`` (ListClusterNodes) and an instance-group change, ``diff`` says so. A moto
    server plays SageMaker (moto implements DescribeCluster and ListClusterNodes); the node status is set on its
    backend, to a value of the service model's ClusterInstanceStatus."""
    import boto3
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.sagemaker.models import sagemaker_backends

    cwd, _ = synthesized
    env, _ = fake_npx
    aws = moto_env
    backend = sagemaker_backends[DEFAULT_ACCOUNT_ID]["us-west-2"]
    sm = boto3.client("sagemaker", region_name="us-west-2", endpoint_url=aws["AWS_ENDPOINT_URL"],
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    sm.create_cluster(ClusterName="demo", VpcConfig={"SecurityGroupIds": ["sg-1"], "Subnets": ["subnet-1"]},
                      InstanceGroups=[{"InstanceGroupName": g, "InstanceType": "ml.p5.48xlarge",
                                       "InstanceCount": count, "ThreadsPerCore": 1,
                                       "OnStartDeepHealthChecks": ["InstanceStress", "InstanceConnectivity"],
                                       "ExecutionRole": "arn:aws:iam::123456789012:role/hp",
                                       "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lc/", "OnCreate": "x"}}
                                      for g, count in (("prefill", 1), ("decode", 2))])
    backend.clusters["demo"].nodes["decode-1"].status = "DeepHealthCheckInProgress"
    result = _cli("diff", "HyperPod", "--env", "demo", cwd=cwd, **env, **aws)
    assert result.returncode == 0, result.stderr
    assert ("FAIL: deep health checks: 1 node(s) in deep health checks (decode-1 (decode)), and the config "
            "changes decode: instance_count 2 -> 1: HyperPod refuses UpdateCluster") in result.stdout
    backend.clusters["demo"].nodes["decode-1"].status = "Running"
    calm = _cli("diff", "HyperPod", "--env", "demo", cwd=cwd, **env, **aws)
    assert "pass: deep health checks: no node of demo in deep health checks" in calm.stdout


@pytest.mark.parametrize(("given", "selector"), [
    ("demo-network", "Network"), ("Cluster", "Cluster"), ("platform", "Platform")])
def test_stacks_are_selected_by_the_ids_the_cdk_cli_accepts(synthesized, fake_npx, given, selector) -> None:
    """The CDK CLI selects by construct path (``cdk diff Network``); a CloudFormation name is translated."""
    cwd, _ = synthesized
    env, log = fake_npx
    result = _cli("diff", given, "--env", "demo", cwd=cwd, **env)
    assert result.returncode == 0, result.stderr
    assert log.read_text().splitlines()[2:] == [
        "diff", "--app", str((cwd / "envs/demo/cdk.out").resolve()), selector]


def test_destroy_asks_and_without_a_terminal_wants_yes(synthesized, fake_npx) -> None:
    cwd, _ = synthesized
    env, log = fake_npx
    result = _cli("destroy", "--env", "demo", cwd=cwd, **env)
    assert result.returncode == 2 and "pass --yes" in result.stderr
    assert not log.exists()
    dry = _cli("destroy", "--env", "demo", "--dry-run", cwd=cwd, **env)
    assert dry.returncode == 0 and dry.stdout.strip() == "dry run: nothing destroyed"
    # Reverse deploy order; the stacks of the selection and those that depend on them (what cdk destroy removes).
    assert dry.stderr.splitlines()[-1].startswith(
        "destroy: 6 stacks of demo in us-west-2, in this order: demo-platform, demo-observability-addon, "
        "demo-hyperpod, demo-cluster, demo-observability, demo-network; the model bucket is kept")
    partial = _cli("destroy", "HyperPod", "--env", "demo", "--dry-run", cwd=cwd, **env)
    assert "3 stacks of demo in us-west-2, in this order: demo-platform, demo-observability-addon, demo-hyperpod" \
        in partial.stderr
    assert not log.exists()


def test_destroy_yes_destroys_and_moves_the_outputs_aside(synthesized, fake_npx) -> None:
    cwd, _ = synthesized
    env, log = fake_npx
    target = _copy_env(cwd, "gone", charts_fetched=True)
    outputs = {f"demo-{s}": {"X": s} for s in ("network", "cluster", "hyperpod", "platform")}
    (target / "cdk-outputs.json").write_text(json.dumps(outputs))
    partial = _cli("destroy", "Platform", "--env", "gone", "--yes", cwd=cwd, **env)
    assert partial.returncode == 0, partial.stderr
    assert log.read_text().splitlines()[2:] == ["destroy", "--app", str((target / "cdk.out").resolve()), "Platform",
                                                "--force"]
    aside = sorted(target.glob("cdk-outputs.destroyed-*.json"))
    assert len(aside) == 1 and json.loads(aside[0].read_text()) == outputs
    assert json.loads((target / "cdk-outputs.json").read_text()) == {
        k: v for k, v in outputs.items() if k != "demo-platform"}, "the remaining stacks' outputs stay"
    import time

    time.sleep(1.1)  # the stamp has one-second resolution
    full = _cli("destroy", "--env", "gone", "--yes", cwd=cwd, **env)
    assert full.returncode == 0, full.stderr
    assert not (target / "cdk-outputs.json").exists()
    assert len(list(target.glob("cdk-outputs.destroyed-*.json"))) == 2
    assert "no later command uses the destroyed stacks' names" in full.stdout


#: What a deploy of the demo environment writes for the kept bucket: CloudFormation's generated bucket name and the
#: key's ARN (outputs ModelBucketName, ModelBucketKeyArn; core/hyperpod_core/outputs.py).
KEPT_BUCKET = "demo-platform-modelbucket24fa8ca2-1a2b3c4d5e6f"
KEPT_KEY = "arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
DELETE_HINT = ('to delete the bucket, its key and the access-log bucket instead: docs/platform.md, "Deleting the '
               'kept model data anyway" (the bucket is versioned: aws s3 rb --force cannot empty it)')


def _in_place_of_model_bucket(config_text: str, block: list[str]) -> str:
    """``config_text`` with ``block`` in place of its ``model_bucket:`` block, as the destroy message says."""
    import re

    return re.sub(r"\nmodel_bucket:\n(?:[ #].*\n)*", "\n" + "\n".join(block) + "\n", config_text, count=1)


def test_destroy_prints_the_kept_bucket_and_key_as_config_lines_that_load(synthesized, fake_npx) -> None:
    """Issue 30, items 3 and 7: the lines name the kept bucket and key exactly as the outputs file has them, they
    load into this config, and the deletion hint points at the versioned-bucket procedure, not ``aws s3 rb``."""
    from hyperpod_core.config import load_config

    cwd, _ = synthesized
    env, _ = fake_npx
    target = _copy_env(cwd, "kept", charts_fetched=True)
    (target / "cdk-outputs.json").write_text(json.dumps({
        "demo-cluster": {"EksClusterName": "demo-eks"},
        "demo-platform": {"ModelBucketName": KEPT_BUCKET, "ModelBucketKeyArn": KEPT_KEY}}))
    result = _cli("destroy", "--env", "kept", "--yes", cwd=cwd, **env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    at = lines.index("model_bucket:")
    block = lines[at:at + 3]
    assert block == ["model_bucket:", f"  existing_name: {KEPT_BUCKET}", f"  existing_kms_key_arn: {KEPT_KEY}"]
    assert lines[at - 1] == f"to read it again, put these lines into {Path('envs/kept/config.yaml')} (in place of " \
                            "its model_bucket block):"
    assert lines[at + 3] == DELETE_HINT
    assert "### Deleting the kept model data anyway" in (REPO_ROOT / "docs" / "platform.md").read_text()
    reused = target / "reused.yaml"
    reused.write_text(_in_place_of_model_bucket((target / "config.yaml").read_text(), block))
    bucket = load_config(reused).model_bucket
    assert (bucket.existing_name, bucket.existing_kms_key_arn, bucket.delete_on_destroy) == (KEPT_BUCKET, KEPT_KEY,
                                                                                           False)


@pytest.mark.parametrize(("outputs", "expected"), [
    ({"demo-platform": {"ModelBucketName": KEPT_BUCKET}},
     ["model_bucket:", f"  existing_name: {KEPT_BUCKET}",
      f"  # existing_kms_key_arn: the key of the bucket's default encryption (aws s3api get-bucket-encryption "
      f"--bucket {KEPT_BUCKET}; no ModelBucketKeyArn output)"]),
    (None, ["to read it again, set model_bucket.existing_name and existing_kms_key_arn to the platform stack's "
            "outputs ModelBucketName and ModelBucketKeyArn (not in an outputs file here)"]),
    ({"demo-platform": {"ModelBucketName": "Not A Bucket", "ModelBucketKeyArn": "alias/x"}},
     ["to read it again, set model_bucket.existing_name and existing_kms_key_arn to the platform stack's "
      "outputs ModelBucketName and ModelBucketKeyArn (not in {file})"]),
], ids=["no-key-output", "no-outputs-file", "values-that-would-not-load"])
def test_the_kept_bucket_message_prints_only_lines_that_load(tmp_path, default_config_dict, outputs,
                                                             expected) -> None:
    """An outputs file from before the ModelBucketKeyArn output, none, or values that would not load: the message
    says where to find them and never prints a config line that would not load."""
    import yaml

    from hyperpod_core.config import load_config
    from hyperpod_dpd.commands.lifecycle import kept_model_bucket

    path = None
    if outputs is not None:
        path = tmp_path / "cdk-outputs.destroyed-20260101T000000Z.json"
        path.write_text(json.dumps(outputs))
    lines = kept_model_bucket(path, Path("c.yaml")).splitlines()
    shown = [line.replace("{file}", str(path)) for line in expected]
    assert lines[0] == "model bucket kept, with its KMS key and its access-log bucket " \
                       "(model_bucket.delete_on_destroy: false)"
    assert lines[-1] == DELETE_HINT
    assert lines[-1 - len(shown):-1] == shown
    if shown[0] == "model_bucket:":
        reused = tmp_path / "reused.yaml"
        reused.write_text(_in_place_of_model_bucket(yaml.safe_dump(default_config_dict, sort_keys=False), shown))
        assert load_config(reused).model_bucket.existing_name == KEPT_BUCKET


def test_a_failed_destroy_keeps_the_outputs(synthesized, fake_npx) -> None:
    cwd, _ = synthesized
    env, _ = fake_npx
    target = _copy_env(cwd, "stuck", charts_fetched=True)
    (target / "cdk-outputs.json").write_text("{}")
    result = _cli("destroy", "--env", "stuck", "--yes", cwd=cwd, **env, FAKE_NPX_RC="1")
    assert result.returncode == 1 and result.stderr.splitlines()[-1].startswith("error: cdk destroy exited 1")
    assert (target / "cdk-outputs.json").is_file() and not list(target.glob("cdk-outputs.destroyed-*"))


class _Terminal(__import__("io").StringIO):
    """stdin as a terminal that answers ``answer``."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("answer", "code"), [("n\n", 1), ("\n", 1), ("yes\n", 0)])
def test_a_destroy_the_user_declines_is_cancelled_not_failed(synthesized, fake_npx, monkeypatch, capsys, answer,
                                                             code) -> None:
    from hyperpod_dpd.app import main

    cwd, _ = synthesized
    env, log = fake_npx
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.setattr(sys, "stdin", _Terminal(answer))
    with pytest.raises(SystemExit) as exit_:
        main(["destroy", "--env", "demo"])
        raise SystemExit(0)
    err = capsys.readouterr().err
    assert exit_.value.code == code
    assert "destroy 6 stacks of demo in us-west-2? [y/N]" in err
    if code:
        # The answer's line end is the terminal's echo; the question and the answer share a line.
        assert err.rstrip().endswith("[y/N] cancelled: nothing destroyed") and "error" not in err.lower()
        assert not log.exists()
    else:
        assert log.read_text().splitlines()[-1] == "--force"


def test_deploy_refuses_a_config_changed_since_synth(synthesized, fake_npx) -> None:
    cwd, _ = synthesized
    env, log = fake_npx
    from hyperpod_core.config import load_config
    from hyperpod_core.environment import stamp

    shutil.copytree(cwd / "envs" / "demo", cwd / "envs" / "edited")
    cfg = cwd / "envs" / "edited" / "config.yaml"
    stamp(cwd / "envs" / "edited" / "cdk.out", cfg, load_config(cfg))  # as a synth of envs/edited/ stamps it
    cfg.write_text(cfg.read_text().replace("max_model_len: 16384", "max_model_len: 8192"))
    result = _cli("deploy", "--env", "edited", cwd=cwd, **env)
    _one_line_exit(result, 2, "error: envs/edited/config.yaml changed since envs/edited/cdk.out was synthesized")
    # Another config's templates (a copied folder whose config was then edited) are named as such.
    shutil.copytree(cwd / "envs" / "demo", cwd / "envs" / "copied")
    cfg = cwd / "envs" / "copied" / "config.yaml"
    cfg.write_text(cfg.read_text().replace("max_model_len: 16384", "max_model_len: 8192"))
    result = _cli("deploy", "--env", "copied", cwd=cwd, **env)
    _one_line_exit(result, 2, f"error: envs/copied/cdk.out holds the templates of "
                              f"{(cwd / 'envs' / 'demo' / 'config.yaml').resolve()}, not of envs/copied/config.yaml")
    assert not log.exists(), "the CDK CLI must not run"


@pytest.mark.parametrize("command", ["diff", "deploy", "destroy"])
def test_nothing_synthesized_is_one_line_and_exit_2(tmp_path, fake_npx, command) -> None:
    env, log = fake_npx
    (tmp_path / "envs" / "fresh").mkdir(parents=True)
    shutil.copy(DEFAULT, tmp_path / "envs" / "fresh" / "config.yaml")
    result = _cli(command, "--env", "fresh", cwd=tmp_path, **env)
    _one_line_exit(result, 2, "error: envs/fresh/cdk.out holds no synthesized templates")
    assert "run: hyperpod-dpd synth --env fresh" in result.stderr
    assert not log.exists()


def test_an_unknown_stack_is_one_line_and_exit_2(synthesized, fake_npx) -> None:
    cwd, _ = synthesized
    env, log = fake_npx
    result = _cli("deploy", "hyperpod-dpd-network", "--env", "demo", cwd=cwd, **env)
    _one_line_exit(result, 2, "error: stack must be one of Network (demo-network)")
    assert not log.exists()


@pytest.mark.parametrize(("args", "starts"), [
    (("synth",), "error: name the config"),
    (("synth", "--env", "demo", "--outputs-file", "nope.json"), "error: --outputs-file 'nope.json' does not exist"),
    (("init", "Bad_Name"), "error: environment name must be 1-31 lowercase letters"),
    (("init", "demo"), "error: environment 'demo' exists already"),
    (("init", "other", "--from", "missing.yaml"), "error: config file 'missing.yaml' cannot be read"),
])
def test_bad_input_is_one_line_and_exit_2(synthesized, args, starts) -> None:
    cwd, _ = synthesized
    _one_line_exit(_cli(*args, cwd=cwd), 2, starts)


def test_synth_of_a_bad_config_is_one_line_and_writes_nothing(tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(DEFAULT.read_text().replace("routing_threshold_tokens: 4096", "routing_threshold_tokens: 20000"))
    result = _cli("synth", "--config", str(bad), cwd=tmp_path)
    _one_line_exit(result, 2, "error: endpoint.routing_threshold_tokens must be below")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml"]


def test_synth_refuses_the_outputs_of_another_deployment(synthesized) -> None:
    cwd, _ = synthesized
    other = cwd / "other-outputs.json"
    other.write_text(json.dumps({"hyperpod-dpd-platform": {"ModelBucketName": "someone-elses"}}))
    before = sorted(p.name for p in (cwd / "envs/demo/dist").iterdir())
    result = _cli("synth", "--env", "demo", "--outputs-file", str(other), cwd=cwd)
    _one_line_exit(result, 2,
        f"error: outputs file {str(other)!r}: stack 'hyperpod-dpd-platform' does not belong to config name 'demo'")
    assert sorted(p.name for p in (cwd / "envs/demo/dist").iterdir()) == before


@pytest.mark.slow
def test_the_main_job_script_rejects_a_bad_config_in_one_line_and_keeps_its_outputs(tmp_path) -> None:
    """``./scripts/synth bad.yaml``: set-up, then one line and exit 2 before anything is replaced."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(DEFAULT.read_text().replace("routing_threshold_tokens: 4096", "routing_threshold_tokens: 20000"))
    marker = REPO_ROOT / "cdk.out" / "manifest.json"
    before = marker.read_bytes() if marker.is_file() else None
    result = subprocess.run([str(REPO_ROOT / "scripts" / "synth"), str(bad)], cwd=REPO_ROOT, capture_output=True,
                            text=True, timeout=600, check=False)
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if not line.startswith("[setup]")]
    assert len(errors) == 1 and errors[0].startswith("error: endpoint.routing_threshold_tokens must be below")
    assert (marker.read_bytes() if marker.is_file() else None) == before


def _with_parameters(cwd: Path, name: str, parameters: dict) -> None:
    """A copy of the demo environment whose Cluster template declares ``parameters`` (as main's does)."""
    shutil.copytree(cwd / "envs" / "demo", cwd / "envs" / name)
    template = cwd / "envs" / name / "cdk.out" / "Cluster.template.json"
    data = json.loads(template.read_text())
    data.setdefault("Parameters", {}).update(parameters)
    template.write_text(json.dumps(data))


def test_deploy_fills_the_admin_principal_parameter(synthesized, fake_npx, moto_env) -> None:
    """A required ``AdminPrincipalArn`` gets the role of an assumed-role session (an access entry names roles)."""
    cwd, _ = synthesized
    env, log = fake_npx
    _with_parameters(cwd, "admin", {"AdminPrincipalArn": {"Type": "String"}})
    _copy_env(cwd, "admin", charts_fetched=True)
    result = _cli("deploy", "--env", "admin", "--yes", "--admin-principal-arn",
                  "arn:aws:sts::111122223333:assumed-role/Ops/alice", cwd=cwd, **env, **moto_env)
    assert result.returncode == 0, result.stderr
    argv = log.read_text().splitlines()
    assert argv[argv.index("--parameters") + 1] == "demo-cluster:AdminPrincipalArn=arn:aws:iam::111122223333:role/Ops"


@pytest.mark.parametrize(("parameters", "args", "starts"), [
    ({"AdminPrincipalArn": {"Type": "String"}}, ("--admin-principal-arn", "alice"),
     "error: admin principal must be an IAM user, IAM role or assumed-role session ARN, got 'alice'"),
    ({"Other": {"Type": "String"}}, (), "error: stack demo-cluster needs parameters Other that hyperpod-dpd does"),
])
def test_deploy_parameter_bad_input_is_one_line_and_exit_2(synthesized, fake_npx, parameters, args, starts) -> None:
    cwd, _ = synthesized
    env, log = fake_npx
    name = f"p{len(list((cwd / 'envs').iterdir()))}"
    _with_parameters(cwd, name, parameters)
    _one_line_exit(_cli("deploy", "--env", name, *args, cwd=cwd, **env), 2, starts)
    assert not log.exists()


@pytest.mark.parametrize(("caller", "principal"), [
    ("arn:aws:sts::111122223333:assumed-role/Admin/session-1", "arn:aws:iam::111122223333:role/Admin"),
    ("arn:aws:iam::111122223333:user/alice", "arn:aws:iam::111122223333:user/alice"),
    ("arn:aws:iam::111122223333:role/path/Ops", "arn:aws:iam::111122223333:role/path/Ops"),
])
def test_principal_arn_of_a_caller(caller: str, principal: str) -> None:
    """STS GetCallerIdentity ARN forms (IAM user guide, 'IAM identifiers')."""
    from hyperpod_dpd.deploy_guards import principal_arn

    assert principal_arn(caller) == principal


@pytest.mark.parametrize("fetched", [True, False])
def test_synth_says_plainly_when_the_templates_cannot_deploy_yet(synthesized, monkeypatch, fetched) -> None:
    """The summary's next steps start with what to run when CloudFormation would refuse the templates."""
    from hyperpod_core import environment
    from hyperpod_mainjob.job import next_steps

    cwd, _ = synthesized
    name = "steps-fetched" if fetched else "steps-unfetched"
    _copy_env(cwd, name, charts_fetched=fetched)
    monkeypatch.chdir(cwd)
    steps = next_steps(environment.resolve(env=name), deployed=False, via_cli=True)
    if fetched:
        assert steps == [f"hyperpod-dpd preflight --env {name}", f"hyperpod-dpd deploy --env {name}"]
        return
    assert steps[0].startswith("NOT DEPLOYABLE YET: stack demo-cluster cannot deploy yet: Helm charts "
                               "nvidia-device-plugin")
    assert steps[1].startswith("./scripts/setup   # with access to raw.githubusercontent.com")
    assert steps[2].startswith(f"hyperpod-dpd synth --env {name}")
    assert steps[-1] == f"hyperpod-dpd deploy --env {name}"


# --- the region rule (issue 30 item 2) --------------------------------------------------------------------------

def _regional(cwd: Path) -> str:
    """A copy of the demo environment deployed to us-west-2: its outputs file says ``Region``."""
    target = _copy_env(cwd, "regional", charts_fetched=True)
    (target / "cdk-outputs.json").write_text(json.dumps({"demo-network": {"Region": "us-west-2"}}))
    return "regional"


@pytest.fixture
def no_aws(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every boto3 client the command line would create (``hyperpod_dpd.aws.client``, the only place it does),
    recorded and refused."""
    from hyperpod_dpd import aws

    made: list[str] = []

    def refused(service: str, region: str, session: object = None) -> None:
        made.append(f"{service} in {region}")
        raise AssertionError(f"AWS client created: {service} in {region}")

    monkeypatch.setattr(aws, "client", refused)
    return made


@pytest.mark.parametrize("command", ["deploy", "diff", "destroy"])
def test_a_region_other_than_the_deployments_is_refused_before_any_aws_call(
        synthesized, fake_cdk, no_aws, monkeypatch, run_cli, command) -> None:
    """Stack names are unique per region only (CloudFormation: "The stack name must be unique in the Region in
    which you are creating the stack"), so demo in us-east-1 is another deployment: a command that changes or
    deletes refuses it in one line, exit 2, before any AWS or CDK CLI call. Fails on main: no --region there."""
    cwd, _ = synthesized
    env, log = fake_cdk
    name = _regional(cwd)
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("PATH", env["PATH"])
    result = run_cli(command, "--env", name, "--region", "us-east-1", *(["--yes"] if command != "diff" else []))
    assert result.exit_code == 2, result.stderr
    (line,) = result.stderr.splitlines()  # what the command does there: test_one_way_through.py
    assert line.startswith(f"error: --region must be this deployment's region us-west-2 (envs/{name}/cdk-outputs.json: "
                           f"demo-network.Region) for hyperpod-dpd {command}, which ")
    assert line.endswith(", got 'us-east-1' (a deployment of the same name in us-east-1 is another deployment; name "
                         "its own config)")
    assert no_aws == [] and _calls(log) == []


@pytest.mark.parametrize("args", [
    ("diff", "Network"), ("deploy", "Network", "--yes"), ("destroy", "Platform", "--yes")])
def test_profile_reaches_the_cdk_cli_and_boto3(synthesized, fake_cdk, monkeypatch, run_cli, tmp_path, args) -> None:
    """``--profile NAME`` goes to the CDK CLI as its global ``--profile`` option (aws-cdk's CLI reference, global
    options: "Use the indicated AWS profile as the default environment"; the pinned CLI's cli-config.js) and to
    boto3 as AWS_PROFILE; ``--region`` equal to the deployment's is accepted."""
    cwd, _ = synthesized
    env, log = fake_cdk
    _copy_env(cwd, "fetched", charts_fetched=True)
    config = tmp_path / "aws-config"
    config.write_text("[profile ops]\nregion = us-west-2\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_PROFILE", "unset")  # recorded, so that the value the option sets is undone
    monkeypatch.delenv("AWS_PROFILE")
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("PATH", env["PATH"])
    result = run_cli(args[0], *args[1:], "--env", "fetched", "--profile", "ops", "--region", "us-west-2")
    assert result.exit_code == 0, result.stderr
    (call,) = _calls(log)
    assert call[2] == args[0] and call[-2:] == ["--profile", "ops"]
    assert os.environ["AWS_PROFILE"] == "ops"


# --- the cluster admin on an update (issue 30 item 4) ---------------------------------------------------------

ALICE, BOB, CAROL = (f"arn:aws:iam::123456789012:role/{name}" for name in ("Alice", "Bob", "Carol"))


def _deployed_cluster_stack(moto_env: dict[str, str], admin: str) -> None:
    """``demo-cluster`` as a first deploy left it in CloudFormation (moto): its ``AdminPrincipalArn`` is ``admin``."""
    import boto3

    cfn = boto3.client("cloudformation", region_name="us-west-2", endpoint_url=moto_env["AWS_ENDPOINT_URL"],
                       aws_access_key_id="testing", aws_secret_access_key="testing")
    cfn.create_stack(StackName="demo-cluster", TemplateBody=json.dumps({
        "Parameters": {"AdminPrincipalArn": {"Type": "String"}}, "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}}}),
        Parameters=[{"ParameterKey": "AdminPrincipalArn", "ParameterValue": admin}])


def test_an_update_keeps_the_deployed_cluster_admin(synthesized, fake_cdk, moto_env, monkeypatch, run_cli) -> None:
    """``AWS::EKS::AccessEntry`` ``PrincipalArn`` is create-only (its resource schema, cfn-lint's copy in the venv),
    so passing the caller on every deploy replaced the first admin's entry with a second engineer's (or failed 409
    ResourceInUseException when the caller has an entry). Alice deployed; Bob (an assumed-role session of role Bob)
    deploys again: the parameter is not passed, so the CDK CLI sends UsePreviousValue (``--previous-parameters``,
    default true). Fails on main, which passed ``demo-cluster:AdminPrincipalArn=<role Bob>``.
    ``--admin-principal-arn`` still changes it, on purpose."""
    import boto3

    cwd, _ = synthesized
    env, log = fake_cdk
    _copy_env(cwd, "fetched", charts_fetched=True)
    _deployed_cluster_stack(moto_env, ALICE)
    sts = boto3.client("sts", region_name="us-west-2", endpoint_url=moto_env["AWS_ENDPOINT_URL"],
                       aws_access_key_id="testing", aws_secret_access_key="testing")
    bob = sts.assume_role(RoleArn=BOB, RoleSessionName="bob")["Credentials"]
    monkeypatch.chdir(cwd)
    for var, value in {**env, **moto_env, "AWS_ACCESS_KEY_ID": bob["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": bob[
            "SecretAccessKey"], "AWS_SESSION_TOKEN": bob["SessionToken"]}.items():
        monkeypatch.setenv(var, value)  # the command in-process, the fake CDK CLI beside it: one moto server

    kept = run_cli("deploy", "Cluster", "--env", "fetched", "--yes")

    assert kept.exit_code == 0, kept.stderr
    assert not [a for call in _calls(log) for a in call if "AdminPrincipalArn" in a or a == "--parameters"]
    prepare, deploy = _calls(log)
    assert "--method=prepare-change-set" in prepare and "--method=prepare-change-set" not in deploy
    assert f"; cluster admin {ALICE} (deployed; kept: pass --admin-principal-arn to change it);" in kept.stderr

    changed = run_cli("deploy", "Cluster", "--env", "fetched", "--yes", "--admin-principal-arn", CAROL)

    assert changed.exit_code == 0, changed.stderr
    prepare, deploy = _calls(log)[2:]
    for call in (prepare, deploy):
        assert call[call.index("--parameters"):call.index("--parameters") + 2] == [
            "--parameters", f"demo-cluster:AdminPrincipalArn={CAROL}"]
    assert f"; cluster admin {CAROL} (replaces {ALICE}, which loses its access entry);" in changed.stderr


# --- no silent replacement (issue 30 item 6) ------------------------------------------------------------------

def test_the_guarded_resources_are_the_synthesized_ones(synthesized) -> None:
    """The logical IDs the check guards are the templates' own, with the UpdateReplacePolicy the messages state
    (absent: Delete, CloudFormation's default, User Guide "UpdateReplacePolicy attribute")."""
    from hyperpod_dpd import change_set
    from hyperpod_dpd.cdk_cli import stack_ids
    from hyperpod_dpd.cdk_cli import templates as assembly_templates

    cwd, _ = synthesized
    cdk_out = cwd / "envs" / "demo" / "cdk.out"
    templates = assembly_templates(cdk_out, list(stack_ids(cdk_out)))
    assert change_set.guarded_stacks(templates) == ["demo-cluster", "demo-hyperpod", "demo-platform"]
    hyperpod = templates["demo-hyperpod"]["Resources"]["HyperPodCluster"]
    bucket = templates["demo-platform"]["Resources"]["ModelBucket24FA8CA2"]
    eks = [r for r in templates["demo-cluster"]["Resources"].values() if r["Type"] == "AWS::EKS::Cluster"]
    assert (hyperpod["Type"], hyperpod["UpdateReplacePolicy"]) == ("AWS::SageMaker::Cluster", "Retain")
    assert (bucket["Type"], bucket["UpdateReplacePolicy"]) == ("AWS::S3::Bucket", "Retain")
    assert len(eks) == 1 and "UpdateReplacePolicy" not in eks[0]
    # What a Remove does (DeletionPolicy; absent: Delete, User Guide "DeletionPolicy attribute"): the guard's
    # removal_deletes. The bucket's Remove (model_bucket.existing_name) keeps it.
    assert {g.logical_id or "eks": g.removal_deletes for g in change_set.GUARDED} == {
        "HyperPodCluster": hyperpod.get("DeletionPolicy", "Delete") == "Delete",
        "eks": eks[0].get("DeletionPolicy", "Delete") == "Delete",
        "ModelBucket24FA8CA2": bucket.get("DeletionPolicy", "Delete") == "Delete"}


OLD_CLUSTER = "arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdef123456"
NEW_CLUSTER = "arn:aws:sagemaker:us-west-2:123456789012:cluster/0123456789ab"
CHANGE_SET = "hyperpod-dpd-replacement-check"


def _stack(name: str, **extra: object) -> dict[str, object]:
    """A ``DescribeStacks`` ``Stacks[]`` entry (API reference, ``Stack``: StackName, CreationTime, StackStatus
    required)."""
    import datetime

    return {"StackName": name, "StackId": f"arn:aws:cloudformation:us-west-2:123456789012:stack/{name}/1",
            "CreationTime": datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC), "StackStatus": "UPDATE_COMPLETE",
            **extra}


def _stubbed_update(replacement: str, now: str | None, *, platform_deployed: bool = False,
                    change_set_denied: bool = False, nodes: list[str] | None = None, delete_old: bool = True,
                    ) -> tuple[dict[str, object], list[object]]:
    """Stubbed clients (botocore Stubber on boto3's own CloudFormation and SageMaker models) for ``deploy
    HyperPod`` of a deployed demo: the HyperPod stack's change set shows ``HyperPodCluster`` ``Replacement``
    ``replacement`` for ``ClusterName`` (``hyperpod.cluster_name`` renamed; ``False``: an in-place change of
    ``InstanceGroups``). ``now``: the physical ID after the update (``None``: the deploy must not get that far).
    ``platform_deployed``: whether the Platform stack, which imports the cluster's ARN export, exists (the replacement
    check's DescribeStacks). ``change_set_denied``: DescribeChangeSet of the HyperPod stack is refused. ``nodes``: the
    instance statuses ListClusterNodes returns (the deep health check ``deploy`` makes before an in-place update).
    ``delete_old``: a changed physical ID is followed by DeleteCluster of the old one (a successful deploy)."""
    import boto3
    from botocore.stub import Stubber
    from test_change_set import change, described

    cfn = boto3.client("cloudformation", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    sm = boto3.client("sagemaker", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    cfn_stub, sm_stub = Stubber(cfn), Stubber(sm)
    cfn_stub.add_response("describe_stacks", {"Stacks": [_stack("demo-cluster", Parameters=[
        {"ParameterKey": "AdminPrincipalArn", "ParameterValue": ALICE}])]}, {"StackName": "demo-cluster"})
    cfn_stub.add_response("describe_stacks", {"Stacks": [_stack("demo-hyperpod")]}, {"StackName": "demo-hyperpod"})
    cfn_stub.add_response("describe_change_set", described("demo-cluster", []),
                          {"StackName": "demo-cluster", "ChangeSetName": CHANGE_SET})
    if change_set_denied:
        cfn_stub.add_client_error("describe_change_set", service_error_code="AccessDenied", http_status_code=403,
                                  service_message="not authorized to perform: cloudformation:DescribeChangeSet",
                                  expected_params={"StackName": "demo-hyperpod", "ChangeSetName": CHANGE_SET})
    else:
        cfn_stub.add_response("describe_change_set", described("demo-hyperpod", [change(
            "HyperPodCluster", "AWS::SageMaker::Cluster", replacement, OLD_CLUSTER,
            [("ClusterName", {"True": "Always", "Conditional": "Conditionally"}[replacement])]
            if replacement != "False" else [("InstanceGroups", "Never")])]),
            {"StackName": "demo-hyperpod", "ChangeSetName": CHANGE_SET})
    for stack in ("demo-cluster", "demo-hyperpod"):
        cfn_stub.add_response("delete_change_set", {}, {"StackName": stack, "ChangeSetName": CHANGE_SET})
    if replacement != "False" and not change_set_denied:  # who imports the cluster's ARN export
        if platform_deployed:
            cfn_stub.add_response("describe_stacks", {"Stacks": [_stack("demo-platform")]},
                                  {"StackName": "demo-platform"})
        else:
            cfn_stub.add_client_error("describe_stacks", service_error_code="ValidationError",
                                      service_message="Stack with id demo-platform does not exist",
                                      expected_params={"StackName": "demo-platform"})
    if nodes is not None:
        _health_responses(sm_stub, nodes)
    if now is not None:
        import datetime

        cfn_stub.add_response("describe_stack_resource", {"StackResourceDetail": {
            "StackName": "demo-hyperpod", "LogicalResourceId": "HyperPodCluster", "PhysicalResourceId": now,
            "ResourceType": "AWS::SageMaker::Cluster", "ResourceStatus": "UPDATE_COMPLETE",
            "LastUpdatedTimestamp": datetime.datetime(2025, 1, 2, tzinfo=datetime.UTC)}},
            {"StackName": "demo-hyperpod", "LogicalResourceId": "HyperPodCluster"})
        if now != OLD_CLUSTER and delete_old:
            sm_stub.add_response("delete_cluster", {"ClusterArn": OLD_CLUSTER}, {"ClusterName": OLD_CLUSTER})
    cfn_stub.activate()
    sm_stub.activate()
    return {"cloudformation": cfn, "sagemaker": sm}, [cfn_stub, sm_stub]


def _health_responses(sm_stub: object, statuses: list[str]) -> None:
    """DescribeCluster (the demo's instance groups as its config has them: no change the config comparison sees)
    and ListClusterNodes with one decode node per status (``ClusterInstanceStatus`` values of the SageMaker
    model), as ``preflight.check_deep_health_checks`` reads them."""
    import datetime

    groups = [{"InstanceGroupName": g, "InstanceType": "ml.p5.48xlarge", "CurrentCount": 1, "TargetCount": 1,
               "ThreadsPerCore": 1, "OnStartDeepHealthChecks": ["InstanceStress", "InstanceConnectivity"],
               "ExecutionRole": "arn:aws:iam::123456789012:role/hp",
               "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lc/lifecycle/0123456789abcdef/",
                                   "OnCreate": "on_create.sh"}} for g in ("prefill", "decode")]
    sm_stub.add_response("describe_cluster", {  # type: ignore[attr-defined]
        "ClusterArn": OLD_CLUSTER, "ClusterName": "demo", "ClusterStatus": "InService", "InstanceGroups": groups},
        {"ClusterName": "demo"})
    sm_stub.add_response("list_cluster_nodes", {"NextToken": "", "ClusterNodeSummaries": [  # type: ignore[attr-defined]
        {"InstanceGroupName": "decode", "InstanceId": f"decode-{i}", "InstanceType": "ml.p5.48xlarge",
         "LaunchTime": datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC), "InstanceStatus": {"Status": status}}
        for i, status in enumerate(statuses)]}, {"ClusterName": "demo"})


def _deploy_in_process(synthesized, fake_cdk, monkeypatch, run_cli, clients, *args: str):  # type: ignore[no-untyped-def]
    from hyperpod_dpd import aws

    cwd, _ = synthesized
    env, log = fake_cdk
    _copy_env(cwd, "fetched", charts_fetched=True)
    monkeypatch.setattr(aws, "client", lambda service, region, session=None: clients[service])
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("PATH", env["PATH"])
    return run_cli("deploy", "HyperPod", "--env", "fetched", "--admin-principal-arn", ALICE, *args), _calls(log)


def test_deploy_refuses_a_replacement_the_change_set_shows(synthesized, fake_cdk, monkeypatch, run_cli) -> None:
    """A renamed HyperPod cluster (ClusterName is create-only: AWS::SageMaker::Cluster's resource schema) shows
    ``Replacement: True`` in the HyperPod stack's change set; deploy stops in one line naming the resource, the
    property and what changed it, after the CDK CLI prepared the change sets (and before it deploys), and deletes
    them. Fails on main, which deployed at once."""
    clients, stubs = _stubbed_update("True", None)

    result, calls = _deploy_in_process(synthesized, fake_cdk, monkeypatch, run_cli, clients, "--yes")

    assert result.exit_code == 1, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [result.stderr.splitlines()[-1]] and "Traceback" not in result.stderr
    assert errors[0].startswith(
        f"error: deploy would replace demo-hyperpod: the HyperPod cluster HyperPodCluster (AWS::SageMaker::Cluster "
        f"{OLD_CLUSTER}) Replacement True (property ClusterName: DirectModification). Nothing was deployed.")
    assert "pass --allow-replace HyperPodCluster (the old HyperPod cluster is then deleted, asked once)" in errors[0]
    cdk_out = str((synthesized[0] / "envs" / "fetched" / "cdk.out").resolve())
    # --method/--change-set-name/--exclusively: the CDK CLI's deploy options (aws-cdk's cdk deploy reference;
    # the pinned CLI's cli-config.js) [I: no AWS account, so the real CLI's change set is not run here].
    assert calls == [["--no-install", "cdk", "deploy", "--app", cdk_out, "Cluster", "HyperPod", "--exclusively",
                      "--method=prepare-change-set", "--change-set-name", CHANGE_SET, "--concurrency", "2",
                      "--require-approval", "never", "--parameters", f"demo-cluster:AdminPrincipalArn={ALICE}"]]
    for stub in stubs:
        stub.assert_no_pending_responses()


@pytest.mark.parametrize("allow", [["HyperPodCluster"], ["all"]])
@pytest.mark.parametrize(("replacement", "now", "deleted"), [
    ("True", NEW_CLUSTER, True), ("Conditional", OLD_CLUSTER, False)])
def test_allow_replace_deploys_then_deletes_the_retained_cluster(synthesized, fake_cdk, monkeypatch, run_cli,
                                                                 replacement, now, deleted, allow) -> None:
    """With --allow-replace HyperPodCluster (or all) the deploy goes ahead; afterwards the old HyperPod cluster,
    which ``UpdateReplacePolicy: Retain`` leaves running, is deleted by its previous physical ID (SageMaker
    DeleteCluster takes the name or the ARN: its ClusterName pattern in boto3's model), asked once (--yes answers).
    A ``Conditional`` replacement that did not happen (same physical ID) deletes nothing; as it may be an in-place
    update, the deep health checks are read first."""
    clients, stubs = _stubbed_update(replacement, now, nodes=["Running"] if replacement == "Conditional" else None)

    result, calls = _deploy_in_process(synthesized, fake_cdk, monkeypatch, run_cli, clients, "--yes",
                                       *(x for a in allow for x in ("--allow-replace", a)))

    assert result.exit_code == 0, result.stderr
    assert [c[c.index("--app") + 2] for c in calls] == ["Cluster", "HyperPod"]  # prepared, then deployed
    assert "--method=prepare-change-set" not in calls[1] and calls[1][-2:] == ["--require-approval", "never"]
    assert "--allow-replace: demo-hyperpod: the HyperPod cluster HyperPodCluster" in result.stderr
    assert (f"deleting the old HyperPod cluster {OLD_CLUSTER}" in result.stdout) == deleted
    for stub in stubs:
        stub.assert_no_pending_responses()


def test_allow_replace_of_another_resource_does_not_allow_this_one(synthesized, fake_cdk, monkeypatch,
                                                                   run_cli) -> None:
    """``--allow-replace`` takes the logical IDs it allows: allowing the EKS cluster's replacement is no licence to
    replace the HyperPod cluster. Fails on main, where the flag allowed every guarded resource at once."""
    clients, stubs = _stubbed_update("True", None)

    result, calls = _deploy_in_process(synthesized, fake_cdk, monkeypatch, run_cli, clients, "--yes",
                                       "--allow-replace", "EksClusterB2BDED5B")

    assert result.exit_code == 1, result.stderr
    assert result.stderr.splitlines()[-1].startswith("error: deploy would replace demo-hyperpod: the HyperPod cluster")
    assert len(calls) == 1  # prepared only
    for stub in stubs:
        stub.assert_no_pending_responses()


@pytest.mark.parametrize("value", ["HyperPod", "ModelBucket"])
def test_allow_replace_of_an_unknown_resource_is_one_line_and_exit_2(synthesized, fake_cdk, monkeypatch, run_cli,
                                                                     value) -> None:
    """A stack's construct ID (``HyperPod``) is not a resource's logical ID: bad input, before any AWS call."""
    result, calls = _deploy_in_process(synthesized, fake_cdk, monkeypatch, run_cli, {}, "--yes",
                                       "--allow-replace", value)

    assert result.exit_code == 2, result.stderr
    assert result.stderr.strip() == (
        "error: --allow-replace must be all or the logical ID of a resource the replacement check guards "
        f"(EksClusterB2BDED5B, HyperPodCluster, ModelBucket24FA8CA2), got {value!r}")
    assert calls == []


def test_the_exports_a_guarded_resource_feeds_are_found_in_the_templates(synthesized) -> None:
    """Which stacks import what a guarded resource exports, read from the synthesized templates (``Outputs`` with
    ``Export.Name``, ``Fn::ImportValue`` elsewhere): CloudFormation does not let an update modify an exported value
    another stack imports (User Guide, ``Fn::ImportValue``: "After another stack imports an output value, you can't
    ... modify the exported output value")."""
    from hyperpod_dpd import change_set
    from hyperpod_dpd.cdk_cli import stack_ids
    from hyperpod_dpd.cdk_cli import templates as assembly_templates

    cdk_out = synthesized[0] / "envs" / "demo" / "cdk.out"
    templates = assembly_templates(cdk_out, list(stack_ids(cdk_out)))
    assert change_set.importers(templates, "demo-hyperpod", "HyperPodCluster") == ["demo-platform"]
    assert sorted(change_set.importers(templates, "demo-cluster", "EksClusterB2BDED5B")) == [
        "demo-hyperpod", "demo-observability-addon", "demo-platform"]
    assert change_set.importers(templates, "demo-platform", "ModelBucket24FA8CA2") == []
    # A Remove (the EKS cluster's logical ID changed): its successor's exports, imported by the same stacks.
    removed = change_set.Replacement(stack="demo-cluster", logical_id="EksClusterOld0000", physical_id="demo-eks",
                                     replacement="True", properties=(), guard=change_set.GUARDED[1], action="Remove")
    assert sorted(change_set.importers_of(templates, removed)) == [
        "demo-hyperpod", "demo-observability-addon", "demo-platform"]


@pytest.mark.parametrize("allow", [[], ["--allow-replace", "HyperPodCluster"]], ids=["not-allowed", "allowed"])
def test_a_replacement_whose_exports_are_imported_is_refused_even_when_allowed(synthesized, fake_cdk, monkeypatch,
                                                                              run_cli, allow) -> None:
    """The Platform stack imports the HyperPod cluster's ARN export: while it exists, an update that replaces the
    cluster fails on the export (after creating the new P5 cluster) and rolls back. Fails on main, which deployed
    with --allow-replace. The one line names the importing stack and the procedure."""
    clients, stubs = _stubbed_update("True", None, platform_deployed=True)

    result, calls = _deploy_in_process(synthesized, fake_cdk, monkeypatch, run_cli, clients, "--yes", *allow)

    assert result.exit_code == 1, result.stderr
    (error,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert error == result.stderr.splitlines()[-1]
    assert error == ("error: deploy cannot replace demo-hyperpod HyperPodCluster (Replacement True, property "
                     "ClusterName: DirectModification) while demo-platform import its exports: CloudFormation refuses "
                     "to modify an exported value in use (Fn::ImportValue), also with --allow-replace. Nothing was "
                     "deployed. Undo the create-only setting (docs/cluster.md), or: hyperpod-dpd destroy Platform "
                     "--env fetched, then hyperpod-dpd deploy --env fetched --allow-replace HyperPodCluster")
    assert len(calls) == 1  # prepared only
    for stub in stubs:
        stub.assert_no_pending_responses()


def test_the_change_sets_are_deleted_when_reading_them_fails(synthesized, fake_cdk, monkeypatch, run_cli) -> None:
    """DescribeChangeSet refused (AccessDenied, botocore Stubber on the real model): both change sets are still
    deleted (DeleteChangeSet), so none is left to be executed by mistake, and the error is one line. Fails on
    main, which deleted them only after every read succeeded."""
    clients, stubs = _stubbed_update("True", None, change_set_denied=True)

    result, calls = _deploy_in_process(synthesized, fake_cdk, monkeypatch, run_cli, clients, "--yes")

    assert result.exit_code == 1, result.stderr
    assert "cloudformation:DescribeChangeSet" in result.stderr.splitlines()[-1]
    assert len(calls) == 1
    for stub in stubs:
        stub.assert_no_pending_responses()  # the two DeleteChangeSet calls were made


def test_a_failed_deploy_names_the_old_cluster_it_left_running(synthesized, fake_cdk, monkeypatch, run_cli) -> None:
    """--allow-replace, and the deploy fails after the HyperPod stack's update replaced the cluster (a later stack
    failed): the old cluster keeps running outside the stack (``UpdateReplacePolicy: Retain``). Fails on main, which
    said nothing of it. Nothing is deleted after a failed deploy; the command that deletes it is printed."""
    clients, stubs = _stubbed_update("True", NEW_CLUSTER, delete_old=False)
    monkeypatch.setenv("FAKE_DEPLOY_RC", "1")

    result, calls = _deploy_in_process(synthesized, fake_cdk, monkeypatch, run_cli, clients, "--yes",
                                       "--allow-replace", "HyperPodCluster")

    assert result.exit_code == 1, result.stderr
    assert (f"note: the old HyperPod cluster {OLD_CLUSTER} was replaced by {NEW_CLUSTER} before the deploy failed "
            f"and keeps running, and billing, outside the stack; delete it with: aws sagemaker delete-cluster "
            f"--cluster-name {OLD_CLUSTER} --region us-west-2") in result.stderr
    assert result.stderr.splitlines()[-1].startswith("error: cdk deploy exited 1")
    assert len(calls) == 2
    for stub in stubs:
        stub.assert_no_pending_responses()


def test_deploy_refuses_an_in_place_cluster_update_during_deep_health_checks(synthesized, fake_cdk, monkeypatch,
                                                                             run_cli) -> None:
    """The HyperPod stack's change set modifies ``HyperPodCluster`` in place (here ``InstanceGroups``: a new
    lifecycle script's ``SourceS3Uri``, which the config comparison cannot see) while a node is in deep health
    checks: HyperPod refuses ``UpdateCluster`` then (AWS HyperPod EKS deep health check page), so deploy stops in
    one line with the fix. Fails on main, which deployed."""
    clients, stubs = _stubbed_update("False", None, nodes=["Running", "DeepHealthCheckInProgress"])

    result, calls = _deploy_in_process(synthesized, fake_cdk, monkeypatch, run_cli, clients, "--yes")

    assert result.exit_code == 1, result.stderr
    assert result.stderr.splitlines()[-1] == (
        "error: 1 node(s) in deep health checks (decode-1 (decode)), and the change set modifies HyperPodCluster's "
        "InstanceGroups: HyperPod refuses UpdateCluster until they finish, so the demo-hyperpod stack update would "
        "fail. Nothing was deployed; fix: wait until 'hyperpod-dpd status' shows every node Running, then deploy; "
        "meanwhile deploy only the other stacks")
    assert len(calls) == 1
    for stub in stubs:
        stub.assert_no_pending_responses()


def test_deploy_never_leaves_the_cdk_cli_a_question_it_cannot_ask(tmp_path) -> None:
    """Without --yes the person answered our question; the CDK CLI then runs several stacks at once with its output in
    a log file, where its own IAM/security-group question ("--require-approval", which the CDK CLI asks only at
    concurrency 1 on a terminal: aws-cdk CLI reference, deploy options) would fail the deploy. So it is always told
    not to ask."""
    from hyperpod_dpd.commands.lifecycle import deploy_args

    args = deploy_args(tmp_path / "cdk.out", ["--all"], tmp_path / "cdk-outputs.json", 6, [])
    assert args[args.index("--concurrency") + 1] == "6"
    assert args[-2:] == ["--require-approval", "never"]
