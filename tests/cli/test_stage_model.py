"""``hyperpod-dpd stage-model`` against moto's S3 (in-process), plus Stubber for a denied bucket.

The expected checksums are computed here independently (hashlib SHA-256; S3's own FULL_OBJECT CRC64NVME
computed by moto from the uploaded parts); CRC64NVME itself is pinned by its published check value.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
import yaml
from botocore.stub import Stubber
from lifecycle_fixtures import no_aws_credentials
from moto import mock_aws

from hyperpod_core.errors import CommandFailed
from hyperpod_dpd import model_folder, staging

REGION = "us-west-2"
BUCKET = "team-models"
PREFIX = "models/Llama-3.3-70B-Instruct/"
MIB = 1024 * 1024


@pytest.fixture
def s3(monkeypatch) -> Iterator[object]:
    """A fresh bucket in moto. Its name is unique: another module may hold moto open for the whole session,
    and a nested ``mock_aws`` does not reset the backends."""
    import uuid

    monkeypatch.setattr(sys.modules[__name__], "BUCKET", f"team-models-{uuid.uuid4().hex[:12]}")
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(staging, "PART_SIZE", 5 * MIB)  # S3's minimum part: the shards below go multipart
    with mock_aws():
        client = boto3.client("s3", REGION)
        client.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
        yield client


def make_model(root: Path, shards: int = 2, shard_size: int = 11 * MIB) -> Path:
    src = root / "Llama-mini"
    src.mkdir()
    (src / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    (src / "tokenizer.json").write_text("{}")
    (src / "tokenizer_config.json").write_text("{}")
    names = [f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(1, shards + 1)]
    for i, name in enumerate(names):
        (src / name).write_bytes(os.urandom(shard_size - i * MIB))
    (src / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {f"layer.{i}": n for i, n in enumerate(names)}}))
    return src


@pytest.fixture
def config_file(s3, tmp_path, default_config_dict) -> Path:
    data = copy.deepcopy(default_config_dict)
    data["model_bucket"]["existing_name"] = BUCKET
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
def _invoke(run_cli):
    return lambda *args: run_cli("stage-model", *args)


def _keys(client) -> list[str]:
    return sorted(o["Key"] for o in client.list_objects_v2(Bucket=BUCKET).get("Contents", []))


def _where(src: Path) -> str:
    """The prefix the weights of ``src`` go to, computed here from the files alone: ``<model.s3_prefix>sha256-<first
    16 hex of the SHA-256 of their manifest>/`` (content-addressed, hyperpod_core.staged_model)."""
    files = model_folder.checksum_all(model_folder.scan_model_dir(src))
    digest = hashlib.sha256(model_folder.manifest_body(files)).hexdigest()
    return f"{PREFIX}sha256-{digest[:16]}/"


def test_crc64nvme_matches_the_published_check_value() -> None:
    """CRC-64/NVME of "123456789" is 0xAE8B14860A799888 (the catalogue check value S3 documents)."""
    from awscrt import checksums

    assert checksums.crc64nvme(b"123456789") == 0xAE8B14860A799888


def test_stages_the_folder_under_the_prefix_with_full_object_checksums(_invoke, s3, tmp_path, config_file) -> None:
    src = make_model(tmp_path)
    result = _invoke(str(src), "--config", str(config_file))
    assert result.exit_code == 0, result.output
    where = _where(src)
    local = sorted(p.name for p in src.iterdir())
    assert _keys(s3) == sorted([where + n for n in local] + [where + model_folder.MANIFEST_NAME])
    manifest = json.loads(s3.get_object(Bucket=BUCKET, Key=where + model_folder.MANIFEST_NAME)["Body"].read())
    for name in local:
        data = (src / name).read_bytes()
        assert manifest["files"][name]["sha256"] == hashlib.sha256(data).hexdigest()
        head = s3.head_object(Bucket=BUCKET, Key=where + name, ChecksumMode="ENABLED")
        assert head["ContentLength"] == len(data)
        if len(data) < staging.PART_SIZE:  # a single PutObject also records the SHA-256 (the manifest has them all)
            assert head["Metadata"]["sha256"] == hashlib.sha256(data).hexdigest()
    for shard in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
        # Multipart (>= 5 MiB parts): S3 (moto) computes the whole object's CRC64NVME from the parts it received.
        # moto returns no checksum for a single PutObject (real S3 does, and verifies it on write).
        head = s3.head_object(Bucket=BUCKET, Key=where + shard, ChecksumMode="ENABLED")
        assert head["ChecksumType"] == "FULL_OBJECT"
        assert head["ChecksumCRC64NVME"] == manifest["files"][shard]["crc64nvme"]
    assert f"staged: s3://{BUCKET}/{where} (6 files" in result.stdout


def test_a_second_run_uploads_only_what_is_missing(_invoke, s3, tmp_path, config_file) -> None:
    """Staging the same folder again is idempotent: same revision, same prefix, every object (the manifest too)
    found in place, nothing written."""
    src = make_model(tmp_path)
    assert _invoke(str(src), "--config", str(config_file)).exit_code == 0
    where = _where(src)
    before = {o["Key"]: o["LastModified"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]}
    again = _invoke(str(src), "--config", str(config_file))
    assert f"s3://{BUCKET}/{where}: 6 files, 0 to upload (0.00 GiB), 6 already there" in again.stdout
    assert "(already there: nothing changed)" in again.stdout
    assert {o["Key"]: o["LastModified"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]} == before
    s3.delete_object(Bucket=BUCKET, Key=where + "model-00002-of-00002.safetensors")
    resumed = _invoke(str(src), "--config", str(config_file))
    assert resumed.exit_code == 0 and "1 to upload" in resumed.stdout


def test_different_content_is_not_overwritten_without_force(_invoke, s3, tmp_path, config_file) -> None:
    """An object under the revision's own prefix that is not what the manifest says (damaged, or written by hand)
    is never overwritten silently."""
    src = make_model(tmp_path)
    where = _where(src)
    s3.put_object(Bucket=BUCKET, Key=where + "config.json", Body=b'{"other": "model"}')
    refused = _invoke(str(src), "--config", str(config_file))
    assert refused.exit_code == 1
    assert refused.stderr.strip().splitlines()[-1].startswith(
        f"error: 1 objects under s3://{BUCKET}/{where} hold other content than revision {where[len(PREFIX):-1]}'s "
        "files (listed above; the objects of a revision are never changed in place); pass --force")
    assert _keys(s3) == [where + "config.json"], "nothing uploaded"
    forced = _invoke(str(src), "--config", str(config_file), "--force")
    assert forced.exit_code == 0, forced.output
    assert s3.get_object(Bucket=BUCKET, Key=where + "config.json")["Body"].read() == (src / "config.json").read_bytes()


def test_dry_run_writes_nothing(_invoke, s3, tmp_path, config_file) -> None:
    src = make_model(tmp_path)
    result = _invoke(str(src), "--config", str(config_file), "--dry-run")
    assert result.exit_code == 0, result.output
    where = _where(src)
    assert result.stdout.splitlines()[0] == (f"revision {where[len(PREFIX):-1]}: SHA-256 of the manifest of 6 files; "
                                             f"its own prefix {where}")
    assert f"upload   {where}config.json" in result.stdout
    assert _keys(s3) == []
    assert not (tmp_path / "c.out" / "staged-model.json").exists()


def test_dry_run_without_a_bucket_lists_the_upload_offline(_invoke, tmp_path, default_config_dict,
                                                           monkeypatch) -> None:
    """Before any deploy (no outputs file, no model_bucket.existing_name): --dry-run lists the files, their sizes,
    the revision they would get and their S3 keys under it, from the local files alone; no AWS client is made."""
    from hyperpod_dpd import aws

    def no_aws(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"an AWS client was made: {args}")

    monkeypatch.setattr(aws, "client", no_aws)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(default_config_dict))
    src = make_model(tmp_path, shards=1, shard_size=MIB)
    result = _invoke(str(src), "--config", str(path), "--dry-run")
    assert result.exit_code == 0, result.output
    where = _where(src)  # the revision computed here, from the manifest of the files' SHA-256s
    lines = result.stdout.splitlines()
    assert lines[0] == (f"revision {where[len(PREFIX):-1]}: SHA-256 of the manifest of 5 files; its own prefix "
                        f"{where}")
    assert lines[1] == (f"no model bucket yet ({tmp_path / 'c.out' / 'cdk-outputs.json'} does not exist, and "
                        "model_bucket.existing_name is not set): S3 was not read")
    total = sum(p.stat().st_size for p in src.iterdir())
    assert lines[2] == f"s3://<model bucket>/{where}: 5 files, {total:,} bytes, then {model_folder.MANIFEST_NAME}"
    rows = {ln.split()[0]: ln.split()[1] for ln in lines[3:-1]}  # key under the prefix -> size in bytes
    assert rows == {p.name: f"{p.stat().st_size:,}" for p in src.iterdir()}
    assert lines[-1] == "dry run: nothing written, no AWS call"
    assert not (tmp_path / "c.out").exists()


def test_dry_run_without_credentials_lists_the_upload_with_one_note(_invoke, tmp_path, default_config_dict,
                                                                   monkeypatch) -> None:
    """A bucket is known (model_bucket.existing_name) but there are no AWS credentials anywhere in botocore's chain
    (environment, shared files, profile; IMDS off): --dry-run still lists what would be uploaded, from the local
    files, with one line saying S3 could not be read, why, and the fix; exit 0, nothing written. Fails on main:
    ``error: s3://team-models: NoCredentialsError: Unable to locate credentials; fix: ...`` (exit 1)."""
    no_aws_credentials(monkeypatch, tmp_path)
    data = copy.deepcopy(default_config_dict)
    data["model_bucket"]["existing_name"] = "team-models"
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    src = make_model(tmp_path, shards=1, shard_size=MIB)
    result = _invoke(str(src), "--config", str(path), "--dry-run")
    assert result.exit_code == 0, result.output
    assert result.stderr.count("error") == 0 and "Traceback" not in result.output
    where = _where(src)
    lines = result.stdout.splitlines()
    assert lines[1].startswith("s3://team-models could not be read (NoCredentialsError: Unable to locate credentials"
                               "; fix: set AWS_PROFILE ")
    assert lines[1].endswith("): every file is listed, whether S3 holds it already or not")
    total = sum(p.stat().st_size for p in src.iterdir())
    assert lines[2] == f"s3://team-models/{where}: 5 files, {total:,} bytes, then {model_folder.MANIFEST_NAME}"
    assert {ln.split()[0] for ln in lines[3:-1]} == {p.name for p in src.iterdir()}
    assert lines[-1] == "dry run: nothing written"
    assert not (tmp_path / "c.out").exists()


