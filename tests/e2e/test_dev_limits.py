"""`dormant dev --dynamodb local`, tried from outside as the DynamoDB-limits issue asks: DynamoDB on AWS's own
DynamoDB Local with the stack's default credentials (no AWS_* variables set), messages of 150 and 210 KB, a key
of 1.1 KB, state grown past 400 KB, a 1 MB step result (the last three offloaded to the stack's S3) and a commit of
6,000 entries each end processed, refused at once with nothing created, or failed with their error (listed by
`dormant actors list --status failed`) — never acknowledged and then stuck.
Its data outlives a restart; a SIGKILL of `dormant dev` leaves no JVM behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.e2e.devprocess import ROOT, STOP_BOUND, DevProcess, alive, children
from tests.e2e.test_dev_lifecycle import request, wait_gone

APP = "tests.limits_app:registry"


def bare_environment() -> dict[str, str]:
    """No AWS_* or DORMANT_* variable: `dormant dev` supplies its own credentials."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DORMANT_"))}
    return {**env, "PYTHONUNBUFFERED": "1"}


def jvm_pids(dev: DevProcess) -> list[int]:
    """The DynamoDB Local JVM: a child of its supervisor, which is a child of `dormant dev`."""
    found = []
    for supervisor in children(dev.pid):
        if b"dormant.dev.dynamodb_local" in Path(f"/proc/{supervisor}/cmdline").read_bytes():
            found += children(supervisor)
    return found


def until(dev: DevProcess, url: str, done: Any, timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        status, body = request(url)
        if status == 200 and done(body):
            return body
        assert time.monotonic() < deadline, (status, body, dev.output()[-3000:])
        time.sleep(0.1)


def cli(*args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "dormant.cli", *args], cwd=ROOT, env=bare_environment(),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_dev_on_dynamodb_local_ends_every_limit_case_cleanly_and_keeps_its_data(tmp_path: Path) -> None:
    dev = DevProcess(tmp_path / "data", "--dynamodb", "local", app=APP, env=bare_environment()).start()
    try:
        assert len(jvm_pids(dev)) == 1
        inbox = f"{dev.url}/actors/limits-inbox"
        # The stack has a bucket: a message past the inbox item's 200 KB goes to S3 and is processed like any other.
        assert request(f"{inbox}/m150/queues/put", "POST", {"data": "m" * 150_000})[0] == 202
        assert request(f"{inbox}/m210/queues/put", "POST", {"data": "m" * 210_000})[0] == 202
        status, body = request(f"{inbox}/{'k' * 1100}/queues/put", "POST", {"data": "x"})
        assert (status, body["error"]["code"]) == (400, "invalid_key") and "kkk" not in json.dumps(body)
        until(dev, f"{inbox}/m150/state", lambda state: state["sizes"] == [150_000])
        until(dev, f"{inbox}/m210/state", lambda state: state["sizes"] == [210_000])

        grower = f"{dev.url}/actors/limits-grower/g"
        for _ in range(5):
            assert request(f"{grower}/queues/grow", "POST", {"kb": 100})[0] == 202
        state = until(dev, f"{grower}/state", lambda s: len(s["notes"]) + len(s["errors"]) == 5, timeout=60)
        assert [len(note) for note in state["notes"]] == [100_000] * 5 and state["errors"] == []  # 500 KB of state
        assert request(f"{grower}/status")[1]["workflow"] == "sleeping"

        request(f"{dev.url}/actors/limits-result/r", "PUT")  # a 1 MB step result: offloaded, the workflow ends
        until(dev, f"{dev.url}/actors/limits-result/r/status", lambda s: s["workflow"] == "completed")

        # 6,000 sleeps in one commit: no value is large, the commit is; no step to blame, so the actor fails visibly.
        request(f"{dev.url}/actors/limits-sleeper/s", "PUT")
        status_body = until(dev, f"{dev.url}/actors/limits-sleeper/s/status", lambda s: s["workflow"] == "failed",
                            timeout=60)
        assert "ItemTooLargeError" in status_body["error"]
        listed = cli("actors", "list", "--status", "failed", "--url", dev.url, "--json")
        assert [actor["name"] for actor in json.loads(listed)] == ["limits-sleeper"]
        assert "wake-up failed" not in dev.output()  # no wake-up failed on a receive, nothing went to a DLQ
    finally:
        took = dev.stop()
    assert took < STOP_BOUND, f"stopping took {took:.2f} s"

    again = DevProcess(tmp_path / "data", "--dynamodb", "local", app=APP, env=bare_environment()).start()
    try:  # the data outlives the stack: DynamoDB Local keeps it in the data directory
        assert request(f"{again.url}/actors/limits-inbox/m150/state")[1]["sizes"] == [150_000]
        jvm = jvm_pids(again)
        again.process.send_signal(signal.SIGKILL)  # type: ignore[union-attr]
        again.process.wait(timeout=10)  # type: ignore[union-attr]
        for pid in jvm:
            wait_gone(pid, timeout=10)
        assert not any(alive(pid) for pid in jvm)
    finally:
        again.kill()
