"""`dormant dev` as a user runs it: a real subprocess, driven over HTTP, stopped with Ctrl-C."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dormant.dev.bucket import DEV_BUCKET
from dormant.dev.stack import free_port
from dormant.http.client import HttpClient
from tests.servers import MotoServer, fake_aws_environment
from tests.waiting import dev_answers, until_async

ROOT = Path(__file__).resolve().parents[2]


def _environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DORMANT_"))}
    return {**env, **fake_aws_environment(), "PYTHONUNBUFFERED": "1", **extra}


def _start(*args: str, env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    data = tempfile.mkdtemp(prefix="dormant-e2e-")  # not the repository's .dormant/dev
    process = subprocess.Popen([sys.executable, "-m", "dormant.cli", "dev", "--port", str(port), "--data-dir", data,
                                *args],
                               cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    dev_answers(url, process, lambda: process.stdout.read() if process.stdout and process.poll() is not None else "")
    return process, url


def _cli(*args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "dormant.cli", *args], cwd=ROOT, env=_environment(),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _interrupt(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=30)
    assert process.returncode == 0, output
    return output


@pytest.fixture
def moto() -> Iterator[MotoServer]:
    server = MotoServer()
    server.start()
    yield server
    server.stop()


async def _count_to(url: str, total: int) -> None:
    async with HttpClient(url) as client:
        handle = client.get_or_create("workflow-counter", ["e2e"])
        for delta in (2, 3, total - 5):
            await handle.send("counter", {"delta": delta})
        async def processed() -> dict[str, int] | None:
            state: dict[str, int] = await handle.state()
            return state if state["processed"] >= 3 else None

        state = await until_async(processed, timeout=20, what="the dev stack processed 3 messages", interval=0.1)
        assert state == {"value": total, "processed": 3}
        history = await handle.history()  # dev mode: the inspector needs no token
        assert any(entry.location.endswith("apply-counter-command") for entry in history)


def _answers_on_one_connection_after_idling(url: str, idle: float) -> bool:
    """Two GETs on one kept-alive connection, `idle` seconds apart: whether the second is answered."""
    host, port = url.removeprefix("http://").split(":")
    request = f"GET /openapi.json HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        for attempt in range(2):
            if attempt:
                time.sleep(idle)
            try:
                connection.sendall(request)
                head = connection.recv(65536)
            except OSError:
                return False
            if not head.startswith(b"HTTP/1.1 200"):
                return False
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n\r\n")[0].split(b"\r\n")
                              if line.lower().startswith(b"content-length")))
            body = head.split(b"\r\n\r\n", 1)[1]
            while len(body) < length:
                body += connection.recv(65536)
    return True


@pytest.mark.parametrize("dynamodb", ["moto", "local"])
async def test_dev_runs_the_whole_stack_and_stops_on_ctrl_c(tmp_path: Path, dynamodb: str) -> None:
    """The embedded default, and DynamoDB on AWS's DynamoDB Local (`--dynamodb local`)."""
    process, url = _start("--app", "examples.counter:registry", "--dynamodb", dynamodb, env=_environment())
    try:
        await _count_to(url, 42)
        # An idle kept-alive connection outlives a client pool's 5 s (uvicorn's default would close it then, and
        # a client reusing it at that moment sees "disconnected without a response").
        assert _answers_on_one_connection_after_idling(url, idle=6.0)
        # Production history, replayed offline against the code before a deploy:
        exported = tmp_path / "counter.jsonl"
        _cli("history", "export", "workflow-counter", "e2e", "--url", url, "--out", str(exported))
        replayed = _cli("replay", str(exported), "--app", "examples.counter:registry")
        assert "workflow-counter e2e: ok" in replayed
    finally:
        output = _interrupt(process)
    assert "API        " + url in output and "dormant dev: stopping" in output
    assert "127.0.0.1" in output.split("AWS")[1]  # the embedded moto server
    assert ("DynamoDB   http://127.0.0.1:" in output) == (dynamodb == "local")


async def test_dev_uses_another_endpoint_when_given_one(moto: MotoServer) -> None:
    process, url = _start(env=_environment(DORMANT_APP="examples.counter:registry", AWS_ENDPOINT_URL=moto.endpoint))
    try:
        await _count_to(url, 10)
    finally:
        output = _interrupt(process)
    assert f"AWS        {moto.endpoint}" in output
    # The table lives on that endpoint: it outlives the stack.
    import boto3

    creds = fake_aws_environment()
    dynamodb = boto3.client("dynamodb", endpoint_url=moto.endpoint, region_name="us-east-1",
                            aws_access_key_id=creds["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=creds["AWS_SECRET_ACCESS_KEY"])
    tables = dynamodb.list_tables()["TableNames"]
    assert "dormant" in tables
    # ... and so does the bucket of large values, created there with its lifecycle rules
    s3 = boto3.client("s3", endpoint_url=moto.endpoint, region_name="us-east-1",
                      aws_access_key_id=creds["AWS_ACCESS_KEY_ID"],
                      aws_secret_access_key=creds["AWS_SECRET_ACCESS_KEY"])
    rules = s3.get_bucket_lifecycle_configuration(Bucket=DEV_BUCKET)["Rules"]
    assert {rule["ID"]: rule["Filter"]["Prefix"] for rule in rules} == {
        "expire-ephemeral-values": "ephemeral/", "abort-incomplete-multipart-uploads": ""}
    blocked = s3.get_public_access_block(Bucket=DEV_BUCKET)["PublicAccessBlockConfiguration"]
    assert set(blocked.values()) == {True} and len(blocked) == 4


def test_dev_without_an_app_says_what_to_do() -> None:
    result = subprocess.run([sys.executable, "-m", "dormant.cli", "dev"], cwd=ROOT, env=_environment(),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "--app module:attribute or DORMANT_APP" in result.stderr


def test_make_demo_tour_runs_end_to_end() -> None:
    result = subprocess.run([sys.executable, "-m", "examples.tour"], cwd=ROOT, env=_environment(),
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "=> state: value=42 processed=3" in out
    assert "=> completed: {'doubled': 42}" in out
    assert "=> fulfilled" in out
    assert "fired after" in out and "['stand up']" in out
    assert "released ['reserve-big-2']" in out and "(compensated)" in out
    assert "dormant dev stopped (exit code 0)" in out


async def test_the_stack_hands_its_bucket_to_the_worker_and_the_api(moto_server: str) -> None:
    """Without DORMANT_BUCKET, the stack's bucket is `dormant-dev-values`, created with its rules where missing, and
    the settings the worker and the API run with name it."""
    import uuid

    import boto3

    from dormant.dev.stack import run_dev_stack
    from dormant.settings import Settings
    from examples.counter import registry

    suffix = uuid.uuid4().hex[:8]
    settings = Settings(table=f"bucket-{suffix}", queue_name=f"bucket-{suffix}.fifo",
                        timer_queue_name=f"bucket-timers-{suffix}")
    assert settings.bucket is None
    async with run_dev_stack(registry, port=free_port(), endpoint_url=moto_server, settings=settings) as stack:
        assert stack.settings.bucket == DEV_BUCKET
        s3 = boto3.client("s3", endpoint_url=moto_server, region_name="us-east-1")
        assert len(s3.get_bucket_lifecycle_configuration(Bucket=DEV_BUCKET)["Rules"]) == 2
