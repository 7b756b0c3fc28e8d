"""Async RPC over queues: the caller waits for its reply durably; a timed-out request is sent again, a late
reply is accepted, a reply to a request given up on is dropped; clients get completions by message id."""

from __future__ import annotations

import pytest

from dormant import NonRetryableError
from dormant.testing import TestEnv
from examples import async_rpc
from examples.async_rpc import Services, registry


class FlakyResponder:
    """The responder's work: fails its first `failures` attempts (retried with backoff), or always."""

    def __init__(self, failures: int = 0, *, forever: bool = False) -> None:
        self.failures = failures
        self.forever = forever
        self.attempts = 0

    async def double(self, value: int) -> int:
        self.attempts += 1
        if self.forever:
            raise NonRetryableError("the responder cannot compute anything")
        if self.attempts <= self.failures:
            raise RuntimeError("busy")
        return value * 2


@pytest.fixture
def short_timeout(monkeypatch: pytest.MonkeyPatch) -> float:
    monkeypatch.setattr(async_rpc, "RESPONSE_TIMEOUT", 1.0)
    return 1.0


def install(monkeypatch: pytest.MonkeyPatch, fake: FlakyResponder) -> None:
    monkeypatch.setattr(async_rpc, "services", Services(double=fake.double))


async def test_the_caller_waits_for_its_reply_durably(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, FlakyResponder())
    async with TestEnv(registry) as env:
        caller = env.client.get_or_create("caller", ["main"])
        await caller.send("jobs", {"value": 21})
        await caller.send("jobs", {"value": 4})
        await env.run_until_idle()

        assert (await caller.call("get_state")).answers == [42, 8]
        responder = env.client.get_or_create("responder", ["main"])
        assert (await responder.get_state()).handled == 2
        sends = [e for e in await caller.history() if e.location.endswith("/send-request-1")]
        assert sends and all(e.attempts == 1 for e in sends)
        # Waiting for the next job: no reply wait is pending, nothing sits in any inbox.
        assert env.store.inbox_ids(caller.ref) == [] and env.store.inbox_ids(responder.ref) == []


async def test_a_timed_out_request_is_sent_again_and_a_late_reply_is_accepted(
        monkeypatch: pytest.MonkeyPatch, short_timeout: float) -> None:
    fake = FlakyResponder(failures=3)  # answers after its retries: 0.2 + 0.4 + 0.8 s, past the 1 s timeout
    install(monkeypatch, fake)
    async with TestEnv(registry) as env:
        caller = env.client.get_or_create("caller", ["main"])
        await caller.send("jobs", {"value": 5})
        await env.run_until_idle()
        status = await caller.status()
        assert status.workflow == "sleeping" and status.waiting_for.queues == ["replies"]
        assert status.waiting_for.deadline == pytest.approx(env.now() + short_timeout)

        await env.advance(short_timeout)  # the first attempt times out: the request is sent again
        assert [e.location.rsplit("/", 1)[-1] for e in await caller.history()
                if "send-request" in e.location] == ["send-request-1", "send-request-2"]
        await env.advance(5)
        state = await caller.state()
        assert (state.answers, state.timed_out) == ([10], [])  # the late reply to the first request
        responder = env.client.get_or_create("responder", ["main"])
        assert (await responder.get_state()).handled == 2  # both requests were answered

        await caller.send("jobs", {"value": 7})  # the reply to the second request is dropped first
        await env.advance(5)
        state = await caller.state()
        assert (state.answers, state.timed_out) == ([10, 14], [])


async def test_a_request_never_answered_is_given_up(monkeypatch: pytest.MonkeyPatch, short_timeout: float) -> None:
    install(monkeypatch, FlakyResponder(forever=True))
    async with TestEnv(registry) as env:
        caller = env.client.get_or_create("caller", ["main"])
        await caller.send("jobs", {"value": 3})
        await env.advance(10 * short_timeout)

        state = await caller.state()
        assert (state.answers, state.timed_out) == ([], [3])
        assert (await env.client.get_or_create("responder", ["main"]).status()).workflow == "failed"
        assert (await caller.status()).waiting_for.queues == ["jobs"]  # ready for the next job


async def test_client_send_wait_gets_the_completion_once_per_message_id(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, FlakyResponder())
    async with TestEnv(registry) as env:
        responder = env.client.get_or_create("responder", ["main"])
        first = await responder.send("requests", {"value": 5}, wait=True, timeout=5, message_id="req-1")
        again = await responder.send("requests", {"value": 5}, wait=True, timeout=5, message_id="req-1")

        assert first.status == "completed" and first.response == {"doubled": 10}
        assert again.status == "completed" and again.response == {"doubled": 10}
        assert (await responder.get_state()).handled == 1  # the duplicate was not handled again
