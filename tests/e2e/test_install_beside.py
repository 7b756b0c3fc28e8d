"""The wheel installed into a service that already has its own pydantic, boto3 and fastapi: pyproject.toml declares
ranges, so pip keeps what is there (nothing upgraded or downgraded), and Dormant imports and runs on those versions.

The service's versions are older minors than uv.lock's, inside the library's ranges (SERVICE below). A fresh venv
every time (it tests pip's resolution against what is installed): about a minute, so tier 2.
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

# What the service had before Dormant: each an older minor than the lock's (checked below), inside the ranges.
SERVICE = {"pydantic": "2.12.5", "boto3": "1.42.60", "fastapi": "0.160.0"}

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
    listed = run(python, "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check").stdout
    return {re.sub(r"[-_.]+", "-", name).lower(): version
            for name, version in (line.split("==") for line in listed.splitlines() if "==" in line)}


def minor(version: str) -> tuple[int, int]:
    major, minor_, *_ = version.split(".")
    return int(major), int(minor_)


def test_the_service_s_versions_are_older_minors_inside_the_ranges() -> None:
    declared = {Requirement(r).name: Requirement(r).specifier
                for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]}
    locked = lock.locked()
    for name, version in SERVICE.items():
        assert version in declared[name], (name, version, declared[name])
        ((in_lock, _),) = locked[name]
        assert minor(version) < minor(in_lock), (name, version, in_lock)


@pytest.mark.parametrize("extra", ["", "[dev]"])
def test_installing_the_wheel_keeps_the_service_s_versions(wheel: Path, tmp_path: Path, extra: str) -> None:
    home = tmp_path / "service"
    run(sys.executable, "-m", "venv", home)
    python = home / "bin" / "python"
    run(python, "-m", "pip", "install", "--quiet", "--no-compile", "--disable-pip-version-check",
        *(f"{name}=={version}" for name, version in SERVICE.items()), timeout=600)
    before = freeze(python)
    assert {name: before[name] for name in SERVICE} == SERVICE

    run(python, "-m", "pip", "install", "--quiet", "--no-compile", "--disable-pip-version-check", f"{wheel}{extra}",
        timeout=600)
    after = freeze(python)
    assert "dormant" in after and (not extra or "moto" in after)
    moved = {name: (version, after.get(name)) for name, version in before.items() if after.get(name) != version}
    assert not moved, moved  # not only the three: nothing the service had was upgraded, downgraded or removed

    project = tmp_path / "project"
    project.mkdir()
    (project / "myapp.py").write_text(blocks("python")[0])  # the README's app
    (project / "run.py").write_text(RUN)
    ran = run(python, "run.py", cwd=project, env=user_environment())
    assert ran.stdout.split() == ["total", "5"], ran.stdout + ran.stderr
    versions = run(python, "-c", "import pydantic, boto3, fastapi, dormant; "
                   "print(pydantic.VERSION, boto3.__version__, fastapi.__version__)", cwd=project,
                   env=user_environment()).stdout.split()
    assert versions == list(SERVICE.values())
