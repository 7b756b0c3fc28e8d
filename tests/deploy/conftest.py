"""Fixtures of the deployment tests: template.yaml as CloudFormation after the SAM transform, the
descriptions of both deployments (tests/deploy/describe.py), and infra/ applied by Terraform to a moto server
(started early, in the background)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.deploy.describe import Description, describe_sam, describe_terraform
from tests.deploy.support import INFRA, load_template, terraform, translate
from tests.deploy.terraform import TerraformRun, provider_mirror


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


@pytest.fixture(scope="session")
def terraform_run() -> Iterator[TerraformRun]:
    """infra/ applied to a moto server by Terraform (tests/deploy/terraform.py), in the background."""
    binary = terraform()
    mirror = provider_mirror()
    run = TerraformRun(binary, mirror)
    yield run
    run.close()


@pytest.fixture(autouse=True)
def _terraform_starts_early(request: pytest.FixtureRequest) -> None:
    """Start the Terraform run with the first deployment test when test_terraform.py is selected: it waits on
    AWS provider timers for over a minute, which the tests before it then overlap."""
    if shutil.which("terraform") and any(item.path.name == "test_terraform.py" for item in request.session.items):
        request.getfixturevalue("terraform_run").start()
