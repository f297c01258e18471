"""The cdk8s entry point: config -> charts -> ``dist/*.k8s.yaml``.

Run through ``npx cdk8s synth`` (see ``cdk8s.yaml``) or directly as ``python -m hyperpod_k8s.main``.
The config file is ``--config``, else ``$HYPERPOD_CONFIG``, else ``config/default.yaml``: the same file
the CDK app reads, so the two cannot disagree.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from hyperpod_infra.config import Config, load_config
from hyperpod_infra.errors import run_guarded

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CONFIG = REPO_ROOT / "config" / "default.yaml"


def config_path(cli_value: str | None) -> Path:
    return Path(cli_value or os.environ.get("HYPERPOD_CONFIG") or DEFAULT_CONFIG)


def synth(config: Config, outdir: Path) -> list[Path]:
    """Build every chart for ``config`` and write them to ``outdir``; returns the files written."""
    import cdk8s  # jsii starts here, after the config is known to be valid

    from hyperpod_k8s.charts import build_charts

    app = cdk8s.App(outdir=str(outdir), yaml_output_type=cdk8s.YamlOutputType.FILE_PER_CHART)
    build_charts(app, config)
    outdir.mkdir(parents=True, exist_ok=True)
    for stale in outdir.glob("*.k8s.yaml"):
        stale.unlink()
    app.synth()
    return sorted(outdir.glob("*.k8s.yaml"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Synthesize the DPD endpoint manifests with cdk8s.")
    parser.add_argument("--config", help="config YAML (default: $HYPERPOD_CONFIG or config/default.yaml)")
    parser.add_argument("--outdir", default=os.environ.get("CDK8S_OUTDIR", "dist"))
    args = parser.parse_args(argv)
    config = load_config(config_path(args.config))
    for path in synth(config, Path(args.outdir)):
        print(f"wrote {path}")


if __name__ == "__main__":
    run_guarded(main)
