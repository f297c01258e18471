"""Model identity in every KV-cache key: vLLM's ``--model`` carries the model and its revision, clients keep one name.

The key, as LMCache 0.4.3 builds it (the worker image ``lmcache/vllm-openai:v0.4.3``), re-implemented here from the
code of the ``lmcache==0.4.3`` wheel (read with ``pip download lmcache==0.4.3 --no-deps``; nothing of LMCache is
copied or imported):

* ``lmcache/integration/vllm/utils.py:260``: the engine metadata takes ``model_name=model_cfg.model``, vLLM's
  ``--model`` value (the last one on the command line: argparse keeps the last value of a repeated option); the
  served name is a separate field (``:269``, ``served_model_name=model_cfg.served_model_name``) no key reads;
* ``lmcache/v1/token_database.py:214-221`` (``_make_key_by_hash``): each key is ``CacheEngineKey(model_name,
  world_size, worker_id, chunk_hash, kv_dtype, request_configs)``; ``world_size`` is the tensor-parallel size and
  ``worker_id`` the rank;
* ``lmcache/utils.py:340-387`` (``CacheEngineKey``): ``__post_init__`` (``:350-362``) turns the request configs
  whose key starts with ``lmcache.tag.`` into ``tags`` (``None`` without any); ``__hash__`` (``:364-374``) hashes
  ``(model_name, world_size, worker_id, chunk_hash, dtype string, tags)`` and ``__eq__`` (``:376-387``) compares the
  same six fields: two keys meet only when all six agree, the model name included;
* ``lmcache/utils.py:389-395`` (``to_string``) joins the fields with ``@`` (the form a remote L2 such as Redis
  stores, tags appended as ``@name%value``) and ``from_string`` (``:430-448``) splits on it, so a model name must
  hold no ``@``;
* ``lmcache/v1/token_database.py:64-81``: the chunk hashes start from vLLM's ``NONE_HASH``, the same in every
  process with the same ``PYTHONHASHSEED`` (every pod here: ``0``), and chain over the token chunks: they depend on
  the tokens, never on the model.

The endpoints here send no ``lmcache.tag.*`` request config, so ``tags`` is ``None`` on every key: the model name is
the only field that tells two same-shape models apart.

vLLM 0.19 ``--served-model-name`` (``vllm/config/model.py``, ``ModelConfig.served_model_name: str | list[str] |
None``): "The model name(s) used in the API ... If not specified, the model name will be the same as the
``--model`` argument"; the parser takes one or more values (``nargs="+"``), so the next argument must be a flag.
The project has no table extracted from vLLM 0.19's parser (the review's was never committed); the flags below are
read from that source.
"""

from __future__ import annotations

import copy
import hashlib
import json
import posixpath
import re
from pathlib import Path

import pytest
from tests.k8s.endpoint_props import inputs_of, props_of

from hyperpod_core import staged_model
from hyperpod_core.config import parse_config
from hyperpod_core.errors import ConfigError

#: LMCache's default ``chunk_size`` (``v1/token_database.py``: 256 tokens without a config).
CHUNK = 256
#: A prompt of 4 chunks: the same tokens for every model (same tokenizer, as a model and its fine-tune share).
TOKENS = [(i * 7919) % 128_000 for i in range(4 * CHUNK)]
FIXTURES = Path(__file__).parent / "fixtures"


def _last(args: list[str], flag: str) -> str:
    """The value vLLM's argparse keeps for ``flag``: the last one given (role args come after worker args)."""
    values = [args[i + 1] for i, a in enumerate(args[:-1]) if a == flag]
    assert values, f"{flag} missing from {args}"
    return values[-1]


def _chunk_hashes(tokens: list[int], seed: int = 0) -> list[str]:
    """The prefix-hash chain over ``CHUNK``-token chunks, from a start value fixed by the hash seed: a stand-in for
    ``hash_func((prefix_hash, tokens_tuple, extra_keys))`` that, like it, sees only tokens and the seed."""
    prefix: object = ("NONE_HASH", seed)
    out = []
    for i in range(0, len(tokens), CHUNK):
        prefix = hashlib.sha256(repr((prefix, tuple(tokens[i:i + CHUNK]), None)).encode()).hexdigest()
        out.append(str(prefix))
    return out


