"""The ``benchmark:`` config section: one failing case per rule, each a one-line error naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hyperpod_core.config import parse_config, scenario_token_range
from hyperpod_core.errors import ConfigError

DEFAULT = Path(__file__).resolve().parents[2] / "config" / "default.yaml"


def _with(benchmark: dict, **endpoint) -> dict:
    data = yaml.safe_load(DEFAULT.read_text(encoding="utf-8"))
    data["benchmark"] = benchmark
    data.setdefault("endpoint", {}).update(endpoint)
    return data


@pytest.mark.parametrize(("benchmark", "endpoint", "message"), [
    ({"client_image": "python:3.11-slim"}, {}, "benchmark.client_image must be pinned by digest"),
    ({"scenarios": [{"name": "x", "traffic": "D(4096,256)", "path": "dpd"}]}, {},
     "benchmark.scenarios[0].traffic takes path 'dpd', so its prompts must be at least 5120 tokens"),
    ({"scenarios": [{"name": "x", "traffic": "D(4000,256)", "path": "direct"}]}, {},
     "benchmark.scenarios[0].traffic takes path 'direct', so its prompts must be at most 3072 tokens"),
    ({"scenarios": [{"name": "x", "traffic": "N(6000,500)/(256,0)", "path": "dpd"}]}, {},
     "must be at least 5120 tokens"),  # mean - 2 std = 5000: the tail crosses
    ({"scenarios": [{"name": "x", "traffic": "D(16000,1024)", "path": "dpd"}]}, {},
     "must fit endpoint.max_model_len (16384)"),
    ({"scenarios": [{"name": "x", "traffic": "E(10,10)"}]}, {}, "benchmark.scenarios[0].traffic must be D(in,out)"),
    ({"scenarios": [{"name": "a", "traffic": "D(100,10)", "path": "direct"},
                    {"name": "a", "traffic": "D(100,20)", "path": "direct"}]}, {},
     "benchmark.scenarios[1].name must be a unique DNS label"),
    ({"scenarios": [{"name": "x", "traffic": "D(100,10)", "path": "direct"}]}, {"routing_threshold_tokens": 0},
     "must be at most 0 tokens"),
    ({"concurrency": [8, 8]}, {}, "benchmark.concurrency must not repeat a level"),
    ({"target": "load_balancer", "ca_secret_name": "ca"}, {}, "benchmark.load_balancer_url must be https://"),
    ({"target": "load_balancer", "load_balancer_url": "https://x.example.com"}, {},
     "benchmark.ca_secret_name must name the Secret"),
    ({"results_s3_uri": "https://bucket/x"}, {}, "benchmark.results_s3_uri must be s3://"),
    ({"max_time_per_run_minutes": 0}, {}, "benchmark.max_time_per_run_minutes"),
])
def test_bad_benchmark_config_is_one_line_naming_the_field(benchmark, endpoint, message):
    with pytest.raises(ConfigError) as err:
        parse_config(_with(benchmark, **endpoint))
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_a_lower_threshold_makes_the_aws_shape_a_dpd_run():
    parse_config(_with({"scenarios": [{"name": "aws", "traffic": "D(4096,256)", "path": "dpd"}]},
                       routing_threshold_tokens=2048))


@pytest.mark.parametrize(("traffic", "expected"), [
    ("D(4096,256)", (4096, 4096, 256)),
    ("N(6000,100)/(256,10)", (5800, 6200, 276)),
    ("U(100,900)/(10,50)", (100, 900, 50)),
])
def test_scenario_token_range(traffic, expected):
    assert scenario_token_range(traffic) == expected


@pytest.mark.parametrize(("endpoint", "expected"), [
    ({}, {"aws-reference": "D(4096,256)", "long-in-long-out": "D(8192,1024)", "long-in-short-out": "D(8192,128)",
          "short-in-long-out": "D(1024,1024)", "short-in-short-out": "D(1024,128)"}),
    ({"routing_threshold_tokens": 2048}, {"aws-reference": "D(4096,256)", "long-in-long-out": "D(4096,1024)",
                                          "long-in-short-out": "D(4096,128)", "short-in-long-out": "D(512,1024)",
                                          "short-in-short-out": "D(512,128)"}),
    # a threshold near max-model-len: the long shapes shrink to what fits, still 25 % above the threshold
    ({"routing_threshold_tokens": 12000}, {"aws-reference": "D(4096,256)", "long-in-long-out": "D(15360,1024)",
                                           "long-in-short-out": "D(15360,128)", "short-in-long-out": "D(3000,1024)",
                                           "short-in-short-out": "D(3000,128)"}),
])
def test_default_scenarios_follow_the_endpoint(endpoint, expected):
    """A user who never wrote a benchmark section never gets an error about one."""
    config = parse_config(_with({}, **endpoint))
    assert {s.name: s.traffic for s in config.spec().benchmark_scenarios()} == expected


def test_job_names_must_fit_63_characters():
    with pytest.raises(ConfigError, match=r"benchmark.scenarios\[0\].name must keep the Job name"):
        parse_config(_with({"scenarios": [{"name": "a" * 24, "traffic": "D(100,10)", "path": "direct"}],
                            "concurrency": [1000]}, name="a-rather-long-endpoint-name"))
