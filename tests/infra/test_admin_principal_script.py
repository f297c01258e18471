"""``scripts/admin-principal-arn``: the README deploy command turns the caller into an access-entry principal."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hyperpod_infra.stacks.cluster_stack import ADMIN_PRINCIPAL_PATTERN

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "admin-principal-arn"


def _run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], input=stdin, capture_output=True, text=True,
                          check=False)


@pytest.mark.parametrize(("caller", "principal"), [
    # sts get-caller-identity for an assumed role: the access entry must name the role (EKS access entries
    # take IAM role/user ARNs), not one session of it
    ("arn:aws:sts::123456789012:assumed-role/Admin/alice@example.com", "arn:aws:iam::123456789012:role/Admin"),
    ("arn:aws-us-gov:sts::123456789012:assumed-role/Ops_Role/i-0abc", "arn:aws-us-gov:iam::123456789012:role/Ops_Role"),
    ("arn:aws:iam::123456789012:user/alice", "arn:aws:iam::123456789012:user/alice"),
    ("arn:aws:iam::123456789012:role/Admin", "arn:aws:iam::123456789012:role/Admin"),
])
def test_caller_becomes_the_principal_the_parameter_accepts(caller: str, principal: str) -> None:
    for result in (_run(caller), _run(stdin=caller + "\n")):
        assert result.returncode == 0, result.stderr
        assert result.stdout == principal + "\n"
        assert __import__("re").fullmatch(ADMIN_PRINCIPAL_PATTERN, principal)


def test_anything_else_is_one_line_and_exit_two() -> None:
    result = _run("arn:aws:sts::123456789012:federated-user/bob")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("error: admin principal must be") and result.stderr.count("\n") == 1