def test_verify_checks_s3_against_the_manifest(_invoke, s3, tmp_path, config_file) -> None:
    src = make_model(tmp_path)
    assert _invoke(str(src), "--config", str(config_file)).exit_code == 0
    ok = _invoke("--verify", "--config", str(config_file))
    assert ok.exit_code == 0 and "6 of 6 files match the manifest" in ok.stdout
    s3.put_object(Bucket=BUCKET, Key=_where(src) + "tokenizer.json", Body=b'{"changed": true}')
    bad = _invoke("--verify", "--config", str(config_file))
    assert bad.exit_code == 1
    assert "  BAD  tokenizer.json: differs: S3 holds 17 bytes, no CRC64NVME stored; the manifest says 2 bytes, " \
           "CRC64NVME " in bad.stdout


def test_the_bucket_comes_from_the_environment_outputs_file(_invoke, s3, tmp_path, default_config_dict,
                                                            monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    env = tmp_path / "envs" / "prod"
    env.mkdir(parents=True)
    data = copy.deepcopy(default_config_dict)
    (env / "config.yaml").write_text(yaml.safe_dump(data))
    (env / "cdk-outputs.json").write_text(json.dumps({"hyperpod-dpd-platform": {"ModelBucketName": BUCKET}}))
    src = make_model(tmp_path, shards=1, shard_size=MIB)
    result = _invoke(str(src), "--env", "prod")
    assert result.exit_code == 0, result.output
    assert _where(src) + "config.json" in _keys(s3)


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda src: (src / "config.json").unlink(), "config.json missing"),
    (lambda src: [(src / n).unlink() for n in ("tokenizer.json", "tokenizer_config.json")],
     "no tokenizer (one of tokenizer.json, tokenizer.model, tokenizer_config.json, tiktoken.model)"),
    (lambda src: (src / "model-00002-of-00002.safetensors").unlink(),
     "1 of 2 shards named by model.safetensors.index.json missing (model-00002-of-00002.safetensors)"),
    (lambda src: (src / "config.json").write_text("{"), "config.json is not valid JSON"),
])
def test_a_folder_that_is_not_a_model_is_one_line_and_exit_2(_invoke, s3, tmp_path, config_file, mutate,
                                                             message) -> None:
    src = make_model(tmp_path, shard_size=6 * MIB)
    mutate(src)
    result = _invoke(str(src), "--config", str(config_file))
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: SRC {str(src)!r} is not a Hugging Face model folder: {message}"
    assert _keys(s3) == []


