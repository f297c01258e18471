"""Bad input is a test suite: every case of ``tests/bad_input_corpus.py`` against every entry point.

Each entry point must exit 2 (the CDK CLI: non-zero, after our line and its report that the app exited with
2), print our one line (``error: ...``) naming the field, never a traceback, and leave its output folders
(``cdk.out/``, ``dist/``) byte for byte as they were.

Cost (2 cores): every entry point's own function under the guard its process runs it with (``guarded(main)``
of ``python -m hyperpod_k8s.main``, ``app.py``, ``hyperpod_core.config.__main__``; ``hyperpod_dpd.app.main`` of
the console script) takes every case in this process (the cdk8s app, the only reader of outputs files, the
outputs cases too). The processes themselves (exit code, the streams, the output folders of a real start) take a
fixed sample of 5 (:data:`SAMPLE`: encodings, duplicate keys, YAML aliases, types, field formats): the same
functions run there, so a process per case would repeat the in-process verdict at ~0.7 CPU s a case. The CDK
CLI and ``scripts/synth`` (set-up's checks before every run), which run ``app.py``, take 2 of them.
``BAD_INPUT_FULL=1`` runs every case through every process too (about 4 minutes; run before a release).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from tests.in_process import run_entry_point

from bad_input_corpus import CASES, CONFIG_CASES, OUTPUTS_CASES, Case, write_case
from hyperpod_core.config import load_config
from hyperpod_core.errors import ConfigError
from hyperpod_core.inputs import resolve_inputs

#: These tests run the entry points in the repository itself (its cdk.out/ and dist/, scripts/setup): one
#: xdist worker runs them all, one after another (scripts/test: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("repository-root")

REPO_ROOT = Path(__file__).resolve().parents[1]
FULL = os.environ.get("BAD_INPUT_FULL") == "1"
#: The cases every process entry point takes (and the CDK CLI and ``scripts/synth``): an encoding, a duplicate
#: key, a YAML alias bomb, a type and a field format. Every case goes through each entry point's function in
#: process.
SAMPLE = {"latin1_byte", "duplicate_delete_on_destroy", "alias_bomb", "true_as_replica_count",
          "s3_prefix_wildcard"}
#: The CDK CLI and ``scripts/synth`` run ``app.py`` (every case in process, the sample in its own process) and add
#: only how they pass its line and exit code on and keep the output folders: a file the reader refuses and a
#: value the schema refuses (~2-3 s a case: node start-up, set-up's checks).
WRAPPER_SAMPLE = {"latin1_byte", "true_as_replica_count"}
SOURCE_ROOTS = os.pathsep.join(str(REPO_ROOT / p) for p in ("infra", "constructs", "k8s", "cli"))


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", "CDK_VALIDATION": "false",
            "CDK_DISABLE_VERSION_CHECK": "1", "CDK_DISABLE_CLI_TELEMETRY": "true", "PYTHONPATH": SOURCE_ROOTS,
            "AWS_EC2_METADATA_DISABLED": "true", **extra}


def _tree_hash(folder: Path) -> str:
    """sha256 over every file's relative path and bytes; ``absent`` when the folder does not exist."""
    if not folder.exists():
        return "absent"
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        h.update(str(p.relative_to(folder)).encode())
        if p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


def _sandbox(tmp: Path) -> tuple[Path, Path]:
    """Output folders holding a sentinel file each: any write, move or delete changes their hash."""
    cdk_out, dist = tmp / "cdk.out", tmp / "dist"
    for folder in (cdk_out, dist):
        folder.mkdir(parents=True)
        (folder / "sentinel.txt").write_text("from an earlier, good synth\n")
    return cdk_out, dist


def _verdict(case: Case, result: subprocess.CompletedProcess[str], *, cli: bool = False,
             only_ours: bool = True) -> str | None:
    """``None`` when the entry point handled the case cleanly, else why not. ``only_ours``: stderr holds
    nothing but our line (``scripts/synth`` may log set-up steps before it)."""
    if "Traceback" in result.stderr:
        return "traceback"
    ours = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    if cli:
        if result.returncode == 0 or "exited with error 2" not in result.stderr:
            return f"exit {result.returncode}"
    elif result.returncode != 2:
        return f"exit {result.returncode}"
    if len(ours) != 1 or (not cli and only_ours and len(result.stderr.strip().splitlines()) != 1):
        return f"{len(ours)} error lines: {result.stderr[-300:]!r}"
    if case.fragment not in ours[0] or len(ours[0]) > 520:
        return f"message does not name {case.fragment!r}: {ours[0][:200]}"
    return None


