"""Issue 31, "One way through": the README's path and the command line's path are the same, and quiet.

* one layout: each config's files live in ONE folder that every entry point finds
  (:func:`hyperpod_core.environment.folder_of`), never inside ``config/``;
* the command is reachable in a fresh shell the way the README's first section says;
* quiet edges: ``diff``/``deploy``/``destroy`` end in one line with the fix, the CDK CLI's output is kept in a log file
  that line names, the echoed command can be pasted, ``npx cdk8s synth`` of a bad config is one line and exit 2;
* conventions: ``--outputs-file`` wherever the outputs are read, ``--region``/``--profile`` on ``stage-model`` and
  ``bench``, ``init`` from any folder of the checkout, ``report`` without results says what makes them.

The done-when test (:func:`test_the_readme_deploy_commands_find_one_cdk_out_and_one_outputs_file`) runs the README's
Deploy commands as written, parsed from README.md, after the session's synth (``demo_env``, tests/cli/conftest.py):
the raw CLIs' block and the command line's block, up to ``preflight`` (moto) and ``diff`` without credentials.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from lifecycle_fixtures import REPO_ROOT, copy_env, no_aws_credentials, set_charts_fetched

#: The demo environment's synth is shared with tests/cli/test_lifecycle.py on one xdist worker.
pytestmark = pytest.mark.xdist_group("repository-root")

DEFAULT = REPO_ROOT / "config" / "default.yaml"
README = REPO_ROOT / "README.md"


def _one_line(result: Any, code: int, starts: str) -> str:
    assert result.exit_code == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(starts), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.fixture
def fake_npx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake ``npx`` first on PATH, in this process and its children: it appends its argv (one JSON list a line) to
    the returned log, prints ``$FAKE_NPX_OUTPUT`` and exits ``$FAKE_NPX_RC`` (0); for ``--outputs-file F`` it writes
    ``$FAKE_OUTPUTS`` (JSON) to F, as ``cdk deploy`` writes its outputs there."""
    bin_dir, log = tmp_path / "fake-bin", tmp_path / "npx-calls.jsonl"
    bin_dir.mkdir()
    (bin_dir / "npx").write_text(f"""#!{sys.executable}
import json, os, sys
args = sys.argv[1:]
with open({str(log)!r}, "a") as f:
    f.write(json.dumps(args) + "\\n")
if "--outputs-file" in args and os.environ.get("FAKE_OUTPUTS"):
    with open(args[args.index("--outputs-file") + 1], "w") as f:
        f.write(os.environ["FAKE_OUTPUTS"])
sys.stdout.write(os.environ.get("FAKE_NPX_OUTPUT", ""))
sys.exit(int(os.environ.get("FAKE_NPX_RC", "0")))
""")
    (bin_dir / "npx").chmod(0o755)
    (bin_dir / "aws").write_text("#!/bin/sh\n# aws sts get-caller-identity --query Account|Arn --output text\n"
                                 'case "$*" in *Account*) echo 123456789012;; '
                                 "*) echo arn:aws:sts::123456789012:assumed-role/Admin/me;; esac\n")
    (bin_dir / "aws").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log


def _calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.is_file() else []


