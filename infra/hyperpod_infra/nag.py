"""cdk-nag 3 wiring. Acknowledgements live next to the resource they concern, each with its reason
(:func:`hyperpod_constructs.nag.acknowledge`, re-exported here for the stacks)."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from hyperpod_constructs.nag import AcknowledgementRecord, acknowledge

__all__ = ["acknowledge", "add_nag", "findings_report", "write_findings_report"]


def add_nag(app: cdk.App) -> None:
    """Run the AwsSolutions rule pack on every stack at synth; any unacknowledged finding fails synth."""
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))


def findings_report(validation_report: Path, acknowledgements: list[AcknowledgementRecord]) -> dict[str, Any]:
    """Every finding of a synth with acknowledgements off (``validation-report.json``), each with the
    acknowledgement that covers it (path, rule, reason) or ``None``."""
    report = json.loads(validation_report.read_text(encoding="utf-8"))
    findings = []
    for plugin in report.get("pluginReports", []):
        for violation in plugin.get("violations", []):
            rule = violation["ruleName"]
            for construct in violation.get("violatingConstructs", []):
                path = construct["constructPath"]
                ack = next((a for a in acknowledgements if a.rule_id.removeprefix("AwsSolutions::") == rule
                            and (path == a.path or path.startswith(a.path + "/"))), None)
                findings.append({"rule": rule, "path": path, "description": violation.get("description", ""),
                                 "acknowledged_by": None if ack is None else
                                 {"path": ack.path, "rule": ack.rule_id, "reason": ack.reason}})
    return {"findings": findings,
            "unacknowledged": sum(1 for f in findings if f["acknowledged_by"] is None),
            "acknowledgements": len(acknowledgements)}


#: File in ``cdk.out/`` with every cdk-nag finding and the acknowledgement (and reason) covering it.
NAG_REPORT = "nag-findings.json"


def write_findings_report(config_path: Path, out: Path) -> dict[str, Any]:
    """Synthesize ``config_path`` in a temporary folder with acknowledgements off and write every cdk-nag
    finding, with the acknowledgement covering it, to ``out`` (JSON). Returns the report."""
    from hyperpod_constructs.nag import ACKNOWLEDGEMENTS_CONTEXT, recorded_acknowledgements
    from hyperpod_infra.app_builder import build
    from hyperpod_infra.config import load_config

    config = load_config(config_path)
    with tempfile.TemporaryDirectory(prefix="cdk.out.nag-") as tmp:
        app = cdk.App(outdir=tmp, context={"aws:cdk:disable-asset-staging": True, ACKNOWLEDGEMENTS_CONTEXT: "off"})
        before = len(recorded_acknowledgements())
        build(app, config)
        acks = recorded_acknowledgements()[before:]
        add_nag(app)
        try:
            app.synth()
        except RuntimeError as exc:
            if "ValidationFailed" not in str(exc):
                raise
        report_file = Path(tmp) / "validation-report.json"
        report = findings_report(report_file, acks) if report_file.is_file() else \
            {"findings": [], "unacknowledged": 0, "acknowledgements": len(acks)}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return report


def main(argv: list[str] | None = None) -> None:
    """``python -m hyperpod_infra.nag CONFIG OUT.json``: write the full findings report."""
    args = sys.argv[1:] if argv is None else argv
    report = write_findings_report(Path(args[0]), Path(args[1]))
    print(f"cdk-nag: {len(report['findings'])} findings, {report['unacknowledged']} unacknowledged, "
          f"{report['acknowledgements']} acknowledgements -> {args[1]}")


if __name__ == "__main__":
    main()
