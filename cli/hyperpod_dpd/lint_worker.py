"""cfn-lint, warmed up before the templates exist.

    python -m hyperpod_dpd.lint_worker CONFIG_FILE REGION

The main job starts this child first, so cfn-lint's imports and rule loading (~1 s) overlap the CDK synth;
then it writes the template paths on stdin (one per line, then EOF). The child lints them with the settings
of ``CONFIG_FILE`` (``.cfnlintrc.yaml``) for the region the templates deploy to, prints one line per
finding and exits 0 (clean) or 2 (findings).
Same engine, rules and settings as the ``cfn-lint`` command; only the start-up is moved earlier.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path


def main() -> int:
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
    runner.config = ConfigMixIn(["--config-file", rc_file, "--regions", region, "--", *templates])
    matches = list(runner.run())
    for match in matches:
        print(f"{match.rule.id} {match.message} {match.filename}:{match.linenumber}")
    return 2 if matches else 0


if __name__ == "__main__":
    sys.exit(main())
