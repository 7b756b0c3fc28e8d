"""The Python blocks of README.md that a reader runs as they are (docs/testing.md's run in
tests/unit/test_docs_testing.py)."""

from __future__ import annotations

import pytest

from dormant import HmacSignature
from dormant.actor import ActorDefinition
from tests.docs.blocks import doc_blocks, run_python


async def test_the_readme_counter_runs_and_its_test_passes() -> None:
    """The counter actor and the TestEnv lines after it (their own `assert` is the check)."""
    blocks = doc_blocks("readme-counter")
    assert [block.lang for block in blocks] == ["python", "python"]
    scope = await run_python(blocks)
    assert "registry" in scope and "env" in scope  # both blocks ran to their end


async def test_the_webhook_signature_block_declares_a_checked_callback(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/http-api.md's HmacSignature block: the callback it declares accepts a body signed with the secret of
    the variable it names, and refuses the same body once that secret changes."""
    scope = await run_python(doc_blocks("http-api-hmac"))
    shop = scope["shop"]
    assert isinstance(shop, ActorDefinition)
    verify = shop.callback_spec("payment").verify
    assert isinstance(verify, HmacSignature)
    monkeypatch.setenv("PAYMENT_WEBHOOK_SECRET", "s3cret")
    body = b'{"id": "evt_1", "amount": 4200}'
    signed = {"X-Hub-Signature-256": verify.sign(body)}
    assert verify(signed, body) is True
    monkeypatch.setenv("PAYMENT_WEBHOOK_SECRET", "another")
    assert verify(signed, body) is False
