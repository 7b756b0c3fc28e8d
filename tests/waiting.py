"""Waiting in tests: poll a condition until it holds or a deadline passes. Tests never sleep to synchronize: every
pause here is the interval of a poll that ends on the condition, and the deadline only bounds a failure."""

from __future__ import annotations

import asyncio
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def _message(what: str | Callable[[], str]) -> str:
    return what() if callable(what) else what


def until(check: Callable[[], T], *, timeout: float, what: str | Callable[[], str], interval: float = 0.1,
          retry_on: tuple[type[BaseException], ...] = ()) -> T:
    """`check()` until it returns something truthy (returned), at `interval`; AssertionError naming `what` once
    `timeout` seconds have passed. Exceptions in `retry_on` count as not yet."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = check()
        except retry_on:
            found = None  # type: ignore[assignment]
        if found:
            return found
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout:g} s: {_message(what)}")
        time.sleep(interval)


async def until_async(check: Callable[[], Awaitable[T]], *, timeout: float, what: str | Callable[[], str],
                      interval: float = 0.05) -> T:
    """`until` for a coroutine check, pausing without blocking the event loop."""
    deadline = time.monotonic() + timeout
    while True:
        found = await check()
        if found:
            return found
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout:g} s: {_message(what)}")
        await asyncio.sleep(interval)


def dev_answers(url: str, process: subprocess.Popen[str] | subprocess.Popen[bytes], output: Callable[[], str], *,
                timeout: float = 60) -> None:
    """Wait until a started `dormant dev` answers `url`/openapi.json; AssertionError with its console output if it
    exits first or does not answer within `timeout`."""

    def answers() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"dormant dev exited early ({process.returncode}):\n{output()}")
        urllib.request.urlopen(f"{url}/openapi.json", timeout=2).close()
        return True

    until(answers, timeout=timeout, what=lambda: f"dormant dev did not start:\n{output()}",
          retry_on=(urllib.error.URLError, OSError))
