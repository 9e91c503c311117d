"""``promptkit lint-code``'s three outputs: text for a terminal, JSON, and SARIF 2.1.0 for code scanning.

In SARIF each finding is a result at the line that makes the value, with one ``codeFlow`` whose
thread-flow locations are the steps from that line to the request; the notes (where the analysis gave
up) are ``toolExecutionNotifications`` of the run.

>>> from promptkit.codelint.model import LintResult
>>> format_text(LintResult((), (), 3, 0))
'promptkit lint-code: 3 files, no changing value before repeated content\\n'
"""

from __future__ import annotations

import json
from typing import Any, Final

from promptkit.codelint.model import Finding, LintResult, Location
from promptkit.codelint.sources import RULES

__all__ = ["FORMATS", "format_json", "format_result", "format_sarif", "format_text"]

FORMATS: Final[tuple[str, ...]] = ("text", "json", "sarif")
_SARIF_SCHEMA: Final[str] = "https://json.schemastore.org/sarif-2.1.0.json"
_DOCS: Final[str] = "https://github.com/promptkit/promptkit/blob/main/docs/how-to/lint-code.md"


def format_text(result: LintResult) -> str:
    """One block per finding (where the value is made, its path, the slot, the fix), then the notes."""
    lines = []
    for finding in result.findings:
        lines.append(f"{finding.path}:{finding.line}:{finding.column + 1}: {finding.rule}: {finding.source}")
        lines.append(
            f"  lands in: {finding.slot} of `{finding.api}` ({finding.sink.path}:{finding.sink.line})"
        )
        for step in finding.flow[1:-1]:
            lines.append(f"  via {step.path}:{step.line}: {step.message}")
        lines.append(f"  fix: {finding.fix}")
    for note in result.notes:
        lines.append(f"{note.path}:{note.line}:{note.column + 1}: note: {note.message}")
    count = len(result.findings)
    files = f"{result.files} file{'s' if result.files != 1 else ''}"
    summary = (
        f"{count} finding{'s' if count != 1 else ''}"
        if count
        else "no changing value before repeated content"
    )
    extra = f", {result.ignored} ignored by comments" if result.ignored else ""
    lines.append(f"promptkit lint-code: {files}, {summary}{extra}")
    return "\n".join(lines) + "\n"


def format_json(result: LintResult) -> str:
    """``{"findings": [...], "notes": [...], "files": n, "ignored": n}`` as indented JSON."""
    document = {
        "findings": [f.to_json() for f in result.findings],
        "notes": [n.to_json() for n in result.notes],
        "files": result.files,
        "ignored": result.ignored,
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _physical(location: Location) -> dict[str, Any]:
    return {
        "artifactLocation": {"uri": location.path.replace("\\", "/"), "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": location.line, "startColumn": location.column + 1},
    }


def _result(finding: Finding, rule_index: dict[str, int]) -> dict[str, Any]:
    thread = [
        {"location": {"physicalLocation": _physical(step), "message": {"text": step.message}}}
        for step in finding.flow
    ]
    return {
        "ruleId": finding.rule,
        "ruleIndex": rule_index[finding.rule],
        "level": "warning",
        "message": {"text": f"{finding.message}. Fix: {finding.fix}."},
        "locations": [{"physicalLocation": _physical(finding.flow[0])}],
        "codeFlows": [{"threadFlows": [{"locations": thread}]}],
        "properties": {"slot": finding.slot, "api": finding.api},
    }


def format_sarif(result: LintResult, version: str = "0") -> str:
    """A SARIF 2.1.0 log of one run (every rule described; one result per finding)."""
    rules = list(RULES.values())
    rule_index = {rule.id: i for i, rule in enumerate(rules)}
    driver = {
        "name": "promptkit lint-code",
        "version": version,
        "informationUri": _DOCS,
        "rules": [
            {
                "id": rule.id,
                "name": rule.name,
                "shortDescription": {"text": rule.name},
                "fullDescription": {"text": rule.description},
                "help": {"text": f"Fix: {rule.fix}."},
                "defaultConfiguration": {"level": "warning"},
            }
            for rule in rules
        ],
    }
    notifications = [
        {
            "level": "note",
            "message": {"text": note.message},
            "locations": [{"physicalLocation": _physical(Location(note.path, note.line, note.column, ""))}],
        }
        for note in result.notes
    ]
    run = {
        "tool": {"driver": driver},
        "invocations": [{"executionSuccessful": True, "toolExecutionNotifications": notifications}],
        "results": [_result(f, rule_index) for f in result.findings],
    }
    document = {"$schema": _SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def format_result(result: LintResult, format: str, version: str = "0") -> str:
    """The result in ``format`` (one of :data:`FORMATS`)."""
    if format == "json":
        return format_json(result)
    if format == "sarif":
        return format_sarif(result, version)
    return format_text(result)