# --- 1. one layout -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("config", "folder"), [
    ("config/default.yaml", "."),  # the README's raw CLIs: cdk.out/, dist/, cdk-outputs.json at the root
    ("config/examples/p5en-two-prefill.yaml", "out/config/examples/p5en-two-prefill"),
])
def test_a_config_of_the_checkout_has_one_folder_never_in_config(run_cli, checkout_copy, config, folder) -> None:
    """Fails on main: ``--config config/default.yaml`` put its files in ``config/default.out/``, which breaks
    ``schema --check`` and is not where ``./scripts/synth`` and the raw CLIs write (friction 1 and 2)."""
    result = run_cli("validate", "--config", config, "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["workdir"] == folder
    assert not folder.startswith("config/")


def test_an_environments_config_named_by_path_is_that_environment(run_cli, monkeypatch, tmp_path) -> None:
    """``--config envs/prod/config.yaml`` (what ``./scripts/synth envs/prod/config.yaml`` passes) is ``--env prod``:
    the same folder and name. A config outside the checkout keeps its folder beside it."""
    (tmp_path / "envs" / "prod").mkdir(parents=True)
    shutil.copy(DEFAULT, tmp_path / "envs" / "prod" / "config.yaml")
    shutil.copy(DEFAULT, tmp_path / "my.yaml")
    monkeypatch.chdir(tmp_path)
    by_path = json.loads(run_cli("validate", "--config", "envs/prod/config.yaml", "--json").stdout)
    by_name = json.loads(run_cli("validate", "--env", "prod", "--json").stdout)
    assert by_path["workdir"] == by_name["workdir"] == "envs/prod"
    assert json.loads(run_cli("validate", "--config", "my.yaml", "--json").stdout)["workdir"] == "my.out"


def _scripts_synth_argv(config: str) -> list[str]:
    """The main job's arguments as ``./scripts/synth CONFIG`` passes them (its ``exec`` line, read from the script)."""
    line = next(x for x in (REPO_ROOT / "scripts" / "synth").read_text().splitlines()
                if x.startswith("exec ") and "hyperpod_mainjob" in x)
    words = shlex.split(line)
    return [config if w == "$config" else w for w in words[words.index("hyperpod_mainjob") + 1:]
            if w != "${outputs[@]}"]


class _Stop(Exception):
    pass


def _main_job_folders(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> tuple[Path, Path]:
    """``(cdk.out, dist)`` the main job would write for ``argv`` (stopped before it synthesizes)."""
    from hyperpod_mainjob import job

    seen: list[tuple[Path, Path]] = []

    def stop(config_path: Path, cdk_out: Path, dist: Path, *args: Any, **kwargs: Any) -> None:
        seen.append((cdk_out, dist))
        raise _Stop

    monkeypatch.setattr(job, "run", stop)
    with pytest.raises(_Stop):
        job.main(argv)
    return seen[0]


def _synth_cli_argv(monkeypatch: pytest.MonkeyPatch, run_cli: Any, *args: str) -> list[str]:
    """The main job's arguments as ``hyperpod-dpd synth ARGS`` passes them (its child process, not started)."""
    calls: list[list[str]] = []

    def child(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr("hyperpod_dpd.commands.lifecycle.subprocess.run", child)
    result = run_cli("synth", *args)
    monkeypatch.undo()
    assert result.exit_code == 0, result.stderr
    return calls[0][calls[0].index("hyperpod_mainjob") + 1:]


def test_scripts_synth_and_synth_config_write_the_same_folder(run_cli, checkout_copy, monkeypatch) -> None:
    """Fails on main: ``./scripts/synth PATH`` wrote the root's cdk.out/ and dist/ for any config, ``hyperpod-dpd synth
    --config PATH`` wrote ``PATH.out/``."""
    from hyperpod_core import paths

    config = "config/examples/p5en-two-prefill.yaml"
    cli_argv = _synth_cli_argv(monkeypatch, run_cli, "--config", config)
    monkeypatch.chdir(checkout_copy)  # _synth_cli_argv undid the copy
    monkeypatch.setattr(paths, "CHECKOUT", checkout_copy)
    by_script = _main_job_folders(monkeypatch, _scripts_synth_argv(config))
    by_cli = _main_job_folders(monkeypatch, cli_argv)
    assert by_script == by_cli == (Path("out/config/examples/p5en-two-prefill/cdk.out"),
                                   Path("out/config/examples/p5en-two-prefill/dist"))


def test_the_benchmark_recipe_synthesizes_where_bench_reads(monkeypatch, tmp_path) -> None:
    """docs/benchmark.md's recipe, parsed: ``./scripts/synth envs/prod/config.yaml`` then ``hyperpod-dpd bench --env
    prod``. Fails on main: the synth wrote the root's folders, bench read envs/prod/ (friction 3)."""
    from hyperpod_core import environment

    text = (REPO_ROOT / "docs" / "benchmark.md").read_text()
    synth = re.search(r"^\./scripts/synth (\S+)", text, re.MULTILINE)
    bench = re.search(r"^hyperpod-dpd bench +(--env \S+|--config \S+)", text, re.MULTILINE)
    assert synth and bench, "docs/benchmark.md's recipe: ./scripts/synth CONFIG, then hyperpod-dpd bench --env NAME"
    monkeypatch.chdir(tmp_path)  # the checkout's envs/ as the tests keep it: ./envs ($HYPERPOD_ENVS_DIR)
    (tmp_path / Path(synth[1]).parent).mkdir(parents=True)
    shutil.copy(DEFAULT, tmp_path / synth[1])
    cdk_out, dist = _main_job_folders(monkeypatch, _scripts_synth_argv(synth[1]))
    flag, value = bench[1].split()
    read = environment.resolve(**{flag.lstrip("-"): value})
    assert (cdk_out, dist) == (read.cdk_out, read.dist)


def test_the_cdk_app_writes_a_config_into_its_folder_and_stamps_it(monkeypatch, tmp_path) -> None:
    """``python app.py`` alone writes a config's templates into its own folder; under the CDK CLI it refuses the root's
    cdk.out/ (the default config's) for another config, naming the ``-o`` that fits, and stamps the folder it writes,
    so ``hyperpod-dpd diff/deploy`` accept templates the raw CLI synthesized. Fails on main: the root's cdk.out/ for
    every config, no stamp."""
    import runpy
    import types

    from hyperpod_core import environment

    def synthesize(config: Any, outdir: Path | None = None, **_: Any) -> None:
        Path(outdir or os.environ["CDK_OUTDIR"]).mkdir(parents=True, exist_ok=True)

    monkeypatch.setitem(sys.modules, "hyperpod_infra.app_builder", types.SimpleNamespace(synthesize=synthesize))
    for name in ("CDK_CONTEXT_JSON", "CONTEXT_OVERFLOW_LOCATION_ENV", "CDK_OUTDIR"):
        monkeypatch.delenv(name, raising=False)
    mine = tmp_path / "my.yaml"
    shutil.copy(DEFAULT, mine)
    monkeypatch.setenv("HYPERPOD_CONFIG", str(mine))
    main = runpy.run_path(str(REPO_ROOT / "app.py"), run_name="app_under_test")["main"]
    main()
    env = environment.resolve(str(mine))
    assert env.workdir.resolve() == (tmp_path / "my.out").resolve()
    assert env.require_synthesized  # callable; the stamp is checked below
    (env.cdk_out / "manifest.json").write_text("{}")
    env.require_synthesized()  # stamped with this config: no error
    monkeypatch.setenv("CDK_OUTDIR", str(REPO_ROOT / "cdk.out"))
    from hyperpod_core.errors import UsageError

    with pytest.raises(UsageError, match=re.escape(f"pass -o {tmp_path / 'my.out' / 'cdk.out'}")):
        main()


def test_the_cdk8s_app_writes_into_the_configs_folder_and_reads_its_outputs(monkeypatch, tmp_path) -> None:
    """``HYPERPOD_CONFIG=PATH npx cdk8s synth`` (no ``-o``) writes the config's ``dist/`` and reads its
    ``cdk-outputs.json``; ``-o`` naming the root's ``dist/`` for another config is refused. Fails on main: ``dist/`` and
    ``cdk-outputs.json`` of the current folder."""
    from hyperpod_core.errors import UsageError
    from hyperpod_k8s import main

    mine = tmp_path / "my.yaml"
    shutil.copy(DEFAULT, mine)
    (tmp_path / "my.out").mkdir()
    (tmp_path / "my.out" / "cdk-outputs.json").write_text(json.dumps(
        {"hyperpod-dpd-platform": {"ModelBucketName": "bucket-of-my-yaml"}}))
    seen: list[tuple[Path, list[str]]] = []
    monkeypatch.setattr(main, "synth", lambda config, outdir, inputs: seen.append((outdir, inputs.lines())) or [])
    monkeypatch.delenv("CDK8S_OUTDIR", raising=False)
    monkeypatch.chdir(REPO_ROOT)
    main.main(["--config", str(mine)])
    outdir, lines = seen[0]
    assert outdir.resolve() == (tmp_path / "my.out" / "dist").resolve()
    assert any("bucket-of-my-yaml" in line for line in lines), lines
    monkeypatch.setenv("CDK8S_OUTDIR", str(REPO_ROOT / "dist"))  # npx cdk8s synth -o dist
    with pytest.raises(UsageError, match=re.escape(f"pass -o {tmp_path / 'my.out' / 'dist'}")):
        main.main(["--config", str(mine)])


@pytest.mark.parametrize("args", [
    ("status",), ("smoke",), ("logs", "decode"), ("sweep",), ("bench",), ("stage-model", "./model"), ("diff",),
    ("destroy",), ("synth",)])
def test_every_command_that_reads_the_outputs_takes_outputs_file(run_cli, checkout_copy, args) -> None:
    """Fails on main: only ``synth`` had ``--outputs-file`` (friction 2), so the outputs of a raw ``npx cdk deploy
    --outputs-file F`` could not be named."""
    result = run_cli(*args, "--config", "config/default.yaml", "--outputs-file", "nope.json")
    _one_line(result, 2, "error: --outputs-file 'nope.json' does not exist")


def test_deploy_writes_the_outputs_where_outputs_file_says(demo_env, fake_npx, run_cli, monkeypatch) -> None:
    cwd, _ = demo_env
    copy_env(cwd / "envs" / "demo", cwd / "envs" / "fetched", charts_fetched=True)
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    result = run_cli("deploy", "Network", "--env", "fetched", "--yes", "--outputs-file", "elsewhere.json")
    assert result.exit_code == 0, result.stderr
    (call,) = _calls(fake_npx)
    assert call[call.index("--outputs-file") + 1] == str(cwd.resolve() / "elsewhere.json")
    assert "wrote elsewhere.json" in result.stdout


def test_schema_lists_no_generated_file_as_a_config(monkeypatch, tmp_path) -> None:
    """Defence in depth: whatever synth was pointed into ``config/``, ``schema --check/--write`` see no manifest as a
    config. Fails on main: ``schema --write`` stamped the schema line into 26 manifests (friction 1)."""
    from hyperpod_dpd import schema

    config = tmp_path / "config"
    for rel in ("default.yaml", "examples/x.yaml", "default.out/dist/endpoint/llama-dpd.k8s.yaml",
                "mine/dist/benchmark/jobs.k8s.yaml", "cdk.out/x.yaml", "y.out/z.yaml", "stray.k8s.yaml"):
        (config / rel).parent.mkdir(parents=True, exist_ok=True)
        (config / rel).write_text("name: x\n")
    monkeypatch.setattr(schema, "COMMITTED", config / "schema.json")
    assert schema.config_files() == [config / "default.yaml", config / "examples" / "x.yaml"]


# --- 2. the command is reachable ------------------------------------------------------------------------------------

def _section(heading: str) -> str:
    text = README.read_text()
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def _bash_blocks(section: str) -> list[list[str]]:
    """The ```bash blocks of a README section, each as its commands (a line ending in ``\\`` joined to the next)."""
    blocks = []
    for body in re.findall(r"```bash\n(.*?)```", section, re.DOTALL):
        commands: list[str] = []
        pending = ""
        for line in body.splitlines():
            pending += line
            if pending.endswith("\\"):
                pending = pending[:-1]
                continue
            if pending.strip():
                commands.append(pending.strip())
            pending = ""
        blocks.append(commands)
    return blocks


def test_a_fresh_shell_runs_the_command_the_way_the_readme_says(tmp_path) -> None:
    """The README's first section says how a new shell gets ``hyperpod-dpd``; done in a shell with a minimal PATH and
    no profile, ``hyperpod-dpd`` then runs. Fails on main: the README never said (friction 4: command not found)."""
    blocks = _bash_blocks(_section("The two commands"))
    setup = [c for block in blocks for c in block if "activate" in shlex.split(c, comments=True)[-1]]
    assert setup, "the README's first section says how to put hyperpod-dpd on PATH"
    script = "\n".join([*setup, "hyperpod-dpd --version", "command -v hyperpod-dpd"])
    result = subprocess.run(["/bin/bash", "--noprofile", "--norc", "-ec", script], cwd=REPO_ROOT,
                            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    version, where = result.stdout.splitlines()
    assert version.startswith("hyperpod-dpd ") and Path(where) == REPO_ROOT / ".venv" / "bin" / "hyperpod-dpd"


# --- 3. quiet edges -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args", [("diff",), ("deploy", "Network", "--yes"), ("destroy", "Platform", "--yes")])
def test_no_credentials_is_one_line_with_the_fix_before_the_cdk_cli(demo_env, fake_npx, run_cli, monkeypatch,
                                                                    tmp_path, args) -> None:
    """Fails on main: the CDK CLI ran and printed 25 lines (warnings, "Unable to resolve AWS account to use" twice)
    before ``error: cdk diff exited 1`` with no fix (friction 5)."""
    cwd, _ = demo_env
    copy_env(cwd / "envs" / "demo", cwd / "envs" / "fetched", charts_fetched=True)
    no_aws_credentials(monkeypatch, tmp_path)
    monkeypatch.chdir(cwd)
    line = _one_line(run_cli(args[0], "--env", "fetched", *args[1:]), 1,
                     f"error: hyperpod-dpd {args[0]}: the CDK CLI needs AWS credentials: NoCredentialsError: ")
    assert "; fix: set AWS_PROFILE (aws configure, or aws sso login" in line
    assert _calls(fake_npx) == []


def _metadata_entries(cdk_out: Path) -> list[tuple[str, dict[str, Any]]]:
    """Every ``(construct path, entry)`` of a cloud assembly's ``*.metadata.json`` files."""
    return [(path, entry) for file in sorted(cdk_out.glob("*.metadata.json"))
            for path, entries in json.loads(file.read_text()).items() for entry in entries]


def test_the_cloud_assembly_names_nothing_in_the_temp_folder(demo_env) -> None:
    """No file the synth writes into ``cdk.out/`` names a path under its temp folder (``$TMPDIR``, ``cwd/temp`` in
    ``demo_env``): jsii unpacks its runtime there (``tmpXXXXXXXX/lib/program.js``) and the kernel's packages
    (``jsii-kernel-XXXXXX/node_modules/``), both gone when the process ends, so a stack trace through them is stale
    as it is written; the CDK CLI printed one such frame above every warning of ``cdk synth``/``cdk diff`` (the fourth
    review's frictions 5 and 9). For a Python app these traces hold no frame of ours (aws-cdk-lib writes "no user
    code in 10 frames"): cdk.json turns them off (``aws:cdk:disable-stack-trace``, ``aws:cdk:disable-creation-stack-
    traces``; ``cdk --debug`` brings the creation stacks back). Fails on main: the warnings' ``trace`` and the
    ``aws:cdk:creationStack`` entries name ``<temp>/jsii-kernel-*/node_modules/aws-cdk-lib/...`` and
    ``<temp>/tmp*/lib/program.js``."""
    cwd, _ = demo_env
    cdk_out, temp = cwd / "envs" / "demo" / "cdk.out", str(cwd / "temp")
    named = {f.name: sorted(set(re.findall(r"[^\"\s(]*(?:jsii-kernel-|program\.js|" + re.escape(temp) +
                                           r")[^\"\s)]*", f.read_text())))[:3]
             for f in sorted(cdk_out.glob("*.json"))}
    assert {name: hits for name, hits in named.items() if hits} == {}
    # The CDK CLI prints a warning's trace above it; a creation stack is all trace.
    assert [(path, entry["type"]) for path, entry in _metadata_entries(cdk_out)
            if entry["type"] == "aws:cdk:creationStack" or (entry["type"] == "aws:cdk:warning" and "trace" in entry)
            ] == []


def test_no_warning_asks_for_the_cross_stack_reference_strength(demo_env) -> None:
    """cdk.json sets ``@aws-cdk/core:defaultCrossStackReferences`` to ``"strong"``, what aws-cdk-lib does when it is
    unset (2.275.0, ``cx-api/FEATURE_FLAGS.md``: "Unset behaves like "strong""), so the references stay
    ``Fn::ImportValue`` of an export (its README, "Reference strength": strong, same account and region) and
    CloudFormation still refuses to delete a stack another one imports from. Fails on main: every synth and diff
    warned "No cross-stack-reference strength configured, defaulting to "strong"" (friction 9)."""
    cwd, _ = demo_env
    cdk_out = cwd / "envs" / "demo" / "cdk.out"
    warnings = [entry["data"] for _, entry in _metadata_entries(cdk_out) if entry["type"] == "aws:cdk:warning"]
    assert [w for w in warnings if "cross-stack-reference" in w] == []
    texts = [p.read_text() for p in cdk_out.glob("*.template.json")]
    assert any("Fn::ImportValue" in t for t in texts) and not any("Fn::GetStackOutput" in t for t in texts)


def test_cdk_json_holds_no_reserved_context_key() -> None:
    """An ``aws:`` key in cdk.json's context makes the CDK CLI warn "A reserved context key ('context.aws:') key was
    found in .../cdk.json" on every run, twice (aws-cdk CLI 2.1148.1, ``warnAboutContextKey``): the app sets those
    itself (``hyperpod_infra.cdk_cli.METADATA_DEFAULTS``)."""
    context = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]
    assert [key for key in context if key.startswith("aws:")] == []


#: What the pinned CDK CLI prints around a failure (the fourth review's run of ``cdk diff`` without an account).
CDK_NOISE = """[Warning at /demo-cluster/Cluster] Construct Annotations
/tmp/tmpab12cd34/lib/program.js:1:5591
Unable to resolve AWS account to use. It must be either configured when you define your CDK Stack, or through the environment
\u274c  demo-network failed: ValidationError: Stack:arn:aws:cloudformation:us-west-2:1:stack/demo-network is in UPDATE_ROLLBACK_FAILED state and can not be updated.
"""  # noqa: E501


@pytest.mark.parametrize("args", [("diff",), ("deploy", "Network", "--yes"), ("destroy", "Platform", "--yes")])
def test_a_cdk_failure_is_one_line_naming_its_log_and_the_echo_can_be_pasted(demo_env, fake_npx, run_cli,
                                                                             monkeypatch, args) -> None:
    """The CDK CLI's whole output goes to ``cdk-<command>.log`` in the config's folder; stderr has the echoed command
    (``npx`` included: pasted into a shell it runs the same CDK CLI call) and ONE error line with the CLI's reason and
    the log. Fails on main: ``$ --no-install cdk ...`` (no ``npx``) and the CLI's lines on the terminal."""
    cwd, _ = demo_env
    copy_env(cwd / "envs" / "demo", cwd / "envs" / "fetched", charts_fetched=True)
    monkeypatch.chdir(cwd)
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "FAKE_NPX_RC": "1",
                        "FAKE_NPX_OUTPUT": CDK_NOISE}.items():
        monkeypatch.setenv(name, value)
    result = run_cli(args[0], "--env", "fetched", *args[1:])
    assert result.exit_code == 1
    log = Path("envs/fetched") / f"cdk-{args[0]}.log"
    echo, *progress, error = [x for x in result.stderr.splitlines() if not x.startswith(f"{args[0]}: ")]
    assert progress == ["  \u274c  demo-network failed: ValidationError: Stack:arn:aws:cloudformation:us-west-2:1:"
                        "stack/demo-network is in UPDATE_ROLLBACK_FAILED state and can not be updated."]
    assert error.startswith(f"error: cdk {args[0]} exited 1: demo-network failed: ValidationError: ")
    assert f"(its whole output: {log}); " in error
    assert "Unable to resolve AWS account" in log.read_text() and "program.js" not in result.stderr
    command = echo.removeprefix("$ ").split("   # ")[0]
    assert echo.startswith("$ cd ") and " && npx --no-install cdk " in echo  # npx runs from the checkout's root
    first = _calls(fake_npx)
    pasted = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, timeout=60, check=False,
                            env={**os.environ, "FAKE_NPX_OUTPUT": ""})
    assert pasted.returncode == 1 and _calls(fake_npx)[len(first):] == first


@pytest.mark.parametrize(("output", "reason"), [
    (CDK_NOISE, "demo-network failed: ValidationError: Stack:arn:aws:cloudformation:us-west-2:1:stack/demo-network is "
                "in UPDATE_ROLLBACK_FAILED state and can not be updated."),
    ("node:internal/modules/cjs/loader:1210\n  throw err;\nError: Cannot find module 'x'\n    at Module._load (node:"
     "internal)\n}\n\nNode.js v20.20.2\n", "Error: Cannot find module 'x'"),
    ("\nUnable to resolve AWS account to use.\n", "Unable to resolve AWS account to use."),
    ("", "no output")])
def test_the_reason_is_the_cdk_clis_own(tmp_path, output, reason) -> None:
    from hyperpod_dpd.cdk_cli import Ran

    assert Ran(rc=1, log=tmp_path / "cdk-diff.log", output=output).reason == reason


def test_the_cdk_cli_runs_from_the_checkout_whatever_the_current_folder(demo_env, tmp_path, run_cli,
                                                                        monkeypatch) -> None:
    """``npx`` finds its preload through ``${PWD}`` (.npmrc's node-options, expanded by npm from the environment):
    run from another folder with the caller's PWD, it could not start (``Cannot find module
    <cwd>/scripts/npx-env.cjs``). Fails on main: PWD was the caller's."""
    cwd, _ = demo_env
    copy_env(cwd / "envs" / "demo", cwd / "envs" / "fetched", charts_fetched=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "npx").write_text('#!/bin/sh\necho "PWD=$PWD cwd=$(pwd -P)"\n')
    (bin_dir / "npx").chmod(0o755)
    for name, value in {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "AWS_ACCESS_KEY_ID": "testing",
                        "AWS_SECRET_ACCESS_KEY": "testing", "PWD": str(cwd)}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(cwd)
    result = run_cli("diff", "Network", "--env", "fetched")
    assert result.exit_code == 0, result.stderr
    assert f"PWD={REPO_ROOT} cwd={REPO_ROOT.resolve()}" in result.stdout


@pytest.mark.slow
def test_npx_cdk8s_synth_of_a_bad_config_is_one_line_and_exit_2(tmp_path) -> None:
    """Fails on main: the cdk8s CLI's own report followed our line: ``Error: command ... returned a non-zero exit code
    2`` and four lines of Node stack, exit 1 (friction 10). scripts/npx-env.cjs keeps the app's line and code."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(DEFAULT.read_text().replace("max_model_len: 16384", "max_model_len: 1024"))
    result = subprocess.run(["npx", "--no-install", "cdk8s", "synth", "-o", str(tmp_path / "out")], cwd=REPO_ROOT,
                            env={**os.environ, "HYPERPOD_CONFIG": str(bad)}, capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: endpoint.routing_threshold_tokens must be below endpoint.max_model_len (1024) or no prompt is ever "
        "disaggregated, got 4096"]


def test_the_readme_says_what_the_cdk_cli_adds_to_a_bad_config() -> None:
    """The CDK CLI turns every failure into exit code 1 (its ``cli()`` error handler, the pinned aws-cdk's
    lib/index.js), so ``npx cdk synth -c config=bad.yaml`` cannot exit 2: the README says so."""
    source = (REPO_ROOT / "node_modules" / "aws-cdk" / "lib" / "index.js").read_text()
    handler = source[source.index("function cli(args = process.argv.slice(2))"):][:800]
    assert ".catch(async (err) => {" in handler and "process.exitCode = 1;" in handler
    readme = " ".join(README.read_text().split())
    assert "Subprocess exited with error 2`, and exits **1**: the CDK CLI ends every failure with exit code 1" in readme
    assert ("`npx cdk8s synth` prints `Synthesizing application` on stdout, then the same one line, and exits 2"
            in readme)


# --- 5. conventions -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args", [("stage-model", "./model"), ("bench",)])
def test_stage_model_and_bench_take_region_and_profile(run_cli, checkout_copy, tmp_path, monkeypatch, args) -> None:
    """Fails on main: ``No such option: --region`` / ``--profile`` (friction 6). Both change the deployment (an upload,
    the endpoint), so ``--region`` must be its own. In a checkout of its own: a developer's root ``cdk-outputs.json``
    (the README's raw deploy) would make the message name that file instead of the config."""
    _one_line(run_cli(*args, "--config", "config/default.yaml", "--region", "us-east-1"), 2,
              "error: --region must be this deployment's region us-west-2 (region of config/default.yaml) for "
              f"hyperpod-dpd {args[0]}, which ")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    _one_line(run_cli(*args, "--config", "config/default.yaml", "--profile", "nope"), 2,
              "error: --profile must be a profile of the AWS config files")


@pytest.mark.parametrize(("args", "what"), [
    (("preflight",), "which checks what a deploy of this config needs in its region (quotas, AZ, bootstrap, add-ons)"),
    (("diff",), "which compares its deployed stacks with these templates"),
    (("deploy", "--yes"), "which creates, updates and deletes its stacks"),
    (("destroy", "--yes"), "which deletes its stacks"),
    (("sweep", "--dry-run"), "which deletes what its operator and load balancer controller left"),
    (("stage-model", "./model"), "which uploads to its model bucket"),
    (("bench", "--dry-run"), "which runs benchmark Jobs on its endpoint and writes their results")])
def test_the_region_rule_says_what_each_command_does_in_that_region(run_cli, default_config_copy, args, what) -> None:
    """Fails on main: ``preflight --region eu-west-1`` checked a us-west-2 config in eu-west-1 (exit 1 on its
    checks, not 2), and ``diff`` was refused as a command "which changes or deletes resources"."""
    line = _one_line(run_cli(*args, "--config", str(default_config_copy), "--region", "eu-west-1"), 2,
                     "error: --region must be this deployment's region us-west-2 ")
    assert f"for hyperpod-dpd {args[0]}, {what}, got 'eu-west-1' (a deployment of the same name in eu-west-1 " in line


def test_init_writes_the_checkouts_envs_from_any_folder(run_cli, monkeypatch, tmp_path) -> None:
    """Fails on main: from ``docs/``, ``init prod`` wrote ``docs/envs/prod/`` and ``--env prod`` looked there
    (friction 13)."""
    from hyperpod_core import paths

    checkout = tmp_path / "checkout"
    (checkout / "config").mkdir(parents=True)
    (checkout / "docs").mkdir()
    shutil.copy(DEFAULT, checkout / "config" / "default.yaml")
    monkeypatch.setattr(paths, "CHECKOUT", checkout)
    monkeypatch.delenv("HYPERPOD_ENVS_DIR")
    monkeypatch.chdir(checkout / "docs")
    result = run_cli("init", "prod")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("created ../envs/prod/config.yaml (name: prod;")
    assert (checkout / "envs" / "prod" / "config.yaml").is_file() and not (checkout / "docs" / "envs").exists()
    assert json.loads(run_cli("validate", "--env", "prod", "--json").stdout)["workdir"] == "../envs/prod"


def test_report_without_results_says_to_run_bench(run_cli, monkeypatch, tmp_path) -> None:
    """Fails on main: ``error: --results config/default.out/benchmark-results is not a folder``, naming an option the
    user did not pass (friction 12)."""
    shutil.copy(DEFAULT, tmp_path / "c.yaml")
    monkeypatch.chdir(tmp_path)
    _one_line(run_cli("report", "--config", "c.yaml"), 2,
              "error: no results yet: c.out/benchmark-results/llama-3-3-70b/ does not exist; run: hyperpod-dpd bench "
              "--config c.yaml (or pass --results DIR|s3://bucket/prefix; the shipped sample: --results "
              "docs/sample-benchmark-report/raw)")


# --- done when: the README's Deploy commands, as written ------------------------------------------------------------

def _walk(commands: list[str], run_cli: Any, cwd: Path, until: str) -> dict[str, Any]:
    """Run ``commands`` in order up to and including the last that starts with ``until``: ``hyperpod-dpd ...``
    in-process (preflight against moto; diff without credentials), the others in one bash per run of them (the
    fake ``npx`` and ``aws`` first on PATH). A command holding a ``<placeholder>`` needs the user's values: skipped.
    Returns ``{command: result}``."""
    from moto import mock_aws

    last = max(i for i, c in enumerate(commands) if c.startswith(until))
    ran: dict[str, Any] = {}
    shell: list[str] = []

    def flush() -> None:
        if shell:
            result = subprocess.run(["/bin/bash", "-euc", "\n".join(shell)], cwd=cwd, capture_output=True, text=True,
                                    timeout=60, check=False)
            assert result.returncode == 0, (shell, result.stderr)
            ran.update(dict.fromkeys(shell, result))
            shell.clear()

    for command in commands[:last + 1]:
        if re.search(r"<[a-z][^>]*>", command):
            continue
        if not command.startswith("hyperpod-dpd "):
            shell.append(command)
            continue
        flush()
        args = shlex.split(command, comments=True)[1:]
        with pytest.MonkeyPatch.context() as mp:
            mp.chdir(cwd)
            if args[0] == "diff":
                no_aws_credentials(mp, cwd / ".no-aws")
                ran[command] = run_cli(*args)
            else:
                mp.setenv("AWS_ACCESS_KEY_ID", "testing")
                mp.setenv("AWS_SECRET_ACCESS_KEY", "testing")
                with mock_aws():
                    ran[command] = run_cli(*args)
    flush()
    return ran


def _templates_pass(result: Any, cdk_out: str) -> None:
    """The preflight table's templates row passed, on ``cdk_out``."""
    assert re.search(rf"templates\s*\S\s*PASS\s*\S\s*{re.escape(cdk_out)}: synthesized from ", result.stdout), \
        result.stdout


def test_the_readme_deploy_commands_find_one_cdk_out_and_one_outputs_file(demo_env, fake_npx, run_cli, monkeypatch,
                                                                          tmp_path) -> None:
    """Issue 31's done-when. The session's synth (``hyperpod-dpd init demo``, ``synth --env demo``) stands in for the
    first commands of both blocks, which the README must hold: ``./scripts/synth`` (the default config, into the
    checkout's root) and ``hyperpod-dpd init NAME`` + ``synth --env NAME``. Its folder is placed where each block's
    synth writes: the checkout's root (a temp checkout whose default config is the demo config) and ``envs/NAME/``.
    Then each block's commands run as written up to ``hyperpod-dpd diff``: preflight finds the templates (moto), the raw
    ``npx cdk deploy`` (fake CLI) writes ``cdk-outputs.json`` where every command reads it, and ``diff`` without
    credentials ends in one line with the fix, exit 1. Fails on main: preflight looked in ``config/default.out/``, no
    README command said how the command line finds the raw CLIs' files (friction 2)."""
    from hyperpod_core import paths
    from hyperpod_dpd.deployment import load

    cwd, _ = demo_env
    demo = cwd / "envs" / "demo"
    cli, raw = _bash_blocks(_section("Deploy"))[:2]
    # The command line's block.
    name = re.fullmatch(r"hyperpod-dpd init (\S+)(\s+#.*)?", cli[0])[1]  # type: ignore[index]
    assert shlex.split(cli[1], comments=True) == ["hyperpod-dpd", "synth", "--env", name]
    ops = tmp_path / "ops"
    copy_env(demo, ops / "envs" / name, charts_fetched=True)
    walked = _walk(cli[2:], run_cli, ops, until="hyperpod-dpd diff")
    (preflight,) = [r for c, r in walked.items() if c.startswith("hyperpod-dpd preflight")]
    _templates_pass(preflight, f"envs/{name}/cdk.out")
    (diff,) = [r for c, r in walked.items() if c.startswith("hyperpod-dpd diff")]
    _one_line(diff, 1, "error: hyperpod-dpd diff: the CDK CLI needs AWS credentials: NoCredentialsError")
    assert _calls(fake_npx) == []
    # The raw CLIs' block, in a checkout whose default config is the demo config.
    assert shlex.split(raw[0], comments=True) == ["./scripts/synth"]
    checkout = tmp_path / "checkout"
    (checkout / "config").mkdir(parents=True)
    shutil.copy(demo / "config.yaml", checkout / "config" / "default.yaml")
    for folder in ("cdk.out", "dist"):
        shutil.copytree(demo / folder, checkout / folder)
    set_charts_fetched(checkout / "cdk.out", charts_fetched=True)
    (checkout / "scripts").symlink_to(REPO_ROOT / "scripts")  # ./scripts/admin-principal-arn
    monkeypatch.setattr(paths, "CHECKOUT", checkout)
    monkeypatch.setenv("FAKE_OUTPUTS", json.dumps({"demo-cluster": {"EksClusterName": "demo-eks", "Region":
                                                                    "us-west-2"},
                                                   "demo-platform": {"ModelBucketName": "demo-models"}}))
    walked = _walk(raw[1:], run_cli, checkout, until="hyperpod-dpd diff")
    (preflight,) = [r for c, r in walked.items() if c.startswith("hyperpod-dpd preflight")]
    _templates_pass(preflight, "cdk.out")
    (deploy,) = [c for c in _calls(fake_npx) if c[:2] == ["cdk", "deploy"]]
    assert deploy[2:4] == ["--app", "cdk.out"] and deploy[deploy.index("--outputs-file") + 1] == "cdk-outputs.json"
    (diff,) = [r for c, r in walked.items() if c.startswith("hyperpod-dpd diff")]
    _one_line(diff, 1, "error: hyperpod-dpd diff: the CDK CLI needs AWS credentials: NoCredentialsError")
    # Every day-2 command reads the deployment through one function: it finds the file the raw deploy wrote.
    monkeypatch.chdir(checkout)
    found = load("config/default.yaml", None)
    assert (found.env.cdk_out, found.outputs_source, found.model_bucket) == (
        Path("cdk.out"), "outputs file cdk-outputs.json", "demo-models")
