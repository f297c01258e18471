"""Sizing planner: should you split prefill and decode, how many nodes of each, and what it costs.

``estimate_scenarios(config, traffic, concurrencies)`` returns the ``scenarios`` entries of
``hyperpod-dpd plan --json``; the benchmark report imports it to show estimates beside measurements.
See docs/sizing.md for the method, its parameters and its calibration.
"""

from hyperpod_analysis.plan.planner import estimate_scenarios

__all__ = ["estimate_scenarios"]