Key = tuple[str, int, int, str, str, tuple[tuple[str, str], ...] | None]


def tags_of(request_configs: dict[str, str] | None) -> tuple[tuple[str, str], ...] | None:
    """``CacheEngineKey.__post_init__`` (``lmcache/utils.py:350-362``): the ``lmcache.tag.<name>`` request configs
    as ``(name, value)`` pairs in order, ``None`` when there is none."""
    tags = [(k.removeprefix("lmcache.tag."), v) for k, v in (request_configs or {}).items()
            if k.startswith("lmcache.tag.")]
    return tuple(tags) if tags else None


def lmcache_keys(args: list[str], tokens: list[int], kv_dtype: str,
                 request_configs: dict[str, str] | None = None) -> set[Key]:
    """What ``CacheEngineKey(model_name, world_size, worker_id, chunk_hash, kv_dtype, request_configs)`` hashes and
    compares (``lmcache/utils.py:364-387``), for every rank and chunk of an engine started with ``args``."""
    model, world_size = _last(args, "--model"), int(_last(args, "--tensor-parallel-size"))
    tags = tags_of(request_configs)
    return {(model, world_size, rank, h, kv_dtype, tags) for rank in range(world_size) for h in _chunk_hashes(tokens)}


def key_string(key: Key) -> str:
    """``CacheEngineKey.to_string`` (``lmcache/utils.py:389-395``): the fields joined with ``@``, tags appended as
    ``@name%value``."""
    *fields, tags = key
    return "@".join([*(str(f) for f in fields), *(f"{k}%{v}" for k, v in tags or ())])


def _engines(props) -> dict[str, list[str]]:  # type: ignore[no-untyped-def]
    """The vLLM command line of each engine of one endpoint: worker args, then the role's (CRD: role args come after
    ``worker.args`` and override matching flags); the colocated baseline's worker args carry its own."""
    return {"prefill": [*props.worker_args, *props.prefill.args], "decode": [*props.worker_args, *props.decode.args],
            "colocated": [*props.worker_args, *props.colocated_args]}


def _manifest(shard_sha256: str) -> bytes:
    """The bytes of a stage-model manifest (hyperpod_dpd.model_folder.manifest) naming one shard."""
    files = {"model-00001-of-00001.safetensors": {"size": 10, "sha256": shard_sha256, "crc64nvme": "AAAAAAAAAAA="}}
    return (json.dumps({"format": 1, "files": files}, indent=2) + "\n").encode()


@pytest.fixture(scope="module")
def endpoints(default_config_dict, tmp_path_factory):  # type: ignore[no-untyped-def]
    """Two models, each in two revisions: Llama from two stagings (stage-model records, this week's and last week's
    weights under one name and prefix), and a same-shape fine-tune whose revisions the config names."""
    folder = tmp_path_factory.mktemp("staged")

    def llama(week: str, shard_sha256: str):  # type: ignore[no-untyped-def]
        record = folder / f"{week}.json"
        staged_model.write(record, bucket="b", s3_prefix=default_config_dict["model"]["s3_prefix"],
                           manifest_bytes=_manifest(shard_sha256), files=1)
        config = parse_config(default_config_dict)
        return props_of(config, None, record)

    def finetune(revision: str):  # type: ignore[no-untyped-def]
        data = copy.deepcopy(default_config_dict)
        data["model"].update(name="llama-3-3-70b-support-ft", s3_prefix="models/support-ft/", revision=revision)
        config = parse_config(data)
        return props_of(config)

    return {"llama@last-week": llama("last-week", "a" * 64), "llama@this-week": llama("this-week", "b" * 64),
            "finetune@r1": finetune("r1"), "finetune@r2": finetune("r2")}


