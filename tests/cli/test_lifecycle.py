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
from pathlib import Path

import pytest

#: These tests run the entry points in the repository itself (its cdk.out/ and dist/, scripts/setup): one
#: xdist worker runs them all, one after another (scripts/test: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("repository-root")

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT = REPO_ROOT / "config" / "default.yaml"


def _cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k != "HYPERPOD_CONFIG"} | env
    return subprocess.run([sys.executable, "-m", "hyperpod_dpd", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=600, check=False)


def _one_line_exit(result: subprocess.CompletedProcess[str], code: int, starts: str) -> None:
    assert result.returncode == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(starts), result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """``hyperpod-dpd init demo`` then ``hyperpod-dpd synth --env demo``, once per session."""
    cwd = tmp_path_factory.mktemp("ops")
    init = _cli("init", "demo", cwd=cwd)
    assert init.returncode == 0, init.stderr
    result = _cli("synth", "--env", "demo", cwd=cwd)
    assert result.returncode == 0, result.stderr[-3000:]
    return cwd, result


@pytest.fixture
def fake_npx(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A fake ``npx`` first on PATH that records its argv (one per line) and exits 0."""
    bin_dir, log = tmp_path / "bin", tmp_path / "npx-argv.txt"
    bin_dir.mkdir()
    script = bin_dir / "npx"
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{log}"\n')
    script.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}, log


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
    # No outputs file yet: the manifests hold placeholders, so they are kept out of dist/endpoint/.
    assert (env / "dist" / "placeholders" / "endpoint" / "llama-3-3-70b-dpd.k8s.yaml").is_file()
    assert not (env / "dist" / "endpoint").exists()
    assert not list(cwd.glob("**/.*.tmp-*")), "no temp folders left behind"
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


def test_deploy_deploys_that_cdk_out_and_writes_outputs_beside_it(synthesized, fake_npx) -> None:
    cwd, _ = synthesized
    env, log = fake_npx
    admin = "arn:aws:iam::123456789012:role/Admin"
    result = _cli("deploy", "--env", "demo", "--yes", "--admin-principal-arn", admin, cwd=cwd, **env)
    assert result.returncode == 0, result.stderr
    demo = (cwd / "envs" / "demo").resolve()
    # The cluster stack's required AdminPrincipalArn parameter is filled for the stack that declares it
    # (the CDK CLI keys --parameters by CloudFormation stack name).
    # --concurrency: independent stacks deploy side by side (issue 20 item 6; the CDK CLI's deploy option
    # "Maximum number of simultaneous deployments (dependency permitting) to execute", aws-cdk 2.1148 cli-config).
    assert log.read_text().splitlines() == [
        "--no-install", "cdk", "deploy", "--app", str(demo / "cdk.out"), "--all",
        "--outputs-file", str(demo / "cdk-outputs.json"), "--concurrency", "6",
        "--parameters", f"demo-cluster:AdminPrincipalArn={admin}", "--require-approval", "never"]
    assert "next: hyperpod-dpd synth --env demo" in result.stdout


def test_the_cdk_cli_takes_the_concurrency_option_deploy_passes() -> None:
    """The pinned CDK CLI's own option table (node_modules/aws-cdk/lib/cli/cli-config.js) lists ``concurrency`` for
    ``deploy``: a misspelt option would stop the real deploy with "Unknown argument"."""
    config = (REPO_ROOT / "node_modules" / "aws-cdk" / "lib" / "cli" / "cli-config.js").read_text()
    deploy = config[config.index("'deploy': {"):config.index("'validate': {")]
    assert "'concurrency': { type: 'number', desc: 'Maximum number of simultaneous deployments (dependency " \
           "permitting) to execute.'" in deploy


def test_diff_of_the_hyperpod_stack_says_when_deep_health_checks_refuse_the_update(synthesized, fake_npx) -> None:
    """HyperPod refuses UpdateCluster while deep health checks run (AWS HyperPod EKS deep health check page): with a
    node ``DeepHealthCheckInProgress`` (ListClusterNodes) and an instance-group change, ``diff`` says so. A moto
    server plays SageMaker (moto implements DescribeCluster and ListClusterNodes); the node status is set on its
    backend, to a value of the service model's ClusterInstanceStatus."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.sagemaker.models import sagemaker_backends
    from moto.server import ThreadedMotoServer

    from fake_http import free_port

    cwd, _ = synthesized
    env, _ = fake_npx
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    aws = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_EC2_METADATA_DISABLED": "true", "AWS_DEFAULT_REGION": "us-west-2"}
    backend = sagemaker_backends[DEFAULT_ACCOUNT_ID]["us-west-2"]
    try:
        import boto3

        sm = boto3.client("sagemaker", region_name="us-west-2", endpoint_url=aws["AWS_ENDPOINT_URL"],
                          aws_access_key_id="testing", aws_secret_access_key="testing")
        backend.clusters.pop("demo", None)
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
    finally:
        backend.clusters.pop("demo", None)
        server.stop()


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


def test_destroy_asks_unless_forced(synthesized, fake_npx) -> None:
    cwd, _ = synthesized
    env, log = fake_npx
    assert _cli("destroy", "--env", "demo", cwd=cwd, **env).returncode == 0
    assert "--force" not in log.read_text().splitlines()
    assert _cli("destroy", "--env", "demo", "--force", cwd=cwd, **env).returncode == 0
    assert log.read_text().splitlines()[-1] == "--force"


def test_deploy_refuses_a_config_changed_since_synth(synthesized, fake_npx) -> None:
    cwd, _ = synthesized
    env, log = fake_npx
    shutil.copytree(cwd / "envs" / "demo", cwd / "envs" / "edited")
    cfg = cwd / "envs" / "edited" / "config.yaml"
    cfg.write_text(cfg.read_text().replace("max_model_len: 16384", "max_model_len: 8192"))
    result = _cli("deploy", "--env", "edited", cwd=cwd, **env)
    _one_line_exit(result, 2, "error: envs/edited/config.yaml changed since envs/edited/cdk.out was synthesized")
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


def test_deploy_fills_the_admin_principal_parameter(synthesized, fake_npx) -> None:
    """A required ``AdminPrincipalArn`` gets the role of an assumed-role session (an access entry names roles)."""
    cwd, _ = synthesized
    env, log = fake_npx
    _with_parameters(cwd, "admin", {"AdminPrincipalArn": {"Type": "String"}})
    result = _cli("deploy", "--env", "admin", "--admin-principal-arn",
                  "arn:aws:sts::111122223333:assumed-role/Ops/alice", cwd=cwd, **env)
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
    from hyperpod_dpd.commands.lifecycle import principal_arn

    assert principal_arn(caller) == principal
