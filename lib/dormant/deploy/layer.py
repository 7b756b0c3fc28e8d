"""The dependency layer of a packaged app: the wheels of Dormant's runtime dependencies and the project's own, for
Lambda's Python 3.13 on arm64 (pip --platform: nothing is built here), trimmed of what a function never loads.

The same choices as the repository's Makefile (build-DependenciesLayer, trim-layer), which builds examples' layer.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, requires
from pathlib import Path

from dormant.deploy.errors import AppNotFoundError, LayerBuildError

LAMBDA_PYTHON = "3.13"
LAMBDA_PLATFORM = "manylinux2014_aarch64"
# Dependencies only `dormant dev` and the CLI use: the functions never import them (tests/integration/
# test_import_path.py), so they stay out of the layer.
EXCLUDED = frozenset({"uvicorn", "httpx", "typer", "rich", "websockets"})
# botocore/boto3 service models kept: the functions call DynamoDB and SQS, keep large values in S3, read the
# operator token from SSM or Secrets Manager (dormant.aws.secrets) and post to WebSocket connections through API
# Gateway's Management API (dormant.aws.realtime); botocore ships ~400 models, 27 MB.
SERVICES = frozenset({"dynamodb", "sqs", "s3", "ssm", "secretsmanager", "apigatewaymanagementapi"})


def distribution_name(requirement: str) -> str:
    """`pydantic[email]>=2; python_version>'3'` -> `pydantic` (normalized as PyPI compares names)."""
    name = re.split(r"[\s\[<>=!~;@(]", requirement.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def dormant_requirements() -> list[str]:
    """Dormant's own runtime requirements (no extras), as its installed metadata states them."""
    try:
        declared = requires("dormant") or []
    except PackageNotFoundError:
        raise LayerBuildError("dormant is not installed (pip install it): its requirements come from its "
                              "metadata") from None
    return [r for r in declared if "extra ==" not in r and distribution_name(r) not in EXCLUDED]


def project_requirements(project: Path) -> list[str]:
    """The project's [project.dependencies] from its pyproject.toml, but Dormant itself (it is in the bundle)."""
    pyproject = project / "pyproject.toml"
    if not pyproject.is_file():
        return []
    try:
        declared = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {}).get("dependencies", [])
    except tomllib.TOMLDecodeError as error:
        raise AppNotFoundError(f"{pyproject}: {error}") from None
    return [r for r in declared if distribution_name(r) != "dormant"]


def pip_command(target: Path, requirements: list[str]) -> list[str]:
    return [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-warn-conflicts",
            "--no-compile", "--root-user-action=ignore", "--target", str(target),
            "--implementation", "cp", "--python-version", LAMBDA_PYTHON, "--platform", LAMBDA_PLATFORM,
            "--only-binary=:all:", *requirements]


def build(layer: Path, requirements: list[str]) -> None:
    """pip installs `requirements` for Lambda into layer/python, then trims it."""
    site = layer / "python"
    site.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(pip_command(site, requirements), capture_output=True, text=True, check=False,
                            stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        raise LayerBuildError(f"pip could not install {' '.join(requirements)} for Python {LAMBDA_PYTHON} on "
                              f"{LAMBDA_PLATFORM} (every dependency needs a wheel for it):\n"
                              f"{result.stdout}{result.stderr}".rstrip())
    trim(site)


def trim(site: Path) -> None:
    """What a function never loads: scripts, installers, pydantic.v1 (FastAPI imports it only to refuse v1 models)
    and the service models of services the functions do not call."""
    for path in [site / "bin", site / "pip", site / "pydantic" / "v1", *site.glob("pip-*.dist-info")]:
        shutil.rmtree(path, ignore_errors=True)
    for data in (site / "botocore" / "data", site / "boto3" / "data"):
        if data.is_dir():
            for service in data.iterdir():
                if service.is_dir() and service.name not in SERVICES:
                    shutil.rmtree(service)
