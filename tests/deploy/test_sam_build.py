"""`sam build` packages the functions offline: lib/dormant, functions/ and the registry's package (examples/),
the same files infra/ zips; the bundle alone (plus the third-party packages of the layer) imports both
handlers. The layer's make target fetches wheels for Lambda's python3.13 on arm64 (needs PyPI, as
`make check` does)."""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.support import ROOT, deploy_tool, run, tool_environment
from tools import lock

FUNCTIONS = ("WorkerFunction", "ApiFunction")
NO_NETWORK = {"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": "",
              "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9", "no_proxy": ""}


# the Makefile's: dev and CLI only (not in functions)
LAYER_EXCLUDE = {"uvicorn", "httpx", "typer", "rich", "websockets"}


def deploy_python_available() -> bool:
    """Whether this machine has Lambda's Python (3.13) to compile bytecode with (as the Makefile looks for it)."""
    import subprocess

    try:
        found = subprocess.run(["python3.13", "-c", "import sys; print(sys.version_info[:2] == (3, 13))"],
                               env={**os.environ, "PYENV_VERSION": "3.13"}, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return found.stdout.strip() == "True"


def expected_bundle() -> set[str]:
    """What `make infra-zips` zips for infra/ (tools/bundle.py), as zip paths: sam build must bundle the same."""
    spec = importlib.util.spec_from_file_location("bundle", ROOT / "tools" / "bundle.py")
    assert spec is not None and spec.loader is not None
    bundle = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bundle)
    return set(bundle.code_files(ROOT / "examples"))


def _functions_only(template: dict[str, Any]) -> dict[str, Any]:
    """template.yaml without the dependencies layer (the one part of `sam build` that downloads)."""
    stripped = copy.deepcopy(template)
    del stripped["Globals"]["Function"]["Layers"]
    del stripped["Resources"]["DependenciesLayer"]
    return stripped


@pytest.fixture(scope="module")
def built(sam_template: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    sam = deploy_tool("sam")
    directory = tmp_path_factory.mktemp("sam-build")
    template = directory / "template.json"
    template.write_text(json.dumps(_functions_only(sam_template)))
    # the network is closed to the build: a proxy that refuses every connection
    result = run([sam, "build", "--template-file", template, "--base-dir", ROOT, "--build-dir", directory / "build"],
                 env=tool_environment(**NO_NETWORK), timeout=240)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return directory / "build"


def test_sam_build_bundles_lib_functions_and_the_registry_offline(built: Path) -> None:
    expected = expected_bundle()
    assert {"dormant/aws/worker.py", "functions/api/handler.py", "examples/app.py", "dormant/http/static/ui/app.js",
            "dormant/http/static/swagger/swagger-ui-bundle.js"} <= expected
    for function in FUNCTIONS:
        files = {str(p.relative_to(built / function)) for p in (built / function).rglob("*") if p.is_file()}
        sources = {f for f in files if not f.endswith(".pyc")}
        assert sources == expected, (function, sorted(sources ^ expected))
        # Bytecode for Lambda's Python ships beside the sources when the build machine has that Python.
        compiled = {f for f in files if f.endswith(".pyc")}
        assert all(".cpython-313.pyc" in f for f in compiled), sorted(compiled)[:5]
        if deploy_python_available():
            assert "functions/worker/__pycache__/handler.cpython-313.pyc" in compiled
    built_template = (built / "template.yaml").read_text()
    assert all(f"CodeUri: {function}" in built_template for function in FUNCTIONS)


def test_the_bundle_alone_imports_both_handlers(built: Path) -> None:
    """With the bundle first on the path (as /var/task is), the handlers load our code from it, not lib/."""
    bundle = built / "WorkerFunction"
    script = (
        "import json, functions.worker.handler as w, functions.api.handler as a, dormant, examples\n"
        "print(json.dumps({'dormant': dormant.__file__, 'examples': examples.__file__,\n"
        "                  'worker': callable(w.handler), 'api': callable(a.handler)}))\n")
    # The handlers build their AWS clients at import (init phase): queue URLs given, as the deployment gives them.
    env = tool_environment(PYTHONPATH=str(bundle), DORMANT_APP="examples.app:registry",
                           AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
                           DORMANT_QUEUE_URL="https://sqs.us-east-1.amazonaws.com/123456789012/w.fifo",
                           DORMANT_TIMER_QUEUE_URL="https://sqs.us-east-1.amazonaws.com/123456789012/t")
    result = run([sys.executable, "-c", script], cwd=built, env=env)  # cwd: not the repository root
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert Path(loaded["dormant"]).is_relative_to(bundle) and Path(loaded["examples"]).is_relative_to(bundle)
    assert loaded["worker"] is True and loaded["api"] is True


@pytest.mark.timeout(600)  # pip downloads and unpacks the layer's wheels: minutes on a loaded machine
def test_the_layer_target_fetches_wheels_for_the_lambda_runtime(tmp_path: Path) -> None:
    """make build-DependenciesLayer (what sam build runs for the layer): every pinned dependency, built for
    CPython 3.13 on aarch64 (the template's runtime and architecture)."""
    result = run(["make", "--no-print-directory", "build-DependenciesLayer", f"ARTIFACTS_DIR={tmp_path}"],
                 env=tool_environment(), timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    site = tmp_path / "python"
    # every dependency of the library at the version uv.lock has (pyproject.toml gives ranges), but those excluded
    installed = {p.name.removesuffix(".dist-info").lower() for p in site.glob("*.dist-info")}
    names = [name for name, _ in lock.dependency_names()]
    assert names and set(LAYER_EXCLUDE) <= set(names)
    for name in names:
        ((version, _),) = lock.locked()[name]
        assert (f"{re.sub(r'[-.]', '_', name)}-{version}" in installed) == (name not in LAYER_EXCLUDE), name
    native = [p.name for p in site.rglob("_pydantic_core*.so")]
    assert native and all("cpython-313-aarch64-linux-gnu" in name for name in native), native
    assert not list(site.rglob("*.cpython-311.pyc"))  # nothing compiled for the build machine's Python
    # Trimmed: only the service models the functions use, no scripts or installers.
    # The API reads its operator token from SSM or Secrets Manager, both functions keep large values in S3 and post
    # to WebSocket connections (apigatewaymanagementapi): their
    # models stay (a missing one is UnknownServiceError on the first request that needs it, on a deployed stack).
    models = sorted(p.name for p in (site / "botocore" / "data").iterdir() if p.is_dir())
    assert models == ["apigatewaymanagementapi", "dynamodb", "s3", "secretsmanager", "sqs", "ssm"], models
    assert not (site / "bin").exists() and not list(site.glob("pip*"))
    assert (site / "pydantic").is_dir() and not (site / "pydantic" / "v1").exists()  # FastAPI only probes it
    if deploy_python_available():  # bytecode for Lambda's Python, so no cold start compiles the layer
        assert list(site.glob("aiobotocore/__pycache__/session.cpython-313.pyc"))
