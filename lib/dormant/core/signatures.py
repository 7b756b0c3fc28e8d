"""Signature checks of webhooks (`callback(..., verify=...)`): a verifier takes the request's headers and its exact
body bytes and says whether the sender signed them. `HmacSignature` is the common scheme (GitHub's
`X-Hub-Signature-256: sha256=<hex>`, Shopify's base64 `X-Shopify-Hmac-Sha256`, most providers'); anything else
(Stripe's timestamped `Stripe-Signature`) is a function of the same shape."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

Verifier = Callable[[Mapping[str, str], bytes], bool]
"""`verify(headers, body) -> bool`: headers case-insensitively (as the HTTP API gives them), the body as sent."""


class SignatureSecretError(RuntimeError):
    """The secret a signature check needs is not configured (the deployment's fault, not the sender's)."""


@dataclass(frozen=True, slots=True)
class HmacSignature:
    """HMAC-SHA256 of the raw body with a shared secret, compared in constant time with the one in `header`.

    The secret is read when a request comes, from the environment variable `secret_env` (set it on the API
    function, e.g. from SSM/Secrets Manager by the deployment), or from `secret()` if given (a function: read it
    where you keep it). `prefix` is what precedes the digest in the header (`sha256=` for GitHub; "" for none);
    `encoding` is how the digest is written (hex or base64)."""

    secret_env: str | None = None
    header: str = "X-Hub-Signature-256"
    prefix: str = "sha256="
    encoding: Literal["hex", "base64"] = "hex"
    secret: Callable[[], str | bytes] | None = None

    def __post_init__(self) -> None:
        if (self.secret_env is None) == (self.secret is None):
            raise ValueError("HmacSignature needs exactly one of secret_env= (an environment variable's name) and "
                             "secret= (a function returning the secret)")
        if not self.header:
            raise ValueError("HmacSignature needs the name of the header that carries the signature")
        if self.encoding not in ("hex", "base64"):
            raise ValueError('HmacSignature encoding must be "hex" or "base64"')

    def key(self) -> bytes:
        """The shared secret, now (SignatureSecretError when it is not set)."""
        if self.secret is not None:
            value = self.secret()
        else:
            assert self.secret_env is not None
            value = os.environ.get(self.secret_env, "")
        if not value:
            raise SignatureSecretError(f"the webhook secret is not configured: set {self.secret_env}"
                                       if self.secret_env else "the webhook secret function returned nothing")
        return value.encode() if isinstance(value, str) else value

    def sign(self, body: bytes) -> str:
        """The header's value for `body` (what a sender computes; tests and clients use it)."""
        digest = hmac.new(self.key(), body, hashlib.sha256).digest()
        return self.prefix + (digest.hex() if self.encoding == "hex" else base64.b64encode(digest).decode())

    def __call__(self, headers: Mapping[str, str], body: bytes) -> bool:
        given = headers.get(self.header)
        if given is None or not given.startswith(self.prefix):
            return False
        try:
            claimed = bytes.fromhex(given[len(self.prefix):]) if self.encoding == "hex" else \
                base64.b64decode(given[len(self.prefix):], validate=True)
        except (ValueError, binascii.Error):
            return False
        expected = hmac.new(self.key(), body, hashlib.sha256).digest()
        return hmac.compare_digest(claimed, expected)
