"""What a callback declares for outside systems: `HmacSignature` (GitHub's published test vector, base64 as Shopify
writes it, constant-time refusal of anything else), and the declaration rules of `callback(...)`."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from dormant import Approval, HmacSignature, callback
from dormant.core.signatures import SignatureSecretError
from dormant.workflow.errors import WorkflowDefinitionError

# docs.github.com, "Validating webhook deliveries": this secret and payload give this signature
GITHUB_SECRET = "It's a Secret to Everybody"
GITHUB_BODY = b"Hello, World!"
GITHUB_SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"


def test_github_s_published_vector_verifies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GH_SECRET", GITHUB_SECRET)
    check = HmacSignature(secret_env="GH_SECRET")
    assert check.sign(GITHUB_BODY) == GITHUB_SIGNATURE
    assert check({"X-Hub-Signature-256": GITHUB_SIGNATURE}, GITHUB_BODY)
    assert not check({"X-Hub-Signature-256": GITHUB_SIGNATURE}, GITHUB_BODY + b"\n")
    assert not check({"X-Hub-Signature-256": GITHUB_SIGNATURE.upper()}, GITHUB_BODY)  # the prefix is exact
    assert not check({"X-Hub-Signature-256": GITHUB_SIGNATURE[:-2]}, GITHUB_BODY)
    assert not check({}, GITHUB_BODY)
    monkeypatch.setenv("GH_SECRET", GITHUB_SECRET + "!")  # read per request: a rotated secret applies at once
    assert not check({"X-Hub-Signature-256": GITHUB_SIGNATURE}, GITHUB_BODY)


def test_a_base64_header_without_prefix_and_a_secret_function() -> None:
    check = HmacSignature(secret=lambda: b"shpss_1", header="X-Shopify-Hmac-Sha256", prefix="", encoding="base64")
    body = b'{"id": 1}'
    expected = base64.b64encode(hmac.new(b"shpss_1", body, hashlib.sha256).digest()).decode()
    assert check.sign(body) == expected
    assert check({"X-Shopify-Hmac-Sha256": expected}, body)
    assert not check({"X-Shopify-Hmac-Sha256": expected.replace("=", "") + "!"}, body)
    assert not check({"X-Shopify-Hmac-Sha256": expected}, b'{"id": 2}')


def test_a_secret_that_is_not_set_is_an_error_of_the_deployment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOT_SET_SECRET", raising=False)
    check = HmacSignature(secret_env="NOT_SET_SECRET")
    with pytest.raises(SignatureSecretError, match="NOT_SET_SECRET"):
        check({"X-Hub-Signature-256": GITHUB_SIGNATURE}, GITHUB_BODY)


@pytest.mark.parametrize("arguments", [{}, {"secret_env": "A", "secret": lambda: "x"},
                                       {"secret_env": "A", "header": ""}, {"secret_env": "A", "encoding": "base32"}])
def test_a_signature_check_needs_one_secret_a_header_and_a_known_encoding(arguments: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="HmacSignature"):
        HmacSignature(**arguments)  # type: ignore[arg-type]


def test_callback_declarations() -> None:
    spec = callback(Approval, description="Ship it?")
    assert spec.is_approval and spec.description == "Ship it?" and spec.verify is None
    assert not callback(dict).is_approval and not callback().is_approval

    class Escalation(Approval):
        level: int = 1

    assert callback(Escalation).is_approval
    with pytest.raises(WorkflowDefinitionError, match="approval callback takes no verify"):
        callback(Approval, verify=HmacSignature(secret_env="X"))
    with pytest.raises(WorkflowDefinitionError, match="verify"):
        callback(dict, verify="X-Hub-Signature-256")  # type: ignore[arg-type]
    with pytest.raises(WorkflowDefinitionError, match="description"):
        callback(Approval, description="x" * 1001)
