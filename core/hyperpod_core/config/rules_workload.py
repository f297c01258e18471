"""The rules of one endpoint's workload, split from :mod:`hyperpod_core.config.rules` (which runs them, in its
:data:`~hyperpod_core.config.rules.RULES` order): what the GPU memory must hold and what the benchmark scenarios must
fit. Each raises :class:`ConfigError` with one line: the field, what is allowed, and the bad value.
"""

from __future__ import annotations

import math
from typing import Any, NoReturn

from hyperpod_core import fit, instances
from hyperpod_core.config.spec import EndpointSpec
from hyperpod_core.config.types import BENCHMARK_PATH_MARGIN, scenario_token_range
from hyperpod_core.errors import ConfigError, shown
from hyperpod_core.names import ROLES, Role


def fail(field: str, value: Any, allowed: str) -> NoReturn:
    """``<field> <allowed>, got <value>``: the one line of every rule."""
    raise ConfigError(f"{field} {allowed}, got {shown(value)}")



# --- GPU memory -------------------------------------------------------------------------------------------

def model_size_is_complete(s: EndpointSpec) -> None:
    """A model described by size needs both numbers: the weights and the KV cache per token."""
    m = s.model
    if (m.parameters_billion is None) != (m.kv_cache_kib_per_token is None):
        missing = s.model_field('kv_cache_kib_per_token' if m.kv_cache_kib_per_token is None else 'parameters_billion')
        given = s.model_field('parameters_billion' if missing.endswith('per_token') else 'kv_cache_kib_per_token')
        fail(missing, None, f"must be set with {given} (the GPU-memory check needs the weights and the KV cache)")


def _utilization_field(s: EndpointSpec, role: Role) -> str:
    own = s.endpoint.role_gpu_memory_utilization(role) != s.endpoint.gpu_memory_utilization
    return f"{s.at}.{role}.extra_args {fit.UTILIZATION_FLAG}" if own else f"{s.at}.gpu_memory_utilization"


def gpu_memory_holds_the_pd_buffer(s: EndpointSpec) -> None:
    """vLLM reserves its share first, then LMCache allocates the PD buffer on the same GPU, on every prefill and
    decode rank (lifecycle-facts.md: ``v1/worker/gpu_worker.py``, LMCache ``pd_backend.py``): share + buffer + the
    runtime margin must fit the GPU. The colocated baseline, which has no buffer, gets the share back up to what this
    rule allows without one (:meth:`EndpointConfig.colocated_gpu_memory_utilization`)."""
    e = s.endpoint
    for role in ROLES:
        utilization = e.role_gpu_memory_utilization(role)
        gpu = fit.gpu_memory_fit(e.instance_type, utilization, e.pd_buffer_size_bytes)
        if not gpu.fits:
            knob = _utilization_field(s, role)
            fail(f"{s.at}.pd_buffer_size_bytes", e.pd_buffer_size_bytes,
                  f"({gpu.pd_buffer_gib:g} GiB per rank) plus {role}'s vLLM share ({utilization:g} x "
                  f"{gpu.gpu_memory_gib:.1f} GiB {gpu.gpu} = {gpu.vllm_share_gib:.1f} GiB) and the "
                  f"{gpu.margin_gib:g} GiB CUDA-graph/runtime margin must fit the GPU ("
                  f"{gpu.vllm_share_gib + gpu.pd_buffer_gib + gpu.margin_gib:.1f} GiB > {gpu.gpu_memory_gib:.1f} GiB): "
                  f"lower {knob} to <= {gpu.max_utilization:.2f} or the buffer to <= {gpu.max_pd_buffer_gib} GiB")


