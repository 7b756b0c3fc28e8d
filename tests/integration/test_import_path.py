"""The Lambda functions' import path holds nothing dev-only: with the dev stack, the CLI, the HTTP client, uvicorn,
httpx and moto made unimportable (as in the trimmed layer, which ships none of them), both handlers import and
answer a first invocation against the moto server, and none of those modules was even attempted. Nor were
aiobotocore and aiohttp: the functions' clients are botocore's in threads (dormant.aws.clients), since aiohttp
alone is about 150 ms of a cold start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import boto3

from dormant.dynamodb.table import table_definition
from tests.api.support import http_api_v2_event

ROOT = Path(__file__).resolve().parents[2]
DEV_ONLY = ("dormant.dev", "dormant.cli", "dormant.http.client", "examples.tour", "uvicorn", "httpx", "click",
            "websockets", "moto", "typer", "rich", "aiobotocore", "aiohttp")

SCRIPT = r"""
import importlib.abc, json, sys
DEV_ONLY, event = tuple(json.loads(sys.argv[1])), json.loads(sys.argv[2])
attempted = []

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == p or name.startswith(p + ".") for p in DEV_ONLY):
            attempted.append(name)
            raise ModuleNotFoundError(f"No module named {name!r} (dev-only)", name=name)
        return None

sys.meta_path.insert(0, Refuse())
from functions.worker.handler import handler as worker
from functions.api.handler import handler as api
answers = {"worker": worker({"Records": []}, None), "api": api(event, None)["statusCode"]}
ours = sorted(m for m in attempted if m.startswith(("dormant", "examples", "uvicorn", "moto", "typer", "rich",
                                                   "aiobotocore", "aiohttp")))
print(json.dumps({"answers": answers, "attempted": ours, "all_attempted": sorted(set(attempted)),
                  "loaded": sorted(m for m in sys.modules if any(m == p or m.startswith(p + ".") for p in DEV_ONLY))}))
"""


def test_the_functions_never_import_dev_only_modules(moto_server: str) -> None:
    table = f"import-path-{uuid.uuid4().hex[:8]}"
    boto3.client("dynamodb", endpoint_url=moto_server, region_name="us-east-1").create_table(**table_definition(table))
    event = http_api_v2_event("GET", "/actors/workflow-counter/nobody/state")
    env = {**os.environ, "DORMANT_APP": "examples.app:registry", "AWS_ENDPOINT_URL": moto_server,
           "DORMANT_AUTH_MODE": "none",  # the event carries no authorizer context
           "DORMANT_TABLE": table, "DORMANT_QUEUE_URL": f"{moto_server}/123456789012/w.fifo",
           "DORMANT_TIMER_QUEUE_URL": f"{moto_server}/123456789012/t",
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "lib")])}
    result = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(DEV_ONLY), json.dumps(event)], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["answers"] == {"worker": {"batchItemFailures": []}, "api": 404}  # both handlers work
    assert report["attempted"] == [], report  # our code never reached for a dev-only module
    assert report["loaded"] == []
    assert report["all_attempted"] == [], report["all_attempted"]