def test_a_missing_bucket_is_one_line_and_exit_1(_invoke, s3, tmp_path, default_config_dict) -> None:
    data = copy.deepcopy(default_config_dict)
    data["model_bucket"]["existing_name"] = "nobody-made-this"
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    result = _invoke(str(make_model(tmp_path, shards=1, shard_size=MIB)), "--config", str(path))
    assert result.exit_code == 1
    assert result.stderr.strip() == ("error: bucket 'nobody-made-this' does not exist (deploy the platform stack "
                                     "first, or fix model_bucket.existing_name)")


def test_denied_access_is_one_line() -> None:
    """Stubber (real S3 model): HeadBucket answers 403 when the caller may not use the bucket."""
    client = boto3.client("s3", REGION, aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        stub.add_client_error("head_bucket", service_error_code="403", http_status_code=403,
                              expected_params={"Bucket": BUCKET})
        with pytest.raises(CommandFailed, match=f"access denied to bucket '{BUCKET}'"):
            staging.check_bucket(client, BUCKET)


@pytest.mark.parametrize(("args", "message"), [
    ((), "error: SRC is required: the Hugging Face model folder to upload"),
    (("somewhere", "--verify"), "error: --verify checks what is in S3 against the manifest; pass no SRC"),
    (("not-a-folder",), "error: SRC must be a Hugging Face model folder, got 'not-a-folder' (not a folder)"),
    (("somewhere", "--revision", "sha256-0123456789abcdef"),
     "error: --revision 'sha256-0123456789abcdef' goes with --verify; a staging derives its revision from the files"),
    (("--verify", "--revision", "latest"), "error: --revision must be sha256-<16 lowercase hex digits>, got 'latest'"),
])
def test_bad_arguments_are_one_line_and_exit_2(_invoke, tmp_path, config_file, monkeypatch, args, message) -> None:
    monkeypatch.chdir(tmp_path)
    result = _invoke(*args, "--config", str(config_file))
    assert result.exit_code == 2
    assert result.stderr.strip() == message


def test_no_bucket_yet_is_one_line_and_exit_2(_invoke, tmp_path, default_config_dict, monkeypatch) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(default_config_dict))
    result = _invoke(str(make_model(tmp_path, shards=1, shard_size=MIB)), "--config", str(path))
    assert result.exit_code == 2
    assert result.stderr.strip().startswith(f"error: no model bucket yet: {tmp_path / 'c.out'}/cdk-outputs.json")


