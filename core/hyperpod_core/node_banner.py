"""jsii's banner about an unsupported Node.js, silenced in every Python entry point that imports a jsii library.

On a Node.js past the pinned jsii's support (Node 20 since 2026-10-30), jsii's runtime prints an 11-line banner in
every process that imports aws-cdk-lib or cdk8s, and jsii's Python side relays it as bytes (``b'!!!...'``). Set-up
says it once, in one line (scripts/node-support.cjs, README "The two commands"); after that the banner is noise. The
runtime reads :data:`VARIABLE` (a comma list of Node.js majors, ``bin__jsii-runtime.js``) from the environment its
node kernel copies at the first jsii import, so :func:`silence` runs before that import. One place for every Python
entry point: ``app.py``, ``python -m hyperpod_k8s.main`` (``npx cdk8s synth``), and the main job and the CDK CLI as
the command line starts them (``hyperpod_dpd.cdk_cli.CLI_ENV``). scripts/env.sh sets the running Node's major, and
scripts/npx-env.cjs the same default for ``npx``. An explicit value wins.
"""

from __future__ import annotations

import os
from typing import Final

VARIABLE: Final = "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"
#: The Node.js majors whose banner is silenced: those past the pinned jsii's support that set-up reports.
SILENCED_MAJORS: Final = "20"


def silence() -> None:
    """Silence the banner for :data:`SILENCED_MAJORS` in this process and its children, unless already set."""
    os.environ.setdefault(VARIABLE, SILENCED_MAJORS)
