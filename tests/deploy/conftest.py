"""Fixtures of the deployment tests: template.yaml as CloudFormation after the SAM transform, the
descriptions of both deployments (tests/deploy/describe.py). infra/ applied by Terraform (`terraform_run`)
is in tests/conftest.py: it starts with the session."""

from __future__ import annotations

from typing import Any

import pytest

from tests.deploy.describe import Description, describe_sam, describe_terraform
from tests.deploy.support import INFRA, load_template, translate


@pytest.fixture(scope="session")
def sam_template() -> dict[str, Any]:
    return load_template()


@pytest.fixture(scope="session")
def translated(sam_template: dict[str, Any]) -> dict[str, Any]:
    """template.yaml after the SAM transform (code locations in S3, as `sam package` leaves them)."""
    return translate(sam_template)


@pytest.fixture(scope="session")
def sam_description(translated: dict[str, Any]) -> Description:
    return describe_sam(translated)


@pytest.fixture(scope="session")
def terraform_description() -> Description:
    return describe_terraform(INFRA)