# --- verify: the checksums S3 stores, and what else is under the prefix ------------------------------------------


def test_verify_prints_the_checksum_s3_stores_for_every_file_and_the_strays(_invoke, s3, tmp_path,
                                                                            config_file) -> None:
    src = make_model(tmp_path)
    assert _invoke(str(src), "--config", str(config_file)).exit_code == 0
    where = _where(src)
    s3.put_object(Bucket=BUCKET, Key=where + "model-00003-of-00003.safetensors", Body=b"x" * 10)
    result = _invoke("--verify", "--config", str(config_file))
    assert result.exit_code == 0, result.output
    manifest = json.loads(s3.get_object(Bucket=BUCKET, Key=where + model_folder.MANIFEST_NAME)["Body"].read())
    shard = "model-00001-of-00002.safetensors"
    want = manifest["files"][shard]
    assert f"  ok   {shard}: {want['size']} bytes, CRC64NVME {want['crc64nvme']} (full-object)" in result.stdout
    assert "None" not in result.stdout
    assert (f"  not in the manifest: {where}model-00003-of-00003.safetensors (10 bytes)") in result.stdout
    assert result.stdout.splitlines()[-1] == (f"s3://{BUCKET}/{where}: 6 of 6 files match the manifest; 1 objects "
                                              "under the prefix are not in it")


