"""The operator's tools as an operator uses them: the installed `dormant` command against a real `dormant dev`,
run from the directory of the app (docs/operations: the walkthrough's shop), which it finds there."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from dormant.cli.main import app
from dormant.dev.stack import free_port
from tests.servers import MotoServer, fake_aws_environment
from tests.waiting import dev_answers

ROOT = Path(__file__).resolve().parents[2]
DORMANT = str(Path(sys.executable).with_name("dormant"))  # the console script, as a user runs it
RUNNER = CliRunner()


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DORMANT_"))}
    return {**env, **fake_aws_environment(), "PYTHONUNBUFFERED": "1", "NO_COLOR": "1", "COLUMNS": "200", **extra}


@dataclass
class Dev:
    process: subprocess.Popen[str]
    url: str
    cwd: Path

    def cli(self, *args: str, code: int = 0) -> str:
        """A `dormant` command, run in this process (as the console script would, from the app's directory)."""
        result = RUNNER.invoke(app, [*args], env={"DORMANT_URL": self.url, "NO_COLOR": "1", "COLUMNS": "200"})
        assert result.exit_code == code, f"dormant {' '.join(args)} -> {result.exit_code}:\n{result.output}"
        return result.output

    def json(self, *args: str, code: int = 0) -> Any:
        result = RUNNER.invoke(app, [*args, "--json"], env={"DORMANT_URL": self.url})
        assert result.exit_code == code, result.output
        return json.loads(result.stdout)

    def wait_for(self, actor: str, key: str, status: str, timeout: float = 120) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:  # polled over HTTP (a CLI process per poll would be slow)
            with urllib.request.urlopen(f"{self.url}/actors/{actor}/{key}/status", timeout=10) as response:
                found: dict[str, Any] = json.loads(response.read())
            if found["workflow"] == status:
                return found
            assert time.monotonic() < deadline, found
            time.sleep(0.3)

    def stop(self) -> str:
        self.process.send_signal(signal.SIGINT)
        output, _ = self.process.communicate(timeout=30)
        assert self.process.returncode == 0, output
        return output


def start_dev(cwd: Path, app: str, **env: str) -> Dev:
    port = free_port()
    process = subprocess.Popen([DORMANT, "dev", "--app", app, "--port", str(port)], cwd=cwd,
                               env=environment(**env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    dev_answers(url, process, lambda: process.stdout.read() if process.stdout and process.poll() is not None else "")
    return Dev(process, url, cwd)


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    """A directory with the walkthrough's app in it (not on sys.path: `dormant` must find it there)."""
    for source in (ROOT / "docs" / "operations").glob("*.py"):
        shutil.copy(source, tmp_path / source.name)
    return tmp_path


@pytest.fixture
def moto() -> Iterator[MotoServer]:
    server = MotoServer()
    server.start()
    yield server
    server.stop()


def test_the_operator_walkthrough(shop: Path, moto: MotoServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/operations.md, step by step: list, status, history, a failed actor fixed and resumed, replay --all
    catching a divergence before a deploy, terminate, delete; then a diverging deploy over live actors and the
    fix, after which the actor resumes on `dormant resume` (and not before)."""
    version = subprocess.run([DORMANT, "--version"], capture_output=True, text=True, timeout=60)
    assert version.stdout.startswith("dormant ")
    monkeypatch.chdir(shop)  # the commands run in-process below find the app here too
    on_moto = {"AWS_ENDPOINT_URL": moto.endpoint}  # the data outlives each stack: deploys follow one another
    dev = start_dev(shop, "shop:registry", **on_moto)  # `shop` is found in the current directory
    try:
        for order in ("o-1", "o-2", "o-3"):
            assert "queued" in dev.cli("send", "order", order, "ship", '{"carrier": "ups"}')
        for order in ("o-1", "o-2", "o-3"):
            dev.wait_for("order", order, "completed")
        (shop / "payments.down").write_text("down")  # the payment provider goes down
        dev.cli("send", "order", "o-4", "ship", '{"carrier": "dhl"}')
        failed = dev.wait_for("order", "o-4", "failed")
        assert "payment provider is unavailable" in failed["error"]
        listing = dev.cli("actors", "list")
        assert "o-4" in listing and "failed" in listing and "completed" in listing
        assert [row["key"] for row in dev.json("actors", "list", "--status", "failed")] == [["o-4"]]
        words = dev.cli("status", "order", "o-4")
        assert "failed" in words and "ConnectionError" in words and "fix the cause, then resume it" in words
        assert "operator actions that apply: resume," in words
        timeline = dev.cli("history", "show", "order", "o-4")
        assert "step reserve" in timeline and "step charge" in timeline and "(3 attempts)" in timeline
        assert "ConnectionError: the payment provider is unavailable" in timeline

        (shop / "payments.down").unlink()  # fixed
        resumed = dev.cli("resume", "order", "o-4")
        assert "retrying" in resumed and "charge" in resumed
        done = dev.wait_for("order", "o-4", "completed")
        assert done["output"] == {"charge": "ch_o-4", "carrier": "dhl"}
        assert dev.json("call", "order", "o-4", "get")["result"]["charge"] == "ch_o-4"

        # o-5 is live (it waits to be shipped) when the next release renames a recorded step:
        dev.json("call", "order", "o-5", "get")  # creates it
        waiting = dev.wait_for("order", "o-5", "sleeping")
        assert waiting["waiting_for"]["queues"] == ["ship"]
        assert dev.json("state", "order", "o-5")["item"] == "book"
        assert "waits for a message on queue ship" in dev.cli("status", "order", "o-5")
        report = dev.cli("replay", "--all", "--app", "shop_v2:registry", code=1)
        assert "reserve-stock" in report and "o-5" in report and "do not deploy" in report
        assert "every live actor replays cleanly" in dev.cli("replay", "--all", "--app", "shop:registry")
        summary = dev.json("replay", "--all", "--app", "shop_v2:registry", code=1)
        assert summary["ok"] is False and summary["types"]["order"]["diverged"] == 1
        everything = dev.json("replay", "--all", "--app", "shop_v2:registry", "--include-finished", code=1)
        assert everything["types"]["order"]["diverged"] == 5

        assert "terminated" in dev.cli("terminate", "order", "o-5", "--reason", "customer cancelled")
        assert "already" in dev.cli("terminate", "order", "o-5")
        assert "customer cancelled" in dev.cli("status", "order", "o-5")
        assert "ActorFinishedError" in dev.cli("send", "order", "o-5", "ship", '{"carrier": "ups"}', code=2)
        assert dev.json("delete", "order", "o-5", "--yes")["outcome"] == "deleted"
        assert dev.json("delete", "order", "o-5", "--yes")["outcome"] == "not_found"
        assert "o-5" not in dev.cli("actors", "list")
        assert "does not exist" in dev.cli("status", "order", "o-5", code=2)
        assert "not deleted" in dev.cli("delete", "order", "o-2", code=2)  # no --yes, nobody to confirm
        assert dev.json("status", "order", "o-2")["workflow"] == "completed"

        (shop / "payments.down").write_text("down")
        dev.cli("send", "order", "o-6", "ship", '{"carrier": "ups"}')
        dev.wait_for("order", "o-6", "failed")
    finally:
        output = dev.stop()
    assert f"dashboard  {dev.url}/ui" in output

    # The careless release is deployed anyway: o-6, retried, diverges (its history has "reserve").
    broken = start_dev(shop, "shop_v2:registry", **on_moto)
    try:
        (shop / "payments.down").unlink()
        assert "retrying" in broken.cli("resume", "order", "o-6")
        diverged = broken.wait_for("order", "o-6", "diverged")
        assert "reserve-stock" in diverged["error"]
        assert "still diverges" in broken.cli("resume", "order", "o-6", code=2)
        assert "refused" in broken.cli("resume", "--all", "--status", "diverged", "order", code=1)
    finally:
        broken.stop()
    fixed = start_dev(shop, "shop:registry", **on_moto)  # the fix: a deploy alone resumes nothing
    try:
        assert fixed.json("status", "order", "o-6")["workflow"] == "diverged"
        fixed.json("call", "order", "o-6", "get")  # an action does not wake it either
        assert fixed.json("status", "order", "o-6")["workflow"] == "diverged"
        resumed = fixed.cli("resume", "order", "o-6")
        assert "resumed" in resumed and "1 waiting message(s)" in resumed
        done = fixed.wait_for("order", "o-6", "completed")
        assert done["output"] == {"charge": "ch_o-6", "carrier": "ups"}
    finally:
        fixed.stop()
