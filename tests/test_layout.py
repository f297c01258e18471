"""Guards for the repository layout: the container folders are source roots, never packages."""

from __future__ import annotations

import tomllib
from pathlib import Path

import constructs
import pytest

from hyperpod_core import paths
from hyperpod_core.errors import UsageError

REPO_ROOT = Path(__file__).resolve().parents[1]
#: Container folder -> the one import package it holds (pyproject.toml's packages.find ``where``).
PACKAGES = {"core": "hyperpod_core", "runtime": "hyperpod_runtime", "infra": "hyperpod_infra",
            "constructs": "hyperpod_constructs", "k8s": "hyperpod_k8s", "cli": "hyperpod_dpd",
            "analysis": "hyperpod_analysis", "mainjob": "hyperpod_mainjob"}


def test_import_constructs_is_the_library_not_our_folder() -> None:
    assert "site-packages" in str(constructs.__file__)
    assert hasattr(constructs, "Construct")


def test_every_container_folder_holds_its_package() -> None:
    found = {p.parent.parent.name: p.parent.name for p in REPO_ROOT.glob("*/hyperpod_*/__init__.py")}
    assert found == PACKAGES
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert sorted(pyproject["tool"]["setuptools"]["packages"]["find"]["where"]) == sorted(PACKAGES)


def test_container_folders_have_no_init() -> None:
    for folder in PACKAGES:
        assert not (REPO_ROOT / folder / "__init__.py").exists(), f"{folder}/__init__.py must not exist"


def test_packages_are_typed() -> None:
    for folder, package in PACKAGES.items():
        assert (REPO_ROOT / folder / package / "py.typed").is_file(), f"{folder}/{package}/py.typed"


def test_the_checkout_is_found_from_the_sources(monkeypatch) -> None:
    assert paths.CHECKOUT == REPO_ROOT
    assert paths.checkout("anything") == REPO_ROOT
    monkeypatch.setattr(paths, "CHECKOUT", None)  # as installed from a wheel (tests/cli/test_wheel.py)
    with pytest.raises(UsageError, match=r"^hyperpod-dpd synth needs the repository checkout "):  # exit 2
        paths.checkout("hyperpod-dpd synth")
