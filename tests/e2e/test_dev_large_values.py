"""Values of any size on `dormant dev` (its embedded default: moto with S3), tried from outside as issue 19 asks: an
actor whose state grows to 3 MB in 100 KB steps, a 2 MB step result and a 500 KB message are processed, and the
state reads back whole over HTTP; the objects are in the stack's bucket and survive a restart; the history exports
with them embedded and replays offline."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.e2e.devprocess import ROOT, DevProcess, environment
from tests.e2e.test_dev_lifecycle import request
from tests.large_app import digest

APP = "tests.large_app:registry"


def until(dev: DevProcess, url: str, done: Any, timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        status, body = request(url)
        if status == 200 and done(body):
            return body
        assert time.monotonic() < deadline, (status, str(body)[:300], dev.output()[-3000:])
        time.sleep(0.2)


def test_dev_processes_megabytes_of_state_results_and_messages_and_reads_them_back(tmp_path: Path) -> None:
    dev = DevProcess(tmp_path / "data", app=APP, env=environment()).start()
    notebook = f"{dev.url}/actors/large-notebook/n"
    text = "m" * 500_000
    try:
        assert request(f"{notebook}/queues/echo", "POST", {"text": text})[0] == 202
        for index in range(30):
            assert request(f"{notebook}/queues/append", "POST", {"kb": 100, "fill": "abc"[index % 3]})[0] == 202
        started = time.monotonic()
        assert request(f"{notebook}/queues/result", "POST", {"size": 2_000_000})[0] == 202
        state = until(dev, f"{notebook}/state", lambda s: len(s["chunks"]) == 30 and s["results"])
        took = time.monotonic() - started
        assert state["digests"] == [digest(text)] and state["results"] == [2_000_000]
        assert [len(chunk) for chunk in state["chunks"]] == [100_000] * 30  # 3 MB of state, whole, over HTTP
        assert sum(len(chunk) for chunk in state["chunks"]) == 3_000_000
        assert took < 60, took
        status = request(f"{notebook}/status")[1]
        assert status["workflow"] == "sleeping" and status["error"] is None
        exported = tmp_path / "notebook.jsonl"
        subprocess.run([sys.executable, "-m", "dormant.cli", "history", "export", "large-notebook", "n", "--url",
                        dev.url, "--out", str(exported)], cwd=ROOT, env=environment(), check=True, timeout=120)
        lines = [json.loads(line) for line in exported.read_text().splitlines()]
        assert "__dormant_blob__" not in exported.read_text()  # the values themselves, embedded
        assert any("r" * 1000 in json.dumps(line) for line in lines)  # the 2 MB result is in the file
        replayed = subprocess.run([sys.executable, "-m", "dormant.cli", "replay", str(exported), "--app", APP],
                                  cwd=ROOT, env=environment(), capture_output=True, text=True, timeout=120)
        assert replayed.returncode == 0 and ": ok" in replayed.stdout, replayed.stdout + replayed.stderr
    finally:
        dev.stop()
    again = DevProcess(tmp_path / "data", app=APP, env=environment()).start()
    try:  # the objects are kept with the rest of the dev data
        state = request(f"{again.url}/actors/large-notebook/n/state")[1]
        assert sum(len(chunk) for chunk in state["chunks"]) == 3_000_000
    finally:
        again.stop()