def _run_all(cases: list[Case], tmp: Path, run: Callable[[Case, Path, Path, Path], subprocess.CompletedProcess[str]],
             *, cli: bool = False, workers: int = 2) -> dict[str, str]:
    """Run every case (``workers`` at a time) and return ``{case id: problem}`` for the ones not handled
    cleanly."""
    def one(case: Case) -> tuple[str, str | None]:
        folder = tmp / case.id
        cdk_out, dist = _sandbox(folder)
        before = (_tree_hash(cdk_out), _tree_hash(dist))
        result = run(case, write_case(case, folder / "in"), cdk_out, dist)
        problem = _verdict(case, result, cli=cli)
        if problem is None and (_tree_hash(cdk_out), _tree_hash(dist)) != before:
            problem = "output folder changed"
        return case.id, problem

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return {cid: p for cid, p in pool.map(one, cases) if p is not None}


def _pick(cases: list[Case], sample: set[str] = SAMPLE) -> list[Case]:
    return cases if FULL else [c for c in cases if c.id in sample]


def _report(name: str, cases: list[Case], problems: dict[str, str]) -> None:
    print(f"\n{name}: {len(cases) - len(problems)}/{len(cases)} clean")


def _subprocess(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=REPO_ROOT, env=_env(**env), capture_output=True, text=True, timeout=300,
                          check=False)


# --- the corpus itself ----------------------------------------------------------------------------------


def test_corpus_covers_at_least_60_kinds() -> None:
    assert len(CASES) >= 60 and len({c.id for c in CASES}) == len(CASES)
    assert {c.id for c in CONFIG_CASES} >= SAMPLE >= WRAPPER_SAMPLE, "the processes take config cases"


# --- in process: every case -----------------------------------------------------------------------------


@pytest.mark.parametrize("case", CONFIG_CASES, ids=[c.id for c in CONFIG_CASES])
def test_loader_rejects(case: Case, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write_case(case, tmp_path))
    message = str(info.value)
    assert case.fragment in message and "\n" not in message and len(message) <= 500, message


@pytest.mark.parametrize("case", OUTPUTS_CASES, ids=[c.id for c in OUTPUTS_CASES])
def test_outputs_reader_rejects(case: Case, tmp_path: Path, default_config) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_inputs(default_config, write_case(case, tmp_path))
    message = str(info.value)
    assert case.fragment in message and "\n" not in message and len(message) <= 500, message


# --- subprocess entry points ----------------------------------------------------------------------------


def _cdk8s_argv(case: Case, path: Path, dist: Path) -> list[str]:
    """A config case as ``--config``; an outputs case as ``--outputs-file`` of the default config, copied beside it
    (outside the checkout: no developer's files of the default config's folder are read)."""
    if case.kind != "outputs":
        return ["--config", str(path), "--outdir", str(dist)]
    config = path.parent / "default.yaml"
    shutil.copy(REPO_ROOT / "config" / "default.yaml", config)
    return ["--config", str(config), "--outputs-file", str(path), "--outdir", str(dist)]


def _in_process(fn: Callable[[], object], argv: list[str], env: dict[str, str] | None = None
                ) -> subprocess.CompletedProcess[str]:
    """``guarded(fn)`` as the entry point's process runs it, from the repository root (tests/in_process.py)."""
    from hyperpod_core.errors import guarded

    return run_entry_point(lambda: guarded(fn), argv, cwd=REPO_ROOT, env=env)


def test_cdk8s_app_rejects_every_case(tmp_path: Path) -> None:
    """The cdk8s app's entry point, ``guarded(main)`` as ``python -m hyperpod_k8s.main`` (what ``npx cdk8s
    synth`` runs) calls it: config cases, and outputs cases with the default config."""
    from hyperpod_k8s import main

    def run(case: Case, path: Path, cdk_out: Path, dist: Path) -> subprocess.CompletedProcess[str]:
        argv = _cdk8s_argv(case, path, dist)
        return _in_process(lambda: main.main(argv), argv)

    problems = _run_all(CASES, tmp_path, run, workers=1)
    _report("cdk8s app (in process)", CASES, problems)
    assert problems == {}


