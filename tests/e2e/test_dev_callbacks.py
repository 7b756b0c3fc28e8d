"""The callback, tried as a new user would on a real `dormant dev` (examples.app:registry): an order starts a
payment whose webhook URL is the stack's own `/callbacks/{token}`; posting the provider's result there resumes the
waiting workflow, and `dormant callback` does the same from the command line."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.e2e.devprocess import DevProcess, environment

PAID = {"status": "paid", "amount_cents": 4200, "reference": "pay_1"}


def _webhook(dev: DevProcess, order: str) -> str:
    """The URL the example's stand-in provider logs (on the dev console) for an order."""
    deadline = time.monotonic() + 30
    while True:
        found = re.search(rf"order {order}: the provider will POST the outcome to (\S+)", dev.output())
        if found:
            return found.group(1)
        assert time.monotonic() < deadline, dev.output()[-2000:]
        time.sleep(0.2)


def _state(http: httpx.Client, order: str, status: str) -> dict[str, object]:
    deadline = time.monotonic() + 30
    while True:
        state = http.get(f"/actors/payment-checkout/{order}/state").json()
        if state.get("status") == status:
            return dict(state)
        assert time.monotonic() < deadline, state
        time.sleep(0.2)


def test_posting_to_the_callback_url_resumes_the_waiting_workflow(tmp_path: Path) -> None:
    dev = DevProcess(tmp_path / "data", "--poll-wait", "0", app="examples.app:registry").start()
    try:
        with httpx.Client(base_url=dev.url, timeout=30) as http:
            assert http.post("/actors/payment-checkout/order-1/queues/order",
                             json={"amount_cents": 4200}).status_code == 202
            url = _webhook(dev, "order-1")
            assert url.startswith(f"{dev.url}/callbacks/dcb_")  # cb.url: the stack's own URL
            _state(http, "order-1", "awaiting_payment")
            answer = httpx.post(url, json={"result": PAID}, timeout=30)  # what the provider does
            assert (answer.status_code, answer.json()["status"]) == (202, "accepted")
            state = _state(http, "order-1", "paid")
            assert state["reference"] == "pay_1"
            assert http.get(url.removeprefix(dev.url)).json()["status"] == "completed"

            assert http.post("/actors/payment-checkout/order-2/queues/order",
                             json={"amount_cents": 100}).status_code == 202
            token = _webhook(dev, "order-2").rsplit("/", 1)[1]
            _state(http, "order-2", "awaiting_payment")
            cli = [sys.executable, "-m", "dormant.cli", "callback"]
            failed = subprocess.run([*cli, "fail", "-", "--type", "CardDeclined", "--message", "no funds",
                                     "--url", dev.url], input=token + "\n", capture_output=True, text=True,
                                    timeout=60, env=environment())
            assert failed.returncode == 0, failed.stderr
            assert "callback payment: accepted" in failed.stdout and token not in failed.stdout
            assert _state(http, "order-2", "declined")["reason"] == "CardDeclined: no funds"
            again = subprocess.run([*cli, "complete", token, "--result", '{"status": "paid", "amount_cents": 100, '
                                    '"reference": "x"}', "--url", dev.url], capture_output=True, text=True,
                                   timeout=60, env=environment())
            assert again.returncode == 2 and "CallbackCompletedError" in again.stderr
            assert token not in again.stderr
    finally:
        dev.kill()
