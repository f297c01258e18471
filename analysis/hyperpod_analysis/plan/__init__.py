"""Sizing planner: should you split prefill and decode, how many nodes of each, and what it costs.

``estimate_scenarios(spec, traffic, concurrencies)`` returns the ``scenarios`` entries of
``hyperpod-dpd plan --json`` for one endpoint (its spec, or a config file path and ``endpoint=NAME``);
``estimate_experiment(spec, experiment, traffic, concurrencies)`` the estimate of the layouts a benchmark experiment
measures, which the benchmark report shows beside those measurements.
See docs/sizing.md for the method, its parameters and its calibration.
"""

from hyperpod_analysis.plan.planner import estimate_experiment, estimate_scenarios

__all__ = ["estimate_experiment", "estimate_scenarios"]