def test_two_models_and_two_revisions_never_share_a_key_and_clients_keep_one_name(endpoints, default_config_dict):
    dtype = default_config_dict["model"].get("dtype", "bfloat16")
    keys = {}
    for name, props in endpoints.items():
        per_engine = {engine: lmcache_keys(args, TOKENS, dtype) for engine, args in _engines(props).items()}
        # Within one endpoint every engine keys alike: decode finds what prefill stored (the PD transfer).
        assert per_engine["prefill"] == per_engine["decode"] == per_engine["colocated"], name
        keys[name] = per_engine["decode"]
        assert all("@" not in k[0] and len(key_string(k).split("@")) == 5 and k[5] is None for k in keys[name]), name
    names = list(keys)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert not keys[a] & keys[b], f"{a} and {b} share LMCache keys"
            assert not {key_string(k) for k in keys[a]} & {key_string(k) for k in keys[b]}, (a, b)
    # The name clients send does not change with the revision; it differs between the two models.
    served = {name: _last(_engines(p)["decode"], "--served-model-name") for name, p in endpoints.items()}
    assert served["llama@last-week"] == served["llama@this-week"] == "llama-3-3-70b-instruct"
    assert served["finetune@r1"] == served["finetune@r2"] == "llama-3-3-70b-support-ft"


def test_request_tags_are_part_of_the_key_and_none_is_sent(endpoints, default_config_dict):
    """A tag (``lmcache.tag.*`` request config) separates keys as the model name does (``__eq__`` compares
    ``tags``); other request configs do not. The endpoints send none, so only ``--model`` separates models."""
    args = _engines(endpoints["llama@this-week"])["decode"]
    dtype = default_config_dict["model"].get("dtype", "bfloat16")
    plain = lmcache_keys(args, TOKENS, dtype)
    assert lmcache_keys(args, TOKENS, dtype, {"lmcache.other": "x"}) == plain
    tagged = lmcache_keys(args, TOKENS, dtype, {"lmcache.tag.tenant": "a"})
    assert not plain & tagged and all(key_string(k).endswith("@tenant%a") for k in tagged)


def test_the_staged_manifest_digest_is_the_revision_unless_the_config_names_one(endpoints):
    assert endpoints["llama@last-week"].model_path == (
        f"/opt/ml/model/llama-3-3-70b-instruct/sha256-{staged_model.digest(_manifest('a' * 64))[:16]}")
    assert endpoints["finetune@r2"].model_path == "/opt/ml/model/llama-3-3-70b-support-ft/r2"


def test_two_staged_revisions_are_two_s3_locations_so_a_pod_of_one_never_loads_the_other(endpoints):
    """The revision labels the weights, not just the mount path: a staged revision's S3 location
    (``modelSourceConfig.modelLocation``) is its own content-addressed prefix, so a pod of revision A that restarts
    or scales out after B was staged still mounts A's objects; neither location contains the other. A revision the
    config names keeps ``model.s3_prefix`` (the user gives each revision its own prefix)."""
    a, b = endpoints["llama@last-week"], endpoints["llama@this-week"]
    assert a.model_location == f"models/Llama-3.3-70B-Instruct/{a.model_path.rsplit('/', 1)[1]}"
    assert b.model_location == f"models/Llama-3.3-70B-Instruct/{b.model_path.rsplit('/', 1)[1]}"
    assert a.model_location != b.model_location
    assert not (a.model_location + "/").startswith(b.model_location + "/")
    assert not (b.model_location + "/").startswith(a.model_location + "/")
    assert endpoints["finetune@r1"].model_location == endpoints["finetune@r2"].model_location == "models/support-ft"


