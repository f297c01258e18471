"""The manifests, byte for byte. Rewrite on purpose with ``UPDATE_SNAPSHOTS=1``; CI never does."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE = os.environ.get("UPDATE_SNAPSHOTS") == "1" and not os.environ.get("CI")


@pytest.mark.parametrize("case", ["default", "p5en-two-prefill"])
def test_manifests_match_snapshot(synthesized, case):
    files = synthesized[case].files
    folder = SNAPSHOTS / case
    if UPDATE:
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.glob("*.k8s.yaml"):
            stale.unlink()
        for name, text in files.items():
            (folder / name).write_text(text, encoding="utf-8")
    expected = {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.k8s.yaml"))}
    assert sorted(files) == sorted(expected), "files written differ; review, then rerun with UPDATE_SNAPSHOTS=1"
    for name in files:
        assert files[name] == expected[name], f"{case}/{name} changed; review, then rerun with UPDATE_SNAPSHOTS=1"
