"""The AZ IDs AWS publishes for each region: an offline table, so that a config naming an AZ ID that does not exist
fails at ``validate`` (and every synth), before any AWS call.

Source: AWS documentation, "AWS Availability Zones" (AWS Regions and Availability Zones guide), its tables per
geography (North America, Africa, Asia Pacific, Europe, Middle East, South America),
https://docs.aws.amazon.com/global-infrastructure/latest/regions/aws-availability-zones.html, read 2026-12-03.
The page's "Coming in 2026" row (us-east-1, Maryland) has no AZ ID yet and is left out.

The page covers the ``aws`` partition only. The four regions of :data:`hyperpod_core.config.types.AWS_REGIONS` it
does not list, ``cn-north-1`` and ``cn-northwest-1`` (``aws-cn``) and ``us-gov-east-1`` and ``us-gov-west-1``
(``aws-us-gov``), keep the region-prefix check (``usgw1-az<n>`` in us-gov-west-1), and ``validate`` says so.

Listed is not the same as usable by every account: newer accounts reach two of us-west-1's three AZs (same page), and
AWS may stop offering a constrained AZ to new accounts ("Constrained Availability Zones"); ``hyperpod-dpd preflight``
checks the AZ ID against the account's own list (``ec2:DescribeAvailabilityZones``). When AWS adds an AZ, add its ID
here (a config naming it fails ``validate`` until then).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

SOURCE: Final = "https://docs.aws.amazon.com/global-infrastructure/latest/regions/aws-availability-zones.html"
SOURCE_READ: Final = "2026-12-03"


def _ids(prefix: str, *numbers: int) -> tuple[str, ...]:
    return tuple(f"{prefix}-az{n}" for n in numbers)


#: Region code -> its AZ IDs, as the page lists them (ascending).
PUBLISHED_AZ_IDS: Final[Mapping[str, tuple[str, ...]]] = {
    # North America
    "us-east-1": _ids("use1", 1, 2, 3, 4, 5, 6),
    "us-east-2": _ids("use2", 1, 2, 3),
    "us-west-1": _ids("usw1", 1, 2, 3),
    "us-west-2": _ids("usw2", 1, 2, 3, 4),
    "ca-central-1": _ids("cac1", 1, 2, 4),
    "ca-west-1": _ids("caw1", 1, 2, 3),
    "mx-central-1": _ids("mxc1", 1, 2, 3),
    # Africa
    "af-south-1": _ids("afs1", 1, 2, 3),
    # Asia Pacific
    "ap-east-1": _ids("ape1", 1, 2, 3),
    "ap-east-2": _ids("ape2", 1, 2, 3),
    "ap-northeast-1": _ids("apne1", 1, 2, 3, 4),
    "ap-northeast-2": _ids("apne2", 1, 2, 3, 4),
    "ap-northeast-3": _ids("apne3", 1, 2, 3),
    "ap-south-1": _ids("aps1", 1, 2, 3),
    "ap-south-2": _ids("aps2", 1, 2, 3),
    "ap-southeast-1": _ids("apse1", 1, 2, 3),
    "ap-southeast-2": _ids("apse2", 1, 2, 3),
    "ap-southeast-3": _ids("apse3", 1, 2, 3),
    "ap-southeast-4": _ids("apse4", 1, 2, 3),
    "ap-southeast-5": _ids("apse5", 1, 2, 3),
    "ap-southeast-6": _ids("apse6", 1, 2, 3),
    "ap-southeast-7": _ids("apse7", 1, 2, 3),
    # Europe
    "eu-central-1": _ids("euc1", 1, 2, 3),
    "eu-central-2": _ids("euc2", 1, 2, 3),
    "eu-north-1": _ids("eun1", 1, 2, 3),
    "eu-south-1": _ids("eus1", 1, 2, 3),
    "eu-south-2": _ids("eus2", 1, 2, 3),
    "eu-west-1": _ids("euw1", 1, 2, 3),
    "eu-west-2": _ids("euw2", 1, 2, 3, 4),
    "eu-west-3": _ids("euw3", 1, 2, 3),
    # Middle East
    "il-central-1": _ids("ilc1", 1, 2, 3),
    "me-central-1": _ids("mec1", 1, 2, 3),
    "me-south-1": _ids("mes1", 1, 2, 3),
    # South America
    "sa-east-1": _ids("sae1", 1, 2, 3),
}


def published_az_ids(region: str) -> tuple[str, ...] | None:
    """The AZ IDs AWS publishes for ``region``, or ``None`` for a region the table does not hold (module
    docstring)."""
    return PUBLISHED_AZ_IDS.get(region)