def test_staging_records_the_manifest_digest_the_synth_turns_into_the_revision(_invoke, s3, tmp_path,
                                                                             config_file) -> None:
    """The synth is offline: it learns which weights the endpoint mounts from the record stage-model writes into
    the environment folder (hyperpod_core.staged_model). The digest is the SHA-256 of the manifest object S3 holds,
    and the weights are under the prefix it names; ``--verify`` writes the same record from S3 alone (the only
    revision staged, or the one ``--revision`` names when there are several)."""
    from hyperpod_core import staged_model

    src = make_model(tmp_path, shards=1, shard_size=MIB)  # small: one PutObject per file
    staged = _invoke(str(src), "--config", str(config_file))
    assert staged.exit_code == 0, staged.output
    record = tmp_path / "c.out" / staged_model.RECORD_FILE
    first = staged_model.read(record)
    body = s3.get_object(Bucket=BUCKET, Key=first.location + model_folder.MANIFEST_NAME)["Body"].read()
    assert (first.bucket, first.s3_prefix, first.files, first.location) == (BUCKET, PREFIX, 5, _where(src))
    assert first.manifest_sha256 == hashlib.sha256(body).hexdigest()
    assert first.location == f"{PREFIX}{first.revision}/"
    assert (f"recorded: {record}: revision {first.revision} (SHA-256 of the manifest), weights under "
            f"{first.location}") in staged.stdout
    record.unlink()
    assert _invoke("--verify", "--config", str(config_file)).exit_code == 0
    assert staged_model.read(record) == first
    (src / "model-00001-of-00001.safetensors").write_bytes(os.urandom(MIB))
    assert _invoke(str(src), "--config", str(config_file)).exit_code == 0  # other weights: no --force needed
    second = staged_model.read(record)
    assert second.revision != first.revision and second.location != first.location
    record.unlink()
    several = _invoke("--verify", "--config", str(config_file))
    assert several.exit_code == 2
    assert several.stderr.strip() == (f"error: 2 revisions are staged under s3://{BUCKET}/{PREFIX} "
                                      f"({', '.join(sorted([first.revision, second.revision]))}) and "
                                      "staged-model.json names none of them: pass --revision")
    assert _invoke("--verify", "--revision", first.revision, "--config", str(config_file)).exit_code == 0
    assert staged_model.read(record) == first


def test_a_new_staging_never_changes_what_an_applied_revision_mounts(_invoke, s3, tmp_path, config_file) -> None:
    """The review's scenario (k8s-review finding 1 of the fourth review's follow-up): revision A is applied, other
    weights are staged, and a pod of A restarts or scales out before the new manifests are applied. It mounts A's
    location, whose objects the new staging never touched: byte for byte and version for version what A's manifest
    names."""
    from hyperpod_core import staged_model

    src = make_model(tmp_path, shards=1, shard_size=MIB)
    assert _invoke(str(src), "--config", str(config_file)).exit_code == 0
    a = staged_model.read(tmp_path / "c.out" / staged_model.RECORD_FILE)

    def objects(prefix: str) -> dict[str, tuple[str, object]]:
        listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)["Contents"]
        return {o["Key"]: (o["ETag"], o["LastModified"]) for o in listed}

    before = objects(a.location)
    bytes_before = {k: s3.get_object(Bucket=BUCKET, Key=k)["Body"].read() for k in before}
    (src / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "fine_tuned": True}))
    (src / "model-00001-of-00001.safetensors").write_bytes(os.urandom(MIB))
    assert _invoke(str(src), "--config", str(config_file)).exit_code == 0
    b = staged_model.read(tmp_path / "c.out" / staged_model.RECORD_FILE)
    assert b.location != a.location and not b.location.startswith(a.location)
    assert objects(a.location) == before
    assert {k: s3.get_object(Bucket=BUCKET, Key=k)["Body"].read() for k in before} == bytes_before
    assert _invoke("--verify", "--revision", a.revision, "--config", str(config_file)).exit_code == 0


def test_a_manifest_of_other_weights_under_a_revision_prefix_fails_verify(_invoke, s3, tmp_path, config_file) -> None:
    """The prefix's name is the manifest's digest: a manifest whose digest is another (copied there by hand) does
    not vouch for that revision."""
    src = make_model(tmp_path, shards=1, shard_size=MIB)
    assert _invoke(str(src), "--config", str(config_file)).exit_code == 0
    where = _where(src)
    s3.put_object(Bucket=BUCKET, Key=where + model_folder.MANIFEST_NAME, Body=b'{"format": 1, "files": {}}\n')
    result = _invoke("--verify", "--revision", where[len(PREFIX):-1], "--config", str(config_file))
    assert result.exit_code == 1
    assert result.stderr.strip().startswith(f"error: s3://{BUCKET}/{where}{model_folder.MANIFEST_NAME} is the manifest "
                                            f"of revision sha256-")


def test_with_model_revision_the_weights_go_to_the_configured_prefix_and_no_record(_invoke, s3, tmp_path,
                                                                                   default_config_dict) -> None:
    """``model.revision`` is the user's word: the synth mounts ``model.s3_prefix`` as configured, so stage-model
    uploads there (docs/endpoint.md: one prefix per revision) and records nothing (the config names the weights)."""
    data = copy.deepcopy(default_config_dict)
    data["model_bucket"]["existing_name"] = BUCKET
    data["model"].update(revision="2025-01-06", s3_prefix="models/llama-2025-01-06/")
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    src = make_model(tmp_path, shards=1, shard_size=MIB)
    result = _invoke(str(src), "--config", str(path))
    assert result.exit_code == 0, result.output
    assert _keys(s3) == sorted(f"models/llama-2025-01-06/{n}" for n in [*os.listdir(src), model_folder.MANIFEST_NAME])
    assert not (tmp_path / "c.out" / "staged-model.json").exists()
    assert "no record written: model.revision '2025-01-06' in the config names these weights" in result.stdout
    assert _invoke("--verify", "--config", str(path)).exit_code == 0