def gpu_memory_holds_the_model(s: EndpointSpec) -> None:
    """vLLM's share of one GPU must hold that GPU's weights and the KV cache of one ``max_model_len`` sequence, or
    the engine does not start. Checked when the model's size is known (:meth:`ModelConfig.memory`)."""
    e = s.endpoint
    memory = s.model.memory(e.tensor_parallel_size)
    if memory is None:
        return
    gpu = instances.INSTANCE_FACTS[e.instance_type].gpu
    for role in ROLES:
        utilization = e.role_gpu_memory_utilization(role)
        engine = fit.model_fit(memory, instance_type=e.instance_type, utilization=utilization,
                               tensor_parallel_size=e.tensor_parallel_size, max_model_len=e.max_model_len)
        if engine.fits:
            continue
        needed = math.ceil(engine.needed_gib / gpu.memory_gib * 100) / 100
        knob = _utilization_field(s, role)
        fail(knob, utilization,
              f"gives {role} {engine.vllm_share_gib:.1f} GiB per {gpu.short_name} ({gpu.memory_gib:.1f} GiB), which "
              f"must hold {engine.weights_gib:.1f} GiB of {memory.name} weights per GPU (tensor_parallel_size "
              f"{e.tensor_parallel_size}) and {engine.kv_gib:.1f} GiB of KV cache for one {s.at}.max_model_len "
              f"({e.max_model_len}) sequence: raise it to >= {needed:.2f}, raise {s.at}.tensor_parallel_size or "
              f"lower {s.at}.max_model_len")


# --- benchmark --------------------------------------------------------------------------------------------

def scenario_job_names_fit(s: EndpointSpec) -> None:
    """The longest Job name, ``<endpoint>-bench-colocated-<scenario>-c<concurrency>``, is a DNS label."""
    for i, sc in enumerate(s.benchmark_scenarios()):
        name = f"{s.endpoint.name}-bench-colocated-{sc.name}-c{max(s.benchmark_concurrency(sc))}"
        if len(name) > 63:
            fail(f"benchmark.scenarios[{i}].name", sc.name,
                  f"must keep the Job name {name!r} within 63 characters (with {s.at}.name)")


def scenario_names_are_unique(s: EndpointSpec) -> None:
    names: set[str] = set()
    for i, sc in enumerate(s.benchmark_scenarios()):
        if sc.name in names:
            fail(f"benchmark.scenarios[{i}].name", sc.name, "must be a unique DNS label of at most 24 characters")
        names.add(sc.name)


def scenarios_fit_max_model_len(s: EndpointSpec) -> None:
    for i, sc in enumerate(s.benchmark_scenarios()):
        _, in_max, out_max = scenario_token_range(sc.traffic)
        if in_max + out_max > s.endpoint.max_model_len:
            fail(f"benchmark.scenarios[{i}].traffic", sc.traffic,
                  f"input plus output tokens must fit {s.at}.max_model_len ({s.endpoint.max_model_len})")


def scenario_prompts_take_their_path(s: EndpointSpec) -> None:
    """A ``dpd`` scenario'sc prompts stay well above the routing threshold, a ``direct`` one'sc well below."""
    t = s.endpoint.routing_threshold_tokens
    low, high = t * (1 + BENCHMARK_PATH_MARGIN), t * (1 - BENCHMARK_PATH_MARGIN)
    for i, sc in enumerate(s.benchmark_scenarios()):
        in_min, in_max, _ = scenario_token_range(sc.traffic)
        if sc.path == "dpd" and in_min < low:
            fail(f"benchmark.scenarios[{i}].traffic", sc.traffic,
                  f"takes path 'dpd', so its prompts must be at least {int(low)} tokens ({s.at}.routing_threshold_"
                  f"tokens {t} + {BENCHMARK_PATH_MARGIN:.0%}: the router estimates tokens)")
        if sc.path == "direct" and in_max > high:
            fail(f"benchmark.scenarios[{i}].traffic", sc.traffic,
                  f"takes path 'direct', so its prompts must be at most {int(high)} tokens ({s.at}.routing_"
                  f"threshold_tokens {t} - {BENCHMARK_PATH_MARGIN:.0%})")


def some_scenario_fits(s: EndpointSpec) -> None:
    if not s.benchmark_scenarios():
        fail("benchmark.scenarios", [], "must name at least one scenario (none of the defaults fits this endpoint)")


def experiments_select_a_scenario(s: EndpointSpec) -> None:
    """``benchmark.experiments`` must leave at least one scenario to run."""
    chosen = [sc for sc in s.benchmark_scenarios() if sc.experiment in s.benchmark.experiments]
    if not chosen:
        have = sorted({sc.experiment for sc in s.benchmark_scenarios()})
        fail("benchmark.experiments", list(s.benchmark.experiments),
              f"must select an experiment some scenario belongs to ({', '.join(have)}; `path: reference` "
              "scenarios are aws-reference, the others equal-gpu)")
