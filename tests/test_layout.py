"""Guards for the repository layout: the container folders are source roots, never packages."""

from __future__ import annotations

from pathlib import Path

import constructs

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_import_constructs_is_the_library_not_our_folder() -> None:
    assert "site-packages" in str(constructs.__file__)
    assert hasattr(constructs, "Construct")


def test_container_folders_have_no_init() -> None:
    for folder in ("infra", "constructs", "k8s", "cli"):
        assert not (REPO_ROOT / folder / "__init__.py").exists(), f"{folder}/__init__.py must not exist"


def test_packages_are_typed() -> None:
    for package in ("infra/hyperpod_infra", "constructs/hyperpod_constructs", "k8s/hyperpod_k8s", "cli/hyperpod_dpd"):
        assert (REPO_ROOT / package / "py.typed").is_file()
