"""Which Node.js the pinned tools support, said once by set-up in one line (issue 24) instead of hidden.

Sources: the release table of the jsii runtime inside the pinned Python ``jsii`` package
(``jsii/_embedded/jsii/bin__jsii-runtime.js``: ``NodeRelease(major, {endOfLife, endOfJsiiSupport, untested})``,
supported while not untested and before the end of jsii's support, by default 6 months after end of life), and
that runtime's own behaviour: it prints its banner exactly when the Node.js it runs on is not supported.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_SPEC = importlib.util.find_spec("jsii")
assert _SPEC is not None and _SPEC.submodule_search_locations
RUNTIME = Path(next(iter(_SPEC.submodule_search_locations))) / "_embedded" / "jsii" / "bin__jsii-runtime.js"
_RELEASE = re.compile(r'new NodeRelease\((\d+),\{endOfLife:new Date\("([\d-]+)"\)'
                      r'(?:,endOfJsiiSupport:new Date\("([\d-]+)"\))?(?:,supportedRange:"[^"]*")?(,untested:!0)?\}\)')
_SILENCE = ("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION",
            "JSII_SILENCE_WARNING_KNOWN_BROKEN_NODE_VERSION", "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION")


def _supported_by_the_python_jsii_runtime(today: dt.date) -> list[int]:
    supported = []
    for major, end_of_life, end_of_support, untested in _RELEASE.findall(RUNTIME.read_text(encoding="utf-8")):
        eol = dt.date.fromisoformat(end_of_life)
        month = eol.month + 6  # NodeRelease.DEFAULT_EXTENDED_SUPPORT_MONTHS
        support_ends = (dt.date.fromisoformat(end_of_support) if end_of_support
                        else eol.replace(year=eol.year + (month - 1) // 12, month=(month - 1) % 12 + 1))
        if not untested and support_ends > today:
            supported.append(int(major))
    return sorted(supported)


def _node(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in _SILENCE}
    return subprocess.run(["node", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
                          check=False, stdin=subprocess.DEVNULL)


def test_the_readme_names_the_node_versions_the_pinned_jsii_supports() -> None:
    supported = _supported_by_the_python_jsii_runtime(dt.date.today())
    assert supported, "the release table of the jsii runtime was not found: the pattern above needs a look"
    check_node = _node("-e", "const {NodeRelease} = require('@jsii/check-node');"
                             "console.log(NodeRelease.ALL_RELEASES.filter(r => r.supported).map(r => r.majorVersion)"
                             ".sort((a, b) => a - b).join(' '))")
    assert check_node.stdout.split() == [str(m) for m in supported]  # what scripts/node-support.cjs decides with
    named = re.search(r"Node\.js ((?:\d+, )*\d+) or (\d+) \(what the pinned jsii runtime supports",
                      (REPO / "README.md").read_text(encoding="utf-8"))
    assert named, "README.md must name the supported Node.js versions"
    assert [int(v) for v in (*named.group(1).split(", "), named.group(2))] == supported


@pytest.mark.skipif(not RUNTIME.is_file(), reason="the pinned jsii package embeds its runtime")
def test_set_up_says_in_one_line_what_jsii_says_in_its_banner() -> None:
    """scripts/node-support.cjs prints one line exactly when jsii's own runtime prints its banner on this Node."""
    note = _node("scripts/node-support.cjs")
    assert note.returncode == 0 and len(note.stdout.splitlines()) <= 1, note.stdout + note.stderr
    banner = _node(str(RUNTIME)).stderr
    assert bool(note.stdout) == ("!!" in banner), banner
    if note.stdout:
        supported = _supported_by_the_python_jsii_runtime(dt.date.today())
        assert note.stdout.startswith(f"warning: Node.js {_node('--version').stdout.strip()} ")
        assert note.stdout.rstrip().endswith(f"support Node.js {' and '.join(map(str, supported))} "
                                             '(README.md, "The two commands")')


def test_set_up_silences_the_banner_only_after_saying_it() -> None:
    """scripts/env.sh silences jsii's banner for this Node's major version; the Python entry points run without it
    (``python app.py``, ``python -m hyperpod_k8s.main``) silence it through one module, hyperpod_core.node_banner
    (tests/test_entry_points.py runs both without the variable), and spell the variable nowhere else."""
    sourced = subprocess.run(["bash", "-c", ". scripts/env.sh; echo $JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"],
                             cwd=REPO, capture_output=True, text=True, timeout=60, check=True)
    assert sourced.stdout.strip() == _node("--version").stdout.strip().lstrip("v").split(".")[0]
    setup = (REPO / "scripts" / "setup").read_text()
    assert "node scripts/node-support.cjs" in setup
    for path in ("app.py", "mainjob/hyperpod_mainjob/job.py", "k8s/hyperpod_k8s/main.py",
                 "cli/hyperpod_dpd/cdk_cli.py"):
        assert "JSII_SILENCE_WARNING" not in (REPO / path).read_text(), path