# --- resume inside a file ---------------------------------------------------------------------------------------


def _with_stack_lifecycle(s3, templates) -> dict:  # type: ignore[no-untyped-def]
    """The bucket gets the model bucket's lifecycle rules exactly as the platform stack synthesizes them."""
    buckets = templates["Platform"].find_resources("AWS::S3::Bucket")
    rules = next(b for lid, b in buckets.items() if lid.startswith("ModelBucket"))[
        "Properties"]["LifecycleConfiguration"]["Rules"]
    s3.put_bucket_lifecycle_configuration(Bucket=BUCKET, LifecycleConfiguration={"Rules": [
        {"ID": r["Id"], "Status": r["Status"], "Filter": {"Prefix": ""},
         "AbortIncompleteMultipartUpload": r["AbortIncompleteMultipartUpload"]} for r in rules]})
    return rules[0]


def test_the_stated_lifecycle_is_the_platform_stacks(templates) -> None:
    buckets = templates["Platform"].find_resources("AWS::S3::Bucket")
    rule = next(b for lid, b in buckets.items() if lid.startswith("ModelBucket"))[
        "Properties"]["LifecycleConfiguration"]["Rules"][0]
    assert rule["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"] == staging.STACK_ABORT_DAYS


def _recording(monkeypatch, calls: list[tuple[str, int]], interrupt_after: int | None = None) -> threading.Event:
    """The command's S3 client, recording every UploadPart (key, part number); with ``interrupt_after``, the
    person presses Ctrl-C once that many parts are done, as the next call starts: a real SIGINT to the main thread
    (``pthread_kill``: its wait is interrupted at once, as a terminal's Ctrl-C does; ``_thread.interrupt_main``
    only sets a flag the main thread may not look at for a while), and no later part or object reaches S3: a
    worker that starts another call waits until the test sets the returned event (after the command has
    returned), then fails into a queue nobody reads."""
    import signal

    from hyperpod_dpd import aws

    main_thread = threading.main_thread().ident
    assert main_thread is not None

    real = getattr(aws.client, "unrecorded", aws.client)
    released = threading.Event()

    pressed = threading.Event()

    def after_interrupt() -> None:
        """Ctrl-C as the next call after ``interrupt_after`` parts starts (those parts are counted by then)."""
        if interrupt_after is None or len(calls) < interrupt_after:
            return
        if not pressed.is_set():
            pressed.set()
            signal.pthread_kill(main_thread, signal.SIGINT)
        released.wait(60)
        raise RuntimeError("stopped by Ctrl-C")

    def client(service: str, region: str, session=None):  # type: ignore[no-untyped-def]
        c = real(service, region, session)
        if service == "s3":
            upload_part, put_object = c.upload_part, c.put_object

            def put(**kwargs):  # type: ignore[no-untyped-def]
                after_interrupt()
                return put_object(**kwargs)

            def recorded(**kwargs):  # type: ignore[no-untyped-def]
                after_interrupt()
                response = upload_part(**kwargs)
                calls.append((kwargs["Key"].rsplit("/", 1)[-1], kwargs["PartNumber"]))
                return response
            c.upload_part, c.put_object = recorded, put
        return c

    client.unrecorded = real  # type: ignore[attr-defined]
    monkeypatch.setattr(aws, "client", client)
    return released


def _incomplete(s3) -> dict[str, list[int]]:  # type: ignore[no-untyped-def]
    out = {}
    for u in s3.list_multipart_uploads(Bucket=BUCKET, Prefix=PREFIX).get("Uploads", []):
        parts = s3.list_parts(Bucket=BUCKET, Key=u["Key"], UploadId=u["UploadId"]).get("Parts", [])
        out[u["Key"].rsplit("/", 1)[-1]] = sorted(p["PartNumber"] for p in parts)
    return out


