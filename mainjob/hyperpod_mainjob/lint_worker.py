"""cfn-lint, warmed up before the templates exist.

    python -m hyperpod_mainjob.lint_worker CONFIG_FILE REGION

The main job starts this child first, so cfn-lint's imports and rule loading (~1 s) overlap the CDK synth;
then it writes the template paths on stdin (one per line, then EOF). The child lints them with the settings
of ``CONFIG_FILE`` (``.cfnlintrc.yaml``) for the region the templates deploy to, prints one line per
finding and exits 0 (clean) or 2 (findings).
Same engine, rules and settings as the ``cfn-lint`` command; only the start-up is moved earlier. Once the
templates arrive the worker forks (the children inherit the loaded rules) and each process lints a share.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

#: Processes that lint (the worker and its forks): the templates are split between them by size.
FORKS = 2
#: The settings every cfn-lint run of the templates uses (the main job's, the summary's own), at the root of the
#: checkout.
SETTINGS_FILE = ".cfnlintrc.yaml"


def main() -> int:
    # Here, not at module level: the main job and its summary import SETTINGS_FILE from this module, and cfn-lint's
    # import (about 0.37 s, python -X importtime) belongs in this child, where it overlaps the synth.
    from cfnlint.config import ConfigMixIn
    from cfnlint.runner import Runner

    rc_file, region = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        warm = Path(tmp) / "warm.json"
        warm.write_text('{"Resources": {"T": {"Type": "AWS::SNS::Topic"}}}')
        # Loads the rules once; the real templates reuse them.
        runner = Runner(ConfigMixIn(["--config-file", rc_file, "--regions", region, "--", str(warm)]))
        list(runner.run())
    templates = [line.strip() for line in sys.stdin if line.strip()]
    if not templates:
        return 0
    bins = _split(templates, FORKS)
    children = []
    for part in bins[1:]:  # forked after the rules are loaded: the children start warm
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            with os.fdopen(write_fd, "w") as out:
                out.write("".join(f"{line}\n" for line in _lint(runner, ConfigMixIn, rc_file, region, part)))
            os._exit(0)
        os.close(write_fd)
        children.append((pid, read_fd))
    lines = _lint(runner, ConfigMixIn, rc_file, region, bins[0])
    for pid, read_fd in children:
        with os.fdopen(read_fd) as inp:
            lines += [line for line in inp.read().splitlines() if line]
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            lines.append(f"lint worker {pid} failed with status {status}")
    for line in lines:
        print(line)
    return 2 if lines else 0


def _split(templates: list[str], n: int) -> list[list[str]]:
    """``n`` bins of about equal size (largest first), none empty."""
    bins: list[list[str]] = [[] for _ in range(min(n, len(templates)))]
    sizes = [0] * len(bins)
    for t in sorted(templates, key=lambda t: -Path(t).stat().st_size):
        i = sizes.index(min(sizes))
        bins[i].append(t)
        sizes[i] += Path(t).stat().st_size
    return bins


def _lint(runner: Any, config_cls: Any, rc_file: str, region: str, templates: list[str]) -> list[str]:
    runner.config = config_cls(["--config-file", rc_file, "--regions", region, "--", *templates])
    return [f"{m.rule.id} {m.message} {m.filename}:{m.linenumber}" for m in runner.run()]

if __name__ == "__main__":
    sys.exit(main())
