"""The wheel installed into a service that already has its own pydantic, boto3 and fastapi: pyproject.toml declares
ranges, so pip keeps them (nothing upgraded or downgraded), and Dormant imports and runs a TestEnv on those versions.

Two services, a fresh venv each (it tests pip's resolution against what is installed; about a minute each: tier 2):
- `pip install dormant[dev]` into a venv with older minors of pydantic and fastapi and an older boto3 1.43: the three
  stay. aiobotocore pins one botocore release (3.10.0: botocore 1.43.117) and pip takes the newest aiobotocore
  first, so botocore alone may move, inside boto3's own range.
- a service whose boto3 is an older minor (1.42): installed with the service's own pins kept (`-c` its freeze, what
  its lock file does), pip resolves an older aiobotocore and nothing moves at all. With the exact pins Dormant had
  (pydantic==2.13.3, boto3==1.43.117, ...) neither resolves without changing the service's packages.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.e2e.test_install import ROOT, blocks, run, user_environment, wheel
from tools import lock

pytestmark = [pytest.mark.tier2, pytest.mark.timeout(900)]

__all__ = ["wheel"]  # the fixture, shared with test_install

# (what the service had, with the service's pins kept?, the extra installed, what may move)
SERVICES = {
    "plain": ({"pydantic": "2.12.5", "boto3": "1.43.50", "fastapi": "0.160.0"}, False, "[dev]", {"botocore"}),
    "pinned": ({"pydantic": "2.12.5", "boto3": "1.42.60", "fastapi": "0.160.0"}, True, "", set()),
}

RUN = """
import asyncio

from dormant.testing import TestEnv
from myapp import registry


async def main() -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("tally", ["main"])
        await handle.send("add", {"amount": 2})
        await handle.send("add", {"amount": 3})
        await env.run_until_idle()
        print("total", (await handle.state()).total)


asyncio.run(main())
"""


def freeze(python: Path) -> dict[str, str]:
    listed = run(python, "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check",
                 env=user_environment()).stdout
    return {re.sub(r"[-_.]+", "-", name).lower(): version
            for name, version in (line.split("==") for line in listed.splitlines() if "==" in line)}


def minor(version: str) -> tuple[int, int]:
    major, minor_, *_ = version.split(".")
    return int(major), int(minor_)


def test_the_service_s_versions_are_older_than_the_lock_s_and_inside_the_ranges() -> None:
    declared = {Requirement(r).name: Requirement(r).specifier
                for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]}
    locked = lock.locked()
    for service, *_ in SERVICES.values():
        for name, version in service.items():
            assert version in declared[name], (name, version, declared[name])
            ((in_lock, _),) = locked[name]
            assert [int(n) for n in version.split(".")] < [int(n) for n in in_lock.split(".")], (name, version)
    assert all(minor(SERVICES["pinned"][0][name]) < minor(locked[name][0][0]) for name in SERVICES["pinned"][0])


@pytest.mark.parametrize("case", list(SERVICES))
def test_installing_the_wheel_keeps_the_service_s_versions(wheel: Path, tmp_path: Path, case: str) -> None:
    service, pinned, extra, may_move = SERVICES[case]
    home = tmp_path / "service"
    run(sys.executable, "-m", "venv", home)
    python = home / "bin" / "python"
    pip = (python, "-m", "pip", "install", "--quiet", "--no-compile", "--disable-pip-version-check")
    run(*pip, *(f"{name}=={version}" for name, version in service.items()), env=user_environment(), timeout=600)
    before = freeze(python)
    assert {name: before[name] for name in service} == service
    (tmp_path / "service-pins.txt").write_text("".join(f"{n}=={v}\n" for n, v in before.items()))

    constraints = ("-c", tmp_path / "service-pins.txt") if pinned else ()
    run(*pip, f"{wheel}{extra}", *constraints, env=user_environment(), timeout=600)
    after = freeze(python)
    assert "dormant" in after and ("moto" in after) == bool(extra)
    assert {name: after[name] for name in service} == service
    moved = {name: (version, after.get(name)) for name, version in before.items() if after.get(name) != version}
    assert set(moved) <= may_move, moved

    project = tmp_path / "project"
    project.mkdir()
    (project / "myapp.py").write_text(blocks("python")[0])  # the README's app
    (project / "run.py").write_text(RUN)
    ran = run(python, "run.py", cwd=project, env=user_environment())
    assert ran.stdout.split() == ["total", "5"], ran.stdout + ran.stderr
    versions = run(python, "-c", "import pydantic, boto3, fastapi, dormant; "
                   "print(pydantic.VERSION, boto3.__version__, fastapi.__version__)", cwd=project,
                   env=user_environment()).stdout.split()
    assert versions == list(service.values())