def test_cdk_app_rejects_every_case(tmp_path: Path) -> None:
    """``app.py``'s ``main`` under its guard, as the CDK CLI runs it (config from ``$HYPERPOD_CONFIG``, outdir from
    ``CDK_OUTDIR``)."""
    import runpy

    app = runpy.run_path(str(REPO_ROOT / "app.py"), run_name="app_under_test")

    def run(case: Case, path: Path, cdk_out: Path, dist: Path) -> subprocess.CompletedProcess[str]:
        return _in_process(app["main"], ["app.py"], {"HYPERPOD_CONFIG": str(path), "CDK_OUTDIR": str(cdk_out)})

    problems = _run_all(CONFIG_CASES, tmp_path, run, workers=1)
    _report("app.py (in process)", CONFIG_CASES, problems)
    assert problems == {}


def test_check_config_rejects_every_case(tmp_path: Path) -> None:
    from hyperpod_core.config.__main__ import main

    def run(case: Case, path: Path, cdk_out: Path, dist: Path) -> subprocess.CompletedProcess[str]:
        return _in_process(main, ["hyperpod_core.config", str(path)])

    problems = _run_all(CONFIG_CASES, tmp_path, run, workers=1)
    _report("check_config (in process)", CONFIG_CASES, problems)
    assert problems == {}


def test_operator_cli_validate_rejects_every_case(tmp_path: Path) -> None:
    """The console script's ``main`` (its own guard inside) with ``validate --config``."""
    from hyperpod_dpd.app import main

    def run(case: Case, path: Path, cdk_out: Path, dist: Path) -> subprocess.CompletedProcess[str]:
        argv = ["validate", "--config", str(path)]
        return _in_process(lambda: main(argv), ["hyperpod-dpd", *argv])

    problems = _run_all(CONFIG_CASES, tmp_path, run, workers=1)
    _report("hyperpod-dpd validate (in process)", CONFIG_CASES, problems)
    assert problems == {}


def test_cdk8s_process_rejects(tmp_path: Path) -> None:
    """``python -m hyperpod_k8s.main`` itself, on the sample and the outputs cases' first."""
    cases = _pick(CONFIG_CASES) + OUTPUTS_CASES[:1]

    def run(case: Case, path: Path, cdk_out: Path, dist: Path) -> subprocess.CompletedProcess[str]:
        return _subprocess([sys.executable, "-m", "hyperpod_k8s.main", *_cdk8s_argv(case, path, dist)])

    problems = _run_all(cases, tmp_path, run)
    _report("python -m hyperpod_k8s.main", cases, problems)
    assert problems == {}


def test_cdk_app_rejects(tmp_path: Path) -> None:
    """``python app.py`` as the CDK CLI runs it (config from the environment, outdir from CDK_OUTDIR)."""
    cases = _pick(CONFIG_CASES)

    def run(case: Case, path: Path, cdk_out: Path, dist: Path) -> subprocess.CompletedProcess[str]:
        return _subprocess([sys.executable, "app.py"], HYPERPOD_CONFIG=str(path), CDK_OUTDIR=str(cdk_out))

    problems = _run_all(cases, tmp_path, run)
    _report("app.py", cases, problems)
    assert problems == {}


def test_check_config_rejects(tmp_path: Path) -> None:
    cases = _pick(CONFIG_CASES)

    def run(case: Case, path: Path, cdk_out: Path, dist: Path) -> subprocess.CompletedProcess[str]:
        return _subprocess([sys.executable, "-m", "hyperpod_core.config.__main__", str(path)])

    problems = _run_all(cases, tmp_path, run)
    _report("check_config", cases, problems)
    assert problems == {}


def test_operator_cli_validate_rejects(tmp_path: Path) -> None:
    cli = Path(sys.executable).with_name("hyperpod-dpd")
    cases = _pick(CONFIG_CASES)

    def run(case: Case, path: Path, cdk_out: Path, dist: Path) -> subprocess.CompletedProcess[str]:
        return _subprocess([str(cli), "validate", "--config", str(path)])

    problems = _run_all(cases, tmp_path, run)
    _report("hyperpod-dpd validate", cases, problems)
    assert problems == {}


