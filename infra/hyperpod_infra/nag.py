"""cdk-nag 3 wiring. Acknowledgements live next to the resource they concern, each with its reason
(:func:`hyperpod_constructs.nag.acknowledge`, re-exported here for the stacks).

One synth gives both the verdict and the full findings report: acknowledgements are applied in the CDK's
namespaced form, so cdk-nag reports every finding and the CDK itself matches each to its acknowledgement,
listing it under ``suppressedViolations`` in ``validation-report.json`` (``aws-cdk-lib`` 2.275.0,
``core/lib/private/synthesis-validation.js``: ``collectSuppressions``). :func:`findings_report` turns that
file into ``cdk.out/nag-findings.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from hyperpod_constructs.nag import PACK, acknowledge

__all__ = ["NAG_REPORT", "acknowledge", "add_nag", "findings_report", "write_findings_report"]

#: File in ``cdk.out/`` with every cdk-nag finding and the acknowledgement (and reason) covering it.
NAG_REPORT = "nag-findings.json"

#: What the CDK writes into the cloud assembly after running the validation plugins.
VALIDATION_REPORT = "validation-report.json"


def add_nag(app: cdk.App) -> None:
    """Run the AwsSolutions rule pack on every stack at synth; any unacknowledged finding fails synth."""
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))


def findings_report(validation_report: Path) -> dict[str, Any]:
    """Every finding of the cdk-nag pack in a ``validation-report.json``, each with the acknowledgement that
    covers it (path, rule, reason, as the CDK matched it) or ``None``; ``acknowledgements`` counts the
    distinct acknowledgements that cover at least one finding."""
    report = json.loads(validation_report.read_text(encoding="utf-8"))
    findings = []
    for plugin in report.get("pluginReports", []):
        if plugin.get("pluginName") != PACK:
            continue
        for violation in plugin.get("violations", []):
            findings += [{"rule": violation["ruleName"], "path": c["constructPath"],
                          "description": violation.get("description", ""), "acknowledged_by": None}
                         for c in violation.get("violatingConstructs", [])]
        for violation in plugin.get("suppressedViolations", []):
            ack = {"path": violation["acknowledgedAt"], "rule": violation["acknowledgedId"],
                   "reason": violation["reason"]}
            findings += [{"rule": violation["ruleName"], "path": c["constructPath"],
                          "description": violation.get("description", ""), "acknowledged_by": ack}
                         for c in violation.get("violatingConstructs", [])]
    findings.sort(key=lambda f: (f["path"], f["rule"]))
    return {"findings": findings,
            "unacknowledged": sum(1 for f in findings if f["acknowledged_by"] is None),
            "acknowledgements": len({(f["acknowledged_by"]["path"], f["acknowledged_by"]["rule"])
                                     for f in findings if f["acknowledged_by"]})}


def write_findings_report(cdk_out: Path) -> dict[str, Any] | None:
    """Write :data:`NAG_REPORT` beside the CDK's validation report in ``cdk_out``; ``None`` when the CDK wrote
    none (no validation plugin ran)."""
    source = cdk_out / VALIDATION_REPORT
    if not source.is_file():
        return None
    report = findings_report(source)
    (cdk_out / NAG_REPORT).write_text(json.dumps(report, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return report
