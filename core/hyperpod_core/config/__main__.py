"""``python -m hyperpod_core.config PATH``: validate a config file; one line and exit 2 if bad."""

from __future__ import annotations

import sys

from hyperpod_core import paths
from hyperpod_core.config import load_config
from hyperpod_core.errors import guarded


def main() -> None:
    """Without PATH: the checkout's ``config/default.yaml`` (one line saying so outside a checkout)."""
    path = sys.argv[1] if len(sys.argv) > 1 else str(paths.checkout("the default config") / paths.DEFAULT_CONFIG)
    config = load_config(path)
    groups = ", ".join(f"{g.name}: {g.instance_count}x {g.instance_type} ({g.pool})"
                       for g in config.hyperpod.instance_groups)
    print(f"config {path}: ok ({config.region}, AZ ID {config.network.gpu_availability_zone_id}; {groups})")


if __name__ == "__main__":
    guarded(main)
