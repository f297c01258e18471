"""Instance prices: the one pinned table, and the order in which a price is taken.

The planner (``hyperpod-dpd plan``), the benchmark report and the dashboards' cost row read prices only from here,
so they cannot disagree about what an instance-hour costs. A price is taken, in this order, from ``--price`` (the
command's own option, USD per instance-hour), ``benchmark.instance_hour_usd`` of the config, and
:data:`PINNED_PRICES`; an instance type none of them has gets no price, and the costs are then shown in GPU-hours
only (:func:`no_price_line` says so in one line).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

from hyperpod_core.instances import INSTANCE_FACTS


@dataclass(frozen=True, kw_only=True)
class PriceTable:
    """USD per instance-hour by instance type, with where the numbers come from."""

    usd_per_instance_hour: dict[str, float]
    source: str
    as_of: str

    def price(self, instance_type: str) -> float | None:
        """USD per instance-hour, or None when no price is pinned or given (cost columns are then left out)."""
        return self.usd_per_instance_hour.get(instance_type)


#: On-demand SageMaker price of one ml.p5.48xlarge hour in us-west-2 as returned by the AWS Price List API on
#: 2026-09-12 (the SageMaker training rate, recorded in a public repository's cost table; HyperPod cluster
#: instances are priced per instance-hour on the same page, check yours). Other types are not pinned (no public page
#: gives their price): pass a price for cost columns.
PINNED_PRICES: Final = PriceTable(
    usd_per_instance_hour={"ml.p5.48xlarge": 63.296},
    source="AWS Price List API, AmazonSageMaker, us-west-2 on-demand (https://aws.amazon.com/sagemaker/ai/pricing/)",
    as_of="2026-09-12")

#: Where a configured price comes from, as the report and the planner name it.
CONFIGURED: Final = "benchmark.instance_hour_usd"


@dataclass(frozen=True, kw_only=True)
class InstancePrice:
    """The price one instance type is costed at, and which source gave it."""

    instance_type: str
    usd_per_instance_hour: float
    source: str
    """``--price``, ``benchmark.instance_hour_usd``, or the pinned table's source and date."""

    @property
    def usd_per_gpu_hour(self) -> float:
        """One GPU's share of the instance-hour: every GPU of the instance costs the same."""
        return self.usd_per_instance_hour / INSTANCE_FACTS[self.instance_type].gpus

    def text(self) -> str:
        return (f"{self.usd_per_instance_hour:g} USD per {self.instance_type} hour ({self.source}), "
                f"{self.usd_per_gpu_hour:.3f} USD per GPU-hour")


def instance_price(instance_type: str, *, given: float | None = None, configured: float | None = None,
                   table: PriceTable = PINNED_PRICES) -> InstancePrice | None:
    """The price of ``instance_type``: ``given`` (a command's ``--price``), else ``configured``
    (``benchmark.instance_hour_usd``), else ``table``'s; None when none of them has one."""
    for usd, source in ((given, "--price"), (configured, CONFIGURED),
                        (table.price(instance_type), f"pinned table: {table.source}, {table.as_of}")):
        if usd is not None:
            return InstancePrice(instance_type=instance_type, usd_per_instance_hour=usd, source=source)
    return None


def configured_table(instance_type: str, configured: float | None, table: PriceTable = PINNED_PRICES) -> PriceTable:
    """``table`` with ``benchmark.instance_hour_usd`` over it for the endpoint's ``instance_type``: the planner's
    prices before its own ``--price``/``--prices``, in the same order as the report's."""
    if configured is None:
        return table
    return replace(table, usd_per_instance_hour={**table.usd_per_instance_hour, instance_type: configured},
                   source=f"{CONFIGURED} for {instance_type} over {table.source}")


def no_price_line(instance_type: str) -> str:
    """What a report says when :func:`instance_price` found nothing."""
    return (f"no price for {instance_type} (not in the pinned table; no --price, no {CONFIGURED}): costs in "
            "GPU-hours only")
