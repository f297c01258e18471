"""The IAM principal an EKS access entry needs for whoever runs the deploy.

Standard library only (with :mod:`hyperpod_core.names`), so ``scripts/admin-principal-arn`` can use it with any
Python 3, without the venv.
An assumed-role session ARN ``arn:aws:sts::<account>:assumed-role/<role>/<session>`` becomes the role ARN
``arn:aws:iam::<account>:role/<role>`` (an access entry names the role, not one session of it); IAM user and
role ARNs pass through. A session ARN does not carry the role's path: for a role with a path, set
``eks.admin_principal_arn`` in the config instead.
"""

from __future__ import annotations

import re

from hyperpod_core.names import IAM_PRINCIPAL_ARN_PATTERN

_ASSUMED_ROLE = re.compile(r"^arn:(aws[a-z-]*):sts::(\d{12}):assumed-role/([\w+=,.@-]+)/[\w+=,.@-]+$", re.ASCII)
_IAM_PRINCIPAL = re.compile(IAM_PRINCIPAL_ARN_PATTERN, re.ASCII)


def principal_arn(caller_arn: str) -> str:
    """The IAM role/user ARN for ``caller_arn``; raises ``ValueError`` (one line) for anything else."""
    arn = caller_arn.strip()
    match = _ASSUMED_ROLE.fullmatch(arn)
    if match:
        partition, account, role = match.groups()
        return f"arn:{partition}:iam::{account}:role/{role}"
    if _IAM_PRINCIPAL.fullmatch(arn):
        return arn
    raise ValueError(f"admin principal must be an IAM user, IAM role or assumed-role session ARN, got {arn[:200]!r}")
