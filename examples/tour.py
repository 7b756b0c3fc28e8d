"""`make demo`: starts `dormant dev` (embedded moto server, table and queues, HTTP API, polling worker)
and runs a scripted tour over HTTP — counter, request/response, approval gate, a timer of a few seconds,
a saga that compensates — printing each step and result, then stops the stack.

Its actors are examples/app.py's registry (the default `DORMANT_APP` of template.yaml and infra/).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from typing import Any

from dormant.dev.stack import free_port
from dormant.http.client import HttpActorHandle, HttpClient
from examples.app import registry

__all__ = ["main", "registry"]


class Narrator:
    """Prints the history entries each actor recorded since the last look."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}

    async def show(self, handle: HttpActorHandle) -> None:
        entries = await handle.history()
        label = f"{handle.ref.name}{list(handle.ref.key)}"
        for entry in entries[self._seen.get(label, 0):]:
            print(f"    {label:<28} {_describe(entry.model_dump(mode='json'))}")
        self._seen[label] = len(entries)


def _describe(item: dict[str, Any]) -> str:
    kind, location, status = item["kind"], item["location"], item.get("status", "pending")
    if kind == "step":
        if status == "completed":
            compensated = "  (compensated)" if item.get("rollback_done") else ""
            return f"step   {location} -> {item.get('output')!r}{compensated}"
        error = item.get("error") or {}
        return f"step   {location} {status}: {error.get('type')}: {error.get('message')}"
    if kind == "message":
        bodies = [m["body"] for m in item.get("messages", [])]
        return f"queue  {location} received {bodies}" if bodies else f"queue  {location} (waiting)"
    if kind == "loop":
        return f"loop   {location} (iteration {item.get('iteration', 0)})"
    return f"{kind:<6} {location} {status}"


async def _until(predicate: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not await predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the demo waited too long for the worker")
        await asyncio.sleep(0.2)


async def tour(api_url: str) -> None:
    narrator = Narrator()
    async with HttpClient(api_url, registry=registry) as client:
        print("\n1. Counter: a durable queue loop")
        handle = client.get_or_create("workflow-counter", ["demo"])
        for delta in (1, 2, 39):
            await handle.send("counter", {"delta": delta})
        await _until(lambda: _processed(handle, 3))
        await narrator.show(handle)
        print(f"  => state: {await handle.call('get_state')}")

        print("\n2. Request/response: send(wait=True) returns the workflow's answer")
        handle = client.get_or_create("request-response", ["demo"])
        result = await handle.send("requests", {"value": 21}, wait=True, timeout=20)
        await narrator.show(handle)
        print(f"  => {result.status}: {result.response}")

        print("\n3. Human approval gate: the workflow waits for a decision")
        gate = client.get_or_create("approval-gate", ["order-7"])
        await gate.status()  # the first request creates the actor and starts its workflow
        await _until(lambda: _waiting(gate))
        await narrator.show(gate)
        print(f"  .. waiting for {(await gate.status()).waiting_for.queues}; approving")
        await gate.send("approval", {"approved": True})
        await _until(lambda: _finished(gate))
        await narrator.show(gate)
        print(f"  => {(await gate.call('get_state')).status}")

        print("\n4. Timer: a reminder due in 3 seconds (a delayed SQS message wakes the actor)")
        reminder = client.get_or_create("reminder", ["demo"])
        sent = time.time()
        await reminder.send("reminders", {"text": "stand up", "at": sent + 3})
        await _until(lambda: _fired(reminder), timeout=30)
        await narrator.show(reminder)
        print(f"  => fired after {time.time() - sent:.1f} s: {(await reminder.call('get_state')).fired}")

        print("\n5. Saga: a declined charge compensates the reservation")
        saga = client.get_or_create("checkout-saga", ["demo"])
        await saga.send("orders", {"order_id": "ok-1", "amount": 40})
        await saga.send("orders", {"order_id": "big-2", "amount": 5_000})
        await _until(lambda: _finished(saga))
        await narrator.show(saga)
        status = await saga.status()
        inventory = await client.get_or_create("inventory", ["main"]).call("get_state")
        print(f"  => workflow {status.workflow.value}: {status.error}")
        print(f"  => inventory reservations {inventory.reservations}, released {inventory.released}")


async def _processed(handle: HttpActorHandle, count: int) -> bool:
    return bool((await handle.call("get_state")).processed >= count)


async def _waiting(handle: HttpActorHandle) -> bool:
    return bool((await handle.status()).waiting_for.queues)


async def _finished(handle: HttpActorHandle) -> bool:
    return (await handle.status()).workflow.value in ("completed", "failed")


async def _fired(handle: HttpActorHandle) -> bool:
    return bool((await handle.call("get_state")).fired)


def main() -> int:
    port = free_port()
    api_url = f"http://127.0.0.1:{port}"
    print(f"starting: dormant dev --app examples.tour:registry --port {port}")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for name in ("AWS_ENDPOINT_URL", "DORMANT_ENDPOINT_URL"):
        env.pop(name, None)  # the demo always runs on its own embedded moto server
    # The tour starts from empty data of its own (a user's `dormant dev` keeps its data in .dormant/dev).
    data_dir = tempfile.mkdtemp(prefix="dormant-tour-")
    stack = subprocess.Popen([sys.executable, "-m", "dormant.cli", "dev", "--app", "examples.tour:registry",
                              "--port", str(port), "--data-dir", data_dir], env=env)
    try:
        deadline = time.monotonic() + 60
        while True:
            if stack.poll() is not None:
                print("dormant dev exited before it was ready", file=sys.stderr)
                return 1
            try:
                urllib.request.urlopen(f"{api_url}/openapi.json", timeout=1).close()
                break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    print("dormant dev did not start within 60 s", file=sys.stderr)
                    return 1
                time.sleep(0.2)
        asyncio.run(tour(api_url))
    finally:
        code = _stop(stack)
        shutil.rmtree(data_dir, ignore_errors=True)
    return 0 if code == 0 else 1


def _stop(stack: subprocess.Popen[bytes]) -> int:
    """Ctrl-C the stack, as a user would; its exit code says whether it stopped cleanly."""
    if stack.poll() is None:
        stack.send_signal(signal.SIGINT)
        try:
            stack.wait(timeout=30)
        except subprocess.TimeoutExpired:
            stack.kill()
            return -1
    print(f"\ndormant dev stopped (exit code {stack.returncode})")
    return stack.returncode

if __name__ == "__main__":
    sys.exit(main())
