#!/usr/bin/env python3
"""Benchmark: ``stage-model``'s upload path against plain ``boto3`` ``upload_file`` defaults, in one run.

    .venv/bin/python scripts/bench_stage_model.py [--shards 4] [--shard-mib 128]

Both upload the same synthetic Hugging Face folder (random shards + config/tokenizer/index) to a local S3
(moto's ``ThreadedMotoServer`` on loopback, ``http://localhost:<port>``):

* baseline: ``client.upload_file(path, bucket, key)`` per file, one after the other, s3transfer defaults
  (8 MiB parts, 10 threads, CRC32 per part);
* stage-model: :mod:`hyperpod_dpd.staging`: checksum pass (SHA-256 + CRC64NVME), HeadObject plan, parallel
  multipart across files with 64 MiB parts and the full-object CRC64NVME, read-back check, manifest;
* stage-model again (resume): nothing changed, so nothing is uploaded.

Prints wall seconds and ratios against the baseline; asserts nothing. Loopback S3 served by Python in the
same process measures request overhead and CPU, not network bandwidth: read the ratio with that in mind.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer

ROOT = Path(__file__).resolve().parents[1]
for folder in ("core", "cli"):
    sys.path.insert(0, str(ROOT / folder))

from hyperpod_core.errors import guarded, run_app  # noqa: E402  (from core/, inserted above)


def make_model(root: Path, shards: int, shard_mib: int) -> Path:
    src = root / "model"
    src.mkdir()
    (src / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    (src / "tokenizer.json").write_text("{}")
    names = [f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(1, shards + 1)]
    for name in names:
        with (src / name).open("wb") as fh:
            for _ in range(shard_mib):
                fh.write(os.urandom(1024 * 1024))
    (src / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {n: n for n in names}}))
    return src


app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]})


@app.command(help="\n\n".join(f"\b\n{paragraph}" for paragraph in __doc__.split("\n\n")))  # as written
def _bench(shards: Annotated[int, typer.Option(metavar="N")] = 4,
           shard_mib: Annotated[int, typer.Option(metavar="MIB")] = 128) -> None:
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1",
                      AWS_EC2_METADATA_DISABLED="true")

    import logging

    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise

    from hyperpod_dpd import model_folder, staging

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        _, port = server.get_host_and_port()
        s3 = boto3.client("s3", endpoint_url=f"http://localhost:{port}", region_name="us-east-1")
        with tempfile.TemporaryDirectory() as tmp:
            src = make_model(Path(tmp), shards, shard_mib)
            files = model_folder.scan_model_dir(src)
            total = sum(f.size for f in files)
            print(f"{len(files)} files, {total / 2**20:.0f} MiB, local S3 at http://localhost:{port} (moto)")

            s3.create_bucket(Bucket="bench-baseline")
            start = time.perf_counter()
            for f in files:
                s3.upload_file(str(f.path), "bench-baseline", f"m/{f.rel}")
            baseline = time.perf_counter() - start

            s3.create_bucket(Bucket="bench-stage")

            def stage() -> tuple[float, int]:
                start = time.perf_counter()
                checked = model_folder.checksum_all(files)
                planned = staging.plan(s3, "bench-stage", "m/", checked)
                staging.upload(s3, "bench-stage", planned)
                staging.write_manifest(s3, "bench-stage", "m/", checked)
                return time.perf_counter() - start, sum(p.action != "skip" for p in planned)

            staged, uploaded = stage()
            resumed, reuploaded = stage()
    finally:
        server.stop()
    mib = total / 2**20
    print(f"{'path':<58} {'wall s':>7} {'MiB/s':>7} {'vs baseline':>12}")
    print(f"{'boto3 upload_file defaults, file by file (baseline)':<58} {baseline:>7.2f} {mib / baseline:>7.0f} "
          f"{1.0:>11.2f}x")
    print(f"{'stage-model: checksums + parallel 64 MiB multipart + verify':<58} {staged:>7.2f} "
          f"{mib / staged:>7.0f} {staged / baseline:>11.2f}x  ({uploaded} uploaded)")
    print(f"{'stage-model again (resume: same size and CRC64NVME)':<58} {resumed:>7.2f} {'':>7} "
          f"{resumed / baseline:>11.2f}x  ({reuploaded} uploaded)")
    print(f"\nratio stage-model / baseline: {staged / baseline:.2f} (lower is faster); "
          f"resume / baseline: {resumed / baseline:.2f}")


def main(argv: list[str] | None = None) -> None:
    run_app(app, argv, "scripts/bench_stage_model.py")


if __name__ == "__main__":
    guarded(main)
