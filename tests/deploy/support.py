"""Paths, tools and template helpers shared by the deployment tests (template.yaml, infra/, sam build).

The deployment tools (cfn-lint 1.53.3, the SAM CLI) live in their own venv, `tools/deploy-venv`, which
`make check` creates (`make deploy-tools`); it exports DORMANT_DEPLOY_TOOLS, and then a missing tool is a
failure. Run without make and without that venv, the tests that need a tool are skipped with the reason.
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
INFRA = ROOT / "infra"
REGION = "us-east-1"
ACCOUNT = "123456789012"
ARTIFACT_BUCKET = "dormant-artifacts"


def deploy_tool(name: str) -> Path:
    """A command of the deployment tools venv (skip when it was never installed, fail under `make check`)."""
    return _venv_tool(name, "DORMANT_DEPLOY_TOOLS", "deploy-venv", "make deploy-tools")


def scan_tool(name: str) -> Path:
    """A command of the security-scan venv, tools/scan-venv (`make scan-tools`; DORMANT_SCAN_TOOLS under make
    test)."""
    return _venv_tool(name, "DORMANT_SCAN_TOOLS", "scan-venv", "make scan-tools")


def _venv_tool(name: str, variable: str, venv: str, target: str) -> Path:
    configured = os.environ.get(variable)
    directory = Path(configured) if configured else ROOT / "tools" / venv / "bin"
    if not directory.is_absolute():
        directory = ROOT / directory
    tool = directory / name
    if tool.exists():
        return tool
    message = f"{tool} is missing: run `{target}` (make check does)"
    if configured or os.environ.get("DORMANT_DEPLOY_TOOLS"):  # under `make check`: a missing tool is a failure
        pytest.fail(message)
    pytest.skip(message)


def terraform() -> str:
    found = shutil.which("terraform")
    if found is None:
        message = "terraform is not installed (needed for `terraform fmt -check`)"
        if os.environ.get("DORMANT_DEPLOY_TOOLS"):  # under `make check`: a missing tool is a failure
            pytest.fail(message)
        pytest.skip(message)
    return found


def run(command: list[str | Path], *, cwd: Path = ROOT, env: dict[str, str] | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(part) for part in command], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def tool_environment(**extra: str) -> dict[str, str]:
    """The environment for the tools: no telemetry, no AWS account, no update checks."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("AWS_", "DORMANT_"))}
    env.update(SAM_CLI_TELEMETRY="0", SAM_CLI_DISABLE_UPDATE_CHECK="1", AWS_DEFAULT_REGION=REGION,
               AWS_REGION=REGION, AWS_EC2_METADATA_DISABLED="true", CHECKPOINT_DISABLE="1", **extra)
    return env


def load_template(text: str | None = None) -> dict[str, Any]:
    """template.yaml (or `text`) as CloudFormation JSON: the short tags become {"Ref": ...}, {"Fn::...": ...}."""
    from samtranslator.yaml_helper import yaml_parse  # type: ignore[import-untyped]

    parsed: dict[str, Any] = yaml_parse(TEMPLATE.read_text() if text is None else text)
    return parsed


def translate(template: dict[str, Any], parameters: dict[str, Any] | None = None) -> dict[str, Any]:
    """The SAM transform, as CloudFormation runs it: the plain CloudFormation template it expands to.

    Local code paths become S3 locations in `ARTIFACT_BUCKET` (what `sam package` does)."""
    from samtranslator.translator.managed_policy_translator import (  # type: ignore[import-untyped]
        ManagedPolicyLoader,
    )
    from samtranslator.translator.transform import transform  # type: ignore[import-untyped]

    packaged = copy.deepcopy(template)
    for name, resource in packaged["Resources"].items():
        properties = resource.get("Properties", {})
        for key in ("CodeUri", "ContentUri"):
            if isinstance(properties.get(key), str):
                properties[key] = f"s3://{ARTIFACT_BUCKET}/{name}.zip"
    values = {"AWS::Region": REGION, "AWS::AccountId": ACCOUNT, **(parameters or {})}
    old_region = os.environ.get("AWS_DEFAULT_REGION")
    os.environ["AWS_DEFAULT_REGION"] = REGION  # the translator asks boto3 for a region
    try:
        translated: dict[str, Any] = transform(packaged, values, ManagedPolicyLoader(None))
    finally:
        if old_region is None:
            del os.environ["AWS_DEFAULT_REGION"]
        else:
            os.environ["AWS_DEFAULT_REGION"] = old_region
    return translated


def resources_of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {name: r for name, r in template["Resources"].items() if r["Type"] == kind}