def test_cdk_cli_synth_rejects(tmp_path: Path) -> None:
    """``npx cdk synth -c config=...``: our line, then the CLI's report that the app exited with 2."""
    cases = _pick(CONFIG_CASES, WRAPPER_SAMPLE)

    def run(case: Case, path: Path, cdk_out: Path, dist: Path) -> subprocess.CompletedProcess[str]:
        return _subprocess(["npx", "--no-install", "cdk", "synth", "--quiet", "--no-validation", "--no-notices",
                            "-c", f"config={path}", "-o", str(cdk_out)])

    problems = _run_all(cases, tmp_path, run, cli=True)
    _report("cdk synth (CLI)", cases, problems)
    assert problems == {}


def test_scripts_synth_rejects(tmp_path: Path) -> None:
    """``./scripts/synth CONFIG`` works on the repository's own cdk.out/ and dist/: they must not change. The
    wrappers' sample, like the CDK CLI (each run passes set-up's checks first, ~1.7 s); the loader behind it takes
    every case in process (``test_loader_rejects``)."""
    cases = _pick(CONFIG_CASES, WRAPPER_SAMPLE)
    before = (_tree_hash(REPO_ROOT / "cdk.out"), _tree_hash(REPO_ROOT / "dist"))
    problems: dict[str, str] = {}
    for case in cases:  # one at a time: every run shares the repository's folders
        result = _subprocess([str(REPO_ROOT / "scripts" / "synth"), str(write_case(case, tmp_path / case.id))])
        problem = _verdict(case, result, only_ours=False)
        if problem is None and (_tree_hash(REPO_ROOT / "cdk.out"), _tree_hash(REPO_ROOT / "dist")) != before:
            problem = "cdk.out/ or dist/ changed"
        if problem is not None:
            problems[case.id] = problem
    _report("scripts/synth", cases, problems)
    assert problems == {}


def test_the_harness_sees_a_changed_output_folder(tmp_path: Path) -> None:
    """Guards the harness: a write into an output folder changes its hash."""
    cdk_out, _ = _sandbox(tmp_path)
    before = _tree_hash(cdk_out)
    shutil.copy(cdk_out / "sentinel.txt", cdk_out / "new.txt")
    assert _tree_hash(cdk_out) != before


def test_the_in_process_harness_sees_what_a_process_prints_on_stderr() -> None:
    """Guards the harness: a warning or a logged error beside our line is more than one line, as it would be on
    the stderr of the entry point's own process; a DeprecationWarning, hidden there by default, is hidden here."""
    import logging
    import warnings

    def noisy() -> None:
        warnings.warn("old", DeprecationWarning, stacklevel=1)
        warnings.warn("careful", UserWarning, stacklevel=1)
        logging.getLogger("some.library").error("logged")
        logging.getLogger("quiet.library").error("kept")  # its NullHandler: lastResort never prints it
        raise ConfigError("hyperpod.instance_groups: bad")

    logging.getLogger("quiet.library").addHandler(logging.NullHandler())
    result = _in_process(noisy, ["entry"])
    assert result.returncode == 2
    assert "UserWarning: careful" in result.stderr and "logged\n" in result.stderr
    assert "old" not in result.stderr and "kept" not in result.stderr
    case = Case(id="noisy", kind="config", content=b"", fragment="hyperpod.instance_groups")
    assert (_verdict(case, result) or "").startswith("1 error lines: "), "the extra lines fail the verdict"


@pytest.mark.parametrize("code", [None, 0, 3, "a message"], ids=["none", "zero", "three", "text"])
def test_the_in_process_harness_exits_as_the_interpreter_does(code: object, tmp_path: Path) -> None:
    """Guards the harness against CPython itself: ``SystemExit(code)`` in a real interpreter gives the same exit
    code and stderr as in :func:`run_entry_point` (a text code is printed, exit 1; Python's docs, sys.exit)."""
    real = subprocess.run([sys.executable, "-c", f"raise SystemExit({code!r})"], capture_output=True, text=True,
                          check=False, timeout=30)

    def leave() -> None:
        raise SystemExit(code)

    here = run_entry_point(leave, ["entry"], cwd=tmp_path)
    assert (here.returncode, here.stderr) == (real.returncode, real.stderr)