@pytest.mark.parametrize("case", ["default", "p5en-two-prefill"])
def test_the_weights_mount_path_is_the_model_flag_and_a_valid_path(synthesized, case):
    """Every InferenceEndpointConfig mounts the weights where ``--model`` points, at ``/opt/ml/model/<model.name>/
    <revision>`` (never the bare root), from the revision's own S3 location, at a path the API server and the
    container runtime accept: core/v1 ``VolumeMount.mountPath`` "Must not contain ':'" (the v3.3 CRD carries that
    description on the pod-spec ``volumeMounts`` it embeds, ``shared/crds/v3.3/inferenceendpointconfigs.yaml``
    line 2360-2363; the IEC's own ``modelVolumeMount.mountPath``, line 5845, says only where the model is loaded
    from), Kubernetes' ``ValidateVolumeMounts`` wants it non-empty (``pkg/apis/core/validation/validation.go``), the
    OCI runtime spec a Linux mount destination that is absolute, and Linux at most 255 bytes per component
    (NAME_MAX) and 4096 in all (PATH_MAX)."""
    s = synthesized[case]
    revision = ("UNRESOLVED-ModelRevision" if case == "default"
                else staged_model.read(FIXTURES / "staged-model.json").revision)
    iecs = [d for d in s.docs() if d["kind"] == "InferenceEndpointConfig"]
    assert len(iecs) == 5
    for doc in iecs:
        spec, worker = doc["spec"], doc["spec"]["worker"]
        path = worker["modelVolumeMount"]["mountPath"]
        assert path == f"/opt/ml/model/{spec['modelName']}/{revision}", doc["metadata"]["name"]
        assert spec["modelSourceConfig"]["modelLocation"] == f"models/Llama-3.3-70B-Instruct/{revision}"
        roles = [spec["pdSpec"][r]["args"] for r in ("prefillSpec", "decodingSpec")] if "pdSpec" in spec else []
        assert all("--model" not in args and "--served-model-name" not in args for args in roles)
        assert _last(worker["args"], "--model") == path
        assert path.startswith("/") and ":" not in path and posixpath.normpath(path) == path
        assert len(path.encode()) <= 4096 and all(len(part.encode()) <= 255 for part in path.split("/"))
        served_at = worker["args"].index("--served-model-name")
        assert worker["args"][served_at + 1] == spec["modelName"] and worker["args"][served_at + 2].startswith("--")


def test_clients_send_the_served_name(synthesized):
    """The benchmark Jobs ask for the name vLLM serves (``--served-model-name``), not the weights' path."""
    for case in ("default", "p5en-two-prefill"):
        s = synthesized[case]
        served = _last(s.one("-dpd.k8s.yaml")["spec"]["worker"]["args"], "--served-model-name")
        jobs = [d for d in s.docs("-benchmark.k8s.yaml") if d["kind"] == "Job"]
        models = {e["value"] for j in jobs for e in j["spec"]["template"]["spec"]["containers"][0]["env"]
                  if e["name"] == "BENCH_API_MODEL"}
        assert models == {served}, case


@pytest.mark.parametrize("revision", ["2025/01", "v1:2", "a@b", "..", ".hidden", "", "r" * 65, "snap shot"])
def test_fails_when_model_revision_is_not_a_path_segment(default_config_dict, revision):
    data = copy.deepcopy(default_config_dict)
    data["model"]["revision"] = revision
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    message = str(err.value)
    assert message.startswith("model.revision must be 1-64 letters, digits, '.', '_' or '-' starting with a letter "
                              "or digit") and message.endswith(f", got {revision!r}") and "\n" not in message


# --- where the revision comes from (hyperpod_core.inputs.model_revision) --------------------------------------


def test_without_a_revision_the_manifests_are_not_deployable(default_config):
    r = inputs_of(default_config).model_revision
    assert r.placeholder and r.value == "UNRESOLVED-ModelRevision"
    assert "run hyperpod-dpd stage-model SRC (it records the revision) or set model.revision" in r.source


def test_the_config_revision_wins_over_the_record(default_config_dict, tmp_path):
    record = tmp_path / "staged-model.json"
    staged_model.write(record, bucket="b", s3_prefix="models/Llama-3.3-70B-Instruct/", manifest_bytes=b"m", files=1)
    data = copy.deepcopy(default_config_dict)
    data["model"]["revision"] = "2025-01-06"
    r = inputs_of(parse_config(data), None, record).model_revision
    assert (r.value, r.source, r.placeholder) == ("2025-01-06", "config: model.revision", False)


