"""A security scan in the suite: checkov (PyPI, in its own venv: `make scan-tools`) on template.yaml and infra/,
offline (`--skip-download`). No check may fail; a check may only be skipped in the files themselves
(`checkov:skip` in a resource's Metadata, `#checkov:skip=` in Terraform), each with its reason, and every
skipped check is listed with that reason in docs/deploy.md. A broken copy proves the scan can fail."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.support import INFRA, ROOT, TEMPLATE, run, scan_tool, tool_environment

DOCS = ROOT / "docs" / "deploy.md"


def checkov(target: Path, framework: str) -> dict[str, Any]:
    tool = scan_tool("checkov")
    option = "-d" if target.is_dir() else "-f"
    result = run([tool, "--skip-download", "-o", "json", option, target, "--framework", framework],
                 env=tool_environment(BC_SKIP_MAPPING="TRUE"), timeout=180)
    assert result.returncode in (0, 1), result.stderr[-3000:]  # 1: failed checks; anything else: a crash
    report = json.loads(result.stdout)
    reports = report if isinstance(report, list) else [report]
    merged: dict[str, Any] = {"passed_checks": [], "failed_checks": [], "skipped_checks": [], "parsing_errors": []}
    for one in reports:
        for key in merged:
            merged[key] += one.get("results", {}).get(key, [])
    return merged


@pytest.fixture(scope="module")
def scans() -> dict[str, dict[str, Any]]:
    return {"template.yaml": checkov(TEMPLATE, "cloudformation"), "infra/": checkov(INFRA, "terraform")}


def _documented() -> dict[str, str]:
    """check id -> reason, from docs/deploy.md's table of skipped checks."""
    text = DOCS.read_text()
    section = text[text.index("## Security scan"):]
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^\| `(CKV2?_AWS_\d+)` \|[^|]*\|([^|]*)\|",
                                                                section, re.M)}


def test_no_check_fails_on_either_file(scans: dict[str, dict[str, Any]]) -> None:
    for name, scan in scans.items():
        assert scan["parsing_errors"] == [], name
        failed = [(c["check_id"], c["resource"]) for c in scan["failed_checks"]]
        assert failed == [], f"{name}: {failed}"
        assert len(scan["passed_checks"]) >= 25, name  # the scan read the resources


def test_every_skipped_check_has_its_reason_in_docs(scans: dict[str, dict[str, Any]]) -> None:
    documented = _documented()
    skipped: dict[str, set[str]] = {}
    for name, scan in scans.items():
        for check in scan["skipped_checks"]:
            reason = (check.get("check_result", {}).get("suppress_comment") or "").strip()
            assert reason, f"{name}: {check['check_id']} on {check['resource']} is skipped without a reason"
            skipped.setdefault(check["check_id"], set()).add(reason)
    assert skipped, "no skipped checks: then docs/deploy.md should list none"
    assert set(documented) == set(skipped), (sorted(documented), sorted(skipped))
    for check_id, reasons in skipped.items():
        # one reason per check, wherever it is skipped, and the docs give that reason
        assert reasons == {documented[check_id]}, (check_id, reasons, documented[check_id])


def test_the_scan_fails_a_weakened_copy(tmp_path: Path) -> None:
    copy = tmp_path / "infra"
    shutil.copytree(INFRA, copy, ignore=shutil.ignore_patterns(".build", ".terraform*", "*.tfstate*"))
    main = copy / "main.tf"
    text = main.read_text()
    assert text.count("  sqs_managed_sse_enabled   = true\n") == 2
    main.write_text(text.replace("  sqs_managed_sse_enabled   = true\n", "", 1))
    failed = {(c["check_id"], c["resource"]) for c in checkov(copy, "terraform")["failed_checks"]}
    assert failed == {("CKV_AWS_27", "aws_sqs_queue.wake_dlq")}
