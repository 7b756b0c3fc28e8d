"""`dormant dev` lasts: it stops within 2 s (the tests allow STOP_BOUND, for a loaded machine), leaves no child
behind even when killed with SIGKILL, keeps its data across restarts (DynamoDB, SQS and its S3 bucket; `--fresh`
starts over), and prints one timestamped line per request and per wake-up."""

from __future__ import annotations

import json
import os
import re
import signal
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from dormant.dev.bucket import DEV_BUCKET
from tests.e2e.devprocess import STOP_BOUND, DevProcess, alive

APP = "tests.e2e.apps:registry"
STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}"


def request(url: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def count(dev: DevProcess, key: str, deltas: list[int], *, before: int = 0) -> dict[str, int]:
    """Send the deltas; the state once they are all processed (`before` were processed already)."""
    for delta in deltas:
        status, _ = request(f"{dev.url}/actors/workflow-counter/{key}/queues/counter", "POST", {"delta": delta})
        assert status == 202
    deadline = time.monotonic() + 120  # a deadline, generous for a loaded machine
    while True:
        status, state = request(f"{dev.url}/actors/workflow-counter/{key}/state")
        if status == 200 and state["processed"] >= before + len(deltas):
            return dict(state)
        assert time.monotonic() < deadline, (status, state, dev.output()[-3000:])
        time.sleep(0.05)


def wait_gone(pid: int, timeout: float) -> float:
    started = time.monotonic()
    while alive(pid):
        assert time.monotonic() - started < timeout, f"process {pid} outlived its parent by {timeout} s"
        time.sleep(0.02)
    return time.monotonic() - started


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_a_signal_stops_everything_within_two_seconds(tmp_path: Path, signum: int) -> None:
    dev = DevProcess(tmp_path / "data", app=APP).start()
    try:
        assert count(dev, "stop", [1, 2]) == {"value": 3, "processed": 2}
        moto = dev.moto_pid()
        took = dev.stop(signum)
        assert dev.process is not None and dev.process.returncode == 0, dev.output()
        assert took < STOP_BOUND, f"stopping took {took:.2f} s"
        assert not alive(moto), "the moto child outlived dormant dev"
    finally:
        dev.kill()


def s3(dev: DevProcess) -> Any:
    """A client of the stack's S3: the embedded moto server's endpoint, from the console's `AWS` line."""
    import boto3

    endpoint = re.search(r"^  AWS +(http://\S+)", dev.output().rpartition("dormant dev: serving")[2], re.M)
    assert endpoint, dev.output()
    return boto3.client("s3", endpoint_url=endpoint.group(1), region_name="us-east-1",
                        aws_access_key_id=dev.env["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=dev.env["AWS_SECRET_ACCESS_KEY"])


def test_kill_9_leaves_no_child_and_the_data_survives_until_fresh(tmp_path: Path) -> None:
    data = tmp_path / "data"
    dev = DevProcess(data, app=APP).start()
    large = os.urandom(3 * 1024 * 1024)
    try:
        assert count(dev, "kept", [5, 6]) == {"value": 11, "processed": 2}
        # the stack's bucket for large values exists, set up as the deployments set it up
        bucket = s3(dev)
        rules = bucket.get_bucket_lifecycle_configuration(Bucket=DEV_BUCKET)["Rules"]
        assert sorted(rule["ID"] for rule in rules) == ["abort-incomplete-multipart-uploads", "expire-ephemeral-values"]
        bucket.put_object(Bucket=DEV_BUCKET, Key="actors/0123/value", Body=large)
        moto = dev.moto_pid()
        dev.kill()  # SIGKILL: no handler runs in dormant dev
        wait_gone(moto, timeout=STOP_BOUND)
    finally:
        dev.kill()
    again = DevProcess(data, app=APP).start()
    try:
        assert request(f"{again.url}/actors/workflow-counter/kept/state") == (200, {"value": 11, "processed": 2})
        assert count(again, "kept", [1], before=2) == {"value": 12, "processed": 3}  # the restored actor keeps going
        assert s3(again).get_object(Bucket=DEV_BUCKET, Key="actors/0123/value")["Body"].read() == large
        assert again.stop(signal.SIGTERM) < STOP_BOUND
    finally:
        again.kill()
    fresh = DevProcess(data, "--fresh", app=APP).start()
    try:
        status, body = request(f"{fresh.url}/actors/workflow-counter/kept/state")
        assert status == 404 and body["error"]["code"] == "actor_not_found"
        assert s3(fresh).list_objects_v2(Bucket=DEV_BUCKET)["KeyCount"] == 0  # the bucket again, empty
    finally:
        fresh.kill()


def test_the_console_has_a_line_per_request_and_per_wake_up_and_errors_name_their_actor(tmp_path: Path) -> None:
    dev = DevProcess(tmp_path / "data", app=APP).start()
    try:
        count(dev, "lines", [2])
        assert request(f"{dev.url}/actors/broken/b-1/queues/poke", "POST", {"n": 1})[0] == 202
        deadline = time.monotonic() + 120  # a deadline, generous for a loaded machine
        while "broken['b-1'] failed" not in dev.output():
            assert time.monotonic() < deadline, dev.output()
            time.sleep(0.1)
    finally:
        dev.stop()
    out = dev.output()
    assert re.search(rf"^{STAMP} INFO  http  POST /actors/workflow-counter/lines/queues/counter -> 202 in [\d.]+ ms$",
                     out, re.M), out
    assert re.search(rf"^{STAMP} INFO  wake  workflow-counter\['lines'\] sleeping: 1 step, 1 commit, 1 message v\d+ "
                     r"in [\d.]+ ms", out, re.M), out
    assert re.search(rf"^{STAMP} ERROR wake  broken\['b-1'\] failed \(receive 1\): RuntimeError: the broken actor "
                     "always fails to wake", out, re.M), out
    assert "Traceback" not in out


def test_log_level_warning_keeps_only_problems(tmp_path: Path) -> None:
    dev = DevProcess(tmp_path / "data", "--log-level", "warning", app=APP).start()
    try:
        count(dev, "quiet", [1])
        request(f"{dev.url}/actors/broken/b-2/queues/poke", "POST", {"n": 1})
        deadline = time.monotonic() + 120  # a deadline, generous for a loaded machine
        while "broken['b-2'] failed" not in dev.output():
            assert time.monotonic() < deadline, dev.output()
            time.sleep(0.1)
    finally:
        dev.stop()
    out = dev.output()
    assert " INFO " not in out and "ERROR wake  broken['b-2']" in out