@pytest.fixture
def ctrl_c_raises() -> Iterator[None]:
    """Python's own SIGINT handler, as at a terminal. Python keeps SIGINT ignored when it starts with it ignored,
    as every process a non-interactive shell starts in the background does (POSIX: with job control off,
    asynchronous commands ignore SIGINT), a CI job's test run for one; the previous disposition comes back after."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def test_an_interrupted_upload_resumes_inside_the_file(_invoke, s3, tmp_path, config_file, templates,
                                                      monkeypatch, ctrl_c_raises) -> None:
    """moto implements ListMultipartUploads and ListParts (parts listed with size and ETag). Ctrl-C after two parts:
    one line, exit 130, the uploads stay in S3; the next run uploads only the parts S3 does not hold."""
    _with_stack_lifecycle(s3, templates)
    src = make_model(tmp_path, shards=2, shard_size=16 * MIB)  # 16 MiB and 15 MiB: 4 and 3 parts of 5 MiB
    monkeypatch.setattr(staging, "MAX_CONCURRENCY", 1)  # one part at a time: the interrupt lands after part 2
    calls: list[tuple[str, int]] = []
    released = _recording(monkeypatch, calls, interrupt_after=2)
    stopped = _invoke(str(src), "--config", str(config_file))
    released.set()
    assert stopped.exit_code == 130, stopped.output
    line = stopped.stderr.strip().splitlines()[-1]
    assert line.startswith("interrupted: 0.01 of 0.03 GiB uploaded, 1 files complete; 2 incomplete uploads stay in S3 "
                           "(the bucket's lifecycle rule AbortIncompleteMultipartUploads aborts an incomplete upload 7 "
                           "days after it started)")
    assert line.endswith(f"; resume with: hyperpod-dpd stage-model {src} --config {config_file}")
    first = "model-00001-of-00002.safetensors"
    assert _incomplete(s3) == {first: [1, 2], "model-00002-of-00002.safetensors": []}

    calls.clear()
    _recording(monkeypatch, calls)
    resumed = _invoke(str(src), "--config", str(config_file))
    assert resumed.exit_code == 0, resumed.output
    assert "1 resumed inside the file (0.01 GiB of their parts already in S3" in resumed.stdout
    assert sorted(calls) == [(first, 3), (first, 4), ("model-00002-of-00002.safetensors", 1),
                             ("model-00002-of-00002.safetensors", 2), ("model-00002-of-00002.safetensors", 3)]
    assert _incomplete(s3) == {}
    for name in (first, "model-00002-of-00002.safetensors"):
        data = (src / name).read_bytes()
        assert s3.get_object(Bucket=BUCKET, Key=_where(src) + name)["Body"].read() == data
    assert _invoke("--verify", "--config", str(config_file)).exit_code == 0


def test_a_listed_part_that_does_not_hold_the_local_bytes_is_uploaded_again(_invoke, s3, tmp_path, config_file,
                                                                          monkeypatch) -> None:
    """An incomplete upload whose part 2 holds other bytes of the same size (the file changed since): parts 1 and 3
    are kept (their ETag, the MD5 of the part, matches), part 2 and the missing part 4 are uploaded."""
    src = make_model(tmp_path, shards=1, shard_size=16 * MIB)
    name = "model-00001-of-00001.safetensors"
    data = (src / name).read_bytes()
    key = _where(src) + name
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key=key, ChecksumAlgorithm="CRC64NVME",
                                        ChecksumType="FULL_OBJECT")["UploadId"]
    for n, body in ((1, data[:5 * MIB]), (2, os.urandom(5 * MIB)), (3, data[10 * MIB:15 * MIB])):
        s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=n, Body=body)
    calls: list[tuple[str, int]] = []
    _recording(monkeypatch, calls)
    result = _invoke(str(src), "--config", str(config_file))
    assert result.exit_code == 0, result.output
    assert sorted(calls) == [(name, 2), (name, 4)]
    assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == data
    head = s3.head_object(Bucket=BUCKET, Key=key, ChecksumMode="ENABLED")
    manifest = json.loads(s3.get_object(Bucket=BUCKET, Key=_where(src) + model_folder.MANIFEST_NAME)["Body"].read())
    assert head["ChecksumCRC64NVME"] == manifest["files"][name]["crc64nvme"]


def test_an_upload_without_a_full_object_crc64nvme_is_not_resumed(_invoke, s3, tmp_path, config_file,
                                                                   monkeypatch) -> None:
    """An incomplete upload another tool started (no CRC64NVME): its parts cannot complete an object with our
    full-object checksum, so the file is uploaded whole in a new upload."""
    src = make_model(tmp_path, shards=1, shard_size=11 * MIB)
    name = "model-00001-of-00001.safetensors"
    key = _where(src) + name
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=1,
                   Body=(src / name).read_bytes()[:5 * MIB])
    calls: list[tuple[str, int]] = []
    _recording(monkeypatch, calls)
    assert _invoke(str(src), "--config", str(config_file)).exit_code == 0
    assert sorted(calls) == [(name, 1), (name, 2), (name, 3)]


def test_ctrl_c_while_computing_checksums_says_nothing_was_uploaded(_invoke, s3, tmp_path, config_file,
                                                                   monkeypatch) -> None:
    src = make_model(tmp_path, shards=1, shard_size=MIB)

    def interrupted(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt

    monkeypatch.setattr(model_folder, "checksum_all", interrupted)
    result = _invoke(str(src), "--config", str(config_file))
    assert result.exit_code == 130
    assert result.stderr.strip().splitlines()[-1] == (
        f"interrupted while computing the checksums; nothing was uploaded; resume with: hyperpod-dpd stage-model "
        f"{src} --config {config_file}")
    assert _keys(s3) == []


# --- a fleet: each endpoint stages its own model (issue 34 item 4) -------------------------------------------------

SMALL_PREFIX = "models/Llama-3.1-8B-Instruct/"  # the 8B's model.s3_prefix in config/examples/two-models.yaml


@pytest.fixture
def fleet_file(s3, tmp_path) -> tuple[Path, str]:
    """config/examples/two-models.yaml reading from an existing bucket, the 8B's weights from a bucket of its own
    (``model.bucket``); returns the config and that bucket."""
    repo = Path(__file__).resolve().parents[2]
    data = yaml.safe_load((repo / "config" / "examples" / "two-models.yaml").read_text())
    own = f"{BUCKET}-8b"
    s3.create_bucket(Bucket=own, CreateBucketConfiguration={"LocationConstraint": REGION})
    data["model_bucket"] = {"existing_name": BUCKET}
    data["endpoints"][1]["model"]["bucket"] = own
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    return path, own


def test_endpoint_option_stages_that_endpoints_model_and_keeps_the_others_record(_invoke, s3, tmp_path,
                                                                                 fleet_file) -> None:
    """Each endpoint's weights go to its model.s3_prefix in its bucket (the 8B's model.bucket, the 70B's the
    deployment's); the record holds one entry per model location: staging the 8B keeps the 70B's entry, and
    --verify of the 8B finds its own. Fails before: Config.model raised TypeError on a config of several endpoints."""
    from hyperpod_core import staged_model

    config, own = fleet_file
    (tmp_path / "8b").mkdir()
    big, small = make_model(tmp_path, shards=1, shard_size=MIB), make_model(tmp_path / "8b", shards=1, shard_size=MIB)
    assert _invoke(str(big), "--config", str(config), "--endpoint", "llama-3-3-70b").exit_code == 0
    staged = _invoke(str(small), "--config", str(config), "--endpoint", "llama-3-1-8b")
    assert staged.exit_code == 0, staged.stderr
    record = tmp_path / "c.out" / staged_model.RECORD_FILE
    entries = {(m.bucket, m.s3_prefix): m for m in staged_model.read_all(record)}
    assert set(entries) == {(BUCKET, PREFIX), (own, SMALL_PREFIX)}
    assert _keys(s3) == sorted(f"{_where(big)}{n}" for n in [*(p.name for p in big.iterdir()),
                                                              model_folder.MANIFEST_NAME])
    mine = entries[(own, SMALL_PREFIX)]
    assert s3.list_objects_v2(Bucket=own)["KeyCount"] == 6 and mine.location.startswith(SMALL_PREFIX)
    assert "stage-model --verify --config" in staged.stdout and "--endpoint llama-3-1-8b   (any time)" in staged.stdout
    record.write_text(json.dumps({"format": 3, "models": [
        json.loads(record.read_text())["models"][0]]}))  # the 8B's entry lost: --verify writes it again from S3
    assert _invoke("--verify", "--config", str(config), "--endpoint", "llama-3-1-8b").exit_code == 0
    assert {(m.bucket, m.s3_prefix): m for m in staged_model.read_all(record)} == entries


def test_a_fleet_needs_the_endpoint_named_and_writes_nothing_without(_invoke, s3, tmp_path, fleet_file) -> None:
    config, _ = fleet_file
    result = _invoke(str(make_model(tmp_path)), "--config", str(config))
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (f"error: --endpoint must name the endpoint hyperpod-dpd stage-model acts on: {config} "
                             "serves 2 endpoints (llama-3-3-70b, llama-3-1-8b)\n")
    assert _keys(s3) == [] and not (tmp_path / "c.out").exists()
