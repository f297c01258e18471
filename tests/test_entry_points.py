"""Every entry point, given a bad config, prints ONE line on stderr, exits 2 and writes nothing; a good run leaves
nothing in the temp folder.

The temp folder after a good run is checked where the suite already runs each entry point: the main job
(``./scripts/synth``'s process) in tests/test_matrix.py, ``hyperpod-dpd synth`` in tests/cli/test_lifecycle.py,
``npx cdk8s synth`` in tests/cli/test_friction.py, and ``app.py`` here, on a one-stack app.
"""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

#: These tests run the entry points in the repository itself (its cdk.out/ and dist/, scripts/setup): one
#: xdist worker runs them all, one after another (scripts/test: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("repository-root")

REPO_ROOT = Path(__file__).resolve().parents[1]


#: What silences jsii's banner about an unsupported Node.js (scripts/env.sh, scripts/npx-env.cjs, the suite's conftest).
_SILENCE = "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"


def _run(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, _SILENCE: "20", "CDK_VALIDATION": "false",
                "CDK_OUTDIR": str(tmp_path / "cdk.out"), **env}
    if not full_env[_SILENCE]:  # as a plain shell runs the entry point: without scripts/env.sh
        del full_env[_SILENCE]
    return subprocess.run([sys.executable, *args], cwd=REPO_ROOT, env=full_env, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.fixture(scope="module")
def bad_config(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cfg") / "bad.yaml"
    text = (REPO_ROOT / "config" / "default.yaml").read_text().replace("routing_threshold_tokens: 4096",
                                                                      "routing_threshold_tokens: 20000")
    path.write_text(text)
    return path


def _assert_one_line_exit_2(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: endpoint.routing_threshold_tokens must be below")
    assert "Traceback" not in result.stderr


def test_cdk_app_rejects_bad_config_with_one_line(bad_config: Path, tmp_path: Path) -> None:
    result = _run(["app.py"], tmp_path, HYPERPOD_CONFIG=str(bad_config))
    _assert_one_line_exit_2(result)
    assert not (tmp_path / "cdk.out").exists()


def test_cdk_app_takes_config_from_context(bad_config: Path, tmp_path: Path) -> None:
    result = _run(["app.py"], tmp_path, CDK_CONTEXT_JSON=f'{{"config": "{bad_config}"}}')
    _assert_one_line_exit_2(result)


def test_cdk8s_app_rejects_bad_config_with_one_line(bad_config: Path, tmp_path: Path) -> None:
    result = _run(["-m", "hyperpod_k8s.main", "--config", str(bad_config), "--outdir", str(tmp_path / "dist")],
                  tmp_path, PYTHONPATH=os.pathsep.join(str(REPO_ROOT / p) for p in ("infra", "constructs", "k8s")))
    _assert_one_line_exit_2(result)
    assert not (tmp_path / "dist").exists()


def test_cdk8s_app_takes_config_from_environment(bad_config: Path, tmp_path: Path) -> None:
    result = _run(["-m", "hyperpod_k8s.main", "--outdir", str(tmp_path / "dist")], tmp_path,
                  HYPERPOD_CONFIG=str(bad_config),
                  PYTHONPATH=os.pathsep.join(str(REPO_ROOT / p) for p in ("infra", "constructs", "k8s")))
    _assert_one_line_exit_2(result)


#: ``app.py`` run as its own process (its ``__main__`` block: the guard, the exit) with the app it synthesizes cut
#: down to one empty stack: aws-cdk-lib is loaded and synthesized by jsii's kernel, whose runtime folder is
#: unpacked into the temp folder, at a fraction of the whole app's cost. The whole app goes through the same
#: exit (``hyperpod_core.teardown``) in the main job's test.
ONE_STACK_APP = """
import runpy, sys, types

def one_stack(config, **_):
    import aws_cdk as cdk

    app = cdk.App()
    cdk.Stack(app, "Probe")
    app.synth()

sys.modules["hyperpod_infra.app_builder"] = types.SimpleNamespace(synthesize=one_stack)
sys.argv = ["app.py"]
runpy.run_path("app.py", run_name="__main__")
"""


def test_cdk_app_leaves_nothing_in_the_temp_folder(tmp_path: Path) -> None:
    """jsii unpacks its runtime (2.2 MB) into ``$TMPDIR`` and removes it in its exit handler, which a bare
    ``os._exit`` skipped: every synth left one folder behind. Run as a plain shell runs it (no scripts/env.sh), it
    prints no jsii banner about the Node.js (``b'!!!...'``, 11 lines on Node 20; set-up says it in one line)."""
    temp = tmp_path / "temp"
    temp.mkdir()
    result = _run(["-c", ONE_STACK_APP], tmp_path, TMPDIR=str(temp), **{_SILENCE: ""})
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "cdk.out" / "Probe.template.json").is_file()
    assert sorted(p.name for p in temp.iterdir()) == []
    assert "!!" not in result.stderr and result.stderr == "", result.stderr


def test_cdk8s_app_run_alone_prints_no_jsii_banner(tmp_path: Path) -> None:
    """``python -m hyperpod_k8s.main`` from a plain shell (no scripts/env.sh, no npx preload): no jsii banner, and
    nothing left in the temp folder. A config outside the checkout: no developer's cdk-outputs.json is read."""
    config, temp = tmp_path / "my.yaml", tmp_path / "temp"
    config.write_text((REPO_ROOT / "config" / "default.yaml").read_text())
    temp.mkdir()
    result = _run(["-m", "hyperpod_k8s.main", "--config", str(config), "--outdir", str(tmp_path / "dist")], tmp_path,
                  TMPDIR=str(temp), **{_SILENCE: ""})
    assert result.returncode == 0, result.stderr
    assert "!!" not in result.stderr and "b'" not in result.stderr, result.stderr
    assert sorted(p.name for p in temp.iterdir()) == []


def test_cdk_app_run_alone_writes_what_cdk_synth_writes_into_cdk_out(monkeypatch: pytest.MonkeyPatch,
                                                                     checkout_copy: Path) -> None:
    """Under the CDK CLI (``$CDK_OUTDIR`` set) the CLI names the folder and the context; ``python app.py`` alone
    writes the same assembly ``npx cdk synth`` would (cdk.json's context) into the checkout's ``cdk.out/``, not
    into a ``cdk.outXXXX`` the CDK makes in the temp folder and leaves there (aws-cdk-lib ``App``: without
    ``outdir`` or ``$CDK_OUTDIR``, a temporary directory)."""
    import runpy

    from hyperpod_core import environment
    from hyperpod_infra.cdk_cli import cli_context

    calls: list[dict[str, object]] = []
    builder = types.SimpleNamespace(synthesize=lambda config, **kwargs: calls.append(kwargs))
    monkeypatch.setitem(sys.modules, "hyperpod_infra.app_builder", builder)
    monkeypatch.setattr(environment, "stamp", lambda cdk_out, path, config: calls.append({"stamp": cdk_out}))
    for name in ("CDK_CONTEXT_JSON", "CONTEXT_OVERFLOW_LOCATION_ENV", "HYPERPOD_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    main = runpy.run_path(str(REPO_ROOT / "app.py"), run_name="app_under_test")["main"]
    monkeypatch.setenv("CDK_OUTDIR", "cli-out")
    main()
    monkeypatch.delenv("CDK_OUTDIR")
    main()
    assert calls == [{}, {"stamp": Path("cli-out")},
                     {"outdir": Path("cdk.out"), "context": cli_context(Path("config/default.yaml"))},
                     {"stamp": Path("cdk.out")}]


@pytest.mark.parametrize("code", [None, 0, 3, "stopped: no templates"])
def test_the_fast_exit_ends_as_the_interpreter_would(code: object) -> None:
    """Same exit code and stderr as a plain ``sys.exit(code)``: an int or ``None`` is the code, a text is printed
    and exits 1."""
    plain = f"import sys; sys.exit({code!r})"
    fast = f"import sys; from hyperpod_core.teardown import fast_exit; fast_exit(lambda: sys.exit({code!r}))"
    expected, got = (subprocess.run([sys.executable, "-c", c], capture_output=True, text=True, timeout=60,
                                    check=False) for c in (plain, fast))
    assert (got.returncode, got.stderr) == (expected.returncode, expected.stderr)


def test_xdist_groups_are_honoured(request: pytest.FixtureRequest) -> None:
    """The tests of this group run the entry points in the repository itself, so they must share one worker:
    under ``--dist loadgroup`` xdist marks their node IDs with the group (pytest-dev/pytest-xdist#1386: a
    pytest release that drops the suffix silently spreads them over every worker)."""
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not running under xdist --dist loadgroup")
    assert request.node.nodeid.endswith("@repository-root")


def _script(name: str) -> types.ModuleType:
    """A script of scripts/ loaded as a module (its ``main`` not run)."""
    import importlib.machinery
    import importlib.util

    loader = importlib.machinery.SourceFileLoader(name.replace("-", "_").removesuffix(".py"),
                                                  str(REPO_ROOT / "scripts" / name))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[loader.name] = module  # dataclasses resolve annotations through sys.modules
    loader.exec_module(module)
    return module


#: Every entry point that takes options (tests/test_libraries.py: all of them parse with Typer): how it names
#: itself, and its module.
OPTION_ENTRY_POINTS = {
    "python -m hyperpod_k8s.main": lambda: __import__("hyperpod_k8s.main", fromlist=["main"]),
    "python -m hyperpod_k8s.crd_source": lambda: __import__("hyperpod_k8s.crd_source", fromlist=["main"]),
    "python -m hyperpod_mainjob": lambda: __import__("hyperpod_mainjob.job", fromlist=["main"]),
    "python -m hyperpod_mainjob.summary": lambda: __import__("hyperpod_mainjob.summary", fromlist=["main"]),
    "python -m hyperpod_mainjob.charts": lambda: __import__("hyperpod_mainjob.charts", fromlist=["main"]),
    "scripts/bench.py": lambda: _script("bench.py"),
    "scripts/bench_stage_model.py": lambda: _script("bench_stage_model.py"),
    "scripts/sample_benchmark_results.py": lambda: _script("sample_benchmark_results.py"),
    "scripts/refresh-addon-versions": lambda: _script("refresh-addon-versions"),
}


@pytest.mark.parametrize("prog", sorted(OPTION_ENTRY_POINTS))
def test_a_bad_option_is_one_line_and_exit_2(prog: str) -> None:
    """Under the guard its process runs it with: one line naming the option and where the help is, exit 2,
    never argparse's or Click's usage block."""
    from tests.in_process import run_entry_point

    from hyperpod_core.errors import guarded

    main = OPTION_ENTRY_POINTS[prog]().main
    result = run_entry_point(lambda: guarded(lambda: main(["--bogus"])), [prog, "--bogus"], cwd=REPO_ROOT)
    assert (result.returncode, result.stderr.splitlines()) == (
        2, [f"error: No such option: --bogus (see: {prog} --help)"])


def test_a_typer_entry_point_keeps_the_guards_exit_codes() -> None:
    """``run_app``: a value the parser refuses is one line, exit 2; Ctrl-C is "interrupted", 130; a command's
    non-zero return is the exit code; --help prints the page and exits 0."""
    import typer
    from tests.in_process import run_entry_point

    from hyperpod_core.errors import guarded, run_app

    app = typer.Typer(add_completion=False)

    @app.command()
    def probe(count: int = 1, interrupt: bool = False) -> int:
        if interrupt:
            raise KeyboardInterrupt
        return count

    def run(*argv: str) -> tuple[int, list[str]]:
        result = run_entry_point(lambda: guarded(lambda: run_app(app, list(argv), "probe")), ["probe", *argv],
                                 cwd=REPO_ROOT)
        return result.returncode, result.stderr.splitlines()

    code, lines = run("--count", "x")
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: Invalid value for '--count'")
    assert run("--interrupt") == (130, ["error: interrupted"])
    assert run("--count", "3") == (3, [])
    assert run("--count", "0") == (0, [])
    assert run("--help") == (0, [])
