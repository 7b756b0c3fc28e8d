"""Refund approval: the manager's link shows a page that decides nothing; its buttons do; no decision expires."""

from __future__ import annotations

import httpx
import pytest

from dormant.http.app import create_app
from dormant.settings import Settings
from dormant.testing import TestEnv
from examples import refund_approval
from examples.refund_approval import DECISION_TIMEOUT, Services, registry

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@pytest.fixture
def mails(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, str]]:
    sent: list[tuple[str, str, str]] = []

    async def send_mail(to: str, subject: str, link: str) -> None:
        sent.append((to, subject, link))

    monkeypatch.setattr(refund_approval, "services", Services(send_mail=send_mail))
    return sent


async def _asked(env: TestEnv, key: str, mails: list[tuple[str, str, str]]) -> str:
    await env.client.get_or_create("refund-request", [key]).send("request", {"order": "order-7", "amount_cents": 42})
    await env.run_until_idle()
    to, subject, link = mails[-1]
    assert (to, subject) == ("manager@example.com", "Refund 42 cents for order-7?")
    assert link.startswith("https://dormant.test/callbacks/dcb_") and link.endswith("/approve")
    return link.removeprefix("https://dormant.test")


@pytest.mark.parametrize(("decision", "status"), [("approve", "refunded"), ("reject", "rejected")])
async def test_the_page_decides_nothing_and_its_button_does(mails: list[tuple[str, str, str]], decision: str,
                                                            status: str) -> None:
    async with TestEnv(registry) as env:
        path = await _asked(env, "r-1", mails)
        app = create_app(registry, Settings(auth_mode="iam"), service=env.service)
        handle = env.client.get_or_create("refund-request", ["r-1"])
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as browser:
            page = await browser.get(path)
            assert page.status_code == 200 and "approve it?" in page.text
            await env.run_until_idle()
            assert (await handle.state()).status == "awaiting_approval"
            answer = await browser.post(path, content=f"decision={decision}".encode(), headers=FORM)
            assert answer.status_code == 200
        await env.run_until_idle()
        assert (await handle.state()).status == status


async def test_no_decision_in_three_days_expires_the_request(mails: list[tuple[str, str, str]]) -> None:
    async with TestEnv(registry) as env:
        await _asked(env, "r-2", mails)
        await env.advance(DECISION_TIMEOUT)
        assert (await env.client.get_or_create("refund-request", ["r-2"]).state()).status == "expired"