@pytest.mark.parametrize(("bucket", "prefix"), [("team-models", "models/other/"), ("someone-elses", None)])
def test_a_record_of_other_weights_leaves_a_placeholder(default_config, tmp_path, bucket, prefix):
    """A record of another prefix (``model.s3_prefix`` changed since the staging) or of another bucket than the
    deployed one never names the weights the endpoint mounts."""
    outputs = tmp_path / "cdk-outputs.json"
    outputs.write_text(json.dumps({"hyperpod-dpd-platform": {"ModelBucketName": "team-models"}}), encoding="utf-8")
    record = tmp_path / "staged-model.json"
    staged_model.write(record, bucket=bucket, s3_prefix=prefix or default_config.spec().model.s3_prefix,
                       manifest_bytes=b"m", files=1)
    r = inputs_of(default_config, outputs, record).model_revision
    assert r.placeholder and f"records s3://{bucket}/" in r.source
    assert "not endpoint llama-3-3-70b's s3://team-models/" in r.source


@pytest.mark.parametrize(("content", "fragment"), [
    ("{not json", "is not JSON"),
    ('{"format": 2, "bucket": "b", "s3_prefix": "p/", "files": 1, "manifest_sha256": "xyz"}',
     "manifest_sha256 must be 64 lowercase hex digits, got 'xyz'"),
    ('{"format": 3}', "must be a format-3 record written by hyperpod-dpd stage-model"),
    ('{"format": 4, "models": []}', "must be a format-3 record written by hyperpod-dpd stage-model"),
    # Weights staged in place under s3_prefix: a later staging overwrote them, so the record names nothing.
    ('{"format": 1, "bucket": "b", "s3_prefix": "p/", "files": 1, "manifest_sha256": "' + "a" * 64 + '"}',
     "is a format-1 record: its weights were staged in place under s3_prefix"),
])
def test_fails_when_the_record_is_not_one(default_config, tmp_path, content, fragment):
    record = tmp_path / "staged-model.json"
    record.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError, match=fragment) as err:
        inputs_of(default_config, None, record)
    assert "\n" not in str(err.value) and str(record) in str(err.value)


def test_synth_reads_the_record_beside_the_outputs_file_and_a_named_one_must_exist(monkeypatch, tmp_path):
    from hyperpod_k8s import main

    monkeypatch.delenv(main.STAGED_MODEL_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    outputs = FIXTURES / "p5en-cdk-outputs.json"
    assert main.staged_model_path(None, outputs) == FIXTURES / staged_model.RECORD_FILE
    assert main.staged_model_path(None, None) is None  # none in the working directory
    with pytest.raises(ConfigError, match=re.escape("--staged-model-file / HYPERPOD_STAGED_MODEL 'nope.json' does "
                                                    "not exist")):
        main.staged_model_path("nope.json", outputs)


def test_a_record_keeps_every_models_entry_and_each_endpoint_reads_its_own(tmp_path) -> None:
    """Format 3: staging a second model keeps the first one's entry (a format-2 record held one model, so staging
    the fleet's second model lost the first one's revision); re-staging one location replaces only its entry; a
    format-2 record still reads as one entry."""
    from hyperpod_core import staged_model

    record = tmp_path / "staged-model.json"
    record.write_text('{"format": 2, "bucket": "b", "s3_prefix": "big/", "files": 3, "manifest_sha256": "'
                      + "a" * 64 + '"}', encoding="utf-8")
    assert [m.s3_prefix for m in staged_model.read_all(record)] == ["big/"]
    small = staged_model.write(record, bucket="b", s3_prefix="small/", manifest_bytes=b"s", files=1)
    again = staged_model.write(record, bucket="b", s3_prefix="big/", manifest_bytes=b"B", files=4)
    assert staged_model.find(record, s3_prefix="small/", bucket="b") == small
    assert staged_model.find(record, s3_prefix="big/", bucket=None) == again
    assert staged_model.find(record, s3_prefix="big/", bucket="other") is None
    with pytest.raises(ConfigError, match="must hold one model here, got 2"):
        staged_model.read(record)
