"""One benchmark run inside a Kubernetes Job: genai-bench against the endpoint, results to S3 or the pod log.

Shipped as a ConfigMap key next to the hash-pinned genai-bench lock and run with the Python of the venv that
lock installs (standard library + boto3 from ``genai-bench[aws]``). Everything it needs comes from ``BENCH_*``
environment variables the cdk8s chart writes (``hyperpod_k8s.benchmark.jobs``):

* the run: ``BENCH_MODE`` (dpd|colocated), ``BENCH_EXPERIMENT`` (aws-reference|equal-gpu), ``BENCH_SCENARIO``,
  ``BENCH_TRAFFIC``, ``BENCH_PATH``,
  ``BENCH_CONCURRENCY`` (a Job passes one scenario and one level; ``;``-separated scenarios/traffic and a
  comma list of levels run several cells in one client start, as the tests do: ``bench`` counts the prefill
  requests around a whole start, so the report verifies the DPD path of such a folder only when its scenarios
  declare one path, and marks the count ``folder-level``);
  stop conditions ``BENCH_MAX_TIME_MINUTES``, ``BENCH_MAX_REQUESTS``; warm-up
  ``BENCH_WARMUP_RATIO``, ``BENCH_COOLDOWN_RATIO``;
* the endpoint: ``BENCH_API_BASE``, ``BENCH_API_MODEL``; for the record ``BENCH_ENDPOINT``,
  ``BENCH_ROUTING_THRESHOLD``, ``BENCH_ROUTING_STRATEGY``, ``BENCH_GPUS``, ``BENCH_INSTANCE_TYPE``,
  ``BENCH_GPU_MEMORY_UTILIZATION`` (``prefill=<u>,decode=<u>`` or ``colocated=<u>``);
* the tokenizer: ``BENCH_TOKENIZER`` (a local folder) or ``BENCH_TOKENIZER_S3`` (``s3://`` prefix of the
  model weights; only the tokenizer files are fetched);
* where results go: ``BENCH_RESULTS_S3`` (``s3://bucket/prefix``) or, when unset, the pod log as
  ``HYPERPOD-BENCH-FILE <name> <base64 gzip>`` lines that ``hyperpod-dpd bench`` decodes;
* ``BENCH_OUTPUT_DIR``: the local experiment folder (default ``/tmp/bench``).

``bench-run.json`` records what the run ran under (mode, experiment, threshold, routing strategy, GPUs, each
engine's GPU-memory utilization, client version).
Exit code: genai-bench's, or 3 when it wrote no result file.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

FILE_MARKER = "HYPERPOD-BENCH-FILE"
DONE_MARKER = "HYPERPOD-BENCH-DONE"
RUN_RECORD = "bench-run.json"
#: Files a Hugging Face tokenizer folder needs (transformers AutoTokenizer.from_pretrained).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "config.json",
                   "generation_config.json")


def _env(name: str, default: str | None = None) -> str:
    value = os.environ.get(name, default)
    if value is None or value == "":
        raise SystemExit(f"error: {name} must be set")
    return value


def _split_s3(uri: str) -> tuple[str, str]:
    rest = uri.removeprefix("s3://")
    bucket, _, prefix = rest.partition("/")
    return bucket, prefix.strip("/")


def fetch_tokenizer(uri: str, dest: Path) -> Path:
    import boto3  # from genai-bench[aws] in the pinned lock

    bucket, prefix = _split_s3(uri)
    s3 = boto3.client("s3")
    dest.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        key = f"{prefix}/{name}" if prefix else name
        try:
            s3.download_file(bucket, key, str(dest / name))
        except Exception as exc:  # a missing optional file is fine; tokenizer.json is checked below
            print(f"tokenizer: s3://{bucket}/{key} not fetched ({type(exc).__name__})", flush=True)
    if not (dest / "tokenizer.json").is_file():
        raise SystemExit(f"error: BENCH_TOKENIZER_S3 {uri} holds no tokenizer.json")
    return dest


def run_name() -> str:
    levels = _env("BENCH_CONCURRENCY").replace(",", "-").replace(" ", "")
    return f"{_env('BENCH_MODE')}-{_env('BENCH_SCENARIO').replace(';', '+')}-c{levels}"


def genai_bench_command(tokenizer: Path, out_dir: Path) -> list[str]:
    """The genai-bench CLI call (genai_bench/cli/cli.py ``benchmark``; options in cli/option_groups.py)."""
    return [
        sys.executable, "-m", "genai_bench.cli.cli", "benchmark",
        "--api-backend", "vllm",  # vLLM backend sends ignore_eos: fixed output lengths
        "--api-base", _env("BENCH_API_BASE"),
        "--api-key", os.environ.get("BENCH_API_KEY", "unused"),
        "--api-model-name", _env("BENCH_API_MODEL"),
        "--model-tokenizer", str(tokenizer),
        "--task", "text-to-text",
        *(x for t in _env("BENCH_TRAFFIC").split(";") for x in ("--traffic-scenario", t.strip())),
        *(x for n in _env("BENCH_CONCURRENCY").split(",") for x in ("--num-concurrency", n.strip())),
        "--warmup-ratio", _env("BENCH_WARMUP_RATIO", "0"),
        "--cooldown-ratio", _env("BENCH_COOLDOWN_RATIO", "0"),
        "--max-time-per-run", _env("BENCH_MAX_TIME_MINUTES"),
        "--max-requests-per-run", _env("BENCH_MAX_REQUESTS"),
        "--server-engine", "vLLM",
        "--server-gpu-count", _env("BENCH_GPUS"),
        "--experiment-base-dir", str(out_dir),
        "--log-dir", str(out_dir / "logs"),
        "--experiment-folder-name", run_name(),
    ]


def _utilizations(text: str) -> dict[str, float]:
    """``prefill=0.75,decode=0.75`` -> ``{"prefill": 0.75, "decode": 0.75}`` (each engine's
    ``--gpu-memory-utilization``; the colocated baseline's raised by the PD buffer's share); empty when unset."""
    out = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        engine, _, value = item.partition("=")
        out[engine] = float(value)
    return out


def run_record() -> dict[str, object]:
    from importlib.metadata import version

    return {
        "mode": _env("BENCH_MODE"),
        "experiment": os.environ.get("BENCH_EXPERIMENT") or "equal-gpu",
        "scenarios": dict(zip((t.strip() for t in _env("BENCH_TRAFFIC").split(";")),
                              (n.strip() for n in _env("BENCH_SCENARIO").split(";")), strict=True)),
        "path": _env("BENCH_PATH"),
        "concurrency": [int(n) for n in _env("BENCH_CONCURRENCY").split(",")],
        "endpoint": _env("BENCH_ENDPOINT"), "api_base": _env("BENCH_API_BASE"),
        "routing_threshold_tokens": int(_env("BENCH_ROUTING_THRESHOLD")),
        "routing_strategy": _env("BENCH_ROUTING_STRATEGY"), "gpus": int(_env("BENCH_GPUS")),
        "instance_type": _env("BENCH_INSTANCE_TYPE"),
        "gpu_memory_utilization": _utilizations(os.environ.get("BENCH_GPU_MEMORY_UTILIZATION", "")),
        "warmup_ratio": float(_env("BENCH_WARMUP_RATIO", "0")),
        "max_time_per_run_minutes": int(_env("BENCH_MAX_TIME_MINUTES")),
        "max_requests_per_run": int(_env("BENCH_MAX_REQUESTS")),
        "genai_bench_version": version("genai-bench"),
    }


def publish(folder: Path) -> int:
    files = sorted(p for p in folder.iterdir() if p.suffix == ".json")
    target = os.environ.get("BENCH_RESULTS_S3")
    if target:
        import boto3

        bucket, prefix = _split_s3(target)
        s3 = boto3.client("s3")
        for p in files:
            key = "/".join(x for x in (prefix, _env("BENCH_MODE"), run_name(), p.name) if x)
            s3.upload_file(str(p), bucket, key)
            print(f"uploaded s3://{bucket}/{key}", flush=True)
    else:
        for p in files:
            blob = base64.b64encode(gzip.compress(p.read_bytes(), mtime=0)).decode()
            print(f"{FILE_MARKER} {p.name} {blob}", flush=True)
    print(f"{DONE_MARKER} {run_name()} {len(files)}", flush=True)
    return len(files)


def main() -> int:
    out_dir = Path(os.environ.get("BENCH_OUTPUT_DIR", "/tmp/bench"))
    local = os.environ.get("BENCH_TOKENIZER")
    tokenizer = Path(local) if local else fetch_tokenizer(_env("BENCH_TOKENIZER_S3"), out_dir / "tokenizer")
    os.environ.setdefault("ENABLE_UI", "false")  # headless: no Rich dashboard in a pod log
    code = subprocess.call(genai_bench_command(tokenizer, out_dir))
    folder = out_dir / run_name()
    if not folder.is_dir():
        print(f"error: genai-bench wrote no experiment folder (exit {code})", flush=True)
        return code or 3
    (folder / RUN_RECORD).write_text(json.dumps(run_record(), indent=2, sort_keys=True))
    has_results = any(p.name not in (RUN_RECORD, "experiment_metadata.json") and p.suffix == ".json"
                      and not p.name.startswith("debug_") for p in folder.iterdir())
    publish(folder)
    if code == 0 and not has_results:
        print("error: genai-bench finished but wrote no run result (did any request succeed?)", flush=True)
        return 3
    return code


if __name__ == "__main__":
    sys.exit(main())
